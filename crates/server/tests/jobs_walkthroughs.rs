//! The walkthroughs of docs/jobs.md, step for step against a real broker.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

#[path = "support/jobs.rs"]
mod jobs;
mod support;

use std::time::Duration;

use jobs::*;
use serde_json::json;
use support::paused::PausedNode;
use support::*;
use tokio::time::Instant;

#[test]
fn renders_with_a_scope_per_customer() {
    paused::run(async {
        let broker = PausedNode::start().await;
        let (c, base) = (client(), broker.base());
        let r = results(
            &c,
            &base,
            vec![
                json!({ "op": "configure", "queue": "renders", "lease": { "defaultMs": 60_000, "maxMs": 600_000 },
                        "retry": { "maxAttempts": 3, "initialDelayMs": 2_000, "maxDelayMs": 30_000 } }),
                json!({ "op": "enqueue", "queue": "renders", "scope": "acme", "id": "r-42", "payload": { "scene": "intro" } }),
                json!({ "op": "enqueue", "queue": "renders", "scope": "globex", "id": "r-42", "payload": { "scene": "logo" } }),
            ],
        )
        .await;
        assert!(r.iter().all(|r| r["applied"] == true), "{r:?}");

        let acme = claim(&c, &base, "renders", "gpu-1", json!({ "scope": "acme", "waitMs": 30_000 })).await;
        assert_eq!(
            (acme["scope"].clone(), acme["id"].clone(), acme["token"].clone(), acme["attempt"].clone()),
            (json!("acme"), json!("r-42"), json!(1), json!(1))
        );
        assert_eq!(acme["payload"], json!({ "scene": "intro" }));
        let globex = claim(&c, &base, "renders", "gpu-2", json!({ "scope": "globex" })).await;
        assert_eq!(
            (globex["payload"].clone(), globex["token"].clone()),
            (json!({ "scene": "logo" }), json!(1)),
            "another job, its own tokens"
        );

        let failed = one(
            &c,
            &base,
            json!({ "op": "fail", "queue": "renders", "scope": "acme", "id": "r-42", "owner": "gpu-1", "token": 1, "error": { "exit": 137 } }),
        )
        .await;
        assert_eq!(failed["job"]["state"], "pending", "{failed}");
        assert_eq!(ms(&failed["job"]["availableAt"]) - ms(&failed["job"]["updatedAt"]), 2_000, "back after 2 s");
        let (status, pending) = get_json(&c, &format!("{base}/api/v1/jobs/renders?scope=acme&state=pending")).await;
        assert_eq!(status, 200);
        assert_eq!(pending["rows"][0]["error"], json!({ "exit": 137 }));
        assert_eq!(pending["rows"][0]["attempts"], 1);
        let again = claim(&c, &base, "renders", "gpu-1", json!({ "scope": "acme", "waitMs": 5_000 })).await;
        assert_eq!((again["attempt"].clone(), again["token"].clone()), (json!(2), json!(2)));
    });
}

#[test]
fn an_order_whose_bake_job_commits_with_its_kv_write() {
    paused::run(async {
        let broker = PausedNode::start().await;
        let (c, base) = (client(), broker.base());
        let place = json!({
            "operations": [{ "type": "push", "items": [{ "queue": "orders", "partition": "order-7", "payload": { "event": "placed" } }] }],
            "kv":   [{ "op": "put", "ns": "orders", "key": "order-7", "value": { "state": "placed" }, "forever": true }],
            "jobs": [{ "op": "enqueue", "queue": "bake", "id": "order-7", "payload": { "order": 7 }, "delayMs": 5_000 }],
        });
        let placed_at = Instant::now();
        let (status, v) = post_json(&c, &format!("{base}/api/v1/transaction"), &place).await;
        assert_eq!((status, v["success"].clone()), (200, json!(true)), "{v}");

        let cl = claim(&c, &base, "bake", "oven-1", json!({ "waitMs": 10_000 })).await;
        assert_eq!((cl["id"].clone(), cl["token"].clone()), (json!("order-7"), json!(1)), "{cl}");
        assert!(placed_at.elapsed() >= Duration::from_millis(4_900), "claimable only once due");

        let bake = json!({
            "operations": [{ "type": "push", "items": [{ "queue": "orders", "partition": "order-7", "payload": { "event": "baked" } }] }],
            "kv":   [{ "op": "put", "ns": "orders", "key": "order-7", "value": { "state": "baked" }, "forever": true }],
            "jobs": [{ "op": "complete", "queue": "bake", "id": "order-7", "owner": "oven-1", "token": 1, "result": { "temperature": 220 } }],
        });
        let (status, v) = post_json(&c, &format!("{base}/api/v1/transaction"), &bake).await;
        assert_eq!((status, v["success"].clone()), (200, json!(true)), "{v}");

        // Sent again: the lease is gone, and nothing happens twice.
        let (_, v) = post_json(&c, &format!("{base}/api/v1/transaction"), &bake).await;
        assert_eq!(
            (v["success"].clone(), v["reason"].clone(), v["code"].clone()),
            (json!(false), json!("job_precondition"), json!("LEASE_LOST")),
            "{v}"
        );
        let events = drain(&c, &base, "orders", "order-7", "audit", 10).await;
        let names: Vec<_> = events.iter().map(|m| m["data"]["event"].clone()).collect();
        assert_eq!(names, vec![json!("placed"), json!("baked")]);
        let (_, kv) = get_json(&c, &format!("{base}/api/v1/kv/orders/order-7")).await;
        assert_eq!(kv["value"], json!({ "state": "baked" }), "{kv}");
        assert_eq!(get(&c, &base, "bake", "order-7").await["result"], json!({ "temperature": 220 }));
    });
}
