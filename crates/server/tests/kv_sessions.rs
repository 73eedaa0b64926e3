//! The walkthrough of docs/kv.md, step by step against a real broker: a
//! session store whose namespace default forgets sessions idle for 2 s.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;
#[path = "support/wire.rs"]
mod wire;

use std::time::Duration;

use serde_json::{json, Value};

use regina_types::time::parse_iso;
use support::paused;
use wire::*;

fn ms(v: &Value, field: &str) -> u64 {
    v[field].as_str().and_then(parse_iso).unwrap_or_else(|| panic!("{field} is not a time: {v}"))
}

#[test]
fn a_session_store_forgets_idle_sessions() {
    paused::run(async {
        let env = Env::paused().await;

        // 1. The namespace's default lifetime.
        let set =
            kv_results(&env, json!([{ "op": "configure", "ns": "sessions", "expiration": { "afterUpdateMs": 2000 } }]))
                .await;
        has(
            &set[0],
            json!({ "op": "configure", "ns": "sessions", "applied": true,
                             "expiration": { "afterUpdateMs": 2000 } }),
        );

        // 2. Two logins, naming no lifetime.
        let login = kv_results(
            &env,
            json!([
                { "op": "put", "ns": "sessions", "key": "s-alice", "value": { "user": "alice" } },
                { "op": "put", "ns": "sessions", "key": "s-bob", "value": { "user": "bob" } },
            ]),
        )
        .await;
        for w in &login {
            has(w, json!({ "applied": true }));
            assert_eq!(ms(w, "expiresAt"), ms(w, "updatedAt") + 2000, "{w}");
        }
        let logged_in = login[0]["createdAt"].clone();

        // 3. Alice touches her session once a second for three seconds.
        let mut last = login[0].clone();
        for _ in 0..3 {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let touch =
                kv_results(&env, json!([{ "op": "touch", "ns": "sessions", "key": "s-alice" }])).await.remove(0);
            has(&touch, json!({ "applied": true, "value": { "user": "alice" }, "createdAt": logged_in }));
            assert_eq!(ms(&touch, "expiresAt"), ms(&touch, "updatedAt") + 2000, "{touch}");
            assert!(ms(&touch, "expiresAt") > ms(&last, "expiresAt"), "a touch renews: {touch}");
            assert!(touch["version"].as_u64() > last["version"].as_u64(), "a new version: {touch}");
            last = touch;
        }

        // 4. Bob idled past 2 s; Alice did not.
        has(&get_body(&env, "/api/v1/kv/sessions/s-bob").await, json!({ "found": false }));
        let alice = get_body(&env, "/api/v1/kv/sessions/s-alice").await;
        has(&alice, json!({ "found": true, "createdAt": logged_in, "value": { "user": "alice" } }));

        // 5. The live sessions.
        let scan = kv_results(&env, json!([{ "op": "scan", "ns": "sessions" }])).await.remove(0);
        assert_eq!(column(std::slice::from_ref(&scan), "rows", "key"), [json!("s-alice")], "{scan}");
        has(&scan, json!({ "truncated": false }));

        // 6. Two seconds after her last touch Alice's session is gone too.
        tokio::time::sleep(Duration::from_millis(2_200)).await;
        has(&get_body(&env, "/api/v1/kv/sessions/s-alice").await, json!({ "found": false }));
        let scan = kv_results(&env, json!([{ "op": "scan", "ns": "sessions" }])).await.remove(0);
        has(&scan, json!({ "rows": [], "truncated": false }));
    });
}
