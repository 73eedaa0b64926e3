//! Job-queue rules that must not depend on when the leader last swept,
//! against a real broker: a finished job past retention is gone for writers
//! as for readers, a lease that ran out is judged under the policy of that
//! time, a resent claim answers the original claim, a claim rolled back
//! with its call uses up no token, and equal instants tie by the entry that
//! set them.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

#[path = "support/jobs.rs"]
mod jobs;
mod support;

use std::time::Duration;

use jobs::*;
use serde_json::{json, Value};
use support::paused;

#[test]
fn a_finished_job_past_retention_is_gone_for_writers_too() {
    paused::run(async {
        let (_b, c, base) = paused_setup().await;
        one(&c, &base, json!({ "op": "configure", "queue": "q", "completedRetentionMs": 600_000 })).await;
        enqueue(&c, &base, "q", "done", json!(1)).await;
        enqueue(&c, &base, "q", "broken", json!(2)).await;
        let first = claim(&c, &base, "q", "w", json!({})).await;
        one(&c, &base, with_proof("complete", "q", &first, json!({ "result": "ok" }))).await;
        let second = claim(&c, &base, "q", "w", json!({})).await;
        let failed = one(&c, &base, with_proof("fail", "q", &second, json!({ "error": "no", "retry": false }))).await;
        assert_eq!(failed["job"]["state"], "failed", "{failed}");
        tokio::time::sleep(Duration::from_secs(601)).await;

        let retry = one(&c, &base, json!({ "op": "retry", "queue": "q", "id": "broken" })).await;
        assert_eq!(
            (retry["applied"].clone(), retry["code"].clone()),
            (json!(false), json!("JOB_NOT_FAILED")),
            "{retry}"
        );
        let cancel = one(&c, &base, json!({ "op": "cancel", "queue": "q", "id": "broken" })).await;
        assert_eq!(cancel["existed"], false, "{cancel}");
        let again = enqueue(&c, &base, "q", "done", json!(3)).await;
        assert_eq!((again["applied"].clone(), again["replaced"].clone()), (json!(true), json!(false)), "{again}");
        assert_eq!(again["job"]["payload"], 3);
    });
}

#[test]
fn a_job_failed_by_its_lease_stays_failed_when_the_policy_changes() {
    paused::run(async {
        let (_b, c, base) = paused_setup().await;
        let policy = |attempts: u32| {
            json!({ "op": "configure", "queue": "q",
                    "retry": { "maxAttempts": attempts, "initialDelayMs": 100, "maxDelayMs": 1000 } })
        };
        one(&c, &base, policy(1)).await;
        enqueue(&c, &base, "q", "j", json!(1)).await;
        let cl = claim(&c, &base, "q", "w", json!({ "leaseMs": 30_000 })).await;
        assert_eq!(cl["attempt"], 1, "{cl}");
        tokio::time::sleep(Duration::from_secs(31)).await;
        let job = get(&c, &base, "q", "j").await;
        assert_eq!((job["state"].clone(), job["error"].clone()), (json!("failed"), json!({ "code": "LEASE_EXPIRED" })));
        one(&c, &base, policy(5)).await;
        let job = get(&c, &base, "q", "j").await;
        assert_eq!(job["state"], "failed", "a later policy does not revive it: {job}");
        assert!(claim(&c, &base, "q", "w", json!({})).await.is_null());
    });
}

#[test]
fn a_resent_claim_answers_the_original_claim_after_its_job_is_cancelled() {
    paused::run(async {
        let (_b, c, base) = paused_setup().await;
        enqueue(&c, &base, "q", "a", json!({ "v": 1 })).await;
        enqueue(&c, &base, "q", "b", json!({ "v": 2 })).await;
        let asked = json!({ "leaseMs": 5000, "requestId": "req-1" });
        let first = claim(&c, &base, "q", "w", asked.clone()).await;
        assert_eq!((first["id"].clone(), first["payload"].clone()), (json!("a"), json!({ "v": 1 })), "{first}");
        one(&c, &base, json!({ "op": "cancel", "queue": "q", "id": "a" })).await;
        let again = claim(&c, &base, "q", "w", asked).await;
        assert_eq!(again, first, "the same claim, payload included, not job b");
    });
}

#[test]
fn a_claim_rolled_back_with_its_call_uses_no_token() {
    paused::run(async {
        let (_b, c, base) = paused_setup().await;
        enqueue(&c, &base, "q", "a", json!(1)).await;
        let (status, v) = call(
            &c,
            &base,
            vec![
                json!({ "op": "claim", "queue": "q", "owner": "w" }),
                json!({ "op": "enqueue", "queue": "q", "id": "a", "payload": 2, "required": true }),
            ],
        )
        .await;
        assert_eq!((status, v["success"].clone(), v["code"].clone()), (200, json!(false), json!("JOB_EXISTS")), "{v}");
        let cl = claim(&c, &base, "q", "w", json!({})).await;
        assert_eq!((cl["id"].clone(), cl["token"].clone()), (json!("a"), json!(1)), "{cl}");
    });
}

#[test]
fn equal_instants_go_to_the_job_whose_instant_was_set_first() {
    paused::run(async {
        let (_b, c, base) = paused_setup().await;
        enqueue(&c, &base, "q", "x", json!(1)).await;
        enqueue(&c, &base, "q", "y", json!(2)).await;
        // One call, one instant: x and y are leased until the same moment, and
        // x's lease is then renewed to that same moment, after y's was set.
        let rs = results(
            &c,
            &base,
            vec![
                json!({ "op": "claim", "queue": "q", "owner": "w", "leaseMs": 30_000 }),
                json!({ "op": "claim", "queue": "q", "owner": "w", "leaseMs": 30_000 }),
                json!({ "op": "renew", "queue": "q", "id": "x", "owner": "w", "token": 1, "leaseMs": 30_000 }),
            ],
        )
        .await;
        let ids: Vec<Value> = rs[..2].iter().map(|r| r["claim"]["id"].clone()).collect();
        assert_eq!(ids, [json!("x"), json!("y")], "{rs:?}");
        assert_eq!(rs[2]["applied"], true, "{rs:?}");
        assert_eq!(rs[2]["claim"]["expiresAt"], rs[1]["claim"]["expiresAt"]);
        tokio::time::sleep(Duration::from_secs(31)).await;
        assert_eq!(claim(&c, &base, "q", "w", json!({})).await["id"], "y");
        assert_eq!(claim(&c, &base, "q", "w", json!({})).await["id"], "x");
    });
}
