//! KV lifetimes: absolute, after creation, after update, namespace
//! defaults, the namespace scan and the sweep, judged at the entry's time.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;

use regina_state::command::*;
use regina_state::kv::KV_SWEEP_ROWS_MAX;
use regina_state::outcome::*;
use regina_state::{Command, Entry, Outcome};
use regina_types::limits::KV_READ_EXPIRED_SKIP_MAX;
use support::*;

fn put(ns: &str, key: &str, value: &str, lifetime: Option<Lifetime>) -> KvOp {
    KvOp::PutWith {
        ns: ns.into(),
        key: key.into(),
        value: value.as_bytes().to_vec(),
        lifetime,
        expect: None,
        required: false,
    }
}

fn incr(key: &str, lifetime: Option<Lifetime>) -> KvOp {
    KvOp::IncrWith { ns: "ns".into(), key: key.into(), delta: 1, min: None, max: None, lifetime, required: false }
}

fn configure(ns: &str, expiration: Option<Lifetime>) -> KvOp {
    KvOp::Configure { ns: ns.into(), expiration }
}

fn get(h: &mut Harness, ns: &str, key: &str) -> Option<KvRowView> {
    match one(h, KvOp::Get { ns: ns.into(), key: key.into() }) {
        KvResult::Got(row) => row,
        r => panic!("a get answered {r:?}"),
    }
}

fn written(r: KvResult) -> KvRowView {
    match r {
        KvResult::Written { row: Some(row) } => row,
        r => panic!("not written: {r:?}"),
    }
}

fn scan(h: &mut Harness, after: Option<&str>, limit: u32) -> (Vec<String>, bool, Option<String>) {
    let op = KvOp::Scan { ns: "ns".into(), after: after.map(str::to_string), limit, keys_only: true };
    match one(h, op) {
        KvResult::Prefix { rows, truncated, next_after } => {
            (rows.into_iter().map(|r| r.key).collect(), truncated, next_after)
        }
        r => panic!("a scan answered {r:?}"),
    }
}

#[test]
fn after_creation_keeps_the_creation_while_live_and_starts_fresh_after_expiry() {
    let mut h = Harness::new();
    let t0 = h.now;
    let first = written(one(&mut h, put("ns", "k", "1", Some(Lifetime::AfterCreation(10_000)))));
    assert_eq!((first.created_ms, first.updated_ms, first.expires_ms), (t0, t0, Some(t0 + 10_000)));
    h.now += 4_000;
    let second = written(one(&mut h, put("ns", "k", "2", Some(Lifetime::AfterCreation(10_000)))));
    assert_eq!(second.created_ms, t0, "a write to a live row keeps its creation");
    assert_eq!(second.updated_ms, t0 + 4_000);
    assert_eq!(second.expires_ms, Some(t0 + 10_000), "the deadline stays fixed from createdAt");
    h.now = t0 + 10_000;
    assert_eq!(get(&mut h, "ns", "k"), None, "gone at its deadline");
    let fresh = written(one(&mut h, put("ns", "k", "3", Some(Lifetime::AfterCreation(10_000)))));
    assert_eq!(fresh.created_ms, h.now, "an expired key starts fresh");
    assert_eq!(fresh.expires_ms, Some(h.now + 10_000));
}

#[test]
fn after_update_is_renewed_by_every_write_put_or_incr() {
    let mut h = Harness::new();
    let t0 = h.now;
    one(&mut h, put("ns", "s", "1", Some(Lifetime::AfterUpdate(1_000))));
    for step in 1..=3 {
        h.now += 900;
        let row = written(one(&mut h, put("ns", "s", "1", Some(Lifetime::AfterUpdate(1_000)))));
        assert_eq!(row.expires_ms, Some(h.now + 1_000), "write {step} renews");
        assert_eq!(row.created_ms, t0);
    }
    one(&mut h, incr("c", Some(Lifetime::AfterUpdate(1_000))));
    h.now += 900;
    let row = written(one(&mut h, incr("c", Some(Lifetime::AfterUpdate(1_000)))));
    assert_eq!((row.value.as_deref(), row.expires_ms), (Some(&b"2"[..]), Some(h.now + 1_000)));
    h.now += 1_000;
    assert_eq!(get(&mut h, "ns", "s"), None, "idle for its whole lifetime");
    assert_eq!(get(&mut h, "ns", "c"), None);
}

