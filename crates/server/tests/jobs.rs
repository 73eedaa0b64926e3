//! The job-queue contract against a real broker: every op, every refusal
//! code, leases judged at read time, backoff, scopes and their tokens, the
//! read routes, schemas, retention, and job riders of a step.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

#[path = "support/jobs.rs"]
mod jobs;
mod support;

use std::time::Duration;

use jobs::*;
use serde_json::{json, Value};
use support::*;

#[test]
fn enqueue_refuses_a_live_id_and_replace_only_replaces_a_finished_job() {
    paused::run(async {
        let (_b, c, base) = paused_setup().await;
        let r = enqueue(&c, &base, "render", "r-42", json!({ "frame": 1 })).await;
        assert_eq!(r["applied"], true, "{r}");
        let job = &r["job"];
        assert_eq!(job["state"], "pending");
        assert_eq!(job["attempts"], 0);
        assert_eq!(job["payload"], json!({ "frame": 1 }));
        assert_eq!(job["scope"], "");
        for field in ["createdAt", "updatedAt", "availableAt"] {
            ms(&job[field]);
        }
        assert!(job["lease"].is_null() && job["leaseExpiresAt"].is_null() && job["result"].is_null());

        let again = enqueue(&c, &base, "render", "r-42", json!(2)).await;
        assert_eq!((again["applied"].clone(), again["code"].clone()), (json!(false), json!("JOB_EXISTS")));
        assert_eq!(again["job"]["payload"], json!({ "frame": 1 }), "the refusal shows the job as it is");
        let replace = json!({ "op": "enqueue", "queue": "render", "id": "r-42", "payload": 3, "replace": true });
        assert_eq!(
            one(&c, &base, replace.clone()).await["code"],
            "JOB_EXISTS",
            "replace does not replace a pending job"
        );

        let cl = claim(&c, &base, "render", "w1", json!({})).await;
        assert_eq!(one(&c, &base, replace.clone()).await["code"], "JOB_EXISTS", "nor a leased one");
        let done = one(&c, &base, with_proof("complete", "render", &cl, json!({ "result": "ok" }))).await;
        assert_eq!(done["job"]["state"], "completed");
        assert_eq!(enqueue(&c, &base, "render", "r-42", json!(4)).await["code"], "JOB_EXISTS", "without replace");
        let r = one(&c, &base, replace).await;
        assert_eq!((r["applied"].clone(), r["job"]["state"].clone()), (json!(true), json!("pending")), "{r}");
        assert_eq!((r["job"]["payload"].clone(), r["job"]["attempts"].clone()), (json!(3), json!(0)));
    });
}

#[test]
fn claims_take_the_longest_waiting_job_with_strictly_rising_tokens_per_scope() {
    paused::run(async {
        let (_b, c, base) = paused_setup().await;
        let ops = vec![
            json!({ "op": "enqueue", "queue": "q", "id": "late", "payload": 0, "delayMs": 60_000 }),
            json!({ "op": "enqueue", "queue": "q", "id": "b", "payload": 1 }),
            json!({ "op": "enqueue", "queue": "q", "id": "a", "payload": 2 }),
            json!({ "op": "enqueue", "queue": "q", "scope": "tenant-x", "id": "a", "payload": 3 }),
        ];
        results(&c, &base, ops).await;
        let first = claim(&c, &base, "q", "w", json!({})).await;
        let second = claim(&c, &base, "q", "w", json!({})).await;
        assert_eq!((first["id"].clone(), second["id"].clone()), (json!("b"), json!("a")), "oldest first, not by id");
        assert_eq!((first["token"].clone(), second["token"].clone()), (json!(1), json!(2)));
        assert_eq!(first["attempt"], 1);
        assert!(claim(&c, &base, "q", "w", json!({})).await.is_null(), "a delayed job is not ready");
        let other = claim(&c, &base, "q", "w", json!({ "scope": "tenant-x" })).await;
        assert_eq!(
            (other["id"].clone(), other["token"].clone(), other["scope"].clone()),
            (json!("a"), json!(1), json!("tenant-x"))
        );
        // A cancelled and re-enqueued id never sees an old token again.
        one(&c, &base, json!({ "op": "cancel", "queue": "q", "id": "b" })).await;
        enqueue(&c, &base, "q", "b", json!(5)).await;
        assert_eq!(claim(&c, &base, "q", "w", json!({})).await["token"], 3);
    });
}

