//! One round trip per module against a real broker: what goes out comes
//! back in the shape the types promise.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;

use std::time::Duration;

use regina_client::{
    Ack, Acquire, Client, Error, KvBatch, KvOp, Lifetime, PushItem, Renewal, StepOutcome, Subscription, Timer,
};
use serde_json::json;
use tokio::time::{sleep, timeout, Instant};

use support::{all_messages, Broker};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_reports_the_brokers_code() {
    assert!(matches!(Client::new("ftp://example"), Err(Error::Invalid(_))));
    let broker = Broker::start().await;
    let client = Client::new(format!("{}/", broker.url())).unwrap();
    assert!(client.healthy().await.unwrap());
    let e = client.push(&[]).await.unwrap_err();
    assert_eq!((e.status(), e.code()), (Some(400), Some("bad_request")), "{e}");
    let e = client.kv().get("Not A Namespace", "k").await.unwrap_err();
    assert_eq!(e.code(), Some("kv_bad_request"), "{e}");
    assert_eq!(e.reason(), Some("kv_bad_namespace"), "{e}");
    let e = client.locks().lock("bad#name", Duration::from_secs(1)).acquire().await.unwrap_err();
    assert_eq!((e.code(), e.reason()), (Some("locks_bad_request"), Some("locks_bad_name")), "{e}");
    let dead = Client::new("http://127.0.0.1:1").unwrap();
    assert!(matches!(dead.healthy().await, Err(Error::Transport(_))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_push_pop_ack_and_nack() {
    let broker = Broker::start().await;
    let client = broker.client();
    let items: Vec<PushItem> =
        (0..3).map(|i| PushItem::new("orders/eu west", json!({ "n": i })).partition("customer 7")).collect();
    let pushed = client.push(&items).await.unwrap();
    assert_eq!(pushed.iter().map(|p| p.offset).collect::<Vec<_>>(), [0, 1, 2]);
    assert!(pushed.iter().all(|p| !p.duplicate));
    let again = client.push(&items[..1]).await.unwrap();
    assert!(again[0].duplicate && again[0].message_id == pushed[0].message_id, "{again:?}");

    let pop = || client.pop("orders/eu west").partition("customer 7").group("shipping").subscription(Subscription::All);
    let batch = pop().batch(2).send().await.unwrap();
    assert_eq!(batch.len(), 2);
    assert_eq!((batch[0].data["n"].clone(), batch[0].queue.as_str()), (json!(0), "orders/eu west"));
    assert_eq!(batch[0].consumer_group.as_deref(), Some("shipping"));
    assert_eq!(batch[0].delivery_attempt, 1);
    let ext = client.extend_lease(batch[0].lease_id.as_deref().unwrap()).await.unwrap();
    assert!(ext.extended && ext.expires_at.is_some(), "{ext:?}");

    // The first completes, the second is nacked and comes back.
    let r = client.ack_batch(&[Ack::completed(&batch[0]), Ack::failed(&batch[1], "printer jam")]).await.unwrap();
    assert!(r.iter().all(|r| r.success), "{r:?}");
    assert!(r[1].lease_released);
    let retry = pop().batch(5).send().await.unwrap();
    assert_eq!(retry.iter().map(|m| m.data["n"].as_i64().unwrap()).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(retry[0].delivery_attempt, 2);
    let r = client.ack(&retry[1]).await.unwrap();
    assert!(r.success && r.lease_released, "acking the last commits the whole batch: {r:?}");
    let r = client.ack(&retry[0]).await.unwrap();
    assert!(r.success && r.noop, "{r:?}");
    let r = client.nack(&retry[0], "too late").await.unwrap();
    assert!(!r.success && r.error.as_deref().unwrap_or("").contains("committed"), "{r:?}");
    let ext = client.extend_lease(retry[0].lease_id.as_deref().unwrap()).await.unwrap();
    assert!(!ext.extended);

    // Queue mode commits at delivery when asked.
    let got = client.pop("orders/eu west").auto_ack().batch(10).send().await.unwrap();
    assert_eq!(got.len(), 3);
    assert!(got[0].lease_id.is_none() && got[0].consumer_group.is_none(), "{:?}", got[0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_long_poll_and_lease_override() {
    let broker = Broker::start().await;
    let client = broker.client();
    let pusher = client.clone();
    tokio::spawn(async move {
        sleep(Duration::from_millis(500)).await;
        pusher.push(&[PushItem::new("jobs", json!("late"))]).await.unwrap();
    });
    let started = Instant::now();
    let got = client.pop("jobs").wait(Duration::from_secs(10)).lease(Duration::from_secs(1)).send().await.unwrap();
    assert_eq!(got.len(), 1, "the long poll wakes on the push");
    assert!(started.elapsed() < Duration::from_secs(8), "{:?}", started.elapsed());

    // A 1 s lease lapses; the message comes back and the old lease fences nothing.
    let again = client.pop("jobs").wait(Duration::from_secs(5)).send().await.unwrap();
    assert_eq!(again.len(), 1, "redelivered once the lease lapsed");
    assert_ne!(again[0].lease_id, got[0].lease_id);
    let stale = client.ack(&got[0]).await.unwrap();
    assert!(!stale.success && stale.error.as_deref().unwrap_or("").contains("lease"), "{stale:?}");
    assert!(client.ack(&again[0]).await.unwrap().success);
    let empty = client.pop("jobs").wait(Duration::from_millis(300)).send().await.unwrap();
    assert!(empty.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kv_reads_writes_and_versions() {
    let broker = Broker::start().await;
    let kv = broker.client().kv();
    assert_eq!(kv.get("carts", "c1").await.unwrap(), None);
    let w = kv.put("carts", "c1", json!({ "items": 2 }), Lifetime::ttl(Duration::from_secs(3600))).await.unwrap();
    assert!(w.applied && w.version > 0, "{w:?}");
    let row = kv.get("carts", "c1").await.unwrap().unwrap();
    assert_eq!((row.value.clone(), row.version), (json!({ "items": 2 }), w.version));
    assert!(row.expires_at.is_some());

    let lost = kv.put_if_absent("carts", "c1", json!("other"), Lifetime::FOREVER).await.unwrap();
    assert_eq!((lost.applied, lost.reason.as_deref()), (false, Some("exists")));
    assert_eq!(lost.value, json!({ "items": 2 }), "a loser sees the winner's value");
    let stale = kv.write(KvOp::put("carts", "c1", json!(3), Lifetime::FOREVER).expect(w.version + 100)).await.unwrap();
    assert_eq!((stale.applied, stale.reason.as_deref(), stale.version), (false, Some("version"), w.version));
    let moved = kv.write(KvOp::put("carts", "c1", json!(3), Lifetime::FOREVER).expect(w.version)).await.unwrap();
    assert!(moved.applied && moved.version > w.version);
    assert_eq!(kv.get("carts", "c1").await.unwrap().unwrap().expires_at, None, "forever");
    assert!(kv.check("carts", "c1", moved.version).await.unwrap().applied);
    assert!(!kv.check("carts", "c1", w.version).await.unwrap().applied);

    assert!(kv.delete("carts", "c1").await.unwrap().applied);
    assert_eq!(kv.delete("carts", "c1").await.unwrap().reason.as_deref(), Some("absent"));
    let back = kv.put("carts", "c1", json!(1), Lifetime::FOREVER).await.unwrap();
    assert!(back.version > moved.version, "versions rise across delete and re-create");

    let n = kv.incr("counters", "hits", 5, Lifetime::days(1)).await.unwrap();
    assert_eq!((n.applied, n.value.as_i64()), (true, Some(5)));
    let capped = kv.write(KvOp::incr("counters", "hits", 10, Lifetime::days(1)).max(10)).await.unwrap();
    assert_eq!((capped.applied, capped.reason.as_deref(), capped.value.as_i64()), (false, Some("limit"), Some(5)));
    let floor = kv.write(KvOp::incr("counters", "hits", -6, Lifetime::days(1)).min(0)).await.unwrap();
    assert!(!floor.applied);

    for k in ["a", "b", "c", "d", "e"] {
        kv.put("pages", &format!("p/{k}"), json!(k), Lifetime::FOREVER).await.unwrap();
    }
    let page = kv.get_prefix("pages", "p/", None, 2).await.unwrap();
    assert_eq!(page.rows.iter().map(|r| r.key.as_str()).collect::<Vec<_>>(), ["p/a", "p/b"]);
    let page = kv.get_prefix("pages", "p/", page.next_after.as_deref(), 2).await.unwrap();
    assert_eq!(page.rows[0].key, "p/c");
    let all = kv.get_prefix_all("pages", "p/").await.unwrap();
    assert_eq!(all.len(), 5);
    let (rows, missing) = kv.get_many("pages", &["p/a", "p/zz"]).await.unwrap();
    assert_eq!((rows.len(), missing), (1, vec!["p/zz".to_string()]));

    // A required operation that loses makes the whole batch write nothing.
    let batch = kv
        .batch(&[
            KvOp::put("pages", "p/f", json!("f"), Lifetime::FOREVER),
            KvOp::put_if_absent("pages", "p/a", json!("again"), Lifetime::FOREVER).required(),
        ])
        .await
        .unwrap();
    let KvBatch::Refused(p) = batch else { panic!("refused: {batch:?}") };
    assert_eq!((p.failed_index, p.kv_reason.as_str()), (1, "exists"));
    assert_eq!(kv.get("pages", "p/f").await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timers_schedule_move_cancel_and_fire() {
    let broker = Broker::start().await;
    let client = broker.client();
    let timers = client.timers();
    let later = Timer::new("nudges", "user/1", Duration::from_secs(3600)).payload(json!({ "say": "hi" }));
    let s = timers.schedule(&later).await.unwrap();
    assert!(!s.rescheduled && s.txn == later.txn, "{s:?}");
    let sooner = Timer { delay: Duration::from_secs(600), ..later.clone() };
    let moved = timers.reschedule(&sooner).await.unwrap();
    assert!(moved.rescheduled && moved.deliver_at < s.deliver_at, "{moved:?} vs {s:?}");
    let row = timers.peek("nudges", "user/1").await.unwrap().unwrap();
    assert_eq!((row.payload.clone(), row.deliver_at.clone()), (json!({ "say": "hi" }), moved.deliver_at.clone()));

    for k in ["user/2", "user/3"] {
        timers.schedule(&Timer::new("nudges", k, Duration::from_secs(3600))).await.unwrap();
    }
    let page = timers.list("nudges", None, 2).await.unwrap();
    assert_eq!(page.rows.len(), 2);
    let rest = timers.list("nudges", page.next_after.as_deref(), 2).await.unwrap();
    assert_eq!((rest.rows.len(), rest.rows[0].key.as_str(), rest.next_after), (1, "user/3", None));

    assert!(timers.cancel("nudges", "user/2").await.unwrap());
    assert!(!timers.cancel("nudges", "user/2").await.unwrap());
    assert_eq!(timers.peek("nudges", "user/2").await.unwrap(), None);

    // A due timer becomes a message with the promised id and payload.
    let now = Timer::new("alarms", "wake", Duration::ZERO).partition("bedroom").payload(json!([1, 2]));
    let promised = timers.schedule(&now).await.unwrap();
    let got = client.pop("alarms").wait(Duration::from_secs(20)).send().await.unwrap();
    assert_eq!(got.len(), 1, "the timer fired");
    assert_eq!((got[0].id.as_str(), got[0].transaction_id.as_str()), (promised.message_id.as_str(), now.txn.as_str()));
    assert_eq!((got[0].data.clone(), got[0].partition.as_str()), (json!([1, 2]), "bedroom"));
    assert_eq!(timers.peek("alarms", "wake").await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_and_semaphores() {
    let broker = Broker::start().await;
    let locks = broker.client().locks();
    let sem = |owner: &str| locks.lock("exports", Duration::from_secs(30)).permits(3).owner(owner);
    let mut permits = Vec::new();
    for o in ["w1", "w2", "w3"] {
        permits.push(sem(o).acquire().await.unwrap().permit().expect("a free slot"));
    }
    assert_eq!(permits.iter().map(|p| p.slot).collect::<Vec<_>>(), [0, 1, 2]);
    assert!(matches!(sem("w4").acquire().await.unwrap(), Acquire::Held(h) if h.len() == 3));
    let again = sem("w2").acquire().await.unwrap().permit().unwrap();
    assert!(again.already && again.token == permits[1].token, "the owner's retry answers its permit");

    let Renewal::Renewed(renewed) = locks.renew(&permits[1]).await.unwrap() else { panic!("renew") };
    assert!(renewed.token > permits[1].token);
    assert!(!locks.release(&permits[1]).await.unwrap(), "the old token no longer releases");
    assert!(locks.release(&renewed).await.unwrap());
    let w4 = sem("w4").acquire().await.unwrap().permit().unwrap();
    assert_eq!(w4.slot, 1, "the freed slot goes to the next acquirer");
    assert!(w4.token > renewed.token);

    let holders = locks.get("exports").await.unwrap();
    assert_eq!(holders.iter().map(|h| h.owner.as_deref().unwrap()).collect::<Vec<_>>(), ["w1", "w4", "w3"]);
    let row = broker.client().kv().get(regina_client::LOCK_NAMESPACE, "exports#1").await.unwrap().unwrap();
    assert_eq!((row.version, row.value["owner"].clone()), (w4.token, json!("w4")), "a permit is a KV row");

    let handle = locks.lock("exports-single", Duration::from_secs(30)).hold_within(Duration::from_secs(1)).await;
    let handle = handle.unwrap().expect("free");
    let none = locks.lock("exports-single", Duration::from_secs(30)).hold_within(Duration::from_millis(300)).await;
    assert!(none.unwrap().is_none(), "held by the handle");
    assert!(handle.release().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn step_refusals_and_riders() {
    let broker = Broker::start().await;
    let client = broker.client();
    assert!(matches!(client.step().commit().await, Err(Error::Invalid(_))));
    client.push(&[PushItem::new("inbox", json!("a")), PushItem::new("inbox", json!("b"))]).await.unwrap();

    // A lapsed lease refuses the whole step, riders included.
    let got = client.pop("inbox").batch(1).lease(Duration::from_secs(1)).send().await.unwrap();
    sleep(Duration::from_millis(1500)).await;
    let taken = client.pop("inbox").batch(1).send().await.unwrap();
    assert_eq!(taken[0].transaction_id, got[0].transaction_id, "redelivered after the lapse");
    let late = client.step().ack(&got[0]).put("seen", "a", json!(1), Lifetime::FOREVER).commit().await.unwrap();
    let r = late.refused().expect("refused");
    assert_eq!((r.reason.as_str(), r.failed_index), ("rejected_ack", 0));
    assert_eq!(client.kv().get("seen", "a").await.unwrap(), None);

    // A nack, a plain put-if-absent that loses (not required: the step still
    // commits), a timer scheduled and one cancelled.
    client.timers().schedule(&Timer::new("followups", "old", Duration::from_secs(3600))).await.unwrap();
    client.kv().put("seen", "b", json!("first"), Lifetime::FOREVER).await.unwrap();
    let outcome = client
        .step()
        .nack(&taken[0], "try later")
        .put_if_absent("seen", "b", json!("second"), Lifetime::FOREVER)
        .schedule(Timer::new("followups", "new", Duration::from_secs(3600)))
        .cancel_timer("followups", "old")
        .commit()
        .await
        .unwrap();
    let StepOutcome::Committed(c) = outcome else { panic!("{outcome:?}") };
    assert_eq!(c.results.len(), 4);
    assert_eq!(c.results[1]["applied"], json!(false));
    assert_eq!(client.kv().get("seen", "b").await.unwrap().unwrap().value, json!("first"));
    let keys: Vec<String> =
        client.timers().list("followups", None, 10).await.unwrap().rows.into_iter().map(|r| r.key).collect();
    assert_eq!(keys, ["new"]);
    let back = timeout(Duration::from_secs(10), client.pop("inbox").wait(Duration::from_secs(5)).send())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(back[0].transaction_id, taken[0].transaction_id, "the nacked message comes back");
    assert_eq!(all_messages(&client, "inbox").await.len(), 2);
}

/// ms since the epoch of a wire time.
fn ms(t: &str) -> u64 {
    regina_types::time::parse_iso(t).unwrap_or_else(|| panic!("{t:?} is not a time"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kv_lifetimes_namespace_defaults_and_scan() {
    let broker = Broker::start().await;
    let kv = broker.client().kv();
    let minute = Duration::from_secs(60);
    kv.put("life", "created", json!(1), Lifetime::after_creation(minute)).await.unwrap();
    let first = kv.get("life", "created").await.unwrap().unwrap();
    assert_eq!(first.created_at, first.updated_at);
    assert_eq!(ms(first.expires_at.as_deref().unwrap()), ms(&first.created_at) + 60_000);
    sleep(Duration::from_millis(20)).await;
    kv.put("life", "created", json!(2), Lifetime::after_creation(minute)).await.unwrap();
    let again = kv.get("life", "created").await.unwrap().unwrap();
    assert_eq!((&again.created_at, &again.expires_at), (&first.created_at, &first.expires_at), "{again:?}");
    assert!(again.updated_at > first.updated_at);

    kv.put("life", "updated", json!(1), Lifetime::after_update(Duration::from_millis(60_000))).await.unwrap();
    let row = kv.get("life", "updated").await.unwrap().unwrap();
    assert_eq!(ms(row.expires_at.as_deref().unwrap()), ms(&row.updated_at) + 60_000);

    let at = std::time::UNIX_EPOCH + Duration::from_millis(4_102_444_800_123);
    kv.put("life", "at", json!(1), Lifetime::at(at)).await.unwrap();
    let row = kv.get("life", "at").await.unwrap().unwrap();
    assert_eq!(row.expires_at.as_deref(), Some("2100-01-01T00:00:00.123000Z"));
    kv.put("life", "past", json!(1), Lifetime::at_ms(1_000)).await.unwrap();
    assert_eq!(kv.get("life", "past").await.unwrap(), None, "an instant already past expires at once");

    // A touch renews a live row and keeps its value; an absent one stays absent.
    let touched = kv.touch("life", "updated", Lifetime::after_update(Duration::from_secs(120))).await.unwrap();
    assert!(touched.applied, "{touched:?}");
    let row = kv.get("life", "updated").await.unwrap().unwrap();
    assert_eq!((row.value.clone(), row.version), (json!(1), touched.version));
    assert_eq!(ms(row.expires_at.as_deref().unwrap()), ms(&row.updated_at) + 120_000);
    let gone = kv.touch("life", "nobody", Lifetime::FOREVER).await.unwrap();
    assert_eq!((gone.applied, gone.reason.as_deref()), (false, Some("absent")));

    // Without a default, a write naming none is refused; with one, it takes it.
    let e = kv.put("life", "bare", json!(1), Lifetime::NAMESPACE_DEFAULT).await.unwrap_err();
    assert_eq!(e.reason(), Some("kv_expiry_not_specified"), "{e}");
    kv.configure("life", Some(Lifetime::after_update(Duration::from_secs(90)))).await.unwrap();
    kv.incr("life", "bare", 1, Lifetime::NAMESPACE_DEFAULT).await.unwrap();
    let row = kv.get("life", "bare").await.unwrap().unwrap();
    assert_eq!(ms(row.expires_at.as_deref().unwrap()), ms(&row.updated_at) + 90_000);
    kv.configure("life", None).await.unwrap();
    let e = kv.put("life", "bare", json!(1), Lifetime::NAMESPACE_DEFAULT).await.unwrap_err();
    assert_eq!(e.reason(), Some("kv_expiry_not_specified"), "cleared: {e}");
    let e = kv.configure("life", Some(Lifetime::at(at))).await.unwrap_err();
    assert_eq!(e.reason(), Some("kv_bad_expiration"), "{e}");

    // A scan walks every live row of the namespace, page by page.
    let page = kv.scan("life", None, 2).await.unwrap();
    let keys: Vec<&str> = page.rows.iter().map(|r| r.key.as_str()).collect();
    assert_eq!((keys, page.next_after.as_deref()), (vec!["at", "bare"], Some("bare")));
    let all = kv.scan_all("life").await.unwrap();
    let keys: Vec<&str> = all.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(keys, ["at", "bare", "created", "updated"]);
    let e = kv.scan("life", None, 0).await.unwrap_err();
    assert_eq!(e.reason(), Some("kv_bad_limit"), "{e}");
}