#[test]
fn an_incr_keeps_a_live_deadline_unless_it_counts_from_creation_or_update() {
    let mut h = Harness::new();
    let t0 = h.now;
    one(&mut h, incr("c", Some(Lifetime::Seconds(10))));
    h.now += 1_000;
    let at = Lifetime::At(t0 + 99_000);
    assert_eq!(written(one(&mut h, incr("c", Some(at)))).expires_ms, Some(t0 + 10_000), "create-only");
    let row = written(one(&mut h, incr("c", Some(Lifetime::AfterCreation(3_000)))));
    assert_eq!(row.expires_ms, Some(t0 + 3_000), "counted from createdAt");
}

#[test]
fn an_absolute_deadline_is_expired_from_its_instant_on() {
    let mut h = Harness::new();
    let at = h.now + 5_000;
    let row = written(one(&mut h, put("ns", "k", "1", Some(Lifetime::At(at)))));
    assert_eq!(row.expires_ms, Some(at));
    h.now = at - 1;
    assert!(get(&mut h, "ns", "k").is_some(), "live a millisecond before");
    h.now = at;
    assert_eq!(get(&mut h, "ns", "k"), None, "now >= expiresAt is expired");
    // A read without an entry is judged at its own time too.
    let state_now = h.state.now_ms;
    let got = h.state.kv_read(&[KvOp::Get { ns: "ns".into(), key: "k".into() }], state_now);
    assert_eq!(got, KvOutcome::Done(vec![KvResult::Got(None)]));
    // An instant already past is a write that expires at once.
    let past = h.now - 1;
    let row = written(one(&mut h, put("ns", "past", "1", Some(Lifetime::At(past)))));
    assert_eq!(row.expires_ms, Some(past));
    assert_eq!(get(&mut h, "ns", "past"), None);
}

#[test]
fn a_write_naming_no_lifetime_takes_the_namespace_default() {
    let mut h = Harness::new();
    // Without a default the whole call is refused, required or not.
    let before = h.state.kv.clone();
    let out = call(&mut h, vec![put("ns", "other", "1", Some(Lifetime::Forever)), put("ns", "k", "1", None)]);
    let KvOutcome::Refused(r) = out else { panic!("must refuse: {out:?}") };
    assert_eq!((r.index, r.reason), (1, KvReason::NoLifetime));
    assert_eq!(h.state.kv, before, "nothing written");

    let set = one(&mut h, configure("ns", Some(Lifetime::AfterUpdate(2_000))));
    assert_eq!(set, KvResult::Configured { expiration: Some(Lifetime::AfterUpdate(2_000)) });
    assert_eq!(written(one(&mut h, put("ns", "k", "1", None))).expires_ms, Some(h.now + 2_000));
    assert_eq!(written(one(&mut h, incr("n", None))).expires_ms, Some(h.now + 2_000));
    assert_eq!(written(one(&mut h, put("ns", "own", "1", Some(Lifetime::Forever)))).expires_ms, None, "its own wins");
    assert_eq!(h.state.kv.default_lifetime("other"), None, "a default belongs to its namespace");

    // A default set in a call applies to the call's later writes.
    let out = call(&mut h, vec![configure("fresh", Some(Lifetime::Seconds(5))), put("fresh", "k", "1", None)]);
    let KvOutcome::Done(r) = out else { panic!("must apply: {out:?}") };
    assert!(matches!(&r[1], KvResult::Written { row: Some(row) } if row.expires_ms == Some(h.now + 5_000)));

    let restored = regina_state::State::decode(&h.state.encode()).unwrap();
    assert_eq!(restored.kv.default_lifetime("ns"), Some(Lifetime::AfterUpdate(2_000)), "kept in the snapshot");

    assert_eq!(one(&mut h, configure("ns", None)), KvResult::Configured { expiration: None });
    assert!(matches!(call(&mut h, vec![put("ns", "k", "2", None)]), KvOutcome::Refused(_)), "cleared");
}

