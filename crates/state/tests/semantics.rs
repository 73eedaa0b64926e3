//! The state machine's rules, one behaviour per test.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;

use regina_state::command::*;
use regina_state::options::OptionsPatch;
use regina_state::outcome::*;
use regina_state::{Command, Outcome};
use support::*;

fn configure(h: &mut Harness, queue: &str, patch: OptionsPatch) {
    let cmd = ConfigureCmd { queue: queue.into(), namespace: None, task: None, options: patch, replace: false };
    assert!(matches!(h.apply(Command::Configure(cmd)), Outcome::Configured { .. }));
}

#[test]
fn offsets_are_gapless_per_partition_and_duplicates_answer_the_original() {
    let mut h = Harness::new();
    let a = h.push("q", "p1", "t1");
    let b = h.push("q", "p1", "t2");
    let c = h.push("q", "p2", "t1");
    assert_eq!((a.offset, b.offset, c.offset), (0, 1, 0));
    assert_eq!(c.status, PushStatus::Queued, "dedup is per partition");
    let d = h.push("q", "p1", "t1");
    assert_eq!(d.status, PushStatus::Duplicate);
    assert_eq!((d.offset, d.pos), (a.offset, a.pos));
    assert_eq!(h.state.queue("q").unwrap().partitions[0].next_offset(), 2);
}

#[test]
fn repeats_inside_one_push_collapse_even_with_no_window() {
    let mut h = Harness::new();
    configure(&mut h, "q", OptionsPatch { dedup_window_seconds: Some(0), ..Default::default() });
    let items = vec![h.item("q", "P", "same"), h.item("q", "P", "same"), h.item("q", "P", "other")];
    let first_id = items[0].message_id;
    let Outcome::Push(r) = h.apply(Command::push(items)) else { panic!() };
    assert_eq!(r[0].status, PushStatus::Queued);
    assert_eq!(r[1].status, PushStatus::Duplicate);
    assert_eq!(r[1].message_id, Some(first_id));
    assert_eq!(r[2].offset, 1);
    // Outside the request, a zero window lets the same id in again.
    h.now += 1;
    assert_eq!(h.push("q", "P", "same").status, PushStatus::Queued);
}

/// Under a window, a repeat inside one push is a duplicate of the message
/// stored earlier in the same entry, and answers with its id.
#[test]
fn repeats_inside_one_push_collapse_under_a_window() {
    let mut h = Harness::new();
    configure(&mut h, "q", OptionsPatch { dedup_window_seconds: Some(1), ..Default::default() });
    let items = vec![h.item("q", "P", "same"), h.item("q", "P", "other"), h.item("q", "P", "same")];
    let first_id = items[0].message_id;
    let Outcome::Push(r) = h.apply(Command::push(items)) else { panic!() };
    let statuses: Vec<_> = r.iter().map(|r| r.status).collect();
    assert_eq!(statuses, [PushStatus::Queued, PushStatus::Queued, PushStatus::Duplicate]);
    assert_eq!((r[2].offset, r[2].message_id), (0, Some(first_id)));
    assert_eq!(h.state.queue("q").unwrap().partitions[0].next_offset(), 2);
}

/// A push whose items switch between partitions and queues and come back
/// lands each item in its own partition, in order, with its own dedup.
#[test]
fn a_push_that_interleaves_partitions_lands_each_item_where_it_names() {
    let mut h = Harness::new();
    h.push("q", "A", "old");
    let items = vec![
        h.item("q", "A", "a1"),
        h.item("q", "A", "old"),
        h.item("q", "B", "old"),
        h.item("r", "A", "a1"),
        h.item("q", "A", "a2"),
        h.item("q", "B", "b1"),
        h.item("q", "A", "a1"),
    ];
    let Outcome::Push(r) = h.apply(Command::push(items)) else { panic!() };
    let seen: Vec<_> = r.iter().map(|r| (r.status, r.partition_id, r.offset)).collect();
    let (qa, qb, ra) = (r[0].partition_id, r[2].partition_id, r[3].partition_id);
    assert!(qa != qb && qa != ra && qb != ra, "three partitions: {seen:?}");
    assert_eq!(
        seen,
        [
            (PushStatus::Queued, qa, 1),
            (PushStatus::Duplicate, qa, 0),
            (PushStatus::Queued, qb, 0),
            (PushStatus::Queued, ra, 0),
            (PushStatus::Queued, qa, 2),
            (PushStatus::Queued, qb, 1),
            (PushStatus::Duplicate, qa, 1),
        ]
    );
    assert_eq!(h.state.queue("q").unwrap().partitions.len(), 2);
    assert_eq!(h.state.queue("r").unwrap().partitions.len(), 1);
}

