//! `regina backup` under load and `regina restore`: a backup taken while
//! pushes go on, restored into a new data directory, holds every message
//! answered before the backup began, in both Raft groups, each once and at
//! the offset its push was answered with; KV written before it is there too.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use support::{Broker, Workspace};

/// Tenants, each pinned to its own Raft group.
const TENANTS: [&str; 2] = ["alpha", "beta"];
const ENV: &[(&str, &str)] =
    &[("REGINA_RAFT_GROUPS", "2"), ("REGINA_TENANCY", "on"), ("REGINA_TENANT_GROUPS", "alpha=0,beta=1")];
const PARTITIONS: usize = 3;

/// (tenant, partition, transaction id) → the offset its push was answered with.
type Answered = BTreeMap<(String, String, String), u64>;

async fn push_loop(base: String, tenant: &'static str, stop: Arc<AtomicBool>, answered: Arc<Mutex<Answered>>) {
    let c = reqwest::Client::new();
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) && n < 20_000 {
        let items: Vec<Value> = (0..5)
            .map(|i| {
                let k = n + i;
                json!({"queue": "orders", "partition": format!("p{}", k % PARTITIONS as u64),
                       "transactionId": format!("{tenant}-{k}"), "payload": {"n": k, "pad": "x".repeat(200)}})
            })
            .collect();
        n += 5;
        let resp = c
            .post(format!("{base}/api/v1/push"))
            .header("x-queen-tenant", tenant)
            .json(&json!({ "items": items }))
            .timeout(Duration::from_secs(10))
            .send()
            .await;
        let Ok(resp) = resp else { continue };
        if !resp.status().is_success() {
            continue;
        }
        let body: Value = resp.json().await.unwrap();
        let mut a = answered.lock().unwrap();
        for (item, r) in items.iter().zip(body.as_array().unwrap()) {
            if r["status"] == "queued" {
                let key = (
                    tenant.to_string(),
                    item["partition"].as_str().unwrap().to_string(),
                    item["transactionId"].as_str().unwrap().to_string(),
                );
                a.insert(key, r["offset"].as_u64().unwrap_or(u64::MAX));
            }
        }
    }
}

