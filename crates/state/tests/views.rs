//! The read-only views: positions, depth, statuses and their counts, message
//! pages, lanes, ranking, reads by offset and partition discovery.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;

use regina_state::command::*;
use regina_state::options::OptionsPatch;
use regina_state::views::{self, FetchError, MessageFilter, MessageStatus, QueueView, StatusCounts};
use regina_state::Command;
use support::*;

fn counts(h: &Harness, queue: &str, pidx: u32) -> StatusCounts {
    let q = h.state.queue(queue).unwrap();
    let c = QueueView::new(q, h.now).partition_counts(pidx);
    assert_eq!(c.pending + c.processing + c.completed + c.dead_letter, c.total, "{c:?}");
    c
}

fn status(h: &Harness, queue: &str, pidx: u32, offset: u64) -> MessageStatus {
    QueueView::new(h.state.queue(queue).unwrap(), h.now).status(pidx, offset)
}

/// Pushes `n` messages whose transaction ids are `<partition>-<offset>`,
/// one millisecond apart.
fn push_n(h: &mut Harness, queue: &str, partition: &str, n: usize) -> u64 {
    let mut pid = 0;
    for _ in 0..n {
        let next = h
            .state
            .queue(queue)
            .and_then(|q| q.partition_by_name(partition).map(|i| q.partitions[i as usize].next_offset()))
            .unwrap_or(0);
        pid = h.push(queue, partition, &format!("{partition}-{next}")).partition_id;
        h.now += 1;
    }
    pid
}

#[test]
fn with_no_group_every_kept_message_is_pending() {
    let mut h = Harness::new();
    push_n(&mut h, "q", "P", 3);
    let q = h.state.queue("q").unwrap();
    assert_eq!(views::depth(q, 0), 3);
    assert_eq!(views::group_depth(q, 0, "nobody"), 3);
    let c = counts(&h, "q", 0);
    assert_eq!((c.total, c.pending, c.completed), (3, 3, 0));
    assert_eq!(status(&h, "q", 0, 2), MessageStatus::Pending);
}

#[test]
fn a_lease_makes_its_messages_processing_until_it_lapses() {
    let mut h = Harness::new();
    let pid = push_n(&mut h, "q", "P", 5);
    let r = h.pop("q", "g", 2, Subscription::All);
    assert_eq!(offsets(&r), vec![0, 1]);
    let c = counts(&h, "q", 0);
    assert_eq!((c.pending, c.processing, c.completed), (3, 2, 0));
    assert_eq!(status(&h, "q", 0, 1), MessageStatus::Processing);

    // Acking the first settles it; the lease still holds the second.
    h.ack("g", vec![ack_item(pid, "P-0", AckStatus::Completed, &r.lease_id)]);
    let c = counts(&h, "q", 0);
    assert_eq!((c.pending, c.processing, c.completed), (3, 1, 1));
    assert_eq!(status(&h, "q", 0, 0), MessageStatus::Completed);
    let q = h.state.queue("q").unwrap();
    assert_eq!(views::depth(q, 0), 4, "leased messages are still owed");
    assert_eq!(views::position(q, 0, 0), 1);

    // Once the lease has lapsed (judged by the caller's clock) nothing is
    // processing, even though no entry was applied since.
    h.now += 61_000;
    let c = counts(&h, "q", 0);
    assert_eq!((c.pending, c.processing), (4, 0));
}

#[test]
fn completed_needs_every_group_and_new_groups_are_seeded_at_the_end() {
    let mut h = Harness::new();
    let pid = push_n(&mut h, "q", "P", 2);
    let r = h.pop("q", "a", 10, Subscription::All);
    h.ack("a", vec![ack_item(pid, "P-1", AckStatus::Completed, &r.lease_id)]);
    assert_eq!(counts(&h, "q", 0).completed, 2);
    // A group subscribing `new` owes nothing of the backlog.
    h.pop("q", "b", 10, Subscription::New);
    let q = h.state.queue("q").unwrap();
    assert_eq!(views::group_depth(q, 0, "b"), 0);
    assert_eq!(counts(&h, "q", 0).completed, 2);
    // A group reading everything holds completion back.
    h.pop("q", "c", 1, Subscription::All);
    let c = counts(&h, "q", 0);
    assert_eq!((c.completed, c.processing, c.pending), (0, 1, 1));
    let q = h.state.queue("q").unwrap();
    assert_eq!(views::depth(q, 0), 2, "the slowest group decides");
}