#[test]
fn the_dedup_window_expires() {
    let mut h = Harness::new();
    configure(&mut h, "q", OptionsPatch { dedup_window_seconds: Some(10), ..Default::default() });
    h.push("q", "P", "t");
    h.now += 9_999;
    assert_eq!(h.push("q", "P", "t").status, PushStatus::Duplicate);
    h.now += 2;
    assert_eq!(h.push("q", "P", "t").status, PushStatus::Queued);
}

#[test]
fn a_lease_is_exclusive_per_partition_and_group_and_acks_commit() {
    let mut h = Harness::new();
    for i in 0..5 {
        h.push("q", "P", &format!("t{i}"));
    }
    let r = h.pop("q", QM, 3, Subscription::All);
    assert_eq!(offsets(&r), vec![0, 1, 2]);
    assert!(offsets(&h.pop("q", QM, 3, Subscription::All)).is_empty(), "the partition is leased");
    let other = h.pop("q", "g2", 10, Subscription::All);
    assert_eq!(offsets(&other).len(), 5, "another group has its own cursor");
    let pid = r.claims[0].partition_id;
    // Acking the last of the batch commits everything before it.
    let res = h.ack(QM, vec![ack_item(pid, "t2", AckStatus::Completed, &r.lease_id)]);
    assert!(res[0].success && res[0].lease_released, "{res:?}");
    let again = h.ack(QM, vec![ack_item(pid, "t0", AckStatus::Completed, &r.lease_id)]);
    assert!(again[0].success && again[0].noop, "an ack below the cursor is a noop");
    let nack = h.ack(QM, vec![ack_item(pid, "t1", AckStatus::Failed, &r.lease_id)]);
    assert!(!nack[0].success && nack[0].error.as_deref().unwrap().contains("committed"));
    assert_eq!(offsets(&h.pop("q", QM, 10, Subscription::All)), vec![3, 4]);
}

#[test]
fn ack_refusals_name_their_reason() {
    let mut h = Harness::new();
    h.push("q", "P", "t0");
    let r = h.pop("q", QM, 1, Subscription::All);
    let pid = r.claims[0].partition_id;
    let wrong = h.ack(QM, vec![ack_item(pid, "t0", AckStatus::Completed, "not-the-lease")]);
    assert!(wrong[0].error.as_deref().unwrap().contains("lease"));
    let unknown = h.ack(QM, vec![ack_item(pid, "never-pushed", AckStatus::Completed, &r.lease_id)]);
    assert!(unknown[0].error.as_deref().unwrap().contains("unresolv"));
    // Refusals did not burn the lease.
    let ok = h.ack(QM, vec![ack_item(pid, "t0", AckStatus::Completed, &r.lease_id)]);
    assert!(ok[0].success);
}

#[test]
fn a_failed_item_clamps_its_batch_and_retries_lead_to_the_dlq() {
    let mut h = Harness::new();
    configure(&mut h, "q", OptionsPatch { retry_limit: Some(1), ..Default::default() });
    for i in 0..3 {
        h.push("q", "P", &format!("t{i}"));
    }
    let r = h.pop("q", QM, 3, Subscription::All);
    let pid = r.claims[0].partition_id;
    let res = h.ack(
        QM,
        vec![
            ack_item(pid, "t0", AckStatus::Completed, &r.lease_id),
            ack_item(pid, "t1", AckStatus::Failed, &r.lease_id),
            ack_item(pid, "t2", AckStatus::Completed, &r.lease_id),
        ],
    );
    assert!(res.iter().all(|r| r.success), "{res:?}");
    let r2 = h.pop("q", QM, 3, Subscription::All);
    assert_eq!(offsets(&r2), vec![1, 2], "the failed item and everything after it come back");
    assert_eq!(r2.claims[0].messages[0].attempt, 2);
    let res = h.ack(QM, vec![ack_item(pid, "t1", AckStatus::Failed, &r2.lease_id)]);
    assert!(res[0].dlq, "second failure with retryLimit 1 goes to the DLQ");
    assert_eq!(h.state.queue("q").unwrap().dlq.len(), 1);
    assert_eq!(h.state.queue("q").unwrap().dlq[0].error.as_deref(), Some("boom"));
    assert_eq!(offsets(&h.pop("q", QM, 3, Subscription::All)), vec![2]);
}

