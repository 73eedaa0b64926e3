//! Timers through `State::apply`: scheduling by delay and by absolute time,
//! firing, refused fires that retry and then fail, the retry operation, the
//! per-queue retry options and the due-order listing.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;

use regina_state::command::ConfigureCmd;
use regina_state::options::{OptionsPatch, TimerPolicyPatch};
use regina_state::timers::{ScheduleAtOp, ScheduleOp, TimerError, TimerOp, TimerOutcome, TimerState};
use regina_state::{Command, Outcome};
use support::Harness;

const Q: &str = "payments";

fn sched(key: &str, delay_ms: i64) -> TimerOp {
    TimerOp::Schedule(ScheduleOp {
        queue: Q.into(),
        timer_key: key.into(),
        partition: "P".into(),
        txn: format!("txn-{key}"),
        message_id: [key.len() as u8; 16],
        payload: b"{}".to_vec(),
        delay_ms,
    })
}

fn sched_at(key: &str, at_ms: u64) -> TimerOp {
    TimerOp::ScheduleAt(ScheduleAtOp {
        queue: Q.into(),
        timer_key: key.into(),
        partition: "P".into(),
        txn: format!("txn-{key}"),
        message_id: [7; 16],
        payload: b"{}".to_vec(),
        at_ms,
    })
}

fn timers(h: &mut Harness, ops: Vec<TimerOp>) -> Vec<TimerOutcome> {
    match h.apply(Command::Timers(ops)) {
        Outcome::Timers(r) => r,
        o => panic!("timers answered {o:?}"),
    }
}

/// A queue that already holds `max_size` messages, so every fire is refused.
fn full_queue(h: &mut Harness, max_size: u64) {
    let options = OptionsPatch { max_size: Some(max_size), ..Default::default() };
    h.apply(Command::Configure(ConfigureCmd { queue: Q.into(), namespace: None, task: None, options, replace: false }));
    for i in 0..max_size {
        h.push(Q, "P", &format!("filler-{i}"));
    }
}

fn row(h: &Harness, key: &str) -> regina_state::timers::TimerRow {
    h.state.timers.get(Q, key).expect("the timer is kept").clone()
}

fn fire_at(h: &mut Harness, now: u64) {
    h.now = now;
    assert_eq!(h.apply(Command::FireTimers), Outcome::Done);
}

#[test]
fn fires_never_early_and_replaces_by_key() {
    let mut h = Harness::new();
    let t0 = h.now;
    assert_eq!(
        timers(&mut h, vec![sched("a", 100)]),
        [TimerOutcome::Scheduled { replaced: false, deliver_at_ms: t0 + 100 }]
    );
    h.now += 10;
    assert_eq!(
        timers(&mut h, vec![sched("a", 50)]),
        [TimerOutcome::Scheduled { replaced: true, deliver_at_ms: t0 + 60 }]
    );
    fire_at(&mut h, t0 + 59);
    assert_eq!(h.state.timers.len(), 1, "not due yet");
    fire_at(&mut h, t0 + 60);
    assert!(h.state.timers.is_empty() && h.state.timers.next_due_ms().is_none());
    assert_eq!(h.state.message_count(), 1);
    let cancel = TimerOp::Cancel { queue: Q.into(), timer_key: "a".into() };
    assert_eq!(timers(&mut h, vec![cancel]), [TimerOutcome::Absent]);
}

#[test]
fn an_absolute_time_in_the_past_fires_at_the_next_check() {
    let mut h = Harness::new();
    let t0 = h.now;
    let out = timers(&mut h, vec![sched_at("late", t0 - 5_000), sched_at("later", t0 + 700)]);
    assert_eq!(
        out,
        [
            TimerOutcome::Scheduled { replaced: false, deliver_at_ms: t0 },
            TimerOutcome::Scheduled { replaced: false, deliver_at_ms: t0 + 700 },
        ]
    );
    fire_at(&mut h, t0);
    assert!(h.state.timers.get(Q, "late").is_none(), "a past time fired at once");
    assert_eq!(row(&h, "later").deliver_at_ms, t0 + 700);
    fire_at(&mut h, t0 + 700);
    assert!(h.state.timers.is_empty());
    assert_eq!(h.state.message_count(), 2);
}

