//! A full disk: past the high watermark a node refuses writes that would
//! grow storage with 507 `storage_full`, keeps serving reads, acks and
//! deletes, says so in `/health`, and takes writes again once space is back,
//! without a restart; nothing answered is lost.
//!
//! The data directory is a small tmpfs of its own, filled from outside by a
//! file, as another process on the machine would. Mounting needs root: the
//! test command runs as root (it installs Debian packages); elsewhere this
//! test fails and says why rather than passing without having run.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{Broker, Workspace};

/// Big enough for the WAL's preallocated segments with room to spare.
const TMPFS_MIB: u64 = 512;

/// A tmpfs mounted over a directory for the test's life.
struct Tmpfs {
    at: PathBuf,
}

impl Tmpfs {
    fn mount(at: &Path, mib: u64) -> Tmpfs {
        std::fs::create_dir_all(at).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(at)
            .output()
            .expect("run mount");
        assert!(
            out.status.success(),
            "this test mounts a {mib} MiB tmpfs as the data directory and needs root to do so: mount said {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        Tmpfs { at: at.to_path_buf() }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.at).status();
    }
}

async fn health(c: &reqwest::Client, b: &Broker) -> (u16, Value) {
    let r = c.get(b.url("/health")).send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

async fn push(c: &reqwest::Client, b: &Broker, txn: &str) -> (u16, Value) {
    push_payload(c, b, txn, &json!({ "txn": txn })).await
}

async fn push_payload(c: &reqwest::Client, b: &Broker, txn: &str, payload: &Value) -> (u16, Value) {
    let item = json!({ "queue": "full", "partition": "p", "transactionId": txn, "payload": payload });
    let r = c.post(b.url("/api/v1/push")).json(&json!({ "items": [item] })).send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

/// Frees the space `filler` took, waits for the node to say so and checks
/// that a push is taken again, without a restart; then restarts the node
/// and returns every message it holds (a fresh group's pop), with their
/// transaction ids sorted.
async fn free_space_then_restart(c: &reqwest::Client, b: &mut Broker, filler: &Path) -> (Vec<Value>, Vec<String>) {
    std::fs::remove_file(filler).unwrap();
    wait_full(c, b, false).await;
    let (status, r) = push(c, b, "after").await;
    assert_eq!(status, 201, "writes resume once space is back, without a restart: {r}");

    b.terminate(Duration::from_secs(10)).expect("a clean stop");
    b.restart();
    let url = b.url("/api/v1/pop/queue/full?wait=false&batch=100&consumerGroup=audit&subscriptionMode=all");
    let v: Value = c.get(url).send().await.unwrap().json().await.unwrap();
    let msgs = v["messages"].as_array().unwrap().clone();
    let mut txns: Vec<String> = msgs.iter().map(|m| m["transactionId"].as_str().unwrap().to_string()).collect();
    txns.sort();
    (msgs, txns)
}

/// Waits until `/health` reports the disk full (or not).
async fn wait_full(c: &reqwest::Client, b: &Broker, full: bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, h) = health(c, b).await;
        if h["storageFull"] == json!(full) {
            assert_eq!(status, if full { 503 } else { 200 }, "{h}");
            return h;
        }
        assert!(Instant::now() < deadline, "the disk did not read as full={full} within 20 s: {h}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Percent of the filesystem of `dir` in use, as `df` counts it.
fn used_pct(dir: &Path) -> f64 {
    let out = Command::new("df").args(["-B1", "--output=used,avail"]).arg(dir).output().expect("run df");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let nums: Vec<f64> =
        text.lines().nth(1).expect("a df line").split_whitespace().map(|n| n.parse().unwrap()).collect();
    nums[0] * 100.0 / (nums[0] + nums[1])
}

/// Fills the filesystem of `dir` to at least `pct` percent with one file,
/// a MiB at a time (the node's own files may still be growing).
fn fill_to(dir: &Path, pct: f64) -> PathBuf {
    use std::io::Write;
    let filler = dir.join("filler");
    let mut f = std::fs::File::create(&filler).unwrap();
    let chunk = vec![0x5a_u8; 1 << 20];
    while used_pct(dir) < pct {
        f.write_all(&chunk).unwrap();
        f.flush().unwrap();
    }
    filler
}

async fn pop_all(c: &reqwest::Client, b: &Broker) -> Vec<Value> {
    let url = b.url("/api/v1/pop/queue/full?wait=false&batch=100&consumerGroup=reader&subscriptionMode=all");
    let r = c.get(url).send().await.unwrap();
    assert!(r.status() == 200 || r.status() == 204, "a pop on a full disk answered {}", r.status());
    if r.status() == 204 {
        return Vec::new();
    }
    let v: Value = r.json().await.unwrap();
    v["messages"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_refuses_growing_writes_keeps_reads_and_resumes_when_space_is_back() {
    let ws = Workspace::new();
    let mount = ws.data_dir();
    let _tmpfs = Tmpfs::mount(&mount, TMPFS_MIB);
    // The default watermarks, whatever the test support sets.
    let mut b = Broker::start_with(&ws, &[("REGINA_DISK_HIGH_PCT", "85"), ("REGINA_DISK_LOW_PCT", "80")]);
    let c = reqwest::Client::new();
    for i in 0..10 {
        let (status, r) = push(&c, &b, &format!("before-{i}")).await;
        assert_eq!(status, 201, "{r}");
    }
    let h = wait_full(&c, &b, false).await;
    let used = h["disk"]["usedPct"].as_f64().unwrap();
    assert!(used < 80.0, "the tmpfs is already {used}% used: {h}");

    let filler = fill_to(&mount, 92.0);
    let h = wait_full(&c, &b, true).await;
    assert_eq!(h["status"], json!("storage_full"), "{h}");
    let (status, r) = push(&c, &b, "refused").await;
    assert_eq!(status, 507, "a push past the high watermark: {r}");
    assert_eq!(r["code"], json!("storage_full"), "{r}");
    let kv = c.put(b.url("/api/v1/kv/ns/k")).json(&json!({ "value": 1 })).send().await.unwrap();
    assert_eq!(kv.status(), 507, "a KV write past the high watermark");
    // Reads, pops and acks go on.
    let msgs = pop_all(&c, &b).await;
    assert_eq!(msgs.len(), 10, "every message answered before the disk filled is readable: {msgs:?}");
    let acks: Vec<Value> = msgs
        .iter()
        .map(|m| json!({ "transactionId": m["transactionId"], "partitionId": m["partitionId"], "leaseId": m["leaseId"], "status": "completed" }))
        .collect();
    let r = c
        .post(b.url("/api/v1/ack/batch"))
        .json(&json!({ "acknowledgments": acks, "consumerGroup": "reader" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "acks on a full disk");
    let results: Vec<Value> = r.json().await.unwrap();
    assert!(results.iter().all(|a| a["success"] == json!(true)), "acks on a full disk: {results:?}");

    // Nothing answered was lost, and the refused push never got in.
    let (_, txns) = free_space_then_restart(&c, &mut b, &filler).await;
    let mut want: Vec<String> = (0..10).map(|i| format!("before-{i}")).collect();
    want.push("after".into());
    want.sort();
    assert_eq!(txns, want);
    b.kill();
}

/// Writes one file until the filesystem of `dir` has no byte left.
fn fill_up(dir: &Path) -> PathBuf {
    use std::io::Write;
    let filler = dir.join("filler");
    let mut f = std::fs::File::create(&filler).unwrap();
    let chunk = vec![0x5a_u8; 1 << 16];
    loop {
        match f.write(&chunk) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::StorageFull => break,
            Err(e) => panic!("filling the tmpfs: {e}"),
        }
    }
    filler
}

/// With the watermark off, a disk that fills up under the node: the push
/// whose body finds no space is answered (its entry is in the log) and
/// readable, later growing writes get 507, `/health` says why, and once
/// space is back the body is written and writes resume, with no restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_write_without_space_keeps_the_answered_push_and_resumes_when_space_is_back() {
    let ws = Workspace::new();
    let mount = ws.data_dir();
    let _tmpfs = Tmpfs::mount(&mount, 256);
    let mut b = Broker::start_with(&ws, &[("REGINA_DISK_HIGH_PCT", "100"), ("REGINA_DISK_LOW_PCT", "99")]);
    let c = reqwest::Client::new();
    for i in 0..5 {
        let (status, r) = push(&c, &b, &format!("before-{i}")).await;
        assert_eq!(status, 201, "{r}");
    }
    let filler = fill_up(&mount);
    // Its entry fits the WAL's preallocated segment; its body does not fit
    // the disk.
    let big = json!({ "blob": "b".repeat(256 << 10) });
    let (status, r) = push_payload(&c, &b, "no-space", &big).await;
    assert_eq!(status, 201, "the push whose body found no space is still answered from the log: {r}");
    let h = wait_full(&c, &b, true).await;
    assert_eq!(h["status"], json!("storage_full"), "{h}");
    assert!(h["storageShort"].as_str().is_some_and(|s| s.contains("bodies")), "{h}");
    let (status, r) = push(&c, &b, "refused").await;
    assert_eq!(status, 507, "a push while a body waits for space: {r}");
    assert_eq!(r["code"], json!("storage_full"), "{r}");

    let msgs = pop_all(&c, &b).await;
    let txns: Vec<&str> = msgs.iter().map(|m| m["transactionId"].as_str().unwrap()).collect();
    assert_eq!(txns.len(), 6, "every answered push is readable on the full disk: {txns:?}");
    let kept = msgs.iter().find(|m| m["transactionId"] == json!("no-space")).expect("the kept body's message");
    assert_eq!(kept["data"], big, "the body kept in memory reads back whole");

    let (msgs, txns) = free_space_then_restart(&c, &mut b, &filler).await;
    let mut want: Vec<String> = (0..5).map(|i| format!("before-{i}")).collect();
    want.extend(["after".to_string(), "no-space".to_string()]);
    want.sort();
    assert_eq!(txns, want, "nothing answered was lost, and the refused push never got in");
    let kept = msgs.iter().find(|m| m["transactionId"] == json!("no-space")).unwrap();
    assert_eq!(kept["data"], big, "the body written once space came back survives a restart");
    b.kill();
}