#[test]
fn retry_never_charges_the_budget() {
    let mut h = Harness::new();
    configure(&mut h, "q", OptionsPatch { retry_limit: Some(0), ..Default::default() });
    h.push("q", "P", "t0");
    for _ in 0..5 {
        let r = h.pop("q", QM, 1, Subscription::All);
        let pid = r.claims[0].partition_id;
        let res = h.ack(QM, vec![ack_item(pid, "t0", AckStatus::Retry, &r.lease_id)]);
        assert!(res[0].success && !res[0].dlq);
    }
    assert!(h.state.queue("q").unwrap().dlq.is_empty());
}

#[test]
fn a_lapsed_lease_redelivers_without_spending_a_retry() {
    let mut h = Harness::new();
    configure(&mut h, "q", OptionsPatch { lease_time: Some(2), ..Default::default() });
    h.push("q", "P", "t0");
    let r = h.pop("q", QM, 1, Subscription::All);
    h.now += 1_999;
    assert!(offsets(&h.pop("q", QM, 1, Subscription::All)).is_empty());
    h.now += 1;
    let r2 = h.pop("q", QM, 1, Subscription::All);
    assert_eq!(offsets(&r2), vec![0]);
    assert_ne!(r2.lease_id, r.lease_id);
    assert_eq!(r2.claims[0].messages[0].attempt, 1);
    let stale = h.ack(QM, vec![ack_item(r.claims[0].partition_id, "t0", AckStatus::Completed, &r.lease_id)]);
    assert!(!stale[0].success, "the old lease no longer acks");
}

#[test]
fn extending_keeps_a_lease_alive() {
    let mut h = Harness::new();
    configure(&mut h, "q", OptionsPatch { lease_time: Some(2), ..Default::default() });
    h.push("q", "P", "t0");
    let r = h.pop("q", QM, 1, Subscription::All);
    for _ in 0..3 {
        h.now += 1_000;
        let Outcome::Extend(e) = h.apply(Command::ExtendLease { lease_id: r.lease_id.clone() }) else { panic!() };
        assert_eq!(e.renewed, 1);
        assert_eq!(e.expires_ms, Some(h.now + 2_000));
    }
    assert!(offsets(&h.pop("q", QM, 1, Subscription::All)).is_empty());
    let pid = r.claims[0].partition_id;
    assert!(h.ack(QM, vec![ack_item(pid, "t0", AckStatus::Completed, &r.lease_id)])[0].success);
    let Outcome::Extend(e) = h.apply(Command::ExtendLease { lease_id: r.lease_id.clone() }) else { panic!() };
    assert_eq!(e.renewed, 0, "a settled lease cannot be extended");
}

#[test]
fn subscriptions_seed_a_new_group_once() {
    let mut h = Harness::new();
    h.push("q", "P", "old");
    assert!(offsets(&h.pop("q", "fresh", 10, Subscription::New)).is_empty());
    h.now += 5;
    h.push("q", "P", "new");
    h.push("q", "Q", "other-lane");
    let r = h.pop("q", "fresh", 10, Subscription::All);
    assert_eq!(offsets(&r), vec![1], "later pops never re-seed; old messages stay skipped");
    let all = h.pop("q", "history", 10, Subscription::All);
    assert_eq!(offsets(&all), vec![0, 1]);
    let from = h.pop("q", "from", 10, Subscription::From(h.now));
    assert_eq!(offsets(&from), vec![1]);
}

#[test]
fn auto_ack_commits_at_delivery() {
    let mut h = Harness::new();
    h.push("q", "P", "t0");
    let mut cmd = PopCmd {
        target: PopTarget::Queue { queue: "q".into(), partition: None },
        group: QM.into(),
        batch: 5,
        max_partitions: 1,
        lease_id: "l".into(),
        lease_ms: None,
        auto_ack: true,
        subscription: Subscription::All,
        conflation: false,
    };
    let r = h.pop_cmd(cmd.clone());
    assert_eq!(offsets(&r), vec![0]);
    assert!(r.lease_id.is_empty());
    cmd.auto_ack = false;
    h.now += 1_000_000;
    assert!(offsets(&h.pop_cmd(cmd)).is_empty());
}

#[test]
fn batch_caps_the_claim_across_partitions() {
    let mut h = Harness::new();
    for lane in 0..5 {
        for i in 0..4 {
            h.push("q", &format!("lane{lane}"), &format!("t{lane}-{i}"));
        }
    }
    let r = h.pop_cmd(PopCmd {
        target: PopTarget::Queue { queue: "q".into(), partition: None },
        group: "g".into(),
        batch: 10,
        max_partitions: 5,
        lease_id: "L".into(),
        lease_ms: None,
        auto_ack: false,
        subscription: Subscription::All,
        conflation: false,
    });
    assert_eq!(offsets(&r).len(), 10);
    assert_eq!(r.claims.len(), 3);
    assert_eq!(h.state.leases["L"].claims.len(), 3, "one lease id holds every claimed partition");
}