#[test]
fn a_refused_fire_retries_after_1000_then_2000_ms_and_fails_at_3_attempts() {
    let mut h = Harness::new();
    full_queue(&mut h, 1);
    let t0 = h.now;
    timers(&mut h, vec![sched("pay-1", 0)]);

    fire_at(&mut h, t0);
    let r = row(&h, "pay-1");
    assert_eq!((r.state, r.attempts, r.deliver_at_ms), (TimerState::Pending, 1, t0 + 1_000));
    assert_eq!(r.error, Some(TimerError::QueueFull { max_size: 1 }));
    assert_eq!(h.state.timers.next_due_ms(), Some(t0 + 1_000), "the retry wakes the driver at its time");

    fire_at(&mut h, t0 + 999);
    assert_eq!(row(&h, "pay-1").attempts, 1, "a retry never comes early");
    fire_at(&mut h, t0 + 1_000);
    let r = row(&h, "pay-1");
    assert_eq!((r.state, r.attempts, r.deliver_at_ms), (TimerState::Pending, 2, t0 + 3_000));

    fire_at(&mut h, t0 + 3_000);
    let r = row(&h, "pay-1");
    assert_eq!((r.state, r.attempts, r.updated_ms), (TimerState::Failed, 3, t0 + 3_000));
    assert_eq!(h.state.timers.next_due_ms(), None, "a failed timer never wakes the driver");
    assert_eq!((h.state.timers.pending_count(), h.state.timers.failed_count()), (0, 1));

    // A failed timer never fires by itself, even once the queue has room.
    h.apply(Command::DeleteQueue { queue: Q.into() });
    fire_at(&mut h, t0 + 1_000_000);
    assert_eq!(row(&h, "pay-1").state, TimerState::Failed);
    assert_eq!(h.state.message_count(), 0);
}

#[test]
fn queue_options_set_attempts_and_delays() {
    let mut h = Harness::new();
    full_queue(&mut h, 1);
    let policy = TimerPolicyPatch { max_attempts: Some(4), retry_delay_ms: Some(10), max_retry_delay_ms: Some(25) };
    assert_eq!(h.apply(Command::ConfigureTimerPolicy { queue: Q.into(), policy }), Outcome::Done);
    let t0 = h.now;
    timers(&mut h, vec![sched("k", 0)]);
    let mut at = t0;
    let mut waits = Vec::new();
    for _ in 0..3 {
        fire_at(&mut h, at);
        let next = row(&h, "k").deliver_at_ms;
        waits.push(next - at);
        at = next;
    }
    assert_eq!(waits, vec![10, 20, 25], "doubling, capped at timerMaxRetryDelayMs");
    fire_at(&mut h, at);
    assert_eq!((row(&h, "k").state, row(&h, "k").attempts), (TimerState::Failed, 4));

    // A configure in replace mode puts the timer options back to their defaults.
    let cmd =
        ConfigureCmd { queue: Q.into(), namespace: None, task: None, options: OptionsPatch::default(), replace: true };
    h.apply(Command::Configure(cmd));
    let o = &h.state.queue(Q).unwrap().options;
    assert_eq!((o.timer_max_attempts, o.timer_retry_delay_ms, o.timer_max_retry_delay_ms), (3, 1_000, 60_000));
}