#[test]
fn a_claim_resent_with_its_request_id_answers_the_original_claim() {
    paused::run(async {
        let (_b, c, base) = paused_setup().await;
        enqueue(&c, &base, "q", "one", json!(1)).await;
        enqueue(&c, &base, "q", "two", json!(2)).await;
        let a = claim(&c, &base, "q", "w", json!({ "requestId": "req-1" })).await;
        let again = claim(&c, &base, "q", "w", json!({ "requestId": "req-1" })).await;
        assert_eq!(a, again);
        let b = claim(&c, &base, "q", "w", json!({ "requestId": "req-2" })).await;
        assert_eq!((b["id"].clone(), b["token"].clone()), (json!("two"), json!(2)));
        assert!(claim(&c, &base, "q", "w", json!({})).await.is_null());
        let stats = one(&c, &base, json!({ "op": "stats", "queue": "q" })).await;
        assert_eq!(stats["counts"]["leased"], 2, "{stats}");
    });
}

#[test]
fn leases_longer_than_the_queue_allows_are_refused_with_lease_too_long() {
    paused::run(async {
        let (_b, c, base) = paused_setup().await;
        enqueue(&c, &base, "q", "j", json!(1)).await;
        let (status, v) =
            call(&c, &base, vec![json!({ "op": "claim", "queue": "q", "owner": "w", "leaseMs": 300_001 })]).await;
        assert_eq!((status, v["code"].clone()), (400, json!("LEASE_TOO_LONG")), "{v}");
        let cfg =
            one(&c, &base, json!({ "op": "configure", "queue": "q", "lease": { "defaultMs": 1_000, "maxMs": 2_000 } }))
                .await;
        assert_eq!(cfg["config"]["lease"], json!({ "defaultMs": 1_000, "maxMs": 2_000 }));
        assert_eq!(cfg["config"]["retry"]["maxAttempts"], 5, "what is not named keeps its default");
        let (status, v) =
            call(&c, &base, vec![json!({ "op": "claim", "queue": "q", "owner": "w", "leaseMs": 2_001 })]).await;
        assert_eq!((status, v["code"].clone()), (400, json!("LEASE_TOO_LONG")), "{v}");
        let cl = claim(&c, &base, "q", "w", json!({})).await;
        let left = ms(&cl["expiresAt"]) - ms(&get(&c, &base, "q", "j").await["updatedAt"]);
        assert_eq!(left, 1_000, "the queue's default lease");
        let (status, v) = call(&c, &base, vec![with_proof("renew", "q", &cl, json!({ "leaseMs": 5_000 }))]).await;
        assert_eq!((status, v["code"].clone()), (400, json!("LEASE_TOO_LONG")), "{v}");
        assert!(get(&c, &base, "q", "j").await["lease"].is_object(), "the refused call changed nothing");
    });
}

#[test]
fn renew_extends_the_current_lease_and_keeps_its_token() {
    paused::run(async {
        let (_b, c, base) = paused_setup().await;
        enqueue(&c, &base, "q", "j", json!(1)).await;
        let cl = claim(&c, &base, "q", "w", json!({ "leaseMs": 10_000 })).await;
        let r = one(&c, &base, with_proof("renew", "q", &cl, json!({ "leaseMs": 60_000 }))).await;
        assert_eq!(r["applied"], true, "{r}");
        assert_eq!(r["claim"]["token"], cl["token"]);
        assert!(ms(&r["claim"]["expiresAt"]) >= ms(&cl["expiresAt"]) + 49_000);
        let mut stale = cl.clone();
        stale["token"] = json!(99);
        let r = one(&c, &base, with_proof("renew", "q", &stale, json!({}))).await;
        assert_eq!((r["applied"].clone(), r["code"].clone()), (json!(false), json!("LEASE_LOST")), "{r}");
        let mut other = cl.clone();
        other["owner"] = json!("intruder");
        assert_eq!(one(&c, &base, with_proof("complete", "q", &other, json!({}))).await["code"], "LEASE_LOST");
    });
}

