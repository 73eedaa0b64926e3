//! The example every user starts from: a billing worker settles a payment
//! in one step (ack the event, push a receipt, record the order, mark the
//! payment handled, schedule a reminder), and doing it again writes nothing.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;

use std::time::Duration;

use regina_client::{Ack, Client, Lifetime, Message, PushItem, Step, StepOutcome, Subscription, Timer};
use serde_json::json;

use support::{all_messages, Broker};

const EVENT: &str = "payment-9137-succeeded";
const DAY_MS: u64 = 86_400_000;

/// The billing worker's step for one payment event, exactly as it would
/// build it in production.
fn billing_step(client: &Client, ack: Ack) -> Step {
    client
        .step()
        .settle(ack)
        .push("receipts", "customer-42", json!({ "order": "9137", "payment": EVENT, "amountCents": 4200 }))
        .put("orders", "9137", json!({ "status": "paid" }), Lifetime::days(30))
        .once("paid", EVENT, Lifetime::days(30))
        .schedule(
            Timer::new("reminders", "order-9137/review", Duration::from_millis(DAY_MS))
                .partition("customer-42")
                .payload(json!({ "order": "9137", "ask": "how was it?" })),
        )
}

async fn pop_payment(client: &Client) -> Message {
    let batch = client
        .pop("payments")
        .group("billing")
        .subscription(Subscription::All)
        .wait(Duration::from_secs(5))
        .send()
        .await
        .expect("pop payments");
    assert_eq!(batch.len(), 1, "one payment event is waiting: {batch:?}");
    batch.into_iter().next().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payment_is_billed_once() {
    let broker = Broker::start().await;
    let client = broker.client();
    let event = json!({ "event": EVENT, "order": "9137", "customer": "customer-42", "amountCents": 4200 });
    client.push(&[PushItem::new("payments", event.clone()).transaction_id(EVENT)]).await.expect("push the event");

    let payment = pop_payment(&client).await;
    assert_eq!(payment.transaction_id, EVENT);
    assert_eq!(payment.data, event);
    assert!(payment.lease_id.is_some(), "a pop takes a lease");

    // Sent once: every part of it is written.
    let step = billing_step(&client, Ack::completed(&payment));
    let first = step.commit().await.expect("commit");
    let StepOutcome::Committed(done) = &first else { panic!("the first send commits: {first:?}") };
    assert_eq!(done.results.len(), 5, "ack, push, put, once, timer: {:?}", done.results);

    let receipts = all_messages(&client, "receipts").await;
    assert_eq!(receipts.len(), 1);
    assert_eq!(receipts[0].partition, "customer-42");
    assert_eq!(receipts[0].data["payment"], EVENT);
    let kv = client.kv();
    let order = kv.get("orders", "9137").await.expect("get order").expect("the order row exists");
    assert_eq!(order.value, json!({ "status": "paid" }));
    assert!(order.expires_at.is_some(), "the order row lives 30 days, not forever");
    let marker = kv.get("paid", EVENT).await.expect("get marker").expect("the marker exists");
    assert_eq!(marker.value, json!(true));
    let timers = client.timers().list("reminders", None, 100).await.expect("list reminders");
    assert_eq!(timers.rows.len(), 1);
    let reminder = timers.rows[0].clone();
    assert_eq!(reminder.key, "order-9137/review");
    assert_eq!(reminder.partition, "customer-42");
    assert_eq!(reminder.payload["order"], "9137");
    // The payment is settled for the group: nothing left to pop.
    let left = client.pop("payments").group("billing").send().await.expect("pop again");
    assert!(left.is_empty(), "the ack committed the payment: {left:?}");

    // Sent again (a retry after a lost answer): refused at the ack, nothing written.
    let again = step.commit().await.expect("commit again");
    let refused = again.refused().expect("the resend is refused");
    assert_eq!(refused.reason, "rejected_ack");
    assert_eq!(refused.failed_index, 0, "the ack is the step's first operation");
    assert!(refused.error.contains("rolled back"), "{}", refused.error);
    assert_nothing_new(&client, &order, &marker, &reminder).await;

    // The same event delivered again under another id (the producer retried
    // without its id): the ack is new, even lease-less, but the `once`
    // marker exists, so the step is refused at the marker and writes nothing.
    let resent_id = format!("{EVENT}-resent");
    client.push(&[PushItem::new("payments", event.clone()).transaction_id(&resent_id)]).await.expect("push again");
    let duplicate = pop_payment(&client).await;
    assert_eq!(duplicate.transaction_id, resent_id);
    let dup = billing_step(&client, Ack::completed(&duplicate).without_lease()).commit().await.expect("commit dup");
    let refused = dup.refused().expect("the duplicate event is refused");
    assert_eq!(refused.reason, "kv_precondition");
    assert_eq!(refused.kv_reason.as_deref(), Some("exists"));
    // Flat index: ack (0), receipt push (1), then kv: order put (2), marker (3).
    assert_eq!(refused.failed_index, 3);
    assert_eq!(refused.version, Some(marker.version));
    assert!(!refused.lost_guard);
    assert_nothing_new(&client, &order, &marker, &reminder).await;

    // Its ack was rolled back with it: the worker still holds the duplicate
    // and settles it on its own, knowing the payment is already billed.
    let settled = client.ack(&duplicate).await.expect("ack the duplicate");
    assert!(settled.success && !settled.noop, "{settled:?}");
}

/// Exactly one receipt, the KV rows at their versions, one reminder as it was.
async fn assert_nothing_new(
    client: &Client,
    order: &regina_client::Row,
    marker: &regina_client::Row,
    reminder: &regina_client::TimerRow,
) {
    assert_eq!(all_messages(client, "receipts").await.len(), 1, "still exactly one receipt");
    let kv = client.kv();
    assert_eq!(kv.get("orders", "9137").await.unwrap().map(|r| r.version), Some(order.version));
    assert_eq!(kv.get("paid", EVENT).await.unwrap().map(|r| r.version), Some(marker.version));
    let timers = client.timers().list("reminders", None, 100).await.unwrap();
    assert_eq!(timers.rows, vec![reminder.clone()], "exactly one reminder, unmoved");
}