#[test]
fn delayed_processing_hides_new_messages() {
    let mut h = Harness::new();
    configure(&mut h, "q", OptionsPatch { delayed_processing: Some(2), ..Default::default() });
    h.push("q", "P", "t0");
    assert!(offsets(&h.pop("q", QM, 1, Subscription::All)).is_empty());
    let target = PopTarget::Queue { queue: "q".into(), partition: None };
    assert!(!h.state.pop_would_act(&target, QM, h.now + 1_999));
    assert!(h.state.pop_would_act(&target, QM, h.now + 2_000));
    h.now += 2_000;
    assert_eq!(offsets(&h.pop("q", QM, 1, Subscription::All)), vec![0]);
}

#[test]
fn time_never_goes_back() {
    let mut h = Harness::new();
    h.now = 5_000_000;
    h.push("q", "P", "a");
    h.now = 4_000_000;
    h.push("q", "P", "b");
    assert_eq!(h.state.now_ms, 5_000_000);
}

#[test]
fn retention_drops_old_messages_and_delete_removes_the_queue() {
    let mut h = Harness::new();
    configure(&mut h, "q", OptionsPatch { retention_seconds: Some(10), ..Default::default() });
    h.push("q", "P", "old");
    h.now += 11_000;
    h.push("q", "P", "new");
    // As in Queen, retention acts only once retentionEnabled is on.
    h.apply(Command::Sweep);
    let p = &h.state.queue("q").unwrap().partitions[0];
    assert_eq!((p.base, p.next_offset()), (0, 2), "retention without retentionEnabled drops nothing");
    configure(&mut h, "q", OptionsPatch { retention_enabled: Some(true), ..Default::default() });
    h.apply(Command::Sweep);
    let p = &h.state.queue("q").unwrap().partitions[0];
    assert_eq!((p.base, p.next_offset()), (1, 2));
    assert_eq!(offsets(&h.pop("q", QM, 5, Subscription::All)), vec![1]);
    assert_eq!(h.apply(Command::DeleteQueue { queue: "q".into() }), Outcome::Deleted { existed: true });
    assert!(h.state.queue("q").is_none() && h.state.partition_ids.is_empty() && h.state.leases.is_empty());
    assert_eq!(h.apply(Command::DeleteQueue { queue: "q".into() }), Outcome::Deleted { existed: false });
}

/// A queue's body bytes are counted as messages come and go (pushes,
/// retention), not summed over every message when asked, and a decoded
/// state counts the same.
#[test]
fn a_queues_kept_bytes_follow_pushes_and_retention() {
    let sum = |h: &Harness| h.state.queue("q").unwrap().partitions.iter().map(|p| p.kept_bytes()).sum::<u64>();
    let mut h = Harness::new();
    configure(
        &mut h,
        "q",
        OptionsPatch { retention_seconds: Some(10), retention_enabled: Some(true), ..Default::default() },
    );
    for i in 0..1_500 {
        h.push("q", &format!("P{}", i % 2), &format!("old-{i}"));
    }
    h.now += 11_000;
    for i in 0..700 {
        h.push("q", &format!("P{}", i % 3), &format!("new-{i}"));
    }
    let q = h.state.queue("q").unwrap();
    assert!(q.kept_bytes > 0 && q.kept_bytes == sum(&h), "{} against {}", q.kept_bytes, sum(&h));
    h.apply(Command::Sweep);
    let q = h.state.queue("q").unwrap();
    assert_eq!(q.kept, 700, "retention dropped the old messages");
    assert_eq!(q.kept_bytes, sum(&h));
    let summary = regina_state::views::queue_summary(q, h.state.now_ms);
    assert_eq!(summary.bytes, q.kept_bytes);
    let back = regina_state::State::decode(&h.state.encode()).unwrap();
    assert_eq!(back.queue("q").unwrap().kept_bytes, q.kept_bytes);
}

fn txn(h: &mut Harness, ops: Vec<TxnOp>) -> TxnOutcome {
    match h.apply(Command::Transaction(TxnCmd { ops, kv: Vec::new(), timers: Vec::new() })) {
        Outcome::Txn(t) => t,
        o => panic!("transaction answered {o:?}"),
    }
}