#[test]
fn an_expired_lease_is_a_failed_attempt_judged_at_read_time() {
    paused::run(async {
        let (_b, c, base) = paused_setup().await;
        let retry = json!({ "maxAttempts": 2, "initialDelayMs": 5_000, "maxDelayMs": 5_000 });
        one(&c, &base, json!({ "op": "configure", "queue": "q", "retry": retry })).await;
        enqueue(&c, &base, "q", "j", json!(1)).await;
        let first = claim(&c, &base, "q", "w", json!({ "leaseMs": 30_000 })).await;
        tokio::time::sleep(Duration::from_secs(31)).await;
        let job = get(&c, &base, "q", "j").await;
        assert_eq!((job["state"].clone(), job["attempts"].clone()), (json!("pending"), json!(1)), "{job}");
        assert_eq!(ms(&job["availableAt"]), ms(&first["expiresAt"]), "available from the expiry, without backoff");
        let late = one(&c, &base, with_proof("complete", "q", &first, json!({}))).await;
        assert_eq!(late["code"], "LEASE_LOST", "an expired lease completes nothing");
        let second = claim(&c, &base, "q", "w", json!({ "leaseMs": 30_000 })).await;
        assert_eq!((second["attempt"].clone(), second["token"].clone()), (json!(2), json!(2)));
        tokio::time::sleep(Duration::from_secs(31)).await;
        let job = get(&c, &base, "q", "j").await;
        assert_eq!(job["state"], "failed", "{job}");
        assert_eq!(job["error"], json!({ "code": "LEASE_EXPIRED" }));
        assert!(claim(&c, &base, "q", "w", json!({})).await.is_null(), "a spent job is not claimable");
        let stats = one(&c, &base, json!({ "op": "stats", "queue": "q" })).await;
        assert_eq!(stats["counts"]["failed"], 1, "{stats}");
    });
}

#[test]
fn without_retries_an_expired_lease_requeues_without_limit() {
    paused::run(async {
        let (_b, c, base) = paused_setup().await;
        one(&c, &base, json!({ "op": "configure", "queue": "q", "retry": false })).await;
        enqueue(&c, &base, "q", "j", json!(1)).await;
        for attempt in 1..=4 {
            let cl = claim(&c, &base, "q", "w", json!({ "leaseMs": 30_000 })).await;
            assert_eq!(cl["attempt"], attempt, "{cl}");
            tokio::time::sleep(Duration::from_secs(31)).await;
        }
        assert_eq!(get(&c, &base, "q", "j").await["state"], "pending");
        let cl = claim(&c, &base, "q", "w", json!({})).await;
        let r = one(&c, &base, with_proof("fail", "q", &cl, json!({ "error": "boom" }))).await;
        assert_eq!(
            (r["job"]["state"].clone(), r["job"]["error"].clone()),
            (json!("failed"), json!("boom")),
            "fail is final without retries"
        );
    });
}

