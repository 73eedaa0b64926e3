//! Stream queries in the state machine: registration and reset, a cycle
//! judged whole (a refused ack writes no state and no push), a resend that
//! changes nothing, claims of idle partitions, isolation per query,
//! partition and tenant, and snapshots (format 6, and format 5 still read).

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;

use regina_state::command::*;
use regina_state::streams::claim::{ClaimOutcome, ClaimStatus};
use regina_state::streams::cycle::{CycleOutcome, CycleRefusal};
use regina_state::streams::read::RowFilter;
use regina_state::streams::register::RegisterOutcome;
use regina_state::streams::*;
use regina_state::{Command, Outcome, State};
use support::Harness;

const SRC: &str = "events";
const SINK: &str = "windows";
const GROUP: &str = "streams.totals";

fn register(h: &mut Harness, name: &str, hash: &str, reset: bool) -> RegisterOutcome {
    let cmd = RegisterCmd {
        name: name.into(),
        source_queue: SRC.into(),
        sink_queue: Some(SINK.into()),
        config_hash: hash.into(),
        reset,
        new_id: format!("id-{name}"),
    };
    match h.apply(Command::Stream(StreamCmd::Register(cmd))) {
        Outcome::Stream(StreamOutcome::Register(r)) => r,
        o => panic!("register answered {o:?}"),
    }
}

fn upsert(key: &str, value: &str, window_end: Option<i64>) -> StateOp {
    StateOp::Upsert { key: key.into(), value: value.as_bytes().to_vec(), window_end }
}

struct Cycle {
    partition_id: u64,
    ops: Vec<StateOp>,
    pushes: Vec<PushItem>,
    ack: Option<CycleAck>,
    release: bool,
    digest: u128,
}

fn cycle(h: &mut Harness, c: Cycle) -> CycleOutcome {
    let cmd = CycleCmd {
        query_id: "id-totals".into(),
        partition_id: c.partition_id,
        group: GROUP.into(),
        state_ops: c.ops,
        pushes: c.pushes,
        ack: c.ack,
        release_lease: c.release,
        digest: c.digest,
    };
    match h.apply(Command::Stream(StreamCmd::Cycle(cmd))) {
        Outcome::Stream(StreamOutcome::Cycle(r)) => r,
        o => panic!("cycle answered {o:?}"),
    }
}

fn ack(txn: &str, lease: &str) -> Option<CycleAck> {
    Some(CycleAck { transaction_id: txn.into(), lease_id: lease.into(), ok: true, count: 1 })
}

fn rows(h: &Harness, partition_id: u64) -> Vec<(String, String)> {
    let q = h.state.streams.query("id-totals").expect("registered");
    q.rows(partition_id, &RowFilter::default())
        .into_iter()
        .map(|(k, r)| (k.to_string(), String::from_utf8(r.value.clone()).unwrap()))
        .collect()
}

fn sink_len(h: &Harness) -> u64 {
    h.state.queue(SINK).map_or(0, |q| q.kept)
}

/// A source partition with `n` messages, popped by the stream's group.
fn popped(h: &mut Harness, partition: &str, n: usize) -> (u64, String) {
    for i in 0..n {
        h.push(SRC, partition, &format!("{partition}-{i}"));
    }
    let r = h.pop(SRC, GROUP, 100, Subscription::All);
    (r.claims[0].partition_id, r.lease_id)
}

#[test]
fn a_changed_chain_is_refused_until_reset_which_clears_state() {
    let mut h = Harness::new();
    assert_eq!(
        register(&mut h, "totals", "h1", false),
        RegisterOutcome::Registered { query_id: "id-totals".into(), fresh: true, reset: false }
    );
    let (pid, lease) = popped(&mut h, "a", 2);
    let out = cycle(
        &mut h,
        Cycle {
            partition_id: pid,
            ops: vec![upsert("k", "{\"acc\":2}", None)],
            pushes: vec![],
            ack: ack("a-1", &lease),
            release: true,
            digest: 1,
        },
    );
    assert!(matches!(out, CycleOutcome::Committed { duplicate: false, .. }), "{out:?}");
    assert_eq!(rows(&h, pid).len(), 1);

    // Same hash again: the same query, its state kept.
    assert!(matches!(register(&mut h, "totals", "h1", false), RegisterOutcome::Registered { fresh: false, .. }));
    assert_eq!(rows(&h, pid).len(), 1);
    // Another hash: refused, nothing changed.
    assert!(matches!(register(&mut h, "totals", "h2", false), RegisterOutcome::Conflict { .. }));
    assert_eq!(h.state.streams.query("id-totals").unwrap().config_hash, "h1");
    assert_eq!(rows(&h, pid).len(), 1);
    // With reset: the new hash, no state, the same id.
    assert_eq!(
        register(&mut h, "totals", "h2", true),
        RegisterOutcome::Registered { query_id: "id-totals".into(), fresh: false, reset: true }
    );
    assert!(rows(&h, pid).is_empty());
}