#[test]
fn a_dead_lettered_message_has_that_status_and_is_counted_once() {
    let mut h = Harness::new();
    let pid = push_n(&mut h, "q", "P", 2);
    let r = h.pop("q", QM, 1, Subscription::All);
    h.ack(QM, vec![ack_item(pid, "P-0", AckStatus::Dlq, &r.lease_id)]);
    assert_eq!(status(&h, "q", 0, 0), MessageStatus::DeadLetter);
    let c = counts(&h, "q", 0);
    assert_eq!((c.dead_letter, c.completed, c.pending), (1, 0, 1));
    let sum = views::queue_summary(h.state.queue("q").unwrap(), h.now);
    assert_eq!((sum.dlq_rows, sum.counts.total), (1, 2));
}

#[test]
fn a_message_is_located_by_transaction_id_with_each_groups_view() {
    let mut h = Harness::new();
    let pid = push_n(&mut h, "q", "P", 3);
    let r = h.pop("q", "g", 2, Subscription::All);
    h.ack("g", vec![ack_item(pid, "P-0", AckStatus::Completed, &r.lease_id)]);
    let found = views::locate(&h.state, pid, "P-1").unwrap();
    assert_eq!(found.offset, 1);
    assert!(views::locate(&h.state, pid, "nope").is_none());
    assert!(views::locate(&h.state, pid + 99, "P-1").is_none());

    let q = h.state.queue("q").unwrap();
    let on = views::groups_on_message(q, found.pidx, 1, h.now);
    assert_eq!(on.len(), 1, "only groups with a cursor here");
    assert_eq!((on[0].name.as_str(), on[0].committed, on[0].consumed), ("g", 0, false));
    assert_eq!(on[0].lease_expires_ms, r.lease_expires_ms);
    let first = views::groups_on_message(q, found.pidx, 0, h.now);
    assert!(first[0].consumed && first[0].lease_expires_ms.is_none());
}

#[test]
fn message_pages_are_newest_first_and_filtered() {
    let mut h = Harness::new();
    push_n(&mut h, "q", "a", 3);
    push_n(&mut h, "q", "b", 2);
    push_n(&mut h, "other", "a", 1);
    let all = views::messages(&h.state, &MessageFilter { queue: Some("q"), ..Default::default() }, 0, 10, h.now);
    let order: Vec<(&str, u64)> = all.iter().map(|m| (m.partition.as_str(), m.offset)).collect();
    assert_eq!(order, vec![("b", 1), ("b", 0), ("a", 2), ("a", 1), ("a", 0)]);
    let page = views::messages(&h.state, &MessageFilter { queue: Some("q"), ..Default::default() }, 1, 2, h.now);
    assert_eq!(page.iter().map(|m| m.offset).collect::<Vec<_>>(), vec![0, 2]);

    let f = MessageFilter { queue: Some("q"), partition: Some("a"), ..Default::default() };
    assert_eq!(views::messages(&h.state, &f, 0, 10, h.now).len(), 3);
    let first_b = all.iter().find(|m| m.partition == "b" && m.offset == 0).unwrap().meta.created_ms;
    let f = MessageFilter { queue: Some("q"), from_ms: Some(first_b), ..Default::default() };
    assert_eq!(views::messages(&h.state, &f, 0, 10, h.now).len(), 2);
    let f = MessageFilter { queue: Some("q"), to_ms: Some(first_b), ..Default::default() };
    assert_eq!(views::messages(&h.state, &f, 0, 10, h.now).len(), 3);

    h.pop("q", QM, 1, Subscription::All);
    let f = MessageFilter { status: Some(MessageStatus::Processing), ..Default::default() };
    let leased = views::messages(&h.state, &f, 0, 10, h.now);
    assert_eq!(leased.len(), 1);
    assert_eq!(views::reader_mix(&h.state, Some("q")), (true, 0));
    assert_eq!(views::reader_mix(&h.state, Some("other")), (false, 0));
}

