//! Bearer tokens against a real server: every route of the router has a
//! role class, every role opens exactly its classes, bad tokens are refused
//! with the messages the clients show, skip paths need no token, and pushed
//! messages carry the token's `sub` as `producerSub` whatever the body says.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;
#[path = "support/tokens.rs"]
mod tokens;

use serde_json::{json, Value};

use regina_server::http::classes::{Class, ROUTE_CLASSES};
use support::client;
use support::paused::{self, PausedNode};
use tokens::{claims, hs256, now_s, sign, token, Signer, SECRET};

async fn jwt_node(extra: &[(&str, &str)]) -> PausedNode {
    let mut env = vec![("JWT_ENABLED", "true"), ("JWT_SECRET", SECRET)];
    env.extend_from_slice(extra);
    PausedNode::start_env(&env).await
}

/// A path the route template matches.
fn concrete(template: &str) -> String {
    template
        .split('/')
        .map(|seg| match seg.strip_prefix('{') {
            Some(p) if p.starts_with('*') => "k1/k2".to_string(),
            Some(_) => "x1".to_string(),
            None => seg.to_string(),
        })
        .collect::<Vec<_>>()
        .join("/")
}

async fn call(c: &reqwest::Client, b: &PausedNode, method: &str, path: &str, bearer: Option<&str>) -> (u16, Value) {
    let url = b.url(&format!("{}?wait=false&timeout=100", concrete(path)));
    let mut req = c.request(method.parse().unwrap(), &url);
    if method == "POST" || method == "PUT" {
        req = req.json(&json!({}));
    }
    if let Some(t) = bearer {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.unwrap_or_else(|e| panic!("{method} {path}: {e}"));
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// The default skip paths that are routes (`/` is the dashboard's page).
const SKIPPED: [&str; 4] = ["/health", "/metrics", "/metrics/prometheus", "/"];

#[test]
fn every_route_has_a_class_and_each_role_opens_only_its_own() {
    paused::run(async {
        let b = jwt_node(&[]).await;
        let c = client();
        let paths = regina_server::http::route_paths();
        for (_, path, _) in ROUTE_CLASSES {
            assert!(paths.iter().any(|p| p == path), "the class table names {path}, which the router does not serve");
        }
        // Walk the router: every path it serves, every method, with a valid
        // token that holds no role.
        let nobody = token("nobody", "no-such-role");
        let mut served = 0;
        for path in &paths {
            assert!(ROUTE_CLASSES.iter().any(|(_, p, _)| p == path), "the router serves {path}, which has no class");
            for method in ["GET", "POST", "PUT", "DELETE", "PATCH"] {
                let (status, body) = call(&c, &b, method, path, Some(&nobody)).await;
                assert_ne!(body["code"], "unclassified_route", "{method} {path}: {body}");
                let class = ROUTE_CLASSES.iter().find(|(m, p, _)| *m == method && p == path).map(|(_, _, c)| *c);
                match class {
                    _ if path.starts_with("/internal/") => {
                        assert_eq!(status, 404, "{method} {path} on the client port: {body}")
                    }
                    None => assert_eq!(status, 405, "{method} {path} is served but has no class: {status} {body}"),
                    Some(_) if SKIPPED.contains(&path.as_str()) => {
                        assert!(![401, 403].contains(&status), "{method} {path} is a skip path: {status} {body}");
                        served += 1;
                    }
                    Some(_) => {
                        assert_eq!(status, 403, "{method} {path} let a token without a role in: {body}");
                        assert_eq!(body["error"], "Insufficient permissions");
                        served += 1;
                    }
                }
            }
        }
        assert_eq!(served, ROUTE_CLASSES.iter().filter(|(_, p, _)| !p.starts_with("/internal/")).count());
        // Every role on every route: it opens exactly the classes it should.
        let roles = [
            ("admin", vec![Class::Read, Class::Write, Class::Produce, Class::Admin]),
            ("read-write", vec![Class::Read, Class::Write, Class::Produce]),
            ("read-only", vec![Class::Read]),
            ("write-only", vec![Class::Produce]),
        ];
        for (role, opens) in &roles {
            let t = token(&format!("a-{role}"), role);
            for (method, path, class) in ROUTE_CLASSES.iter().filter(|(_, p, _)| !p.starts_with("/internal/")) {
                let (status, body) = call(&c, &b, method, path, Some(&t)).await;
                if opens.contains(class) || SKIPPED.contains(path) {
                    assert!(
                        ![401, 403, 500].contains(&status),
                        "{role} on {method} {path} ({class:?}): {status} {body}"
                    );
                } else {
                    assert_eq!(status, 403, "{role} on {method} {path} ({class:?}): {body}");
                }
            }
        }
        // The roles array counts too, and roles add up.
        let both = hs256(&json!({ "sub": "x", "roles": ["read-only", "write-only"], "exp": now_s() + 60 }));
        assert_eq!(call(&c, &b, "GET", "/api/v1/resources/queues", Some(&both)).await.0, 200);
        let (s, _) = call(&c, &b, "DELETE", "/api/v1/resources/queues/{q}", Some(&both)).await;
        assert_eq!(s, 403);
    });
}

#[test]
fn bad_tokens_are_refused_with_the_clients_messages() {
    paused::run(async {
        let b = jwt_node(&[("JWT_ISSUER", "issuer-1"), ("JWT_AUDIENCE", "regina"), ("JWT_CLOCK_SKEW", "5")]).await;
        let c = client();
        let good = |extra: Value| {
            let mut cl = claims("alice", "read-write");
            cl["iss"] = json!("issuer-1");
            cl["aud"] = json!(["other", "regina"]);
            for (k, v) in extra.as_object().unwrap() {
                cl[k] = v.clone();
            }
            cl
        };
        let path = "/api/v1/resources/queues";
        let refused = |(status, body): (u16, Value), want: &str| {
            assert_eq!(status, 401, "{body}");
            assert_eq!(body["error"], want, "{body}");
        };
        assert_eq!(call(&c, &b, "GET", path, Some(&hs256(&good(json!({}))))).await.0, 200);
        refused(call(&c, &b, "GET", path, None).await, "Authentication required");
        let resp = c.get(b.url(path)).header("authorization", "Basic YTpi").send().await.unwrap();
        assert_eq!(resp.status(), 401);
        assert_eq!(resp.headers()["www-authenticate"], "Bearer");
        refused(call(&c, &b, "GET", path, Some("not-a-token")).await, "Invalid token");
        let expired = hs256(&good(json!({ "exp": now_s() - 10 })));
        refused(call(&c, &b, "GET", path, Some(&expired)).await, "Token has expired");
        let in_leeway = hs256(&good(json!({ "exp": now_s() - 2 })));
        assert_eq!(call(&c, &b, "GET", path, Some(&in_leeway)).await.0, 200, "inside the 5 s leeway");
        let early = hs256(&good(json!({ "nbf": now_s() + 60 })));
        refused(call(&c, &b, "GET", path, Some(&early)).await, "Token is not yet valid");
        let wrong_key = sign(&Signer::Hmac("HS256", b"another secret"), &good(json!({})));
        refused(call(&c, &b, "GET", path, Some(&wrong_key)).await, "Invalid token signature");
        let wrong_iss = hs256(&good(json!({ "iss": "issuer-2" })));
        refused(call(&c, &b, "GET", path, Some(&wrong_iss)).await, "Invalid token issuer");
        let wrong_aud = hs256(&good(json!({ "aud": "elsewhere" })));
        refused(call(&c, &b, "GET", path, Some(&wrong_aud)).await, "Invalid token audience");
        let mut no_exp = good(json!({}));
        no_exp.as_object_mut().unwrap().remove("exp");
        refused(call(&c, &b, "GET", path, Some(&hs256(&no_exp))).await, "Token has no expiry");
        // The longer HMACs, from the same secret.
        for alg in ["HS384", "HS512"] {
            let t = sign(&Signer::Hmac(alg, SECRET.as_bytes()), &good(json!({})));
            assert_eq!(call(&c, &b, "GET", path, Some(&t)).await.0, 200, "{alg}");
        }
        // Refusals come before routing: unknown paths want a token too.
        refused(call(&c, &b, "GET", "/api/v1/nowhere", None).await, "Authentication required");
    });
}

#[test]
fn skip_paths_follow_queens_prefix_rule() {
    paused::run(async {
        let b = jwt_node(&[]).await;
        let c = client();
        for path in ["/health", "/metrics", "/metrics/prometheus"] {
            let (s, body) = call(&c, &b, "GET", path, None).await;
            assert_eq!(s, 200, "{path}: {body}");
        }
        // `/` skips the root only (the dashboard's page); a skip path is not
        // a prefix unless it ends in `/`.
        assert_eq!(call(&c, &b, "GET", "/", None).await.0, 200);
        // The dashboard's files need no token, whatever the skip paths;
        // other names under `/dashboard/` do.
        assert_eq!(call(&c, &b, "GET", "/dashboard/app.js", None).await.0, 200);
        for path in ["/healthz", "/health/x", "/metrics/other", "/api/v1/status", "/dashboard/x.js"] {
            assert_eq!(call(&c, &b, "GET", path, None).await.0, 401, "{path}");
        }
        drop(b);
        let b = jwt_node(&[("JWT_SKIP_PATHS", "/health,/api/v1/status/")]).await;
        assert_eq!(call(&c, &b, "GET", "/api/v1/status/queues", None).await.0, 200, "under a skip prefix");
        assert_eq!(call(&c, &b, "GET", "/api/v1/status", None).await.0, 401, "the prefix itself is longer");
        assert_eq!(call(&c, &b, "GET", "/metrics", None).await.0, 401, "no longer skipped");
        assert_eq!(call(&c, &b, "GET", "/", None).await.0, 401, "the page follows the skip paths");
        assert_eq!(call(&c, &b, "GET", "/dashboard/vendor/uPlot.min.css", None).await.0, 200, "its files do not");
    });
}

async fn pop_producer(c: &reqwest::Client, b: &PausedNode, queue: &str, bearer: Option<&str>) -> Vec<Value> {
    let mut req = c.get(b.url(&format!("/api/v1/pop/queue/{queue}?batch=10&wait=false&autoAck=true")));
    if let Some(t) = bearer {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let v: Value = resp.json().await.unwrap();
    v["messages"].as_array().unwrap().iter().map(|m| m["producerSub"].clone()).collect()
}

#[test]
fn pushes_carry_the_tokens_subject_and_never_the_bodys() {
    paused::run(async {
        let b = jwt_node(&[]).await;
        let c = client();
        let alice = token("alice", "read-write");
        let bob = token("bob", "write-only");
        let send = |t: &str, path: &str, body: Value| c.post(b.url(path)).bearer_auth(t).json(&body).send();
        let item = |tx: &str| json!({ "queue": "stamped", "transactionId": tx, "payload": { "tx": tx }, "producerSub": "mallory" });
        assert_eq!(send(&alice, "/api/v1/push", json!({ "items": [item("a1")] })).await.unwrap().status(), 201);
        assert_eq!(send(&bob, "/api/v1/push", json!({ "items": [item("b1")] })).await.unwrap().status(), 201);
        let step = json!({ "operations": [{ "type": "push", "items": [item("a2")] }] });
        let resp = send(&alice, "/api/v1/transaction", step).await.unwrap();
        assert_eq!(resp.status(), 200, "{}", resp.text().await.unwrap());
        // An encrypted queue hides the stamp with the payload and reads it back.
        let conf = json!({ "queue": "sealed", "options": { "encryptionEnabled": true } });
        assert_eq!(send(&alice, "/api/v1/configure", conf).await.unwrap().status(), 200);
        let sealed = json!({ "items": [{ "queue": "sealed", "payload": { "p": 1 }, "producerSub": "mallory" }] });
        assert_eq!(send(&bob, "/api/v1/push", sealed).await.unwrap().status(), 201);
        // The views show who produced each message.
        let (s, view) = {
            let r = c.get(b.url("/api/v1/messages?queue=stamped")).bearer_auth(&alice).send().await.unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        };
        assert_eq!(s, 200);
        let mut subs: Vec<String> = view["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["producerSub"].as_str().unwrap().to_string())
            .collect();
        subs.sort();
        assert_eq!(subs, vec!["alice", "alice", "bob"], "{view}");
        let popped = pop_producer(&c, &b, "stamped", Some(&alice)).await;
        assert_eq!(popped, vec![json!("alice"), json!("bob"), json!("alice")]);
        assert_eq!(pop_producer(&c, &b, "sealed", Some(&alice)).await, vec![json!("bob")]);
        // The payload itself reads back untouched.
        let r = c.get(b.url("/api/v1/messages?queue=sealed")).bearer_auth(&alice).send().await.unwrap();
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["messages"][0]["data"], json!({ "p": 1 }), "{v}");
    });
}

#[test]
fn without_auth_nothing_is_stamped_and_no_token_is_asked_for() {
    paused::run(async {
        let b = PausedNode::start().await;
        let c = client();
        let body = json!({ "items": [{ "queue": "plain", "payload": { "a": 1 }, "producerSub": "mallory" }] });
        let resp = c.post(b.url("/api/v1/push")).bearer_auth("ignored").json(&body).send().await.unwrap();
        assert_eq!(resp.status(), 201);
        assert_eq!(pop_producer(&c, &b, "plain", None).await, vec![Value::Null]);
    });
}