#[test]
fn a_transaction_acks_and_pushes_as_one_and_a_resend_writes_nothing() {
    let mut h = Harness::new();
    h.push("in", "P", "evt-1");
    let r = h.pop("in", QM, 1, Subscription::All);
    let pid = r.claims[0].partition_id;
    let ops = vec![
        TxnOp::Ack { group: QM.into(), item: ack_item(pid, "evt-1", AckStatus::Completed, &r.lease_id) },
        TxnOp::Push(h.item("out", "customer-42", "receipt-1")),
    ];
    let TxnOutcome::Committed(results) = txn(&mut h, ops.clone()) else { panic!("first send must commit") };
    assert!(matches!(&results[0], TxnResult::Ack(a) if a.success && a.lease_released));
    assert!(matches!(&results[1], TxnResult::Push(p) if p.status == PushStatus::Queued));
    let before = h.state.clone();
    let TxnOutcome::Refused { reason, failed_index, error, .. } = txn(&mut h, ops) else {
        panic!("a resend must refuse")
    };
    assert_eq!((reason.as_str(), failed_index), ("rejected_ack", 0));
    assert!(error.contains("rolled back"));
    let mut after = h.state.clone();
    after.now_ms = before.now_ms;
    after.applied_entries = before.applied_entries;
    assert!(after == before, "a refused step changed the state");
}

#[test]
fn one_bad_ack_rolls_back_every_other_part_of_the_step() {
    let mut h = Harness::new();
    h.push("in", "A", "a0");
    h.push("in", "B", "b0");
    let ra = h.pop_cmd(PopCmd {
        target: PopTarget::Queue { queue: "in".into(), partition: Some("A".into()) },
        group: QM.into(),
        batch: 1,
        max_partitions: 1,
        lease_id: "LA".into(),
        lease_ms: None,
        auto_ack: false,
        subscription: Subscription::All,
        conflation: false,
    });
    let pa = ra.claims[0].partition_id;
    let pb = pa + 1;
    let ops = vec![
        TxnOp::Push(h.item("out", "P", "o1")),
        TxnOp::Ack { group: QM.into(), item: ack_item(pa, "a0", AckStatus::Completed, "LA") },
        TxnOp::Ack { group: QM.into(), item: ack_item(pb, "b0", AckStatus::Completed, "no-such-lease") },
    ];
    let TxnOutcome::Refused { failed_index, .. } = txn(&mut h, ops) else { panic!("must refuse") };
    assert_eq!(failed_index, 2);
    assert!(h.state.queue("out").is_none(), "the push was written");
    let a = h.ack(QM, vec![ack_item(pa, "a0", AckStatus::Completed, "LA")]);
    assert!(a[0].success && !a[0].noop, "the first ack was committed by a refused step");
}

#[test]
fn an_ack_naming_no_lease_commits_after_the_lease_lapsed() {
    let mut h = Harness::new();
    configure(&mut h, "q", OptionsPatch { lease_time: Some(1), ..Default::default() });
    h.push("q", "P", "t0");
    let r = h.pop("q", QM, 1, Subscription::All);
    h.now += 2_000;
    let mut item = ack_item(r.claims[0].partition_id, "t0", AckStatus::Completed, "");
    item.lease_id = None;
    let res = h.ack(QM, vec![item]);
    assert!(res[0].success && !res[0].noop, "{res:?}");
    assert!(offsets(&h.pop("q", QM, 1, Subscription::All)).is_empty(), "the commit did not hold");
}

#[test]
fn seek_delete_and_resubscribe_move_a_group() {
    let mut h = Harness::new();
    for i in 0..3 {
        h.push("q", "P", &format!("t{i}"));
    }
    let r = h.pop("q", "g", 10, Subscription::All);
    let pid = r.claims[0].partition_id;
    h.ack("g", vec![ack_item(pid, "t2", AckStatus::Completed, &r.lease_id)]);
    assert!(offsets(&h.pop("q", "g", 10, Subscription::All)).is_empty());
    let n = h.apply(Command::Seek { group: "g".into(), queue: "q".into(), target: SeekTarget::Time(0) });
    assert_eq!(n, Outcome::Changed { count: 1 });
    assert_eq!(offsets(&h.pop("q", "g", 10, Subscription::All)), vec![0, 1, 2], "a seek to the epoch replays all");
    h.apply(Command::Seek { group: "g".into(), queue: "q".into(), target: SeekTarget::End });
    assert!(offsets(&h.pop("q", "g", 10, Subscription::All)).is_empty(), "a seek to the end skips all");
    h.apply(Command::DeleteGroup { group: "g".into(), queue: None, delete_metadata: true });
    assert_eq!(offsets(&h.pop("q", "g", 10, Subscription::All)), vec![0, 1, 2], "a deleted group starts over");
    let now = h.now;
    h.now += 10;
    h.push("q", "P", "t3");
    let Outcome::Changed { count } = h.apply(Command::SetSubscription { group: "g".into(), from_ms: now + 5 }) else {
        panic!()
    };
    assert_eq!(count, 1);
    assert_eq!(offsets(&h.pop("q", "g", 10, Subscription::All)), vec![3]);
}

