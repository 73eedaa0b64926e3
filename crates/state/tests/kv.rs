//! The key/value store's rules, one behaviour per test.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;

use regina_state::command::*;
use regina_state::outcome::*;
use regina_state::{Command, Outcome};
use support::*;

fn put(key: &str, value: &str, ttl: Option<u64>, expect: Option<u64>) -> KvOp {
    KvOp::Put {
        ns: "ns".into(),
        key: key.into(),
        value: value.as_bytes().to_vec(),
        ttl_seconds: ttl,
        expect,
        required: false,
    }
}

fn required(op: KvOp) -> KvOp {
    match op {
        KvOp::Put { ns, key, value, ttl_seconds, expect, .. } => {
            KvOp::Put { ns, key, value, ttl_seconds, expect, required: true }
        }
        op => panic!("not a put: {op:?}"),
    }
}

fn get(key: &str) -> KvOp {
    KvOp::Get { ns: "ns".into(), key: key.into() }
}

fn del(key: &str, expect: Option<u64>) -> KvOp {
    KvOp::Delete { ns: "ns".into(), key: key.into(), expect, required: false }
}

fn incr(key: &str, delta: i64, max: Option<i64>, ttl: Option<u64>) -> KvOp {
    KvOp::Incr { ns: "ns".into(), key: key.into(), delta, min: None, max, ttl_seconds: ttl, required: false }
}

fn written(r: &KvResult) -> &KvRowView {
    match r {
        KvResult::Written { row: Some(row) } => row,
        r => panic!("not written: {r:?}"),
    }
}

fn refused(r: &KvResult) -> (KvReason, Option<&KvRowView>) {
    match r {
        KvResult::NotApplied { reason, current } => (*reason, current.as_ref()),
        r => panic!("applied: {r:?}"),
    }
}