#[test]
fn a_transaction_rider_takes_lifetimes_and_the_default_like_a_call() {
    let mut h = Harness::new();
    let cmd = |kv| Command::Transaction(TxnCmd { ops: Vec::new(), kv, timers: Vec::new() });
    let out = h.apply(cmd(vec![put("ns", "k", "1", None)]));
    assert!(matches!(
        out,
        Outcome::Txn(TxnOutcome::Refused { kv: Some(KvRefusal { reason: KvReason::NoLifetime, .. }), .. })
    ));
    h.apply(cmd(vec![configure("ns", Some(Lifetime::AfterCreation(7_000)))]));
    let Outcome::Txn(TxnOutcome::Committed(r)) = h.apply(cmd(vec![put("ns", "k", "1", None)])) else {
        panic!("must commit")
    };
    assert!(
        matches!(&r[0], TxnResult::Kv(KvResult::Written { row: Some(row) }) if row.expires_ms == Some(h.now + 7_000))
    );
}

#[test]
fn a_scan_pages_every_live_row_of_its_namespace_skipping_expired_ones() {
    let mut h = Harness::new();
    for (key, lifetime) in [
        ("a", Lifetime::Forever),
        ("b", Lifetime::AfterUpdate(500)),
        ("c", Lifetime::Seconds(60)),
        ("d", Lifetime::At(h.now + 500)),
        ("e", Lifetime::AfterCreation(60_000)),
    ] {
        one(&mut h, put("ns", key, "1", Some(lifetime)));
    }
    one(&mut h, put("elsewhere", "a", "1", Some(Lifetime::Forever)));
    h.now += 500;
    assert_eq!(scan(&mut h, None, 2), (vec!["a".into(), "c".into()], true, Some("c".into())));
    assert_eq!(scan(&mut h, Some("c"), 2), (vec!["e".into()], false, None));
}

#[test]
fn a_page_stops_after_a_bounded_number_of_expired_rows() {
    let mut h = Harness::new();
    let n = KV_READ_EXPIRED_SKIP_MAX + 1;
    let ops = (0..n).map(|i| put("ns", &format!("k{i:06}"), "1", Some(Lifetime::AfterUpdate(1)))).collect();
    call(&mut h, ops);
    one(&mut h, put("ns", "z", "1", Some(Lifetime::Forever)));
    h.now += 1;
    let (rows, truncated, next) = scan(&mut h, None, 10);
    let last_skipped = format!("k{:06}", KV_READ_EXPIRED_SKIP_MAX - 1);
    assert_eq!((rows.len(), truncated, next.as_deref()), (0, true, Some(last_skipped.as_str())));
    assert_eq!(scan(&mut h, next.as_deref(), 10), (vec!["z".into()], false, None), "the next page goes on");
}