#[test]
fn fail_backs_off_doubling_and_ends_failed_when_attempts_are_spent() {
    paused::run(async {
        let (_b, c, base) = paused_setup().await;
        let retry = json!({ "maxAttempts": 3, "initialDelayMs": 10_000, "maxDelayMs": 15_000 });
        one(&c, &base, json!({ "op": "configure", "queue": "q", "retry": retry })).await;
        enqueue(&c, &base, "q", "j", json!(1)).await;
        for (attempt, delay) in [(1u64, 10_000u64), (2, 15_000)] {
            let cl = claim(&c, &base, "q", "w", json!({})).await;
            assert_eq!(cl["attempt"], attempt);
            let r = one(&c, &base, with_proof("fail", "q", &cl, json!({ "error": { "why": attempt } }))).await;
            let job = &r["job"];
            assert_eq!(
                (job["state"].clone(), job["error"].clone()),
                (json!("pending"), json!({ "why": attempt })),
                "{r}"
            );
            assert_eq!(
                ms(&job["availableAt"]) - ms(&job["updatedAt"]),
                delay,
                "min(maxDelayMs, initialDelayMs * 2^(n-1))"
            );
            assert!(claim(&c, &base, "q", "w", json!({})).await.is_null(), "not before its backoff");
            tokio::time::sleep(Duration::from_millis(delay + 1_000)).await;
        }
        let cl = claim(&c, &base, "q", "w", json!({})).await;
        let r = one(&c, &base, with_proof("fail", "q", &cl, json!({ "error": "last" }))).await;
        assert_eq!((r["job"]["state"].clone(), r["job"]["attempts"].clone()), (json!("failed"), json!(3)), "{r}");

        // retry brings a failed job back with a fresh attempt count; anything
        // else is not failed.
        let r = one(&c, &base, json!({ "op": "retry", "queue": "q", "id": "j" })).await;
        assert_eq!(
            (r["applied"].clone(), r["job"]["state"].clone(), r["job"]["attempts"].clone()),
            (json!(true), json!("pending"), json!(0))
        );
        let r = one(&c, &base, json!({ "op": "retry", "queue": "q", "id": "j" })).await;
        assert_eq!((r["applied"].clone(), r["code"].clone()), (json!(false), json!("JOB_NOT_FAILED")));
        let r = one(&c, &base, json!({ "op": "retry", "queue": "q", "id": "nobody" })).await;
        assert_eq!(r["code"], "JOB_NOT_FAILED");
        // An explicit delay, and retry: false, win over the policy.
        let cl = claim(&c, &base, "q", "w", json!({})).await;
        let r = one(&c, &base, with_proof("fail", "q", &cl, json!({ "error": "x", "delayMs": 7_000 }))).await;
        assert_eq!(ms(&r["job"]["availableAt"]) - ms(&r["job"]["updatedAt"]), 7_000);
        one(&c, &base, json!({ "op": "cancel", "queue": "q", "id": "j" })).await;
        enqueue(&c, &base, "q", "j", json!(1)).await;
        let cl = claim(&c, &base, "q", "w", json!({})).await;
        let r = one(&c, &base, with_proof("fail", "q", &cl, json!({ "error": "fatal", "retry": false }))).await;
        assert_eq!(r["job"]["state"], "failed");
    });
}

#[test]
fn release_gives_a_job_back_with_its_attempt_counted() {
    paused::run(async {
        let (_b, c, base) = paused_setup().await;
        enqueue(&c, &base, "q", "j", json!(1)).await;
        let cl = claim(&c, &base, "q", "w", json!({})).await;
        let r = one(&c, &base, with_proof("release", "q", &cl, json!({ "delayMs": 10_000 }))).await;
        assert_eq!((r["job"]["state"].clone(), r["job"]["attempts"].clone()), (json!("pending"), json!(1)), "{r}");
        assert!(r["job"]["error"].is_null());
        assert_eq!(one(&c, &base, with_proof("release", "q", &cl, json!({}))).await["code"], "LEASE_LOST");
        tokio::time::sleep(Duration::from_secs(11)).await;
        assert_eq!(claim(&c, &base, "q", "w", json!({})).await["attempt"], 2);
    });
}

#[test]
fn cancel_deletes_in_any_state_and_a_later_complete_loses_its_lease() {
    paused::run(async {
        let (_b, c, base) = paused_setup().await;
        enqueue(&c, &base, "q", "j", json!(1)).await;
        let cl = claim(&c, &base, "q", "w", json!({})).await;
        let r = one(&c, &base, json!({ "op": "cancel", "queue": "q", "id": "j" })).await;
        assert_eq!((r["applied"].clone(), r["existed"].clone()), (json!(true), json!(true)), "{r}");
        let r = one(&c, &base, json!({ "op": "cancel", "queue": "q", "id": "j" })).await;
        assert_eq!(r["existed"], false);
        let r = one(&c, &base, with_proof("complete", "q", &cl, json!({ "result": 1 }))).await;
        assert_eq!(r["code"], "LEASE_LOST");
        let r = one(&c, &base, json!({ "op": "get", "queue": "q", "id": "j" })).await;
        assert_eq!((r["found"].clone(), r["job"].clone()), (json!(false), Value::Null));
    });
}