#[test]
fn a_cycle_commits_state_pushes_and_the_ack_as_one() {
    let mut h = Harness::new();
    register(&mut h, "totals", "h", false);
    let (pid, lease) = popped(&mut h, "a", 3);
    let push = h.item(SINK, "a", "emit-1");
    let out = cycle(
        &mut h,
        Cycle {
            partition_id: pid,
            ops: vec![upsert("w1", "{\"sum\":3,\"windowEnd\":2000}", Some(2000)), upsert("w2", "{}", None)],
            pushes: vec![push],
            ack: ack("a-2", &lease),
            release: true,
            digest: 7,
        },
    );
    let CycleOutcome::Committed { ack: Some(a), pushes, state_ops_applied, .. } = out else { panic!("{out:?}") };
    assert_eq!((a.count, a.lease_released, state_ops_applied, pushes.len()), (3, true, 2, 1));
    assert_eq!(sink_len(&h), 1);
    assert_eq!(rows(&h, pid).len(), 2);
    // The group's cursor is past all three: nothing left to pop.
    assert!(h.pop(SRC, GROUP, 100, Subscription::All).claims.is_empty());
    // ripe_at_or_before keeps only rows whose windowEnd is at or before it.
    let q = h.state.streams.query("id-totals").unwrap();
    let ripe = q.rows(pid, &RowFilter { ripe_at_or_before: Some(2000), ..Default::default() });
    assert_eq!(ripe.iter().map(|(k, _)| *k).collect::<Vec<_>>(), vec!["w1"]);
    assert!(q.rows(pid, &RowFilter { ripe_at_or_before: Some(1999), ..Default::default() }).is_empty());
    let pre = q.rows(pid, &RowFilter { key_prefix: Some("w2"), ..Default::default() });
    assert_eq!(pre.len(), 1);
}

#[test]
fn a_cycle_whose_ack_is_refused_writes_no_state_and_no_push() {
    let mut h = Harness::new();
    register(&mut h, "totals", "h", false);
    let (pid, lease) = popped(&mut h, "a", 2);
    let push = h.item(SINK, "a", "emit-1");
    let wrong = cycle(
        &mut h,
        Cycle {
            partition_id: pid,
            ops: vec![upsert("w", "{\"n\":1}", None)],
            pushes: vec![push.clone()],
            ack: ack("a-1", "someone-elses-lease"),
            release: true,
            digest: 1,
        },
    );
    assert!(matches!(wrong, CycleOutcome::Refused { reason: CycleRefusal::Lease, .. }), "{wrong:?}");
    assert!(rows(&h, pid).is_empty());
    assert_eq!(sink_len(&h), 0);

    // A lease that lapsed refuses too.
    h.now += 3_600_000;
    let lapsed = cycle(
        &mut h,
        Cycle {
            partition_id: pid,
            ops: vec![upsert("w", "{\"n\":1}", None)],
            pushes: vec![push],
            ack: ack("a-1", &lease),
            release: true,
            digest: 2,
        },
    );
    assert!(matches!(lapsed, CycleOutcome::Refused { reason: CycleRefusal::Lease, .. }), "{lapsed:?}");
    assert!(rows(&h, pid).is_empty());
    assert_eq!(sink_len(&h), 0);
    // And the messages are still there for the group.
    assert_eq!(h.pop(SRC, GROUP, 100, Subscription::All).message_count(), 2);
}