#[test]
fn a_dead_letter_row_can_be_replayed_or_deleted_once() {
    let mut h = Harness::new();
    h.push("q", "P", "t0");
    let r = h.pop("q", QM, 1, Subscription::All);
    let pid = r.claims[0].partition_id;
    assert!(h.ack(QM, vec![ack_item(pid, "t0", AckStatus::Dlq, &r.lease_id)])[0].dlq);
    let item = h.item("q", "P", "t0");
    let Outcome::Push(p) =
        h.apply(Command::RetryDeadLetter { partition_id: pid, transaction_id: "t0".into(), item: item.clone() })
    else {
        panic!("replay must push")
    };
    assert_eq!(p[0].offset, 1);
    assert!(h.state.queue("q").unwrap().dlq.is_empty());
    let again = h.apply(Command::RetryDeadLetter { partition_id: pid, transaction_id: "t0".into(), item });
    assert_eq!(again, Outcome::Found(false));
    assert_eq!(offsets(&h.pop("q", QM, 5, Subscription::All)), vec![1]);
    assert_eq!(
        h.apply(Command::DeleteDeadLetter { partition_id: pid, transaction_id: "t0".into() }),
        Outcome::Found(false)
    );
}

#[test]
fn a_dotted_queue_name_declares_its_namespace_and_task() {
    let mut h = Harness::new();
    h.push("billing.invoices.q", "P", "t");
    h.push("plain", "P", "t");
    h.push("two.parts", "P", "t");
    let q = h.state.queue("billing.invoices.q").unwrap();
    assert_eq!((q.namespace.as_deref(), q.task.as_deref()), (Some("billing"), Some("invoices")));
    assert_eq!(h.state.queue("plain").unwrap().namespace, None);
    assert_eq!(h.state.queue("two.parts").unwrap().namespace, None);
}

#[test]
fn max_size_refuses_new_pushes_and_an_overflowing_step() {
    let mut h = Harness::new();
    configure(&mut h, "q", OptionsPatch { max_size: Some(2), ..Default::default() });
    assert_eq!(h.push("q", "P", "a").status, PushStatus::Queued);
    assert_eq!(h.push("q", "P", "b").status, PushStatus::Queued);
    assert_eq!(h.push("q", "P", "c").status, PushStatus::Full);
    assert_eq!(h.push("q", "P", "a").status, PushStatus::Duplicate, "a duplicate is still answered");
    let resent = vec![TxnOp::Push(h.item("q", "P", "b"))];
    let TxnOutcome::Refused { reason, .. } = txn(&mut h, resent) else { panic!("a resent push must roll back") };
    assert_eq!(reason, "duplicate", "a stored duplicate is named before the size check");
    let over = vec![TxnOp::Push(h.item("q", "P", "d"))];
    let TxnOutcome::Refused { reason, .. } = txn(&mut h, over) else { panic!("an overflowing step must roll back") };
    assert_eq!(reason, "queue_full");
}

#[test]
fn a_conflating_group_gets_only_the_newest_message() {
    let mut h = Harness::new();
    for i in 0..4 {
        h.push("q", "P", &format!("t{i}"));
    }
    let mut cmd = PopCmd {
        target: PopTarget::Queue { queue: "q".into(), partition: None },
        group: "last".into(),
        batch: 10,
        max_partitions: 1,
        lease_id: "L".into(),
        lease_ms: None,
        auto_ack: false,
        subscription: Subscription::All,
        conflation: true,
    };
    let r = h.pop_cmd(cmd.clone());
    assert_eq!(offsets(&r), vec![3]);
    assert_eq!(r.conflation, Some(true));
    let pid = r.claims[0].partition_id;
    h.ack("last", vec![ack_item(pid, "t3", AckStatus::Completed, "L")]);
    h.push("q", "P", "t4");
    h.push("q", "P", "t5");
    cmd.lease_id = "L2".into();
    cmd.conflation = false;
    assert_eq!(offsets(&h.pop_cmd(cmd)), vec![5], "the stored policy wins over the request");
    assert_eq!(offsets(&h.pop("q", "plain", 10, Subscription::All)).len(), 6, "other groups see everything");
}