#[test]
fn a_refused_required_op_rolls_the_whole_call_back() {
    paused::run(async {
        let (_b, c, base) = paused_setup().await;
        enqueue(&c, &base, "q", "taken", json!(1)).await;
        let ops = vec![
            json!({ "op": "enqueue", "queue": "q", "id": "fresh", "payload": 1 }),
            json!({ "op": "claim", "queue": "q", "owner": "w" }),
            json!({ "op": "enqueue", "queue": "q", "id": "taken", "payload": 2, "required": true }),
        ];
        let (status, v) = call(&c, &base, ops).await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(
            (v["success"].clone(), v["reason"].clone(), v["code"].clone()),
            (json!(false), json!("job_precondition"), json!("JOB_EXISTS"))
        );
        assert_eq!(v["failedIndex"], 2);
        assert_eq!(v["job"]["id"], "taken");
        let r = one(&c, &base, json!({ "op": "get", "queue": "q", "id": "fresh" })).await;
        assert_eq!(r["found"], false, "the earlier enqueue rolled back");
        assert_eq!(get(&c, &base, "q", "taken").await["state"], "pending", "the claim rolled back");
        // Not required: the refusal is one result among others.
        let ops = vec![
            json!({ "op": "enqueue", "queue": "q", "id": "taken", "payload": 2 }),
            json!({ "op": "enqueue", "queue": "q", "id": "fresh", "payload": 1 }),
        ];
        let r = results(&c, &base, ops).await;
        assert_eq!((r[0]["code"].clone(), r[1]["applied"].clone()), (json!("JOB_EXISTS"), json!(true)));
    });
}

#[test]
fn malformed_operations_are_refused_with_a_code_and_the_field() {
    paused::run(async {
        let (_b, c, base) = paused_setup().await;
        let cases = [
            (json!({ "op": "launch", "queue": "q" }), "op"),
            (json!({ "op": "enqueue", "queue": "q" }), "id"),
            (json!({ "op": "enqueue", "id": "x" }), "queue"),
            (json!({ "op": "enqueue", "queue": "q", "id": "" }), "id"),
            (json!({ "op": "enqueue", "queue": "q", "id": "x", "delayMs": 5, "at": 5 }), "at"),
            (json!({ "op": "enqueue", "queue": "q", "id": "x", "at": "yesterday-ish" }), "at"),
            (json!({ "op": "enqueue", "queue": "q", "id": "x", "delayMs": -1 }), "delayMs"),
            (json!({ "op": "complete", "queue": "q", "id": "x", "owner": "w" }), "token"),
            (json!({ "op": "complete", "queue": "q", "id": "x", "owner": "w", "token": "1" }), "token"),
            (json!({ "op": "claim", "queue": "q" }), "owner"),
            (json!({ "op": "scan", "queue": "q", "state": "sleeping" }), "state"),
            (json!({ "op": "configure", "queue": "q", "retry": true }), "retry"),
            (json!({ "op": "configure", "queue": "q", "lease": { "defaultMs": 10, "maxMs": 5 } }), "lease"),
            (json!({ "op": "configure", "queue": "q", "payloadSchema": { "type": 12 } }), "payloadSchema"),
        ];
        for (op, field) in cases {
            let (status, v) = call(&c, &base, vec![op.clone()]).await;
            assert_eq!(status, 400, "{op} -> {v}");
            assert_eq!(v["code"], "INVALID_ARGUMENT", "{op} -> {v}");
            assert_eq!(v["field"], field, "{op} -> {v}");
            assert!(v["error"].as_str().is_some_and(|e| e.contains(field)), "{v}");
        }
        let (status, v) =
            call(&c, &base, vec![json!({ "op": "enqueue", "queue": "q", "id": "x", "colour": "red" })]).await;
        assert_eq!((status, v["code"].clone()), (400, json!("INVALID_ARGUMENT")), "an unknown field: {v}");
        let waits = vec![
            json!({ "op": "claim", "queue": "q", "owner": "w", "waitMs": 100 }),
            json!({ "op": "stats", "queue": "q" }),
        ];
        let (status, v) = call(&c, &base, waits).await;
        assert_eq!((status, v["field"].clone()), (400, json!("waitMs")), "{v}");
        for body in [json!({}), json!({ "operations": [] }), json!({ "operations": [], "extra": 1 }), json!([1])] {
            let (status, v) = post_json(&c, &format!("{base}/api/v1/jobs"), &body).await;
            assert_eq!((status, v["code"].clone()), (400, json!("INVALID_ARGUMENT")), "{body} -> {v}");
        }
        let (status, _) = raw_request_async(_b.port(), "POST", "/api/v1/jobs", "{not json").await;
        assert_eq!(status, 400);
        let big = "x".repeat(regina_types::limits::JOB_PAYLOAD_BYTES_MAX + 1);
        let (status, v) =
            call(&c, &base, vec![json!({ "op": "enqueue", "queue": "q", "id": "x", "payload": big })]).await;
        assert_eq!((status, v["code"].clone()), (400, json!("PAYLOAD_TOO_LARGE")), "{v}");
        let (status, _) = get_json(&c, &format!("{base}/api/v1/jobs/q?state=nope")).await;
        assert_eq!(status, 400);
        assert_eq!(
            one(&c, &base, json!({ "op": "stats", "queue": "q" })).await["counts"]["pending"],
            0,
            "nothing was applied"
        );
    });
}