#[test]
fn a_resent_cycle_changes_nothing() {
    let mut h = Harness::new();
    register(&mut h, "totals", "h", false);
    let (pid, lease) = popped(&mut h, "a", 4);
    // A gate's cycle: commits a prefix and keeps the lease, so the fence
    // alone would let the resend through.
    let push = h.item(SINK, "a", "emit-1");
    let first = Cycle {
        partition_id: pid,
        ops: vec![upsert("used", "{\"n\":2}", None)],
        pushes: vec![push.clone()],
        ack: ack("a-1", &lease),
        release: false,
        digest: 42,
    };
    let again = Cycle { pushes: vec![h.item(SINK, "a", "emit-1b")], ..first_clone(&first) };
    let out = cycle(&mut h, first);
    assert!(matches!(out, CycleOutcome::Committed { duplicate: false, ack: Some(ref a), .. } if !a.lease_released));
    let resent = cycle(&mut h, again);
    assert!(matches!(resent, CycleOutcome::Committed { duplicate: true, .. }), "{resent:?}");
    assert_eq!(sink_len(&h), 1, "the resend pushed again");
    // A different cycle naming the committed message is refused whole.
    let emit2 = h.item(SINK, "a", "emit-2");
    let stale = cycle(
        &mut h,
        Cycle {
            partition_id: pid,
            ops: vec![upsert("used", "{\"n\":9}", None)],
            pushes: vec![emit2],
            ack: ack("a-0", &lease),
            release: false,
            digest: 43,
        },
    );
    assert!(matches!(stale, CycleOutcome::Refused { reason: CycleRefusal::AlreadyCommitted, .. }), "{stale:?}");
    assert_eq!(rows(&h, pid), vec![("used".to_string(), "{\"n\":2}".to_string())]);
    assert_eq!(sink_len(&h), 1);
}

fn first_clone(c: &Cycle) -> Cycle {
    Cycle {
        partition_id: c.partition_id,
        ops: c.ops.clone(),
        pushes: c.pushes.clone(),
        ack: c.ack.clone(),
        release: c.release,
        digest: c.digest,
    }
}

#[test]
fn the_rows_limit_refuses_the_whole_cycle() {
    let mut h = Harness::new();
    register(&mut h, "totals", "h", false);
    let (pid, lease) = popped(&mut h, "a", 1);
    let limit = regina_types::limits::STREAM_STATE_ROWS_PER_PARTITION_MAX;
    let ops: Vec<StateOp> = (0..=limit).map(|i| upsert(&format!("k{i}"), "1", None)).collect();
    let out = cycle(
        &mut h,
        Cycle { partition_id: pid, ops, pushes: vec![], ack: ack("a-0", &lease), release: true, digest: 1 },
    );
    assert!(matches!(out, CycleOutcome::Refused { reason: CycleRefusal::TooManyRows, .. }), "{out:?}");
    assert!(rows(&h, pid).is_empty());
    // One fewer fits, and deletes make room in the same cycle.
    let mut ops: Vec<StateOp> = (0..=limit).map(|i| upsert(&format!("k{i}"), "1", None)).collect();
    ops.push(StateOp::Delete { key: "k0".into() });
    let out = cycle(
        &mut h,
        Cycle { partition_id: pid, ops, pushes: vec![], ack: ack("a-0", &lease), release: true, digest: 2 },
    );
    assert!(matches!(out, CycleOutcome::Committed { .. }), "{out:?}");
    assert_eq!(rows(&h, pid).len(), limit);
}

#[test]
fn a_claim_leases_an_idle_partition_with_an_empty_batch() {
    let mut h = Harness::new();
    register(&mut h, "totals", "h", false);
    let (pid, lease) = popped(&mut h, "a", 1);
    let claim = |h: &mut Harness, lease_id: &str| match h.apply(Command::Stream(StreamCmd::Claim(ClaimCmd {
        query_id: "id-totals".into(),
        partition_ids: vec![pid, 999_999],
        group: None,
        lease_id: lease_id.into(),
        lease_ms: 30_000,
    }))) {
        Outcome::Stream(StreamOutcome::Claim(ClaimOutcome::Done { partitions, .. })) => {
            partitions.iter().map(|p| p.status).collect::<Vec<_>>()
        }
        o => panic!("claim answered {o:?}"),
    };
    // Held by the pop's lease: busy.
    assert_eq!(claim(&mut h, "c1"), vec![ClaimStatus::Busy, ClaimStatus::Missing]);
    let out = cycle(
        &mut h,
        Cycle {
            partition_id: pid,
            ops: vec![upsert("open", "{}", None)],
            pushes: vec![],
            ack: ack("a-0", &lease),
            release: true,
            digest: 1,
        },
    );
    assert!(matches!(out, CycleOutcome::Committed { .. }));
    // A message waits: backlog.
    h.push(SRC, "a", "a-1");
    assert_eq!(claim(&mut h, "c2")[0], ClaimStatus::Backlog);
    let r = h.pop(SRC, GROUP, 100, Subscription::All);
    let out = cycle(
        &mut h,
        Cycle {
            partition_id: pid,
            ops: vec![],
            pushes: vec![],
            ack: ack("a-1", &r.lease_id),
            release: true,
            digest: 2,
        },
    );
    assert!(matches!(out, CycleOutcome::Committed { .. }));
    // Idle and read to the end: claimed, and a pop gets nothing meanwhile.
    assert_eq!(claim(&mut h, "c3")[0], ClaimStatus::Claimed);
    h.push(SRC, "a", "a-2");
    assert!(h.pop(SRC, GROUP, 100, Subscription::All).claims.is_empty());
    // The close: an empty ack under the claim deletes the window, pushes
    // its emit and gives the partition back; the cursor stays.
    let emit = h.item(SINK, "a", "closed");
    let close = Cycle {
        partition_id: pid,
        ops: vec![StateOp::Delete { key: "open".into() }],
        pushes: vec![emit],
        ack: Some(CycleAck { transaction_id: String::new(), lease_id: "c3".into(), ok: true, count: 0 }),
        release: true,
        digest: 3,
    };
    let out = cycle(&mut h, first_clone(&close));
    assert!(matches!(out, CycleOutcome::Committed { ack: Some(ref a), .. } if a.count == 0 && a.lease_released));
    assert_eq!(sink_len(&h), 1);
    // A second close under the same claim is refused by the fence.
    let again = cycle(&mut h, Cycle { digest: 4, ..close });
    assert!(matches!(again, CycleOutcome::Refused { reason: CycleRefusal::Lease, .. }), "{again:?}");
    assert_eq!(sink_len(&h), 1);
    assert_eq!(h.pop(SRC, GROUP, 100, Subscription::All).message_count(), 1, "a-2 waits for the group");
}