#[test]
fn a_window_buffer_holds_a_partition_until_it_is_quiet() {
    let mut h = Harness::new();
    configure(&mut h, "q", OptionsPatch { window_buffer: Some(2), ..Default::default() });
    h.push("q", "P", "a");
    h.now += 1_500;
    h.push("q", "P", "b");
    h.now += 1_500;
    assert!(offsets(&h.pop("q", QM, 10, Subscription::All)).is_empty(), "the burst is still arriving");
    h.now += 500;
    assert_eq!(offsets(&h.pop("q", QM, 10, Subscription::All)), vec![0, 1]);
}

#[test]
fn a_step_rolls_back_on_a_stored_duplicate_but_not_on_a_repeat_inside_it() {
    let mut h = Harness::new();
    h.push("out", "P", "receipt-1");
    let ops = vec![TxnOp::Push(h.item("out", "Q", "fresh")), TxnOp::Push(h.item("out", "P", "receipt-1"))];
    let TxnOutcome::Refused { reason, failed_index, error, .. } = txn(&mut h, ops) else {
        panic!("a stored duplicate must roll the step back")
    };
    assert_eq!((reason.as_str(), failed_index), ("duplicate", 1));
    assert!(error.contains("rolled back") && error.contains("offset 0"), "{error}");
    assert!(h.state.queue("out").unwrap().partition_by_name("Q").is_none(), "the first push was written");
    let ops = vec![TxnOp::Push(h.item("out", "Q", "x")), TxnOp::Push(h.item("out", "Q", "x"))];
    let TxnOutcome::Committed(r) = txn(&mut h, ops) else {
        panic!("a repeat inside one step collapses, it does not refuse")
    };
    assert!(matches!(&r[1], TxnResult::Push(p) if p.status == PushStatus::Duplicate));
}

#[test]
fn re_acking_under_a_held_lease_is_a_no_op_and_the_step_commits() {
    let mut h = Harness::new();
    h.push("in", "P", "a");
    h.push("in", "P", "b");
    let r = h.pop("in", QM, 2, Subscription::All);
    let pid = r.claims[0].partition_id;
    let first = vec![TxnOp::Ack { group: QM.into(), item: ack_item(pid, "a", AckStatus::Completed, &r.lease_id) }];
    assert!(matches!(txn(&mut h, first.clone()), TxnOutcome::Committed(_)));
    // The lease still holds "b", so the retry of the first step commits.
    assert!(matches!(txn(&mut h, first.clone()), TxnOutcome::Committed(_)), "a retry under a held lease is a no-op");
    let last = vec![TxnOp::Ack { group: QM.into(), item: ack_item(pid, "b", AckStatus::Completed, &r.lease_id) }];
    assert!(matches!(txn(&mut h, last), TxnOutcome::Committed(_)));
    let TxnOutcome::Refused { reason, .. } = txn(&mut h, first) else { panic!("the settled lease fences the retry") };
    assert_eq!(reason, "rejected_ack");
}

#[test]
fn a_batch_applies_each_request_on_its_own_in_order() {
    let mut h = Harness::new();
    let (a, b, a_again, c) =
        (h.item("q", "P", "a"), h.item("q", "P", "b"), h.item("q", "P", "a"), h.item("q", "P", "c"));
    // The middle request is a step whose second push repeats a stored id:
    // it is refused as a whole, and only it.
    let step = TxnCmd { ops: vec![TxnOp::Push(b), TxnOp::Push(a_again)], kv: vec![], timers: vec![] };
    let batch = Command::Batch(vec![Command::push(vec![a]), Command::Transaction(step), Command::push(vec![c])]);
    let Outcome::Batch(out) = h.apply(batch) else { panic!("a batch answers a batch") };
    assert_eq!(out.len(), 3);
    let Outcome::Push(first) = &out[0] else { panic!("{:?}", out[0]) };
    assert_eq!((first[0].status, first[0].offset), (PushStatus::Queued, 0));
    assert!(matches!(&out[1], Outcome::Txn(TxnOutcome::Refused { .. })), "{:?}", out[1]);
    let Outcome::Push(last) = &out[2] else { panic!("{:?}", out[2]) };
    assert_eq!((last[0].status, last[0].offset), (PushStatus::Queued, 1), "the refused step wrote nothing");
    assert_eq!(h.state.queue("q").unwrap().partitions[0].next_offset(), 2);
}

