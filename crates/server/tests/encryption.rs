//! At-rest encryption: a queue with `encryptionEnabled` keeps no plaintext
//! payload in any file under the data directory, and pops answer plaintext,
//! also after a restart.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;

use serde_json::json;
use support::*;

const SECRET: &str = "card-4242-4242-4242-4242";

#[tokio::test]
async fn an_encrypted_queue_keeps_no_plaintext_on_disk() {
    let ws = Workspace::new();
    let mut broker = Broker::start(&ws);
    let c = client();
    let base = broker.base();
    configure(&c, &base, "vault", json!({ "encryptionEnabled": true })).await;
    configure(&c, &base, "open", json!({})).await;
    let res = push(
        &c,
        &base,
        vec![
            json!({ "queue": "vault", "payload": { "secret": SECRET }, "transactionId": "v1" }),
            json!({ "queue": "open", "payload": { "visible": "in-the-clear-marker" }, "transactionId": "o1" }),
        ],
    )
    .await;
    assert!(res.iter().all(|r| r["status"] == "queued"), "{res:?}");

    let got = messages(&pop(&c, &base, "/api/v1/pop/queue/vault?wait=false&autoAck=true").await);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["data"]["secret"], SECRET, "a pop must answer plaintext");

    // Stop cleanly so every file is written out, then look at every byte.
    broker.terminate(std::time::Duration::from_secs(10));
    let dir = ws.data_dir();
    assert!(files_containing(&dir, SECRET.as_bytes()).is_empty(), "plaintext found on disk");
    assert!(!files_containing(&dir, b"in-the-clear-marker").is_empty(), "the check would not see plaintext at all");

    broker.restart();
    let base = broker.base();
    // A fresh client: the old one's pooled connections died with the broker.
    let c = client();
    let (status, detail) = get_json(&c, &format!("{base}/api/v1/dlq?queue=vault")).await;
    assert_eq!(status, 200, "{detail}");
    configure(&c, &base, "vault", json!({ "encryptionEnabled": true })).await;
    push(&c, &base, vec![json!({ "queue": "vault", "payload": SECRET, "transactionId": "v2" })]).await;
    let again = messages(&pop(&c, &base, "/api/v1/pop/queue/vault?wait=false&batch=10").await);
    assert_eq!(again.len(), 1, "{again:?}");
    assert_eq!(again[0]["data"], SECRET, "the key survives a restart");
}