#[test]
fn a_waiting_claim_wakes_when_a_job_is_enqueued() {
    paused::run(async {
        let (_b, c, base) = paused_setup().await;
        let (c2, base2) = (c.clone(), base.clone());
        let waiter = tokio::spawn(async move { claim(&c2, &base2, "q", "w", json!({ "waitMs": 10_000 })).await });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!waiter.is_finished(), "the claim waits while nothing is ready");
        enqueue(&c, &base, "q", "j", json!("late")).await;
        let cl = tokio::time::timeout(Duration::from_secs(5), waiter).await.expect("woken by the enqueue").unwrap();
        assert_eq!(cl["id"], "j");
        // A delayed job wakes a waiting claim when it comes due.
        one(&c, &base, json!({ "op": "enqueue", "queue": "q", "id": "later", "payload": 1, "delayMs": 300 })).await;
        let cl = claim(&c, &base, "q", "w", json!({ "waitMs": 5_000 })).await;
        assert_eq!(cl["id"], "later");
        let none = claim(&c, &base, "q", "w", json!({ "waitMs": 200 })).await;
        assert!(none.is_null(), "answers null when the wait is over");
    });
}

#[test]
fn schemas_check_payloads_on_enqueue_and_results_on_complete() {
    paused::run(async {
        let (_b, c, base) = paused_setup().await;
        let payload =
            json!({ "type": "object", "required": ["frame"], "properties": { "frame": { "type": "integer" } } });
        let result = json!({ "type": "string" });
        let cfg = one(
            &c,
            &base,
            json!({ "op": "configure", "queue": "q", "payloadSchema": payload, "resultSchema": result }),
        )
        .await;
        assert_eq!(cfg["config"]["payloadSchema"], payload);
        let (status, v) =
            call(&c, &base, vec![json!({ "op": "enqueue", "queue": "q", "id": "x", "payload": { "frame": "one" } })])
                .await;
        assert_eq!(
            (status, v["code"].clone(), v["field"].clone()),
            (400, json!("INVALID_ARGUMENT"), json!("payload")),
            "{v}"
        );
        enqueue(&c, &base, "q", "x", json!({ "frame": 1 })).await;
        let cl = claim(&c, &base, "q", "w", json!({})).await;
        let (status, v) = call(&c, &base, vec![with_proof("complete", "q", &cl, json!({ "result": 5 }))]).await;
        assert_eq!((status, v["field"].clone()), (400, json!("result")), "{v}");
        let r = one(&c, &base, with_proof("complete", "q", &cl, json!({ "result": "rendered" }))).await;
        assert_eq!(r["job"]["result"], "rendered");
        one(&c, &base, json!({ "op": "configure", "queue": "q", "payloadSchema": null })).await;
        assert_eq!(
            enqueue(&c, &base, "q", "y", json!("anything")).await["applied"],
            true,
            "a cleared schema checks nothing"
        );
    });
}