#[test]
fn a_wildcard_pop_only_walks_partitions_with_work() {
    let mut h = Harness::new();
    for i in 0..200 {
        h.push("q", &format!("p{i}"), &format!("t{i}"));
    }
    let ready = |h: &Harness| h.state.queue("q").unwrap().groups[0].ready.clone();
    // Claim every partition: each leaves the ready set while leased.
    let mut leases = Vec::new();
    for _ in 0..200 {
        let r = h.pop("q", "g", 1, Subscription::All);
        assert_eq!(r.claims.len(), 1);
        leases.push((r.claims[0].partition_id, r.lease_id.clone()));
    }
    assert!(ready(&h).is_empty(), "leased partitions wait for their lease to end");
    assert!(h.pop("q", "g", 1, Subscription::All).claims.is_empty());
    // Completing a batch hands the partition back only as far as it has
    // more: a push makes exactly one partition ready again.
    let (pid, lease) = leases[7].clone();
    let acked = h.ack("g", vec![ack_item(pid, "t7", AckStatus::Completed, &lease)]);
    assert!(acked[0].success);
    h.pop("q", "g", 1, Subscription::All);
    assert!(ready(&h).is_empty(), "a partition with nothing past its cursor is dropped by the pop that finds it so");
    h.push("q", "p7", "again");
    assert_eq!(ready(&h).len(), 1);
    let r = h.pop("q", "g", 1, Subscription::All);
    assert_eq!((r.claims[0].partition.as_str(), offsets(&r)), ("p7", vec![1]));
    // A lapsed lease marks its partition ready for the next pop.
    h.now += 3_600_000;
    let r = h.pop("q", "g", 500, Subscription::All);
    assert_eq!(r.claims.len(), 1, "max_partitions 1");
    assert_eq!(offsets(&r).len(), 1);
    assert!(ready(&h).len() >= 198, "the other lapsed leases made their partitions ready");
}

#[test]
fn a_snapshot_of_another_format_is_refused_not_misread() {
    let h = Harness::new();
    let bytes = h.state.encode();
    assert!(regina_state::State::decode(&bytes).is_ok());
    // The same state without its format tag, as an older version wrote it.
    let err = regina_state::State::decode(&bytes[8..]).unwrap_err();
    assert!(err.contains("format"), "{err}");
}

/// Decoded from a reader (a snapshot streamed as it is read), a state
/// comes back the same, and a length inside it claiming more than the
/// state's bytes is refused, not allocated: a reader has no end the
/// decoder could check it against.
#[test]
fn a_state_decoded_from_a_reader_refuses_a_length_past_its_end() {
    let mut h = Harness::new();
    h.push("q", "p1", "t1");
    let bytes = h.state.encode();
    let read = regina_state::State::decode_from(&mut bytes.as_slice()).unwrap();
    assert!(read.encode() == bytes, "the state read back differs");
    // After the format tag and the time: the queue-name map's length, then
    // its first name's length, made enormous.
    let mut damaged = bytes.clone();
    let name_len_at = 8 + 8 + 8;
    damaged[name_len_at..name_len_at + 8].copy_from_slice(&(u64::MAX / 4).to_le_bytes());
    let err = regina_state::State::decode_from(&mut damaged.as_slice()).unwrap_err();
    assert!(err.contains("undecodable"), "{err}");
    assert!(regina_state::State::decode(&damaged).is_err());
}

/// The invariant check notices a partition with work that its group's
/// ready set lacks, wherever it sits among many, for every group.
#[test]
fn the_invariant_check_finds_a_partition_missing_from_a_ready_set() {
    let mut h = Harness::new();
    for p in 0..300 {
        h.push("q", &format!("p{p}"), &format!("t{p}"));
    }
    for group in ["g", "h"] {
        h.pop("q", group, 1, Subscription::All);
    }
    h.state.check_invariants().unwrap();
    let qid = h.state.queue_names["q"];
    for (group, missing) in [(0usize, 1u32), (0, 150), (1, 299), (1, 7)] {
        let q = h.state.queues.get_mut(&qid).unwrap();
        let ready = &mut q.groups[group].ready;
        assert!(ready.remove(missing), "group {group} had partition {missing} ready");
        let err = h.state.check_invariants().unwrap_err();
        assert!(err.contains("is not in its ready set"), "{err}");
        h.state.queues.get_mut(&qid).unwrap().groups[group].ready.insert(missing);
        h.state.check_invariants().unwrap();
    }
    // A member past the last partition is refused too.
    h.state.queues.get_mut(&qid).unwrap().groups[1].ready.insert(300);
    let err = h.state.check_invariants().unwrap_err();
    assert!(err.contains("past the end"), "{err}");
}
