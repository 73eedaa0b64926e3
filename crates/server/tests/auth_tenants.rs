//! Tenants from tokens: with tenancy and auth on, a token's tenant claim
//! decides which tenant a request acts for; a header naming another tenant
//! is refused, and a token may be limited to a list of tenants.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;
#[path = "support/tokens.rs"]
mod tokens;

use serde_json::{json, Value};

use support::client;
use support::paused::{self, PausedNode};
use tokens::{hs256, now_s, SECRET};

fn tenant_token(sub: &str, role: &str, tenant: Option<&str>, tenants: Option<&[&str]>) -> String {
    let mut c = json!({ "sub": sub, "role": role, "exp": now_s() + 600 });
    if let Some(t) = tenant {
        c["tenant"] = json!(t);
    }
    if let Some(list) = tenants {
        c["tenants"] = json!(list);
    }
    hs256(&c)
}

async fn req(
    c: &reqwest::Client,
    b: &PausedNode,
    method: &str,
    path: &str,
    token: &str,
    header: Option<&str>,
    body: Option<Value>,
) -> (u16, Value) {
    let mut r = c.request(method.parse().unwrap(), b.url(path)).bearer_auth(token);
    if let Some(h) = header {
        r = r.header("x-queen-tenant", h);
    }
    if let Some(body) = body {
        r = r.json(&body);
    }
    let resp = r.send().await.unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn queues(v: &Value) -> Vec<String> {
    let mut names: Vec<String> = v["queues"]
        .as_array()
        .unwrap_or_else(|| panic!("no queues in {v}"))
        .iter()
        .map(|q| q["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

#[test]
fn two_tokens_two_tenants_never_meet() {
    paused::run(async {
        let b =
            PausedNode::start_env(&[("JWT_ENABLED", "true"), ("JWT_SECRET", SECRET), ("REGINA_TENANCY", "on")]).await;
        let c = client();
        let acme = tenant_token("a", "read-write", Some("acme"), None);
        let globex = tenant_token("g", "read-write", Some("globex"), None);
        let push = |q: &str| json!({ "items": [{ "queue": q, "payload": { "q": q } }] });
        assert_eq!(req(&c, &b, "POST", "/api/v1/push", &acme, None, Some(push("acme-orders"))).await.0, 201);
        assert_eq!(req(&c, &b, "POST", "/api/v1/push", &globex, None, Some(push("globex-orders"))).await.0, 201);
        // Each token sees its own tenant's queues only.
        let (s, v) = req(&c, &b, "GET", "/api/v1/resources/queues", &acme, None, None).await;
        assert_eq!((s, queues(&v)), (200, vec!["acme-orders".to_string()]));
        let (s, v) = req(&c, &b, "GET", "/api/v1/resources/queues", &globex, Some("globex"), None).await;
        assert_eq!((s, queues(&v)), (200, vec!["globex-orders".to_string()]));
        // A header naming the other tenant is refused, for reads and writes.
        for (token, other) in [(&acme, "globex"), (&globex, "acme")] {
            let (s, v) = req(&c, &b, "GET", "/api/v1/resources/queues", token, Some(other), None).await;
            assert_eq!((s, v["error"].as_str()), (403, Some("Insufficient permissions")));
            let (s, _) = req(&c, &b, "POST", "/api/v1/push", token, Some(other), Some(push("sneaky"))).await;
            assert_eq!(s, 403);
        }
        let pop = "/api/v1/pop/queue/globex-orders?wait=false";
        let (_, v) = req(&c, &b, "GET", pop, &acme, None, None).await;
        assert!(v["messages"].as_array().is_none_or(|m| m.is_empty()), "acme's tenant has no such queue: {v}");
        let (s, v) = req(&c, &b, "GET", pop, &globex, None, None).await;
        assert_eq!((s, v["messages"].as_array().map(Vec::len)), (200, Some(1)), "{v}");
        // A token limited to a list picks one of them with the header.
        let both = tenant_token("ops", "read-only", None, Some(&["acme", "globex"]));
        let (s, v) = req(&c, &b, "GET", "/api/v1/resources/queues", &both, Some("globex"), None).await;
        assert_eq!((s, queues(&v)), (200, vec!["globex-orders".to_string()]));
        let (s, v) = req(&c, &b, "GET", "/api/v1/resources/queues", &both, None, None).await;
        assert_eq!(s, 400, "several tenants and none named: {v}");
        assert_eq!(req(&c, &b, "GET", "/api/v1/resources/queues", &both, Some("initech"), None).await.0, 403);
        // A token without tenant claims acts for the default tenant; only an
        // admin token may name any tenant.
        let plain = tenant_token("p", "read-write", None, None);
        let (s, v) = req(&c, &b, "GET", "/api/v1/resources/queues", &plain, None, None).await;
        assert_eq!((s, queues(&v)), (200, Vec::<String>::new()));
        assert_eq!(req(&c, &b, "GET", "/api/v1/resources/queues", &plain, Some("acme"), None).await.0, 403);
        let admin = tenant_token("root", "admin", None, None);
        let (s, v) = req(&c, &b, "GET", "/api/v1/resources/queues", &admin, Some("acme"), None).await;
        assert_eq!((s, queues(&v)), (200, vec!["acme-orders".to_string()]));
        // A bad tenant name in a token is a bad token.
        let bad = tenant_token("x", "read-write", Some("a/b"), None);
        let (s, v) = req(&c, &b, "GET", "/api/v1/resources/queues", &bad, None, None).await;
        assert_eq!((s, v["error"].as_str()), (401, Some("Invalid token tenant")));
    });
}