#[test]
fn the_read_routes_scan_by_state_with_paging_and_give_stats() {
    paused::run(async {
        let (_b, c, base) = paused_setup().await;
        for i in 0..5 {
            enqueue(&c, &base, "q", &format!("j{i}"), json!(i)).await;
        }
        one(&c, &base, json!({ "op": "enqueue", "queue": "q", "id": "later", "payload": 0, "delayMs": 60_000 })).await;
        let cl = claim(&c, &base, "q", "w", json!({})).await;
        let (status, page) = get_json(&c, &format!("{base}/api/v1/jobs/q?limit=2")).await;
        assert_eq!(status, 200, "{page}");
        let ids: Vec<_> = page["rows"].as_array().unwrap().iter().map(|r| r["id"].clone()).collect();
        assert_eq!(
            (ids, page["truncated"].clone(), page["nextAfter"].clone()),
            (vec![json!("j0"), json!("j1")], json!(true), json!("j1"))
        );
        let (_, page) = get_json(&c, &format!("{base}/api/v1/jobs/q?after=j1&limit=10")).await;
        assert_eq!(page["rows"].as_array().unwrap().len(), 4);
        assert_eq!((page["truncated"].clone(), page["nextAfter"].clone()), (json!(false), Value::Null));
        let (_, leased) = get_json(&c, &format!("{base}/api/v1/jobs/q?state=leased")).await;
        assert_eq!(leased["rows"].as_array().unwrap().len(), 1);
        assert_eq!(leased["rows"][0]["lease"]["token"], cl["token"]);
        let (_, other) = get_json(&c, &format!("{base}/api/v1/jobs/q?scope=elsewhere")).await;
        assert_eq!(other["rows"], json!([]));
        let (status, s) = get_json(&c, &format!("{base}/api/v1/jobs/q/stats")).await;
        assert_eq!(status, 200);
        assert_eq!(s["counts"], json!({ "pending": 5, "leased": 1, "completed": 0, "failed": 0 }), "{s}");
        assert_eq!((s["ready"].clone(), s["readyCount"].clone()), (json!(true), json!(4)));
        ms(&s["oldestReadyAt"]);
        assert_eq!(
            ms(&s["nextAvailableAt"]),
            ms(&cl["expiresAt"]),
            "the running lease ends before the delayed job is due"
        );
        let (_, s) = get_json(&c, &format!("{base}/api/v1/jobs/empty/stats")).await;
        assert_eq!((s["ready"].clone(), s["oldestReadyAt"].clone()), (json!(false), Value::Null));
    });
}

#[test]
fn finished_jobs_leave_after_the_queue_retention() {
    paused::run(async {
        let (_b, c, base) = paused_setup().await;
        one(&c, &base, json!({ "op": "configure", "queue": "q", "completedRetentionMs": 600_000 })).await;
        enqueue(&c, &base, "q", "j", json!(1)).await;
        enqueue(&c, &base, "q", "k", json!(1)).await;
        let cl = claim(&c, &base, "q", "w", json!({})).await;
        one(&c, &base, with_proof("complete", "q", &cl, json!({}))).await;
        assert_eq!(get(&c, &base, "q", "j").await["state"], "completed");
        tokio::time::sleep(Duration::from_secs(601)).await;
        assert!(get(&c, &base, "q", "j").await.is_null(), "gone for readers once retention passed");
        assert_eq!(get(&c, &base, "q", "k").await["state"], "pending", "a pending job stays");
        let s = one(&c, &base, json!({ "op": "stats", "queue": "q" })).await;
        assert_eq!(s["counts"]["completed"], 0);
    });
}