#[test]
fn lanes_report_backlog_and_the_lagging_ones_by_age() {
    let mut h = Harness::new();
    let pid = push_n(&mut h, "q", "P", 2);
    let r = h.pop("q", "g", 1, Subscription::All);
    h.ack("g", vec![ack_item(pid, "P-0", AckStatus::Completed, &r.lease_id)]);
    let lanes = views::lanes(&h.state, Some("g"), h.now);
    assert_eq!(lanes.len(), 1);
    assert_eq!((lanes[0].position, lanes[0].depth, lanes[0].lease.is_none()), (1, 1, true));
    assert!(views::lanes(&h.state, Some("other"), h.now).is_empty());

    h.now += 90_000;
    let rows = views::lagging(&h.state, 60, h.now);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].1, 90);
    assert!(views::lagging(&h.state, 120, h.now).is_empty());
}

/// What the dashboard's history summed from every lane, one row each.
fn totals_from_lanes(h: &Harness) -> views::LaneTotals {
    let mut t = views::LaneTotals::default();
    for l in views::lanes(&h.state, None, h.now) {
        t.positions += l.position;
        let e = t.by_group.entry(l.group.clone()).or_default();
        e.0 += l.depth;
        if l.depth > 0 {
            let age = l.oldest_unsettled_ms.map_or(0, |at| views::lag_seconds(h.now, at));
            e.1 = e.1.max(age);
            t.oldest_seconds = t.oldest_seconds.max(age);
        }
    }
    t
}

#[test]
fn lane_totals_are_the_lanes_summed_and_a_copy_of_the_queues_shows_the_same() {
    let mut h = Harness::new();
    assert_eq!(views::lane_totals(&h.state, h.now), views::LaneTotals::default());
    for (queue, partition, n) in [("a", "P", 4), ("a", "Q", 2), ("b", "P", 3), ("b", "R", 1)] {
        push_n(&mut h, queue, partition, n);
    }
    // "g" reads both queues; "idle" registers on "b" and settles all it
    // took; "late" registers but holds no cursor yet on "a".
    // Transaction ids are `<partition>-<offset>` (`push_n`).
    let settle = |h: &mut Harness, group: &str, r: &regina_state::outcome::PopResult, first_only: bool| {
        let mut acks = Vec::new();
        for c in &r.claims {
            for d in &c.messages {
                let txn = format!("{}-{}", c.partition, d.offset);
                acks.push(ack_item(c.partition_id, &txn, AckStatus::Completed, &r.lease_id));
            }
        }
        acks.truncate(if first_only { 1 } else { acks.len() });
        if !acks.is_empty() {
            h.ack(group, acks);
        }
    };
    let r = h.pop("a", "g", 3, Subscription::All);
    settle(&mut h, "g", &r, true);
    h.pop("b", "g", 1, Subscription::All);
    h.now += 45_000;
    for _ in 0..3 {
        let r = h.pop("b", "idle", 10, Subscription::All);
        settle(&mut h, "idle", &r, false);
    }
    h.pop("a", "late", 1, Subscription::New);
    h.now += 20_000;
    let totals = views::lane_totals(&h.state, h.now);
    assert_eq!(totals, totals_from_lanes(&h));
    assert!(totals.by_group.contains_key("idle") && totals.by_group["g"].0 > 0 && totals.oldest_seconds >= 65);

    let copy = h.state.copy_of_queues();
    assert_eq!(views::lane_totals(&copy, h.now), totals);
    assert_eq!(views::queue_summaries(&copy, h.now), views::queue_summaries(&h.state, h.now));
}

#[test]
fn partitions_rank_by_depth() {
    let mut h = Harness::new();
    push_n(&mut h, "q", "quiet", 1);
    push_n(&mut h, "q", "busy", 3);
    let rows = views::ranked_partitions(&h.state, Some("q"), 10, h.now);
    let got: Vec<(&str, u64)> = rows.iter().map(|r| (r.name.as_str(), r.depth)).collect();
    assert_eq!(got, vec![("busy", 3), ("quiet", 1)]);
    assert_eq!(views::ranked_partitions(&h.state, None, 1, h.now).len(), 1);
}

