//! KV lifetimes against a real broker: `expiresAt`, `afterCreationMs` and
//! `afterUpdateMs` beside `ttlSeconds` and `forever`, the times every read
//! answers, namespace default expirations, the namespace scan, transaction
//! riders, and every refusal of a malformed lifetime.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;
#[path = "support/wire.rs"]
mod wire;

use std::time::Duration;

use serde_json::{json, Value};

use regina_types::limits::{KV_EXPIRES_AT_MS_MAX, KV_LIFETIME_MS_MAX, KV_SCAN_LIMIT_MAX};
use regina_types::time::parse_iso;
use support::paused;
use wire::*;

async fn kv1(env: &Env, op: Value) -> Value {
    kv_results(env, json!([op])).await.remove(0)
}

/// A time field as ms since the epoch.
fn ms(v: &Value, field: &str) -> u64 {
    let s = v[field].as_str().unwrap_or_else(|| panic!("{field} is not a time: {v}"));
    parse_iso(s).unwrap_or_else(|| panic!("{field} {s:?} does not parse"))
}

/// A 400 in the KV envelope with this reason.
async fn refused_with(env: &Env, ops: Value, reason: &str) {
    let a = kv(env, ops.clone()).await;
    assert_eq!(a.status, 400, "{ops} answered {}: {}", a.status, a.text);
    has(a.body(), json!({ "error": "kv_bad_request", "reason": reason }));
}

