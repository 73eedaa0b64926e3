//! The store against a clock the tests move by hand.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::*;
use regina_types::limits::{EPHEMERAL_IDLE_MS, EPHEMERAL_SWEEP_INTERVAL_MS};

#[derive(Debug)]
struct ManualClock(AtomicU64);

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

impl ManualClock {
    fn advance(&self, ms: u64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

fn store() -> (Store, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock(AtomicU64::new(1_000_000)));
    (Store::with_clock(clock.clone()), clock)
}

fn options(v: Value) -> Map<String, Value> {
    v.as_object().expect("an object").clone()
}

fn push(s: &Store, q: &str, payloads: &[&str]) -> Result<usize, EphemeralError> {
    s.push(q, None, payloads.iter().map(|p| Arc::<str>::from(*p)).collect())
}

fn pop_req(q: &str, group: Option<&str>, batch: usize) -> PopRequest {
    PopRequest {
        queue: q.into(),
        partition: None,
        group: group.map(str::to_string),
        batch,
        auto_ack: false,
        hold: false,
        ready_since_ms: None,
    }
}

fn pop(s: &Store, q: &str, group: Option<&str>, batch: usize) -> Vec<Delivered> {
    s.pop(&pop_req(q, group, batch)).expect("pop").messages
}

fn payloads(d: &[Delivered]) -> Vec<String> {
    d.iter().map(|m| m.payload.to_string()).collect()
}

fn ack(s: &Store, q: &str, group: Option<&str>, d: &[Delivered], status: AckStatus) -> Vec<AckOutcome> {
    let acks: Vec<(String, AckStatus)> = d.iter().map(|m| (m.id.clone(), status)).collect();
    s.ack(q, group, &acks).expect("ack")
}

#[test]
fn fifo_per_partition_and_payloads_verbatim() {
    let (s, _) = store();
    push(&s, "q", &["1", "2", r#"{ "b" : 1, "a": [2] }"#]).unwrap();
    push(&s, "q", &["4", "null"]).unwrap();
    let first = pop(&s, "q", None, 2);
    assert_eq!(payloads(&first), ["1", "2"]);
    assert!(first.iter().all(|m| m.attempts == 1 && m.partition == DEFAULT_PARTITION));
    let rest = pop(&s, "q", None, 10);
    assert_eq!(payloads(&rest), [r#"{ "b" : 1, "a": [2] }"#, "4", "null"]);
    assert_eq!(ack(&s, "q", None, &rest, AckStatus::Completed), [AckOutcome::Acked; 3]);
    assert_eq!(ack(&s, "q", None, &first, AckStatus::Completed), [AckOutcome::Acked; 2]);
    assert_eq!(s.depth("q").unwrap()["depth"], json!(0));
}

#[test]
fn a_lapsed_lease_hands_the_message_back() {
    let (s, clock) = store();
    s.configure("q", &options(json!({ "leaseSeconds": 2 }))).unwrap();
    push(&s, "q", &["a", "b", "c"]).unwrap();
    let d = pop(&s, "q", None, 2);
    assert_eq!(payloads(&d), ["a", "b"]);
    clock.advance(1_999);
    assert_eq!(payloads(&pop(&s, "q", None, 10)), ["c"], "a live lease is not handed out twice");
    clock.advance(1);
    // Lapsed but not yet delivered again: the old holder's ack lands nowhere.
    assert_eq!(ack(&s, "q", None, &d[..1], AckStatus::Completed), [AckOutcome::Unknown]);
    let again = pop(&s, "q", None, 10);
    assert_eq!(payloads(&again), ["a", "b"], "handed back in FIFO order");
    assert_eq!(again[0].id, d[0].id, "an id is the message's, not the delivery's");
    assert!(again.iter().all(|m| m.attempts == 2));
}

#[test]
fn five_deliveries_then_the_message_is_dropped() {
    let (s, clock) = store();
    push(&s, "q", &["poison", "fine"]).unwrap();
    for attempt in 1..=5 {
        let d = pop(&s, "q", None, 1);
        assert_eq!((payloads(&d), d[0].attempts), (vec!["poison".to_string()], attempt));
        let want = if attempt < 5 { AckOutcome::Redelivered } else { AckOutcome::Acked };
        assert_eq!(ack(&s, "q", None, &d, AckStatus::Failed), [want], "attempt {attempt}");
    }
    let d = pop(&s, "q", None, 10);
    assert_eq!(payloads(&d), ["fine"], "dropped after five deliveries, no DLQ");
    // Lapsed leases count as deliveries too.
    for _ in 0..4 {
        clock.advance(30_000);
        assert_eq!(payloads(&pop(&s, "q", None, 10)), ["fine"]);
    }
    clock.advance(30_000);
    assert!(pop(&s, "q", None, 10).is_empty());
    let depth = s.depth("q").unwrap();
    assert_eq!((depth["dropped"]["retry"].clone(), depth["depth"].clone()), (json!(2), json!(0)), "{depth}");
}

#[test]
fn retry_limit_zero_drops_on_the_first_failure() {
    let (s, _) = store();
    s.configure("q", &options(json!({ "retryLimit": 0 }))).unwrap();
    push(&s, "q", &["x"]).unwrap();
    let d = pop(&s, "q", None, 1);
    assert_eq!(ack(&s, "q", None, &d, AckStatus::Failed), [AckOutcome::Acked]);
    assert!(pop(&s, "q", None, 1).is_empty());
}

#[test]
fn bounds_refuse_or_drop_the_oldest() {
    let (s, _) = store();
    s.configure("r", &options(json!({ "maxLength": 3, "maxBytes": 100 }))).unwrap();
    push(&s, "r", &["1", "2", "3"]).unwrap();
    assert_eq!(push(&s, "r", &["4"]).unwrap_err().kind, ErrorKind::QueueFull);
    assert_eq!(push(&s, "r", &["1", "2", "3", "4"]).unwrap_err().kind, ErrorKind::BadRequest, "can never fit");
    s.reset("r").unwrap();
    push(&s, "r", &[&"x".repeat(60)]).unwrap();
    assert_eq!(push(&s, "r", &[&"y".repeat(41)]).unwrap_err().kind, ErrorKind::QueueFull);
    push(&s, "r", &[&"y".repeat(40)]).unwrap();

    s.configure("d", &options(json!({ "maxLength": 3, "policy": "dropOldest" }))).unwrap();
    push(&s, "d", &["1", "2"]).unwrap();
    push(&s, "d", &["3", "4", "5"]).unwrap();
    assert_eq!(payloads(&pop(&s, "d", None, 10)), ["3", "4", "5"]);
    assert_eq!(s.depth("d").unwrap()["dropped"]["bounds"], json!(2));
}

#[test]
fn the_node_budget_answers_unavailable() {
    let clock = Arc::new(ManualClock(AtomicU64::new(1)));
    let s = Store::with_budget(clock, 10);
    push(&s, "a", &["12345"]).unwrap();
    push(&s, "b", &["1234"]).unwrap();
    assert_eq!(push(&s, "c", &["12"]).unwrap_err().kind, ErrorKind::Unavailable);
    assert_eq!(s.delete("a").unwrap(), (true, false));
    push(&s, "c", &["12"]).unwrap();
    assert_eq!(s.queues()["bytes"], json!(6));
}

#[test]
fn idle_implicit_queues_are_collected_declared_ones_are_not() {
    let (s, clock) = store();
    push(&s, "implicit", &["1"]).unwrap();
    s.configure("declared", &Map::new()).unwrap();
    push(&s, "kept", &["still here"]).unwrap();
    let d = pop(&s, "implicit", None, 1);
    ack(&s, "implicit", None, &d, AckStatus::Completed);
    clock.advance(EPHEMERAL_IDLE_MS - 1);
    assert!(s.depth("implicit").is_ok());
    // Collected by the first sweep once idle; sweeps ride on calls, at most
    // one per interval, and one just ran.
    clock.advance(1);
    assert!(s.depth("implicit").is_ok());
    clock.advance(EPHEMERAL_SWEEP_INTERVAL_MS);
    assert_eq!(s.depth("implicit").unwrap_err().kind, ErrorKind::QueueNotFound);
    assert!(s.depth("declared").is_ok());
    assert_eq!(s.depth("kept").unwrap()["depth"], json!(1), "messages are never collected with a queue");
}

#[test]
fn groups_fan_out_and_compete() {
    let (s, _) = store();
    push(&s, "q", &["1", "2"]).unwrap();
    let a1 = pop(&s, "q", Some("a"), 1);
    let a2 = pop(&s, "q", Some("a"), 1);
    assert_eq!((payloads(&a1), payloads(&a2)), (vec!["1".to_string()], vec!["2".to_string()]), "one group competes");
    let b = pop(&s, "q", Some("b"), 10);
    assert_eq!(payloads(&b), ["1", "2"], "another group sees everything");
    ack(&s, "q", Some("a"), &a1, AckStatus::Completed);
    ack(&s, "q", Some("a"), &a2, AckStatus::Completed);
    assert_eq!(s.depth("q").unwrap()["depth"], json!(2), "kept until every group is done");
    assert_eq!(ack(&s, "q", None, &b, AckStatus::Completed), [AckOutcome::Unknown; 2], "acks are per group");
    ack(&s, "q", Some("b"), &b, AckStatus::Completed);
    assert_eq!(s.depth("q").unwrap()["depth"], json!(0));
}

#[test]
fn a_quiet_group_stops_holding_messages() {
    let (s, clock) = store();
    pop(&s, "q", Some("slow"), 1);
    push(&s, "q", &["1", "2"]).unwrap();
    let d = pop(&s, "q", Some("fast"), 1);
    ack(&s, "q", Some("fast"), &d, AckStatus::Completed);
    assert_eq!(s.depth("q").unwrap()["depth"], json!(2), "slow has taken nothing yet");
    clock.advance(EPHEMERAL_IDLE_MS / 2);
    pop(&s, "q", Some("fast"), 0);
    clock.advance(EPHEMERAL_IDLE_MS / 2);
    assert_eq!(s.depth("q").unwrap()["depth"], json!(1), "slow is forgotten; fast still wants 2");
    assert_eq!(s.depth("q").unwrap()["groups"], json!([{ "group": "fast", "pending": 1, "leased": 0 }]));
    // When every group goes quiet, what one of them consumed is retired and
    // the rest waits for the next consumer.
    clock.advance(EPHEMERAL_IDLE_MS);
    assert_eq!(s.depth("q").unwrap()["depth"], json!(1));
    assert_eq!(payloads(&pop(&s, "q", Some("fast"), 10)), ["2"], "nothing consumed comes back");
}

#[test]
fn foreign_ids_are_stale_and_spent_ones_unknown() {
    let (s, _) = store();
    push(&s, "q", &["1"]).unwrap();
    let d = pop(&s, "q", None, 1);
    let acks = vec![
        ("e:ffffffffff:Default:1".to_string(), AckStatus::Completed),
        ("garbage".to_string(), AckStatus::Completed),
        (d[0].id.clone(), AckStatus::Completed),
        (d[0].id.clone(), AckStatus::Completed),
    ];
    let got = s.ack("q", None, &acks).unwrap();
    assert_eq!(got, [AckOutcome::Stale, AckOutcome::Stale, AckOutcome::Acked, AckOutcome::Unknown]);
    assert_eq!(s.ack("missing", None, &acks[2..3]).unwrap(), [AckOutcome::Unknown]);
}

#[test]
fn reset_and_delete() {
    let (s, _) = store();
    s.configure("q", &options(json!({ "leaseSeconds": 5 }))).unwrap();
    push(&s, "q", &["1", "2", "3"]).unwrap();
    let d = pop(&s, "q", None, 1);
    assert_eq!(s.reset("q").unwrap(), 3);
    assert_eq!(ack(&s, "q", None, &d, AckStatus::Completed), [AckOutcome::Unknown], "reset voids leases");
    assert_eq!(s.depth("q").unwrap()["options"]["leaseSeconds"], json!(5), "reset keeps the options");
    assert_eq!(s.reset("nothing").unwrap(), 0);
    assert_eq!(s.delete("q").unwrap(), (true, true));
    assert_eq!(s.delete("q").unwrap(), (false, false));
}

#[test]
fn a_window_holds_a_waiting_pop_until_count_or_time() {
    let (s, clock) = store();
    s.configure("q", &options(json!({ "windowBuffer": { "ms": 100, "count": 3 } }))).unwrap();
    push(&s, "q", &["1"]).unwrap();
    let mut req = PopRequest { hold: true, ..pop_req("q", None, 10) };
    let held = s.pop(&req).unwrap();
    assert!(held.messages.is_empty());
    assert_eq!(held.wake_at_ms, Some(held.now_ms + 100));
    req.ready_since_ms = held.ready_since_ms;
    push(&s, "q", &["2", "3"]).unwrap();
    assert_eq!(payloads(&s.pop(&req).unwrap().messages), ["1", "2", "3"], "count reached");

    push(&s, "q", &["4"]).unwrap();
    req.ready_since_ms = None;
    let held = s.pop(&req).unwrap();
    assert!(held.messages.is_empty());
    req.ready_since_ms = held.ready_since_ms;
    clock.advance(100);
    assert_eq!(payloads(&s.pop(&req).unwrap().messages), ["4"], "window closed");
}

#[test]
fn ttl_and_commit_at_delivery() {
    let (s, clock) = store();
    s.configure("t", &options(json!({ "ttlSeconds": 10 }))).unwrap();
    push(&s, "t", &["old"]).unwrap();
    clock.advance(10_000);
    assert!(pop(&s, "t", None, 1).is_empty());
    assert_eq!(s.depth("t").unwrap()["dropped"]["ttl"], json!(1));

    push(&s, "a", &["1", "2"]).unwrap();
    let got = s.pop(&PopRequest { auto_ack: true, ..pop_req("a", None, 10) }).unwrap().messages;
    assert_eq!(payloads(&got), ["1", "2"]);
    assert_eq!(ack(&s, "a", None, &got, AckStatus::Completed), [AckOutcome::Unknown; 2], "nothing to ack");
    assert_eq!(s.depth("a").unwrap()["depth"], json!(0));
}

#[test]
fn bad_options_and_names_are_refused() {
    let (s, _) = store();
    for bad in [
        json!({ "ttlSecond": 5 }),
        json!({ "maxLength": 0 }),
        json!({ "maxBytes": 16 * 1024 * 1024 + 1 }),
        json!({ "leaseSeconds": 86_401 }),
        json!({ "policy": "sometimes" }),
        json!({ "windowBuffer": { "ms": -1 } }),
    ] {
        let e = s.configure("q", &options(bad.clone())).unwrap_err();
        assert_eq!(e.kind, ErrorKind::BadRequest, "{bad}");
    }
    assert!(s.depth("q").is_err(), "a refused configure creates nothing");
    assert_eq!(push(&s, "", &["1"]).unwrap_err().kind, ErrorKind::BadRequest);
    assert_eq!(push(&s, &"n".repeat(513), &["1"]).unwrap_err().kind, ErrorKind::BadRequest);
    assert!(push(&s, &"n".repeat(512), &["1"]).is_ok());
}

#[test]
fn the_store_clock_never_goes_back() {
    let (s, clock) = store();
    let before = s.pop(&pop_req("q", None, 1)).unwrap().now_ms;
    clock.0.fetch_sub(5_000, Ordering::SeqCst);
    let after = s.pop(&pop_req("q", None, 1)).unwrap().now_ms;
    assert_eq!(after, before, "a reading behind the last one counts as the last one");
}