#[test]
fn a_fetch_reads_by_offset_within_its_budgets() {
    let mut h = Harness::new();
    push_n(&mut h, "q", "P", 3);
    let mut call = u64::MAX;
    let all = views::plan_fetch(&h.state, "q", "P", 0, 1 << 20, &mut call, 100);
    assert_eq!((all.high_watermark, all.log_start, all.error), (3, 0, None));
    assert_eq!(all.records.iter().map(|r| r.0).collect::<Vec<_>>(), vec![0, 1, 2]);

    // The first record comes back even when it alone is over the budget.
    let one = views::plan_fetch(&h.state, "q", "P", 1, 1, &mut call, 100);
    assert_eq!(one.records.len(), 1);
    let mut spent = 0;
    assert!(views::plan_fetch(&h.state, "q", "P", 0, 1 << 20, &mut spent, 100).records.is_empty());

    let end = views::plan_fetch(&h.state, "q", "P", 3, 1 << 20, &mut call, 100);
    assert!(end.records.is_empty() && end.error.is_none());
    let past = views::plan_fetch(&h.state, "q", "P", 4, 1 << 20, &mut call, 100);
    assert_eq!(past.error, Some(FetchError::OutOfRange));
    let unwritten = views::plan_fetch(&h.state, "q", "nope", 0, 1 << 20, &mut call, 100);
    assert_eq!((unwritten.high_watermark, unwritten.error), (0, None));
    let missing = views::plan_fetch(&h.state, "none", "P", 0, 1 << 20, &mut call, 100);
    assert_eq!(missing.error, Some(FetchError::UnknownQueue));
}

#[test]
fn an_offset_retention_dropped_is_out_of_range() {
    let mut h = Harness::new();
    let cmd = ConfigureCmd {
        queue: "q".into(),
        namespace: None,
        task: None,
        options: OptionsPatch { retention_seconds: Some(10), retention_enabled: Some(true), ..Default::default() },
        replace: false,
    };
    h.apply(Command::Configure(cmd));
    push_n(&mut h, "q", "P", 1);
    h.now += 11_000;
    push_n(&mut h, "q", "P", 1);
    h.apply(Command::Sweep);
    let mut call = u64::MAX;
    let gone = views::plan_fetch(&h.state, "q", "P", 0, 1 << 20, &mut call, 100);
    assert_eq!((gone.error, gone.log_start, gone.high_watermark), (Some(FetchError::OutOfRange), 1, 2));
}

#[test]
fn changed_partitions_page_in_creation_order_and_filter_by_write_time() {
    let mut h = Harness::new();
    for name in ["a", "b", "c"] {
        push_n(&mut h, "q", name, 1);
    }
    let q = h.state.queue("q").unwrap();
    let first = views::changed(q, None, 0, 2);
    assert_eq!(first.rows.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), vec!["a", "b"]);
    assert_eq!(first.next, Some(2));
    let rest = views::changed(q, None, 2, 2);
    assert_eq!((rest.rows.len(), rest.next), (1, None));
    assert_eq!((rest.rows[0].last_offset, rest.rows[0].log_start), (0, 0));

    let since = h.state.now_ms + 1;
    h.now += 5;
    push_n(&mut h, "q", "b", 1);
    let q = h.state.queue("q").unwrap();
    let moved = views::changed(q, Some(since), 0, 10);
    assert_eq!(moved.rows.iter().map(|r| (r.name.as_str(), r.last_offset)).collect::<Vec<_>>(), vec![("b", 1)]);
}

#[test]
fn activity_counts_kept_messages_per_bucket() {
    let mut h = Harness::new();
    let start = h.now;
    push_n(&mut h, "q", "P", 2);
    h.now = start + 60_000;
    push_n(&mut h, "q", "P", 1);
    let series = views::activity(&h.state, None, start, 60_000, 3);
    assert_eq!(series.iter().map(|p| p.0).collect::<Vec<_>>(), vec![2, 1, 0]);
    assert!(views::activity(&h.state, Some("none"), start, 60_000, 2).iter().all(|p| *p == (0, 0)));
}

#[test]
fn a_group_deleted_with_its_metadata_no_longer_holds_completion_back() {
    let mut h = Harness::new();
    let pid = push_n(&mut h, "q", "P", 2);
    let r = h.pop("q", "fast", 10, Subscription::All);
    h.ack("fast", vec![ack_item(pid, "P-1", AckStatus::Completed, &r.lease_id)]);
    h.pop("q", "slow", 1, Subscription::All);
    assert_eq!(counts(&h, "q", 0).completed, 0);
    h.apply(Command::DeleteGroup { group: "slow".into(), queue: None, delete_metadata: true });
    assert_eq!(counts(&h, "q", 0).completed, 2);
    assert!(views::lanes(&h.state, Some("slow"), h.now).is_empty());
    assert_eq!(views::groups(h.state.queue("q").unwrap()).count(), 1);
}
