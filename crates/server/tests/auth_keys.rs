//! Every way a node accepts a caller: HS256/384/512 with a secret, RS256
//! from a PEM public key, EdDSA from a JWKS file (by `kid`) and from a PEM,
//! and static API keys from a key file that SIGHUP reloads.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;
#[path = "support/tokens.rs"]
mod tokens;

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use support::{client, Broker, Workspace};
use tokens::{claims, ed25519_jwks, ed25519_key, ed25519_pem, fixture, rsa_key, sign, Signer, SECRET};

async fn status(c: &reqwest::Client, b: &Broker, path: &str, token: &str) -> (u16, Value) {
    let resp = c.get(b.url(path)).bearer_auth(token).send().await.unwrap();
    let s = resp.status().as_u16();
    (s, resp.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_algorithm_verifies_with_its_own_key_only() {
    let ws = Workspace::new();
    let dir = tempfile::tempdir().unwrap();
    let (ed_jwks, ed_pem, stranger) = (ed25519_key(), ed25519_key(), ed25519_key());
    let jwks = dir.path().join("keys.jwks");
    std::fs::write(&jwks, ed25519_jwks(&ed_jwks, "ed-1")).unwrap();
    let pem = dir.path().join("keys.pem");
    std::fs::write(&pem, fixture("rsa-test.pub.pem") + &ed25519_pem(&ed_pem)).unwrap();
    let b = Broker::start_with(
        &ws,
        &[
            ("JWT_ENABLED", "true"),
            ("JWT_SECRET", SECRET),
            ("REGINA_JWT_PUBLIC_KEY_FILE", pem.to_str().unwrap()),
            ("REGINA_JWT_JWKS_FILE", jwks.to_str().unwrap()),
        ],
    );
    let c = client();
    let cl = claims("svc", "read-only");
    let path = "/api/v1/resources/queues";
    let rsa = rsa_key("rsa-test.key.pem");
    let accepted = [
        ("HS256", sign(&Signer::Hmac("HS256", SECRET.as_bytes()), &cl)),
        ("HS384", sign(&Signer::Hmac("HS384", SECRET.as_bytes()), &cl)),
        ("HS512", sign(&Signer::Hmac("HS512", SECRET.as_bytes()), &cl)),
        ("RS256", sign(&Signer::Rsa(&rsa), &cl)),
        ("EdDSA (JWKS, kid)", sign(&Signer::Ed(&ed_jwks, Some("ed-1")), &cl)),
        ("EdDSA (JWKS, no kid)", sign(&Signer::Ed(&ed_jwks, None), &cl)),
        ("EdDSA (PEM)", sign(&Signer::Ed(&ed_pem, None), &cl)),
    ];
    for (what, t) in &accepted {
        assert_eq!(status(&c, &b, path, t).await.0, 200, "{what}");
    }
    let other_rsa = rsa_key("rsa-other.key.pem");
    let refused = [
        ("RS256 with another key", sign(&Signer::Rsa(&other_rsa), &cl)),
        ("EdDSA with another key", sign(&Signer::Ed(&stranger, None), &cl)),
        // A kid no key carries: the JWKS key (kid ed-1) is not tried.
        ("EdDSA with a kid of no key", sign(&Signer::Ed(&ed_jwks, Some("ed-2")), &cl)),
        // The public key used as an HMAC secret (algorithm confusion).
        ("HS256 keyed with the public key", sign(&Signer::Hmac("HS256", fixture("rsa-test.pub.pem").as_bytes()), &cl)),
    ];
    for (what, t) in &refused {
        let (s, v) = status(&c, &b, path, t).await;
        assert_eq!((s, v["error"].as_str()), (401, Some("Invalid token signature")), "{what}");
    }
    drop(b);
    // Naming the algorithms narrows them.
    let ws = Workspace::new();
    let b = Broker::start_with(
        &ws,
        &[("JWT_ENABLED", "true"), ("JWT_ALGORITHM", "RS256"), ("JWT_PUBLIC_KEY", &fixture("rsa-test.pub.pem"))],
    );
    assert_eq!(status(&c, &b, path, &accepted[3].1).await.0, 200);
    let (s, v) = status(&c, &b, path, &accepted[0].1).await;
    assert_eq!((s, v["error"].as_str()), (401, Some("Invalid token algorithm")));
}

fn key_file(entries: &[(&str, &str, &str, Option<&str>)]) -> String {
    let keys: Vec<Value> = entries
        .iter()
        .map(|(name, secret, role, tenant)| {
            let hash: String = ring::digest::digest(&ring::digest::SHA256, secret.as_bytes())
                .as_ref()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            let mut k = json!({ "name": name, "sha256": hash, "role": role });
            if let Some(t) = tenant {
                k["tenant"] = json!(t);
            }
            k
        })
        .collect();
    json!({ "keys": keys }).to_string()
}

fn hangup(b: &Broker) {
    let ok = std::process::Command::new("kill").args(["-HUP", &b.pid().unwrap().to_string()]).status().unwrap();
    assert!(ok.success());
}

/// Waits until `token` on `path` answers `want`.
async fn eventually(c: &reqwest::Client, b: &Broker, path: &str, token: &str, want: u16) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (s, _) = status(c, b, path, token).await;
        if s == want {
            return;
        }
        assert!(Instant::now() < deadline, "{path} with {token} still answers {s}, not {want}\n{}", b.log_tail(2000));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_keys_carry_roles_and_are_reloaded_on_sighup() {
    let ws = Workspace::new();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("keys.json");
    std::fs::write(&file, key_file(&[("billing", "billing-secret-1", "write-only", None)])).unwrap();
    // Keys alone turn checks on; no JWT key is needed.
    let b = Broker::start_with(&ws, &[("REGINA_API_KEYS_FILE", file.to_str().unwrap())]);
    let c = client();
    let push = json!({ "items": [{ "queue": "bills", "payload": { "n": 1 }, "producerSub": "mallory" }] });
    let resp = c.post(b.url("/api/v1/push")).bearer_auth("billing-secret-1").json(&push).send().await.unwrap();
    assert_eq!(resp.status(), 201);
    assert_eq!(status(&c, &b, "/api/v1/resources/queues", "billing-secret-1").await.0, 403, "write-only");
    let (s, v) = status(&c, &b, "/api/v1/resources/queues", "billing-secret-2").await;
    assert_eq!((s, v["error"].as_str()), (401, Some("Invalid API key")));
    // A new file: billing's key is replaced, an operator key appears.
    std::fs::write(
        &file,
        key_file(&[("billing", "billing-secret-2", "write-only", None), ("ops", "ops-secret", "admin", None)]),
    )
    .unwrap();
    hangup(&b);
    eventually(&c, &b, "/api/v1/resources/queues", "ops-secret", 200).await;
    assert_eq!(status(&c, &b, "/api/v1/resources/queues", "billing-secret-1").await.0, 401, "the old key is gone");
    // The stamp names the key.
    let resp =
        c.get(b.url("/api/v1/pop/queue/bills?wait=false&autoAck=true")).bearer_auth("ops-secret").send().await.unwrap();
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["messages"][0]["producerSub"], "key:billing", "{v}");
    // A broken file keeps the keys in force.
    std::fs::write(&file, "{ not json").unwrap();
    hangup(&b);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(status(&c, &b, "/api/v1/resources/queues", "ops-secret").await.0, 200);
    assert!(b.log_tail(4000).contains("not reloaded"), "{}", b.log_tail(2000));
}