#[test]
fn a_value_round_trips_and_a_delete_removes_it() {
    let mut h = Harness::new();
    let v = written(&one(&mut h, put("k", r#"{"b":1,"a":2}"#, Some(60), None))).version;
    let KvResult::Got(Some(row)) = one(&mut h, get("k")) else { panic!("must be found") };
    assert_eq!(row.value.as_deref(), Some(&br#"{"b":1,"a":2}"#[..]), "stored as received");
    assert_eq!(row.version, v);
    assert_eq!(row.expires_ms, Some(h.now + 60_000));
    assert!(matches!(one(&mut h, del("k", None)), KvResult::Written { row: None }));
    assert_eq!(refused(&one(&mut h, del("k", None))).0, KvReason::Absent);
    assert_eq!(one(&mut h, get("k")), KvResult::Got(None));
}

#[test]
fn versions_never_go_back_across_delete_and_recreate() {
    let mut h = Harness::new();
    let first = written(&one(&mut h, put("k", "1", None, None))).version;
    let second = written(&one(&mut h, put("k", "2", None, None))).version;
    assert!(second > first);
    one(&mut h, del("k", None));
    let third = written(&one(&mut h, put("k", "3", None, None))).version;
    assert!(third > second, "a re-created key must not reuse a version");
    // A short-lived key expires, is swept, and is written again.
    let short = written(&one(&mut h, put("gone", "1", Some(1), None))).version;
    h.now += 2_000;
    h.apply(Command::Sweep);
    assert!(h.state.kv.row("ns", "gone").is_none(), "the sweep drops the expired row");
    let again = written(&one(&mut h, put("gone", "1", Some(1), None))).version;
    assert!(again > short && again > third);
}

#[test]
fn an_expired_key_is_invisible_at_once_without_a_sweep() {
    let mut h = Harness::new();
    one(&mut h, put("k", "true", Some(1), None));
    h.now += 999;
    assert!(matches!(one(&mut h, get("k")), KvResult::Got(Some(_))));
    h.now += 1;
    assert_eq!(one(&mut h, get("k")), KvResult::Got(None), "expired at its instant");
    assert!(h.state.kv.row("ns", "k").is_some(), "still held until a sweep");
    // It counts as absent for putIfAbsent, a check of 0, and a read-only call.
    assert_eq!(h.state.kv_read(&[get("k")], h.now), KvOutcome::Done(vec![KvResult::Got(None)]));
    let chk = KvOp::Check { ns: "ns".into(), key: "k".into(), expect: 0, required: true };
    assert_eq!(one(&mut h, chk), KvResult::Checked { version: 0 });
    written(&one(&mut h, put("k", "1", Some(60), Some(0))));
}

#[test]
fn put_if_absent_has_one_winner_and_the_loser_sees_its_value() {
    let mut h = Harness::new();
    let win = written(&one(&mut h, put("idem", r#""w1""#, Some(60), Some(0)))).version;
    let lose = one(&mut h, put("idem", r#""w2""#, Some(60), Some(0)));
    let (reason, cur) = refused(&lose);
    assert_eq!(reason, KvReason::Exists);
    assert_eq!(cur.unwrap().value.as_deref(), Some(&br#""w1""#[..]));
    assert_eq!(cur.unwrap().version, win);
}

#[test]
fn an_expect_on_an_absent_key_creates_nothing_and_a_stale_one_loses() {
    let mut h = Harness::new();
    assert_eq!(refused(&one(&mut h, put("saga", "1", Some(60), Some(7)))), (KvReason::Absent, None));
    assert_eq!(one(&mut h, get("saga")), KvResult::Got(None));
    let v = written(&one(&mut h, put("saga", "1", Some(60), None))).version;
    let stale = one(&mut h, put("saga", "2", Some(60), Some(v + 1)));
    let (reason, cur) = refused(&stale);
    assert_eq!((reason, cur.unwrap().version), (KvReason::Version, v));
    let v2 = written(&one(&mut h, put("saga", "3", Some(60), Some(v)))).version;
    assert!(v2 > v);
    assert_eq!(refused(&one(&mut h, put("saga", "4", Some(60), Some(v)))).0, KvReason::Version);
    assert_eq!(refused(&one(&mut h, del("saga", Some(v)))).0, KvReason::Version);
}

#[test]
fn incr_refuses_past_its_bounds_without_spending() {
    let mut h = Harness::new();
    for n in 1..=3 {
        let r = one(&mut h, incr("quota", 1, Some(3), Some(60)));
        assert_eq!(written(&r).value.as_deref(), Some(n.to_string().as_bytes()));
    }
    let over = one(&mut h, incr("quota", 1, Some(3), Some(60)));
    let (reason, cur) = refused(&over);
    assert_eq!(reason, KvReason::Limit);
    assert_eq!(cur.unwrap().value.as_deref(), Some(&b"3"[..]), "the current value, unchanged");
    // The first incr of an absent key past the bound creates nothing.
    assert_eq!(refused(&one(&mut h, incr("burst", 10, Some(5), Some(60)))).0, KvReason::Limit);
    assert_eq!(one(&mut h, get("burst")), KvResult::Got(None));
    let min = KvOp::Incr {
        ns: "ns".into(),
        key: "floor".into(),
        delta: -1,
        min: Some(0),
        max: None,
        ttl_seconds: None,
        required: false,
    };
    assert_eq!(refused(&one(&mut h, min)).0, KvReason::Limit);
}

#[test]
fn incr_keeps_the_ttl_it_was_created_with_and_restarts_once_expired() {
    let mut h = Harness::new();
    let created = written(&one(&mut h, incr("c", 1, None, Some(10)))).expires_ms;
    h.now += 1_000;
    assert_eq!(written(&one(&mut h, incr("c", 1, None, Some(500)))).expires_ms, created);
    one(&mut h, put("text", r#""abc""#, Some(1), None));
    assert_eq!(refused(&one(&mut h, incr("text", 1, None, Some(60)))).0, KvReason::Type);
    h.now += 1_000;
    let restarted = written(&one(&mut h, incr("text", 1, None, Some(60)))).clone();
    assert_eq!(restarted.value.as_deref(), Some(&b"1"[..]), "an expired row counts from zero");
}

#[test]
fn a_required_loss_refuses_the_whole_call_and_writes_nothing() {
    let mut h = Harness::new();
    one(&mut h, put("taken", "1", None, None));
    let before = h.state.kv.clone();
    let ops = vec![
        put("a", "1", None, None),
        incr("n", 1, None, None),
        required(put("taken", "2", None, Some(0))),
        put("b", "1", None, None),
    ];
    let KvOutcome::Refused(r) = call(&mut h, ops) else { panic!("must refuse") };
    assert_eq!((r.index, r.reason), (2, KvReason::Exists));
    assert_eq!(h.state.kv, before, "nothing written, no version spent");
    // Without `required` the same loss is a verdict and the rest applies.
    let ops = vec![put("a", "1", None, None), put("taken", "2", None, Some(0))];
    let KvOutcome::Done(r) = call(&mut h, ops) else { panic!("must apply") };
    written(&r[0]);
    assert_eq!(refused(&r[1]).0, KvReason::Exists);
}

#[test]
fn reads_in_a_call_see_its_own_earlier_writes() {
    let mut h = Harness::new();
    let ops = vec![put("p:1", "1", None, None), get("p:1"), del("p:1", None), get("p:1")];
    let KvOutcome::Done(r) = call(&mut h, ops) else { panic!() };
    assert!(matches!(&r[1], KvResult::Got(Some(_))));
    assert_eq!(r[3], KvResult::Got(None));
}

#[test]
fn get_many_lists_absence_and_get_prefix_pages_by_cursor() {
    let mut h = Harness::new();
    for i in 0..5 {
        one(&mut h, put(&format!("page:{i}"), &i.to_string(), Some(60), None));
    }
    one(&mut h, put("pagez", "1", Some(60), None));
    let many = KvOp::GetMany { ns: "ns".into(), keys: vec!["page:1".into(), "nope".into(), "page:1".into()] };
    let KvResult::Many { rows, missing, truncated } = one(&mut h, many) else { panic!() };
    assert_eq!((rows.len(), missing, truncated), (1, vec!["nope".to_string()], false));
    let page = |after: Option<&str>, limit| KvOp::GetPrefix {
        ns: "ns".into(),
        prefix: "page:".into(),
        after: after.map(String::from),
        limit,
        keys_only: after.is_some(),
    };
    let KvResult::Prefix { rows, truncated, next_after } = one(&mut h, page(None, 2)) else { panic!() };
    assert_eq!((rows.len(), truncated, next_after.as_deref()), (2, true, Some("page:1")));
    let KvResult::Prefix { rows, truncated, .. } = one(&mut h, page(Some("page:1"), 10)) else { panic!() };
    let keys: Vec<_> = rows.iter().map(|r| r.key.as_str()).collect();
    assert_eq!((keys, truncated), (vec!["page:2", "page:3", "page:4"], false));
    assert!(rows.iter().all(|r| r.value.is_none()), "keys only");
}

#[test]
fn the_sweep_drops_only_expired_rows_and_replay_agrees() {
    let mut h = Harness::new();
    one(&mut h, put("short", "1", Some(1), None));
    one(&mut h, put("long", "1", Some(100), None));
    one(&mut h, put("forever", "1", None, None));
    assert_eq!(h.state.kv.first_expiry(), Some(h.now + 1_000));
    h.now += 5_000;
    h.apply(Command::Sweep);
    assert_eq!(h.state.kv.len(), 2);
    assert_eq!(h.state.kv.first_expiry(), Some(h.now - 5_000 + 100_000));
    let restored = regina_state::State::decode(&h.state.encode()).unwrap();
    assert_eq!(restored, h.state, "the store survives a snapshot");
}

fn txn(h: &mut Harness, ops: Vec<TxnOp>, kv: Vec<KvOp>) -> TxnOutcome {
    match h.apply(Command::Transaction(TxnCmd { ops, kv, timers: Vec::new() })) {
        Outcome::Txn(t) => t,
        o => panic!("transaction answered {o:?}"),
    }
}

fn once(key: &str) -> KvOp {
    required(put(key, "true", Some(60), Some(0)))
}

#[test]
fn a_transaction_whose_gate_is_taken_writes_nothing() {
    let mut h = Harness::new();
    let item = h.item("sink", "Default", "m1");
    let TxnOutcome::Committed(r) = txn(&mut h, vec![TxnOp::Push(item)], vec![once("gate:evt-1")]) else {
        panic!("the first pass commits")
    };
    assert!(matches!(&r[1], TxnResult::Kv(KvResult::Written { row: Some(_) })));
    let (kv, messages, body_end) = (h.state.kv.clone(), h.state.message_count(), h.state.next_body_pos);
    let item = h.item("sink", "Default", "m2");
    let ops = vec![TxnOp::Push(item)];
    let TxnOutcome::Refused { reason, failed_index, kv: Some(lost), .. } =
        txn(&mut h, ops, vec![put("other", "1", None, None), once("gate:evt-1")])
    else {
        panic!("the second pass must refuse")
    };
    assert_eq!((reason.as_str(), failed_index), ("kv_precondition", 2), "flat: one push, then kv[1]");
    assert_eq!(lost.reason, KvReason::Exists);
    assert_eq!(lost.current.unwrap().value.as_deref(), Some(&b"true"[..]));
    assert_eq!(h.state.kv, kv, "no KV write, no version spent");
    assert_eq!((h.state.message_count(), h.state.next_body_pos), (messages, body_end), "no push");
}

#[test]
fn a_rejected_ack_refuses_the_step_before_its_kv_writes() {
    let mut h = Harness::new();
    let p = h.push("q", "P", "t1");
    let ack = ack_item(p.partition_id, "t1", AckStatus::Completed, "no-such-lease");
    let out = txn(&mut h, vec![TxnOp::Ack { group: QM.into(), item: ack }], vec![put("k", "1", None, None)]);
    assert!(matches!(out, TxnOutcome::Refused { ref reason, kv: None, .. } if reason == "rejected_ack"));
    assert!(h.state.kv.is_empty());
}

#[test]
fn a_kv_only_transaction_commits() {
    let mut h = Harness::new();
    let TxnOutcome::Committed(r) = txn(&mut h, vec![], vec![put("a", "1", None, None), del("b", None)]) else {
        panic!("must commit")
    };
    assert_eq!(r.len(), 2);
    assert!(matches!(&r[1], TxnResult::Kv(KvResult::NotApplied { reason: KvReason::Absent, .. })));
}