#[test]
fn retry_revives_only_a_failed_timer_with_fresh_attempts() {
    let mut h = Harness::new();
    full_queue(&mut h, 1);
    let policy = TimerPolicyPatch { max_attempts: Some(1), ..Default::default() };
    h.apply(Command::ConfigureTimerPolicy { queue: Q.into(), policy });
    let t0 = h.now;
    timers(&mut h, vec![sched("a", 0), sched("b", 60_000)]);
    fire_at(&mut h, t0);
    assert_eq!(row(&h, "a").state, TimerState::Failed);

    let retry = |key: &str, delay_ms: i64| TimerOp::Retry { queue: Q.into(), timer_key: key.into(), delay_ms };
    let out = timers(&mut h, vec![retry("b", 0), retry("nobody", 0)]);
    assert_eq!(out, [TimerOutcome::NotFailed { exists: true }, TimerOutcome::NotFailed { exists: false }]);
    assert_eq!(row(&h, "b").state, TimerState::Pending, "a refused retry changes nothing");

    // Room again: the operator empties the queue, then retries.
    h.apply(Command::DeleteQueue { queue: Q.into() });
    h.now = t0 + 50;
    let out = timers(&mut h, vec![retry("a", 100)]);
    assert_eq!(out, [TimerOutcome::Retried { txn: "txn-a".into(), deliver_at_ms: t0 + 150 }]);
    let r = row(&h, "a");
    assert_eq!((r.state, r.attempts, r.error.clone(), r.updated_ms), (TimerState::Pending, 0, None, t0 + 50));
    fire_at(&mut h, t0 + 150);
    assert!(h.state.timers.get(Q, "a").is_none(), "the retried timer fired");
    assert_eq!(h.state.message_count(), 1);
}

#[test]
fn scheduling_the_key_again_resets_a_failed_timer() {
    let mut h = Harness::new();
    full_queue(&mut h, 1);
    h.apply(Command::ConfigureTimerPolicy {
        queue: Q.into(),
        policy: TimerPolicyPatch { max_attempts: Some(1), ..Default::default() },
    });
    let t0 = h.now;
    timers(&mut h, vec![sched("a", 0)]);
    fire_at(&mut h, t0);
    assert_eq!(row(&h, "a").state, TimerState::Failed);
    let out = timers(&mut h, vec![sched("a", 500)]);
    assert_eq!(out, [TimerOutcome::Scheduled { replaced: true, deliver_at_ms: t0 + 500 }]);
    let r = row(&h, "a");
    assert_eq!((r.state, r.attempts, r.error), (TimerState::Pending, 0, None));
    assert_eq!(h.state.timers.next_due_ms(), Some(t0 + 500));
}

#[test]
fn a_fire_that_meets_a_duplicate_counts_as_fired() {
    let mut h = Harness::new();
    // The message the timer promises is already stored (same transaction id).
    h.push(Q, "P", "txn-a");
    timers(&mut h, vec![sched("a", 0)]);
    let now = h.now;
    fire_at(&mut h, now);
    assert!(h.state.timers.is_empty(), "a duplicate push is a fire");
    assert_eq!(h.state.message_count(), 1);
}

#[test]
fn lists_in_key_order_and_in_due_order_with_keyset_paging() {
    let mut h = Harness::new();
    let t0 = h.now;
    for (k, d) in [("c", 300), ("a", 500), ("e", 100), ("b", 300), ("d", 200)] {
        timers(&mut h, vec![sched(k, d)]);
    }
    let t = &h.state.timers;
    let keys: Vec<&str> = t.list(Q, None).map(|(k, _)| k).collect();
    assert_eq!(keys, ["a", "b", "c", "d", "e"]);
    let keys: Vec<&str> = t.list(Q, Some("b")).map(|(k, _)| k).collect();
    assert_eq!(keys, ["c", "d", "e"]);
    let keys: Vec<&str> = t.list_due(Q, None).map(|(k, _)| k).collect();
    assert_eq!(keys, ["e", "d", "b", "c", "a"], "by deliverAt, ties by key");
    let keys: Vec<&str> = t.list_due(Q, Some((t0 + 300, "b"))).map(|(k, _)| k).collect();
    assert_eq!(keys, ["c", "a"], "the cursor is exclusive and splits a tie");
    assert_eq!(t.list_due("other", None).count(), 0);
}