/// Every record of `tenant`'s partition, by offset, as (offset, transaction id).
async fn read_partition(c: &reqwest::Client, base: &str, tenant: &str, partition: &str) -> Vec<(u64, String)> {
    let mut out = Vec::new();
    let mut offset = 0u64;
    loop {
        let body: Value = c
            .post(format!("{base}/api/v1/fetch"))
            .header("x-queen-tenant", tenant)
            .json(&json!({"entries": [{"queue": "orders", "partition": partition, "offset": offset}]}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let records = body["entries"][0]["records"].as_array().cloned().unwrap_or_default();
        if records.is_empty() {
            return out;
        }
        for r in records {
            let o = r["offset"].as_u64().unwrap();
            out.push((o, r["transactionId"].as_str().unwrap().to_string()));
            offset = o + 1;
        }
    }
}

fn regina(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_regina")).args(args).output().expect("run regina")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_backup_under_load_restores_every_answered_message() {
    let ws = Workspace::new();
    let broker = Broker::start_with(&ws, ENV);
    let base = broker.base();
    let c = reqwest::Client::new();
    for t in TENANTS {
        let r = c
            .put(format!("{base}/api/v1/kv/settings/limit"))
            .header("x-queen-tenant", t)
            .json(&json!({"value": {"tenant": t}, "forever": true}))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    }

    let stop = Arc::new(AtomicBool::new(false));
    let answered = Arc::new(Mutex::new(Answered::new()));
    let loaders: Vec<_> =
        TENANTS.iter().map(|t| tokio::spawn(push_loop(base.clone(), t, stop.clone(), answered.clone()))).collect();
    // Some load first, so the backup has data and runs under writes.
    let started = Instant::now();
    while answered.lock().unwrap().len() < 300 && started.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let before: Answered = answered.lock().unwrap().clone();
    assert!(before.len() >= 300, "the load answered only {} pushes", before.len());

    let backup_dir = tempfile::tempdir().unwrap();
    let dir = backup_dir.path().join("b");
    let out = {
        let (base, dir) = (base.clone(), dir.clone());
        tokio::task::spawn_blocking(move || regina(&["backup", "--url", &base, dir.to_str().unwrap()])).await.unwrap()
    };
    let during = answered.lock().unwrap().len();
    assert!(
        out.status.success(),
        "backup failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // Writes went on while it ran.
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::Relaxed);
    for l in loaders {
        l.await.unwrap();
    }
    let after = answered.lock().unwrap().len();
    assert!(after > before.len(), "no push was answered while the backup ran ({} then {after})", before.len());
    let manifest: Value = serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["raftGroups"], 2, "{manifest}");

    // A restore needs an empty target.
    let target = Workspace::new();
    std::fs::create_dir_all(target.data_dir()).unwrap();
    std::fs::write(target.data_dir().join("stray"), b"x").unwrap();
    let refused = regina(&["restore", dir.to_str().unwrap(), "--data-dir", target.data_dir().to_str().unwrap()]);
    assert!(!refused.status.success(), "a restore into a non-empty directory must be refused");
    std::fs::remove_file(target.data_dir().join("stray")).unwrap();
    let out = regina(&["restore", dir.to_str().unwrap(), "--data-dir", target.data_dir().to_str().unwrap()]);
    assert!(out.status.success(), "restore failed: {}", String::from_utf8_lossy(&out.stderr));
    // The key goes with the data, as an operator would copy it.
    std::fs::copy(ws.data_dir().join("encryption.key"), target.data_dir().join("encryption.key")).unwrap();

    let restored = Broker::start_with(&target, ENV);
    let rbase = restored.base();
    let mut found = 0usize;
    for t in TENANTS {
        let kv: Value = c
            .get(format!("{rbase}/api/v1/kv/settings/limit"))
            .header("x-queen-tenant", t)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(kv["value"]["tenant"], t, "{kv}");
        for p in 0..PARTITIONS {
            let partition = format!("p{p}");
            let records = read_partition(&c, &rbase, t, &partition).await;
            // Gapless from 0, each transaction id once.
            for (i, (o, _)) in records.iter().enumerate() {
                assert_eq!(*o, i as u64, "tenant {t} partition {partition}: offsets must be gapless");
            }
            let by_txn: BTreeMap<&str, u64> = records.iter().map(|(o, id)| (id.as_str(), *o)).collect();
            assert_eq!(by_txn.len(), records.len(), "tenant {t} partition {partition}: a transaction id twice");
            for ((bt, bp, id), offset) in before.iter().filter(|((bt, bp, _), _)| bt == t && *bp == partition) {
                let got = by_txn.get(id.as_str());
                assert_eq!(
                    got,
                    Some(offset),
                    "{bt}/{bp}/{id}, answered at offset {offset} before the backup, is missing or moved"
                );
                found += 1;
            }
        }
    }
    assert_eq!(found, before.len());
    // A group the node does not have is refused, not served by another.
    let r = c.get(format!("{rbase}/api/v1/system/backup/7")).send().await.unwrap();
    assert_eq!(r.status(), 404);
    assert_eq!(r.json::<Value>().await.unwrap()["code"], "no_such_group");
    // The restored node takes writes as the sole voter of a new cluster.
    let r = c
        .post(format!("{rbase}/api/v1/push"))
        .header("x-queen-tenant", "beta")
        .json(&json!({"items": [{"queue": "orders", "partition": "p0", "payload": {"after": "restore"}}]}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    eprintln!("answered before the backup: {}, while it ran: {}, in all: {after}", before.len(), during - before.len());
    drop(restored);
    drop(broker);
}