#[test]
fn job_riders_commit_with_the_step_or_roll_it_back() {
    paused::run(async {
        let (_b, c, base) = paused_setup().await;
        enqueue(&c, &base, "orders-bake", "order-1", json!({ "order": 1 })).await;
        let cl = claim(&c, &base, "orders-bake", "oven", json!({})).await;
        let at = regina_types::time::format_iso(ms(&cl["expiresAt"]) + 3_600_000);
        let step = json!({
            "operations": [{ "type": "push", "items": [{ "queue": "orders", "partition": "order-1", "payload": { "event": "baked" } }] }],
            "kv": [{ "op": "put", "ns": "orders", "key": "order-1", "value": { "state": "baked" }, "forever": true }],
            "jobs": [
                with_proof("complete", "orders-bake", &cl, json!({ "result": { "ok": true } })),
                { "op": "enqueue", "queue": "orders-deliver", "id": "order-1", "payload": { "order": 1 }, "at": at },
            ],
        });
        let (status, v) = post_json(&c, &format!("{base}/api/v1/transaction"), &step).await;
        assert_eq!((status, v["success"].clone()), (200, json!(true)), "{v}");
        let rs = v["results"].as_array().unwrap();
        assert_eq!(rs.len(), 4, "{v}");
        assert_eq!(
            (rs[2]["type"].clone(), rs[2]["op"].clone(), rs[2]["job"]["state"].clone()),
            (json!("job"), json!("complete"), json!("completed"))
        );
        assert_eq!(ms(&rs[3]["job"]["availableAt"]), ms(&json!(at)));
        assert_eq!(get(&c, &base, "orders-bake", "order-1").await["result"], json!({ "ok": true }));

        // Sent again, the complete's lease is gone: the whole step rolls back,
        // the push included.
        let (status, v) = post_json(&c, &format!("{base}/api/v1/transaction"), &step).await;
        assert_eq!(status, 200);
        assert_eq!(
            (v["success"].clone(), v["reason"].clone(), v["code"].clone()),
            (json!(false), json!("job_precondition"), json!("LEASE_LOST")),
            "{v}"
        );
        assert_eq!((v["jobIndex"].clone(), v["failedIndex"].clone()), (json!(0), json!(2)));
        let popped = pop(&c, &base, "/api/v1/pop/queue/orders?batch=10").await;
        assert_eq!(messages(&popped).len(), 1, "the refused step pushed nothing: {popped}");
        // Riders may only write.
        let bad = json!({ "jobs": [{ "op": "claim", "queue": "q", "owner": "w" }] });
        let (status, v) = post_json(&c, &format!("{base}/api/v1/transaction"), &bad).await;
        assert_eq!((status, v["field"].clone()), (400, json!("op")), "{v}");
    });
}

#[tokio::test]
async fn jobs_and_their_tokens_survive_a_kill() {
    let (_ws, mut b, c, base) = setup();
    enqueue(&c, &base, "q", "a", json!(1)).await;
    enqueue(&c, &base, "q", "b", json!(2)).await;
    let cl = claim(&c, &base, "q", "w", json!({ "leaseMs": 60_000 })).await;
    b.kill();
    b.restart();
    let (c, base) = (client(), b.base());
    let job = get(&c, &base, "q", "a").await;
    assert_eq!((job["state"].clone(), job["lease"]["token"].clone()), (json!("leased"), cl["token"].clone()), "{job}");
    let next = claim(&c, &base, "q", "w", json!({})).await;
    assert_eq!(next["token"], 2, "the token counter survived");
    assert_eq!(one(&c, &base, with_proof("complete", "q", &cl, json!({}))).await["applied"], true);
}

#[test]
fn metrics_count_jobs_by_stored_state() {
    paused::run(async {
        let (_b, c, base) = paused_setup().await;
        for id in ["a", "b", "c"] {
            enqueue(&c, &base, "q", id, json!(1)).await;
        }
        let cl = claim(&c, &base, "q", "w", json!({})).await;
        one(&c, &base, with_proof("complete", "q", &cl, json!({}))).await;
        claim(&c, &base, "q", "w", json!({})).await;
        let (_, m) = get_json(&c, &format!("{base}/metrics")).await;
        assert_eq!(m["jobs"], json!({ "pending": 1, "leased": 1, "finished": 1 }), "{m}");
        let text = c.get(format!("{base}/metrics/prometheus")).send().await.unwrap().text().await.unwrap();
        assert!(text.contains("regina_jobs{state=\"pending\"} 1"), "{text}");
        assert!(text.contains("regina_jobs{state=\"finished\"} 1"), "{text}");
    });
}