#[test]
fn every_lifetime_kind_is_stored_and_every_read_answers_its_times() {
    paused::run(async {
        let env = Env::paused().await;
        let put = |key: &str, lifetime: Value| {
            let mut op = json!({ "op": "put", "ns": "life", "key": key, "value": { "k": key } });
            op.as_object_mut().unwrap().extend(lifetime.as_object().unwrap().clone());
            op
        };
        // An absolute instant, as an ISO string or as ms, at ms precision.
        let w = kv1(&env, put("iso", json!({ "expiresAt": "2099-01-02T03:04:05.678+01:00" }))).await;
        has(&w, json!({ "applied": true, "expiresAt": "2099-01-02T02:04:05.678000Z" }));
        let w = kv1(&env, put("epoch", json!({ "expiresAt": 4_070_912_645_123u64 }))).await;
        has(&w, json!({ "expiresAt": "2099-01-01T01:04:05.123000Z" }));
        let w = kv1(&env, put("forever", json!({ "forever": true }))).await;
        has(&w, json!({ "expiresAt": null }));
        let w = kv1(&env, put("ttl", json!({ "ttlSeconds": 60 }))).await;
        assert_eq!(ms(&w, "expiresAt"), ms(&w, "updatedAt") + 60_000);

        // After creation: the deadline stays fixed from createdAt across writes.
        let first = kv1(&env, put("created", json!({ "afterCreationMs": 60_000 }))).await;
        assert_eq!(ms(&first, "createdAt"), ms(&first, "updatedAt"));
        assert_eq!(ms(&first, "expiresAt"), ms(&first, "createdAt") + 60_000);
        tokio::time::sleep(Duration::from_millis(20)).await;
        let again = kv1(&env, put("created", json!({ "afterCreationMs": 60_000 }))).await;
        has(&again, json!({ "createdAt": first["createdAt"], "expiresAt": first["expiresAt"] }));
        assert!(ms(&again, "updatedAt") > ms(&first, "updatedAt"), "{again}");

        // After update: every write moves the deadline to its own time + ms.
        let w = kv1(&env, put("updated", json!({ "afterUpdateMs": 60_000 }))).await;
        assert_eq!(ms(&w, "expiresAt"), ms(&w, "updatedAt") + 60_000);
        tokio::time::sleep(Duration::from_millis(20)).await;
        let w2 = kv1(&env, put("updated", json!({ "afterUpdateMs": 60_000 }))).await;
        assert_eq!(ms(&w2, "expiresAt"), ms(&w2, "updatedAt") + 60_000);
        assert!(ms(&w2, "expiresAt") > ms(&w, "expiresAt"), "renewed: {w} then {w2}");
        has(&w2, json!({ "createdAt": w["createdAt"] }));
        // An incr naming afterUpdateMs renews as well.
        let incr = json!({ "op": "incr", "ns": "life", "key": "n", "delta": 1, "afterUpdateMs": 60_000 });
        let c = kv1(&env, incr.clone()).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        let c2 = kv1(&env, incr).await;
        assert_eq!((ms(&c2, "expiresAt") - ms(&c2, "updatedAt"), c2["value"].as_f64()), (60_000, Some(2.0)), "{c2}");
        assert!(ms(&c2, "expiresAt") > ms(&c, "expiresAt"));

        // Every read answers createdAt, updatedAt and expiresAt (null: never),
        // in the one fixed-width format of the API.
        let g = kv_get(&env, "life", "updated").await;
        has(
            &g,
            json!({ "found": true, "createdAt": w2["createdAt"], "updatedAt": w2["updatedAt"],
                        "expiresAt": w2["expiresAt"] }),
        );
        has(&kv_get(&env, "life", "forever").await, json!({ "expiresAt": null }));
        assert!(kv_get(&env, "life", "forever").await.as_object().unwrap().contains_key("expiresAt"));
        let many = kv1(&env, json!({ "op": "getMany", "ns": "life", "keys": ["forever", "iso"] })).await;
        let prefix = kv1(&env, json!({ "op": "getPrefix", "ns": "life", "prefix": "up" })).await;
        let scan = kv1(&env, json!({ "op": "scan", "ns": "life" })).await;
        let path = get_body(&env, "/api/v1/kv/life/created").await;
        has(&path, json!({ "found": true, "createdAt": first["createdAt"], "expiresAt": first["expiresAt"] }));
        let path_forever = get_body(&env, "/api/v1/kv/life/forever").await;
        assert_eq!(path_forever.get("expiresAt"), Some(&Value::Null), "{path_forever}");
        let rows: Vec<&Value> = [&many, &prefix, &scan].iter().flat_map(|r| r["rows"].as_array().unwrap()).collect();
        assert_eq!(rows.len(), 2 + 1 + 7, "{many} {prefix} {scan}");
        let mut times: Vec<&str> = Vec::new();
        for r in &rows {
            for f in ["createdAt", "updatedAt"] {
                times.push(r[f].as_str().unwrap_or_else(|| panic!("{f} missing: {r}")));
            }
            assert!(r.as_object().unwrap().contains_key("expiresAt"), "{r}");
            times.extend(r["expiresAt"].as_str());
        }
        times.extend([&g, &path].iter().flat_map(|v| ["createdAt", "updatedAt"].map(|f| v[f].as_str().unwrap())));
        assert_fixed_width("kv read times", &times);
        let forever_row = rows.iter().find(|r| r["key"] == json!("forever")).unwrap();
        has(forever_row, json!({ "expiresAt": null }));

        // A touch renews a live row under its lifetime and keeps its value.
        let before = kv_get(&env, "life", "created").await;
        let t = kv1(&env, json!({ "op": "touch", "ns": "life", "key": "created", "afterUpdateMs": 90_000 })).await;
        has(&t, json!({ "op": "touch", "applied": true, "value": before["value"], "createdAt": before["createdAt"] }));
        assert_eq!(ms(&t, "expiresAt"), ms(&t, "updatedAt") + 90_000, "{t}");
        assert!(t["version"].as_u64() > before["version"].as_u64(), "{t}");
        let absent = kv1(&env, json!({ "op": "touch", "ns": "life", "key": "nobody", "forever": true })).await;
        has(&absent, json!({ "applied": false, "reason": "absent" }));
        has(&kv_get(&env, "life", "nobody").await, json!({ "found": false }));

        // The path route writes take the same lifetimes.
        let a = raw(&env, "PUT", "/api/v1/kv/life/via-path", r#"{"value": 1, "afterUpdateMs": 60000}"#).await;
        assert_eq!(a.0, 200, "{}", a.1);
        let v = get_body(&env, "/api/v1/kv/life/via-path").await;
        assert_eq!(ms(&v, "expiresAt"), ms(&v, "updatedAt") + 60_000);
    });
}

#[test]
fn expiry_is_exact_at_read_time_and_a_past_instant_expires_at_once() {
    paused::run(async {
        let env = Env::paused().await;
        let w = kv1(&env, json!({ "op": "put", "ns": "x", "key": "brief", "value": 1, "afterUpdateMs": 700 })).await;
        let deadline = ms(&w, "expiresAt");
        has(&kv_get(&env, "x", "brief").await, json!({ "found": true }));
        tokio::time::sleep(Duration::from_millis(1_000)).await;
        has(&kv_get(&env, "x", "brief").await, json!({ "found": false }));
        // Expired means absent to a precondition too: a putIfAbsent wins and
        // starts a new life.
        let r =
            kv1(&env, json!({ "op": "putIfAbsent", "ns": "x", "key": "brief", "value": 2, "afterCreationMs": 60_000 }))
                .await;
        has(&r, json!({ "applied": true }));
        assert!(ms(&r, "createdAt") >= deadline, "a fresh creation: {r}");

        let past = json!({ "op": "put", "ns": "x", "key": "past", "value": 1, "expiresAt": "2001-01-01T00:00:00Z" });
        has(&kv1(&env, past).await, json!({ "applied": true, "expiresAt": "2001-01-01T00:00:00.000000Z" }));
        has(&kv_get(&env, "x", "past").await, json!({ "found": false }));
    });
}

#[test]
fn a_namespace_default_lifetime_applies_to_writes_that_name_none() {
    paused::run(async {
        let env = Env::paused().await;
        let bare = |key: &str| json!({ "op": "put", "ns": "sessions", "key": key, "value": { "user": key } });
        // Without a default a write that names no lifetime is refused.
        refused_with(&env, json!([bare("s1")]), "kv_expiry_not_specified").await;

        let set = json!({ "op": "configure", "ns": "sessions", "expiration": { "afterUpdateMs": 60_000 } });
        has(
            &kv1(&env, set).await,
            json!({ "op": "configure", "ns": "sessions", "applied": true,
                                            "expiration": { "afterUpdateMs": 60_000 } }),
        );
        let w = kv1(&env, bare("s1")).await;
        assert_eq!(ms(&w, "expiresAt"), ms(&w, "updatedAt") + 60_000, "{w}");
        let c = kv1(&env, json!({ "op": "incr", "ns": "sessions", "key": "hits", "delta": 1 })).await;
        assert_eq!(ms(&c, "expiresAt"), ms(&c, "updatedAt") + 60_000, "{c}");
        let own =
            kv1(&env, json!({ "op": "put", "ns": "sessions", "key": "pinned", "value": 1, "forever": true })).await;
        has(&own, json!({ "expiresAt": null }));
        // The path route and a transaction's riders take the default too.
        let a = raw(&env, "PUT", "/api/v1/kv/sessions/s2", r#"{"value": 2}"#).await;
        assert_eq!(a.0, 200, "{}", a.1);
        let t = ok_body(&transaction(&env, &json!({ "operations": [], "kv": [bare("s3")] })).await);
        has(&t, json!({ "success": true }));
        let s3 = kv_get(&env, "sessions", "s3").await;
        assert_eq!(ms(&s3, "expiresAt"), ms(&s3, "updatedAt") + 60_000, "{s3}");
        // Another namespace is untouched.
        refused_with(&env, json!([{ "op": "put", "ns": "other", "key": "k", "value": 1 }]), "kv_expiry_not_specified")
            .await;

        // Setting it again replaces it; null clears it.
        let days = json!({ "op": "configure", "ns": "sessions", "expiration": { "ttlSeconds": 86_400 } });
        has(&kv1(&env, days).await, json!({ "expiration": { "ttlSeconds": 86_400 } }));
        let w = kv1(&env, bare("s4")).await;
        assert_eq!(ms(&w, "expiresAt"), ms(&w, "updatedAt") + 86_400_000);
        let clear = json!({ "op": "configure", "ns": "sessions", "expiration": null });
        has(&kv1(&env, clear).await, json!({ "applied": true, "expiration": null }));
        refused_with(&env, json!([bare("s5")]), "kv_expiry_not_specified").await;
        let t = transaction(&env, &json!({ "operations": [], "kv": [bare("s6")] })).await;
        assert_eq!(t.status, 400, "{}", t.text);
        has(t.body(), json!({ "code": "kv_bad_request", "reason": "kv_expiry_not_specified" }));
        has(&kv_get(&env, "sessions", "s5").await, json!({ "found": false }));
        has(&kv_get(&env, "sessions", "s6").await, json!({ "found": false }));

        // A configure and the writes after it in one call: the writes see it.
        let call = kv_results(
            &env,
            json!([{ "op": "configure", "ns": "fresh", "expiration": { "afterCreationMs": 5_000 } },
                   { "op": "put", "ns": "fresh", "key": "k", "value": 1 }]),
        )
        .await;
        assert_eq!(ms(&call[1], "expiresAt"), ms(&call[1], "createdAt") + 5_000, "{call:?}");
    });
}

#[test]
fn transaction_riders_take_every_lifetime() {
    paused::run(async {
        let env = Env::paused().await;
        let kv = json!([
            { "op": "put", "ns": "t", "key": "u", "value": 1, "afterUpdateMs": 60_000 },
            { "op": "put", "ns": "t", "key": "c", "value": 1, "afterCreationMs": 60_000 },
            { "op": "incr", "ns": "t", "key": "n", "delta": 1, "expiresAt": "2099-01-01T00:00:00Z" },
        ]);
        let b = ok_body(&transaction(&env, &json!({ "operations": [], "kv": kv })).await);
        has(&b, json!({ "success": true }));
        let r = b["results"].as_array().unwrap();
        assert_eq!(ms(&r[0], "expiresAt"), ms(&r[0], "updatedAt") + 60_000, "{b}");
        assert_eq!(ms(&r[1], "expiresAt"), ms(&r[1], "createdAt") + 60_000, "{b}");
        has(&r[2], json!({ "expiresAt": "2099-01-01T00:00:00.000000Z" }));
        let bad = json!({ "operations": [], "kv": [{ "op": "put", "ns": "t", "key": "k", "value": 1,
                                                      "afterUpdateMs": 1, "ttlSeconds": 1 }] });
        let a = transaction(&env, &bad).await;
        assert_eq!(a.status, 400, "{}", a.text);
        has(a.body(), json!({ "reason": "kv_expiry_conflict" }));
        let scan = json!({ "operations": [], "kv": [{ "op": "scan", "ns": "t" }] });
        let a = transaction(&env, &scan).await;
        assert_eq!(a.status, 400, "{}", a.text);
        has(a.body(), json!({ "reason": "kv_scan_not_allowed_in_transaction" }));
    });
}

#[test]
fn a_scan_pages_every_live_row_of_a_namespace() {
    paused::run(async {
        let env = Env::paused().await;
        let mut puts: Vec<Value> = ["a", "b", "c", "d", "e"]
            .iter()
            .map(|k| json!({ "op": "put", "ns": "scan", "key": k, "value": k, "forever": true }))
            .collect();
        for k in ["b2", "c2"] {
            puts.push(json!({ "op": "put", "ns": "scan", "key": k, "value": k, "afterUpdateMs": 300 }));
        }
        puts.push(json!({ "op": "put", "ns": "scan-other", "key": "a", "value": 0, "forever": true }));
        kv_results(&env, Value::Array(puts)).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let pages =
            walk_pages(|after| kv1(&env, json!({ "op": "scan", "ns": "scan", "limit": 2, "after": after }))).await;
        assert_eq!(column(&pages, "rows", "key"), ["a", "b", "c", "d", "e"].map(|k| json!(k)), "{pages:?}");
        for p in &pages[..2] {
            has(p, json!({ "op": "scan", "truncated": true, "nextAfter": p["rows"][1]["key"] }));
        }
        has(&pages[2], json!({ "truncated": false, "nextAfter": null }));
        let keys = kv1(&env, json!({ "op": "scan", "ns": "scan", "keysOnly": true, "limit": 1 })).await;
        has(&keys["rows"][0], json!({ "key": "a", "value": null }));
        has(&kv1(&env, json!({ "op": "scan", "ns": "empty" })).await, json!({ "rows": [], "truncated": false }));
    });
}

#[test]
fn malformed_lifetimes_are_refused_with_stable_reasons() {
    paused::run(async {
        let env = Env::paused().await;
        let put = |extra: Value| {
            let mut op = json!({ "op": "put", "ns": "bad", "key": "k", "value": 1 });
            op.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            json!([op])
        };
        let too_late = KV_EXPIRES_AT_MS_MAX + 1;
        let too_long = KV_LIFETIME_MS_MAX + 1;
        let cases = [
            (json!({ "ttlSeconds": 5, "afterUpdateMs": 5_000 }), "kv_expiry_conflict"),
            (json!({ "forever": true, "expiresAt": "2099-01-01T00:00:00Z" }), "kv_expiry_conflict"),
            (json!({ "afterCreationMs": 5, "afterUpdateMs": 5 }), "kv_expiry_conflict"),
            (json!({ "afterUpdateMs": 0 }), "kv_bad_lifetime_ms"),
            (json!({ "afterUpdateMs": -5 }), "kv_bad_lifetime_ms"),
            (json!({ "afterCreationMs": too_long }), "kv_bad_lifetime_ms"),
            (json!({ "afterCreationMs": 1.5 }), "kv_bad_lifetime_ms"),
            (json!({ "afterUpdateMs": "60000" }), "kv_bad_lifetime_ms"),
            (json!({ "expiresAt": "tomorrow" }), "kv_bad_expires_at"),
            (json!({ "expiresAt": "2099-13-01T00:00:00Z" }), "kv_bad_expires_at"),
            (json!({ "expiresAt": "1969-12-31T00:00:00Z" }), "kv_bad_expires_at"),
            (json!({ "expiresAt": 0 }), "kv_bad_expires_at"),
            (json!({ "expiresAt": -1 }), "kv_bad_expires_at"),
            (json!({ "expiresAt": too_late }), "kv_bad_expires_at"),
            (json!({ "expiresAt": 1.5e12 }), "kv_bad_expires_at"),
            (json!({ "expiresAt": true }), "kv_bad_expires_at"),
            (json!({ "ttlSeconds": 0 }), "kv_bad_ttl"),
        ];
        for (extra, reason) in cases {
            refused_with(&env, put(extra), reason).await;
        }
        let incr = json!([{ "op": "incr", "ns": "bad", "key": "n", "delta": 1, "afterUpdateMs": 0 }]);
        refused_with(&env, incr, "kv_bad_lifetime_ms").await;
        let touch = json!([{ "op": "touch", "ns": "bad", "key": "n", "afterUpdateMs": 1, "forever": true }]);
        refused_with(&env, touch, "kv_expiry_conflict").await;
        let touch = json!([{ "op": "touch", "ns": "bad", "key": "n", "forever": true, "expect": 0 }]);
        refused_with(&env, touch, "kv_bad_expect").await;
        refused_with(&env, json!([{ "op": "touch", "ns": "bad", "key": "n" }]), "kv_expiry_not_specified").await;

        let configure = |expiration: Option<Value>| {
            let mut op = json!({ "op": "configure", "ns": "bad" });
            if let Some(e) = expiration {
                op["expiration"] = e;
            }
            json!([op])
        };
        for expiration in [
            None,
            Some(json!(60_000)),
            Some(json!("afterUpdateMs")),
            Some(json!({})),
            Some(json!({ "afterUpdateMS": 60_000 })),
            Some(json!({ "afterUpdateMs": 60_000, "ttlSeconds": 60 })),
            Some(json!({ "afterUpdateMs": 0 })),
            Some(json!({ "afterCreationMs": too_long })),
            Some(json!({ "expiresAt": "2099-01-01T00:00:00Z" })),
            Some(json!({ "forever": false })),
        ] {
            refused_with(&env, configure(expiration), "kv_bad_expiration").await;
        }
        refused_with(&env, json!([{ "op": "configure", "ns": "Bad NS", "expiration": null }]), "kv_bad_namespace")
            .await;

        for limit in [json!(0), json!(-1), json!(KV_SCAN_LIMIT_MAX + 1), json!("ten")] {
            refused_with(&env, json!([{ "op": "scan", "ns": "bad", "limit": limit }]), "kv_bad_limit").await;
        }
        // A refused call wrote nothing: the valid op beside a bad one included.
        let mixed = json!([{ "op": "put", "ns": "bad", "key": "ok", "value": 1, "forever": true },
                           { "op": "put", "ns": "bad", "key": "k", "value": 1, "afterUpdateMs": 0 }]);
        refused_with(&env, mixed, "kv_bad_lifetime_ms").await;
        has(&kv_get(&env, "bad", "ok").await, json!({ "found": false }));
        let nothing = json!([{ "op": "put", "ns": "bad", "key": "ok", "value": 1, "forever": true },
                             { "op": "put", "ns": "bad", "key": "k", "value": 1 }]);
        refused_with(&env, nothing, "kv_expiry_not_specified").await;
        has(&kv_get(&env, "bad", "ok").await, json!({ "found": false }));
    });
}
