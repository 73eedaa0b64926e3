//! Determinism: the same entries give the same state, whether applied in
//! one go or across a snapshot and restore; and no sequence breaks the
//! state's invariants or moves a committed cursor back.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;

use proptest::prelude::*;
use regina_state::command::*;
use regina_state::{Command, Entry, State};

fn command() -> impl Strategy<Value = (u64, Command)> {
    let queue = prop::sample::select(vec!["a", "b"]);
    let part = prop::sample::select(vec!["P", "Q", "R"]);
    let group = prop::sample::select(vec!["__QUEUE_MODE__", "g1", "g2"]);
    let txn = 0u8..12;
    let dt = 0u64..3_000;
    prop_oneof![
        4 => (dt.clone(), queue.clone(), part.clone(), txn.clone(), 1u8..4).prop_map(|(dt, q, p, t, n)| {
            let items = (0..n)
                .map(|i| PushItem {
                    queue: q.into(),
                    partition: p.into(),
                    transaction_id: format!("t{}", t.wrapping_add(i)),
                    trace_id: None,
                    message_id: [t; 16],
                    payload: b"1".to_vec(),
                })
                .collect();
            (dt, Command::push(items))
        }),
        3 => (dt.clone(), queue.clone(), group.clone(), 1u32..5, 1u32..3, any::<bool>(), 0u8..3, any::<u16>()).prop_map(
            |(dt, q, g, batch, parts, auto_ack, sub, lid)| {
                let subscription = [Subscription::All, Subscription::New, Subscription::From(1_000_500)][sub as usize];
                (dt, Command::Pop(PopCmd {
                    target: PopTarget::Queue { queue: q.into(), partition: None },
                    group: g.into(),
                    batch,
                    max_partitions: parts,
                    lease_id: format!("L{lid}"),
                    lease_ms: Some(2_000),
                    auto_ack,
                    subscription,
                    conflation: false,
                }))
            }
        ),
        3 => (dt.clone(), group.clone(), 1u64..7, txn.clone(), 0u8..4, prop::option::of(any::<u16>())).prop_map(
            |(dt, g, pid, t, st, lid)| {
                let status = [AckStatus::Completed, AckStatus::Failed, AckStatus::Retry, AckStatus::Dlq][st as usize];
                let item = AckItem { partition_id: pid, transaction_id: format!("t{t}"), status, error: None, lease_id: lid.map(|l| format!("L{l}")) };
                (dt, Command::Ack(AckCmd { group: g.into(), items: vec![item] }))
            }
        ),
        1 => (dt.clone(), any::<u16>()).prop_map(|(dt, l)| (dt, Command::ExtendLease { lease_id: format!("L{l}") })),
        1 => (dt.clone(), queue.clone()).prop_map(|(dt, q)| (dt, Command::DeleteQueue { queue: q.into() })),
        1 => dt.prop_map(|dt| (dt, Command::Sweep)),
    ]
}

/// Every committed cursor, keyed by (queue, partition id, group).
fn cursors(s: &State) -> Vec<((String, u64, u32), u64)> {
    let mut v: Vec<_> = s
        .queues
        .values()
        .flat_map(|q| {
            q.partitions.iter().flat_map(move |p| {
                p.cursors
                    .iter()
                    .enumerate()
                    .filter_map(move |(g, c)| c.as_ref().map(|c| ((q.name.clone(), p.id, g as u32), c.next)))
            })
        })
        .collect();
    v.sort();
    v
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn replay_and_restore_agree(cmds in prop::collection::vec(command(), 1..80), cut in 0usize..80) {
        let mut now = 1_000_000u64;
        let entries: Vec<Entry> = cmds.into_iter().map(|(dt, command)| { now += dt; Entry { now_ms: now, command } }).collect();
        let mut a = State::new();
        let mut b = State::new();
        let mut outcomes_a = Vec::new();
        let mut outcomes_b = Vec::new();
        for (i, e) in entries.iter().enumerate() {
            let before = cursors(&a);
            outcomes_a.push(a.apply(e));
            a.check_invariants().map_err(TestCaseError::fail)?;
            for (key, next) in before {
                if let Some((_, after)) = cursors(&a).into_iter().find(|(k, _)| *k == key) {
                    prop_assert!(after >= next, "cursor {key:?} moved back from {next} to {after}");
                }
            }
            if i == cut {
                b = State::decode(&b.encode()).map_err(TestCaseError::fail)?;
            }
            outcomes_b.push(b.apply(e));
        }
        prop_assert_eq!(outcomes_a, outcomes_b);
        // Map iteration order may differ in the encoding; the states may not.
        prop_assert!(a == b, "replayed and restored states differ");
        prop_assert!(a == State::decode(&a.encode()).unwrap());
    }

    /// A snapshot encodes a copy of the state taken under the lock, after
    /// which applying goes on: partitions are shared with the copy and
    /// copied on their next write. Whatever is applied after the copy, it
    /// still encodes the state at the moment it was taken.
    #[test]
    fn a_copy_keeps_the_state_it_was_taken_at(cmds in prop::collection::vec(command(), 1..80), cut in 0usize..80) {
        let mut now = 1_000_000u64;
        let mut live = State::new();
        let mut copy = None;
        for (i, (dt, command)) in cmds.into_iter().enumerate() {
            if i == cut {
                copy = Some((live.clone(), live.encode()));
            }
            now += dt;
            live.apply(&Entry { now_ms: now, command });
        }
        if let Some((copy, encoded_then)) = copy {
            prop_assert_eq!(copy.encoded_len(), encoded_then.len());
            prop_assert!(copy.encode() == encoded_then, "a copy changed as the state it was taken from went on");
        }
        prop_assert_eq!(live.encoded_len(), live.encode().len());
        // A snapshot streams the encoding into its file.
        let mut streamed = Vec::new();
        live.encode_to(&mut streamed).unwrap();
        prop_assert!(streamed == live.encode(), "the streamed encoding differs");
        let mut holed = regina_state::snapshot_holes::FilledHoles::default();
        live.encode_holed(&mut holed).unwrap();
        prop_assert!(holed.bytes == live.encode(), "the holed encoding, filled, differs");
    }
}