#[test]
fn the_sweep_frees_rows_of_every_lifetime_in_bounded_pages() {
    let mut h = Harness::new();
    let t0 = h.now;
    let n = KV_SWEEP_ROWS_MAX + 3;
    let ops = (0..n).map(|i| put("ns", &format!("k{i:06}"), "1", Some(Lifetime::AfterUpdate(1_000)))).collect();
    call(&mut h, ops);
    one(&mut h, put("ns", "created", "1", Some(Lifetime::AfterCreation(2_000))));
    one(&mut h, put("ns", "at", "1", Some(Lifetime::At(t0 + 3_000))));
    one(&mut h, put("ns", "forever", "1", Some(Lifetime::Forever)));
    h.now += 500;
    // Renewed: this one leaves the first page's deadline.
    one(&mut h, put("ns", "k000000", "1", Some(Lifetime::AfterUpdate(1_000))));
    assert_eq!(h.state.kv.first_expiry(), Some(t0 + 1_000));
    h.now = t0 + 1_000;
    h.apply(Command::Sweep);
    assert_eq!(h.state.kv.len(), n + 3 - KV_SWEEP_ROWS_MAX, "one bounded page");
    h.apply(Command::Sweep);
    assert!(h.state.kv.row("ns", "k000000").is_some(), "the renewed row is not due");
    assert_eq!(h.state.kv.len(), 4);
    h.now = t0 + 3_000;
    h.apply(Command::Sweep);
    let held: Vec<bool> = ["created", "at", "forever"].iter().map(|k| h.state.kv.row("ns", k).is_some()).collect();
    assert_eq!(held, [false, false, true]);
    assert_eq!(h.state.kv.len(), 1);
}

#[test]
fn old_put_entries_keep_their_meaning_and_gain_a_creation() {
    let mut h = Harness::new();
    let t0 = h.now;
    let old = |value: &str| KvOp::Put {
        ns: "ns".into(),
        key: "k".into(),
        value: value.as_bytes().to_vec(),
        ttl_seconds: Some(10),
        expect: None,
        required: false,
    };
    // The entry as an older log holds it, decoded and applied.
    let entry = Entry { now_ms: h.now, command: Command::Kv(KvCmd { ops: vec![old("1")] }) };
    let decoded = Entry::decode(&entry.encode()).unwrap();
    h.state.apply(&decoded);
    h.now += 1_000;
    let row = written(one(&mut h, old("2")));
    assert_eq!((row.created_ms, row.expires_ms), (t0, Some(h.now + 10_000)));
    assert!(h.state.check_invariants().is_ok());
}

#[test]
fn a_touch_renews_a_live_row_and_keeps_its_value() {
    let mut h = Harness::new();
    let t0 = h.now;
    let touch = |lifetime, expect| KvOp::Touch { ns: "ns".into(), key: "s".into(), lifetime, expect, required: false };
    let absent = one(&mut h, touch(Some(Lifetime::AfterUpdate(1_000)), None));
    assert!(matches!(absent, KvResult::NotApplied { reason: KvReason::Absent, current: None }), "{absent:?}");
    assert!(h.state.kv.is_empty(), "a touch creates nothing");

    let v1 = written(one(&mut h, put("ns", "s", r#"{"user":"a"}"#, Some(Lifetime::AfterUpdate(1_000)))));
    h.now += 900;
    let row = written(one(&mut h, touch(Some(Lifetime::AfterUpdate(1_000)), Some(v1.version))));
    assert_eq!(row.value, v1.value, "the value stays");
    assert_eq!((row.created_ms, row.updated_ms, row.expires_ms), (t0, h.now, Some(h.now + 1_000)));
    assert!(row.version > v1.version, "a touch is a write");
    let stale = one(&mut h, touch(Some(Lifetime::AfterUpdate(1_000)), Some(v1.version)));
    assert!(matches!(stale, KvResult::NotApplied { reason: KvReason::Version, .. }), "{stale:?}");

    // Naming none, it takes the namespace default; without one it refuses.
    assert!(matches!(
        call(&mut h, vec![touch(None, None)]),
        KvOutcome::Refused(KvRefusal { reason: KvReason::NoLifetime, .. })
    ));
    one(&mut h, configure("ns", Some(Lifetime::Forever)));
    assert_eq!(written(one(&mut h, touch(None, None))).expires_ms, None);

    one(&mut h, put("ns", "s", "1", Some(Lifetime::Seconds(1))));
    h.now += 1_000;
    let expired = one(&mut h, touch(Some(Lifetime::Forever), None));
    assert!(matches!(expired, KvResult::NotApplied { reason: KvReason::Absent, .. }), "an expired row stays expired");
}