#[test]
fn state_is_isolated_per_query_partition_and_tenant_and_survives_snapshots() {
    let mut h = Harness::new();
    register(&mut h, "totals", "h", false);
    let (a, lease_a) = popped(&mut h, "a", 1);
    let out = cycle(
        &mut h,
        Cycle {
            partition_id: a,
            ops: vec![upsert("k", "\"a\"", None)],
            pushes: vec![],
            ack: ack("a-0", &lease_a),
            release: true,
            digest: 1,
        },
    );
    assert!(matches!(out, CycleOutcome::Committed { .. }));
    let (b, lease_b) = popped(&mut h, "b", 1);
    let out = cycle(
        &mut h,
        Cycle {
            partition_id: b,
            ops: vec![upsert("k", "\"b\"", None)],
            pushes: vec![],
            ack: ack("b-0", &lease_b),
            release: true,
            digest: 1,
        },
    );
    assert!(matches!(out, CycleOutcome::Committed { .. }), "{out:?}");
    assert_eq!(rows(&h, a), vec![("k".to_string(), "\"a\"".to_string())]);
    assert_eq!(rows(&h, b), vec![("k".to_string(), "\"b\"".to_string())]);
    // Another query over the same queue sees nothing of it.
    register(&mut h, "other", "h", false);
    assert!(h.state.streams.query("id-other").unwrap().rows(a, &RowFilter::default()).is_empty());
    // Another tenant has no such query at all.
    let reg = Command::ForTenant {
        tenant: "t1".into(),
        command: Box::new(Command::Stream(StreamCmd::Register(RegisterCmd {
            name: "totals".into(),
            source_queue: SRC.into(),
            sink_queue: None,
            config_hash: "other-hash".into(),
            reset: false,
            new_id: "id-t1".into(),
        }))),
    };
    let out = h.apply(reg);
    assert!(matches!(out, Outcome::Stream(StreamOutcome::Register(RegisterOutcome::Registered { fresh: true, .. }))));
    assert!(h.state.tenant("t1").unwrap().streams.query("id-totals").is_none());

    // Snapshots: format 6 keeps it all; a format-5 state still loads,
    // with no queries.
    let back = State::decode(&h.state.encode()).expect("decodes");
    assert_eq!(back, h.state);
    let old = regina_state::state_v5::encode_for_test(&h.state);
    let from_old = State::decode(&old).expect("a format-5 state still decodes");
    assert!(from_old.streams.queries.is_empty());
    assert_eq!(from_old.queues.len(), h.state.queues.len());
    assert!(from_old.tenant("t1").unwrap().streams.queries.is_empty());
}

#[test]
fn deleting_the_source_queue_drops_its_partitions_state() {
    let mut h = Harness::new();
    register(&mut h, "totals", "h", false);
    let (a, lease) = popped(&mut h, "a", 1);
    let out = cycle(
        &mut h,
        Cycle {
            partition_id: a,
            ops: vec![upsert("k", "1", None)],
            pushes: vec![],
            ack: ack("a-0", &lease),
            release: true,
            digest: 1,
        },
    );
    assert!(matches!(out, CycleOutcome::Committed { .. }));
    h.apply(Command::DeleteQueue { queue: SRC.into() });
    assert!(h.state.streams.query("id-totals").unwrap().partitions.is_empty());
}