#[test]
fn a_snapshot_whose_state_breaks_an_invariant_is_refused() {
    let mut h = support::Harness::new();
    h.push("q", "P", "t1");
    let good = h.state.encode();
    assert!(State::decode(&good).is_ok());
    // A queue its name index names but the state lacks: a state no entry
    // makes.
    h.state.queue_names.insert("ghost".into(), 999);
    let Err(err) = State::decode(&h.state.encode()) else { panic!("a broken state was accepted") };
    assert!(err.contains("invariant"), "{err}");
}

/// The partition-id index is checked as a sum, not entry by entry: a
/// wrong place, a missing entry or a stray one is still found.
#[test]
fn the_invariant_check_finds_a_wrong_partition_id_entry() {
    let mut h = support::Harness::new();
    for i in 0..50 {
        h.push(if i % 2 == 0 { "a" } else { "b" }, &format!("P{i}"), "t");
    }
    h.state.check_invariants().unwrap();
    let (pid, &(qid, pidx)) = h.state.partition_ids.iter().next().unwrap();
    let breaks: [&dyn Fn(&mut State); 4] = [
        &|s| {
            s.partition_ids.insert(pid, (qid, pidx + 1));
        },
        &|s| {
            s.partition_ids.insert(pid, (qid ^ 3, pidx));
        },
        &|s| {
            s.partition_ids.remove(&pid);
        },
        &|s| {
            s.partition_ids.remove(&pid);
            s.partition_ids.insert(pid + 1_000, (qid, pidx));
        },
    ];
    for (n, break_it) in breaks.iter().enumerate() {
        let mut broken = h.state.clone();
        break_it(&mut broken);
        let err = broken.check_invariants().unwrap_err();
        assert!(err.contains("id index"), "case {n}: {err}");
    }
}

/// A snapshot copies the state (sharing partitions and their messages)
/// where partitions and messages outnumber the other rows it would have to
/// copy, and encodes it in place where those rows dominate.
#[test]
fn a_snapshot_copies_the_state_only_where_partitions_and_messages_outnumber_rows() {
    let mut many_partitions = support::Harness::new();
    for i in 0..40 {
        many_partitions.push("q", &format!("P{i}"), "t");
    }
    assert!(many_partitions.state.copy_is_cheaper(), "one message in each of 40 partitions");
    let mut many_rows = support::Harness::new();
    many_rows.push("q", "P", "t");
    let puts = (0..40)
        .map(|i| KvOp::Put {
            ns: "ns".into(),
            key: format!("k{i}"),
            value: b"v".to_vec(),
            ttl_seconds: None,
            expect: None,
            required: false,
        })
        .collect();
    support::call(&mut many_rows, puts);
    assert!(!many_rows.state.copy_is_cheaper(), "40 KV rows beside one message");
}

/// The copy a snapshot encodes leaves out the indexes over every partition
/// (they are written from the partitions), yet encodes to the state's very
/// bytes, tenants and all, and decodes to the state.
#[test]
fn a_copy_to_encode_encodes_to_the_states_bytes() {
    let mut h = support::Harness::new();
    for i in 0..1_500 {
        h.push(if i % 3 == 0 { "a" } else { "b" }, &format!("P{}", i % 1_100), &format!("t{i}"));
    }
    h.pop("b", "g", 10, Subscription::All);
    let tenant = h.state.clone();
    h.state.tenants.insert("t1".into(), tenant);
    let copy = h.state.copy_to_encode();
    assert!(copy.partition_ids.is_empty() && copy.queue("b").unwrap().partition_index.is_empty());
    assert_eq!(copy.encode(), h.state.encode());
    // Indexes are rebuilt from the partitions (transaction-id indexes are
    // a cache and compare equal).
    let back = State::decode(&copy.encode()).unwrap();
    assert_eq!(back, h.state);
}

/// A snapshot leaves every sealed chunk of messages out as a hole; filled
/// in place, the holes give the state's very bytes, tenants and copies
/// included.
#[test]
fn a_holed_encoding_filled_is_the_states_bytes() {
    use regina_state::snapshot_holes::FilledHoles;
    let mut h = support::Harness::new();
    for i in 0..3_800 {
        h.push("a", if i % 3 == 0 { "small" } else { "large" }, &format!("t{i}"));
    }
    h.pop("a", "g", 10, Subscription::All);
    let tenant = h.state.clone();
    h.state.tenants.insert("t1".into(), tenant);
    let copy = h.state.copy_to_encode();
    for state in [&h.state, &copy] {
        let mut holed = FilledHoles::default();
        state.encode_holed(&mut holed).unwrap();
        // "large" holds 2,533 messages (two chunks), "small" 1,267 (one),
        // in the state and in its tenant.
        assert_eq!(holed.holes, 6);
        assert!(holed.bytes == h.state.encode(), "the filled encoding differs");
    }
    let back = State::decode(&copy.encode()).unwrap();
    assert_eq!(back, h.state);
}
