//! `regina backup` and `regina restore`.
//!
//! - `regina backup [--url URL] DIR`: an online, consistent backup of every
//!   Raft group of the node at URL, taken while it serves writes. Per group:
//!   a snapshot built after a read barrier (every write answered before the
//!   backup began is in it) and the body segments it points at. Layout:
//!   `DIR/groups/{g}/snapshot.snap`, `DIR/groups/{g}/bodies/*.body`, and
//!   `DIR/manifest.json`, written last (a directory without it is not a
//!   backup).
//! - `regina restore DIR --data-dir D [--node-id N] [--addr HOST:PORT]`:
//!   builds a new node's data directory from a backup. The node starts as
//!   the sole voter of a new cluster holding the backed-up state.
//!
//! The encryption key is not part of a backup: payloads of queues with
//! `encryptionEnabled` open only with the key they were sealed with
//! (`--encryption-key-file`, or `D/encryption.key`).

use std::io::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// The manifest's format name.
const FORMAT: &str = "regina-backup-1";
const MANIFEST: &str = "manifest.json";
const SNAPSHOT_FILE: &str = "snapshot.snap";
const BODY_SUFFIX: &str = ".body";

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Manifest {
    format: String,
    created_at: String,
    source: String,
    raft_groups: u16,
    groups: Vec<GroupManifest>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct GroupManifest {
    group: u16,
    #[serde(flatten)]
    snapshot: regina_consensus::backup::SnapshotFacts,
    segments: Vec<u64>,
    bytes: u64,
}

/// `regina backup DIR`: every group of the node at `url` into `dir`.
pub fn backup(url: &str, token: Option<&str>, dir: &Path) -> Result<(), String> {
    let dir = dir.to_path_buf();
    let token = token.map(str::to_string);
    ensure_empty(&dir)?;
    let url = url.trim_end_matches('/').to_string();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    runtime.block_on(async move {
        let client = reqwest::Client::builder().build().map_err(|e| e.to_string())?;
        let get = |path: String| {
            let mut req = client.get(format!("{url}{path}"));
            if let Some(t) = &token {
                req = req.bearer_auth(t);
            }
            req
        };
        let groups = read_json(get("/api/v1/cluster/groups".into())).await?;
        let count = groups["groups"].as_array().map_or(0, Vec::len) as u16;
        if count == 0 {
            return Err(format!("{url} lists no Raft groups"));
        }
        let mut manifest = Manifest {
            format: FORMAT.into(),
            created_at: regina_types::time::format_iso(now_ms()),
            source: url.clone(),
            raft_groups: count,
            groups: Vec::new(),
        };
        for g in 0..count {
            manifest.groups.push(backup_group(&get, &dir, g, count).await?);
        }
        let text = serde_json::to_vec_pretty(&manifest).map_err(|e| e.to_string())?;
        write_durably(&dir.join(MANIFEST), &text)?;
        let total: u64 = manifest.groups.iter().map(|g| g.bytes).sum();
        println!("backup of {count} group(s), {total} bytes, in {}", dir.display());
        Ok(())
    })
}

async fn backup_group(
    get: &impl Fn(String) -> reqwest::RequestBuilder,
    dir: &Path,
    g: u16,
    count: u16,
) -> Result<GroupManifest, String> {
    let group_dir = dir.join("groups").join(g.to_string());
    let bodies = group_dir.join("bodies");
    std::fs::create_dir_all(&bodies).map_err(|e| format!("cannot create {}: {e}", bodies.display()))?;
    eprintln!("group {}/{count}: building a snapshot", g + 1);
    let resp = send(get(format!("/api/v1/system/backup/{g}"))).await?;
    let listed = resp
        .headers()
        .get(crate::http::routes::backup::SEGMENTS_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let file = resp.bytes().await.map_err(|e| format!("reading the snapshot of group {g}: {e}"))?;
    let snapshot = regina_consensus::backup::facts(&file).map_err(|e| format!("group {g}'s snapshot: {e}"))?;
    write_durably(&group_dir.join(SNAPSHOT_FILE), &file)?;
    let mut bytes = file.len() as u64;
    let wanted: Vec<u64> = listed.split(',').filter(|s| !s.is_empty()).filter_map(|s| s.parse().ok()).collect();
    let mut segments = Vec::new();
    for (i, s) in wanted.iter().enumerate() {
        eprint!("\rgroup {}/{count}: body segment {}/{}", g + 1, i + 1, wanted.len());
        let resp = get(format!("/api/v1/system/backup/{g}/segments/{s}"))
            .send()
            .await
            .map_err(|e| format!("cannot reach the node: {e}"))?;
        // Released since the listing: nothing the snapshot holds points
        // at it (the same rule as a follower's catch-up).
        if resp.status() == reqwest::StatusCode::NOT_FOUND {
            continue;
        }
        let resp = refusal(resp).await?;
        let body = resp.bytes().await.map_err(|e| format!("reading segment {s} of group {g}: {e}"))?;
        write_durably(&bodies.join(format!("{s:020}{BODY_SUFFIX}")), &body)?;
        bytes += body.len() as u64;
        segments.push(*s);
    }
    if !wanted.is_empty() {
        eprintln!();
    }
    Ok(GroupManifest { group: g, snapshot, segments, bytes })
}

/// `regina restore DIR --data-dir D`: a new node's data directory from a
/// backup, with node `node_id` at `addr` its sole voter.
pub fn restore(dir: &Path, data_dir: &Path, node_id: u64, addr: Option<String>) -> Result<(), String> {
    let (dir, data_dir) = (dir.to_path_buf(), data_dir.to_path_buf());
    let addr = addr.unwrap_or_else(|| format!("{}:{}", crate::config::DEFAULT_BIND, crate::config::DEFAULT_PORT));
    let text = std::fs::read(dir.join(MANIFEST))
        .map_err(|e| format!("{} is not a complete backup (no {MANIFEST}): {e}", dir.display()))?;
    let manifest: Manifest =
        serde_json::from_slice(&text).map_err(|e| format!("{}: not a backup manifest: {e}", dir.display()))?;
    if manifest.format != FORMAT {
        return Err(format!("{}: backup format {:?}, this binary reads {FORMAT:?}", dir.display(), manifest.format));
    }
    if manifest.groups.len() != manifest.raft_groups as usize {
        return Err(format!(
            "{}: the manifest lists {} of {} groups",
            dir.display(),
            manifest.groups.len(),
            manifest.raft_groups
        ));
    }
    ensure_empty(&data_dir)?;
    let raft_dir = data_dir.join("raft");
    for g in &manifest.groups {
        let from = dir.join("groups").join(g.group.to_string());
        let state_dir = if g.group == 0 { data_dir.clone() } else { data_dir.join("groups").join(g.group.to_string()) };
        let file = std::fs::read(from.join(SNAPSHOT_FILE)).map_err(|e| format!("{}: {e}", from.display()))?;
        let mut segments = g.segments.iter().map(|s| {
            let path = from.join("bodies").join(format!("{s:020}{BODY_SUFFIX}"));
            std::fs::read(&path).map(|b| (*s, b)).map_err(|e| format!("{}: {e}", path.display()))
        });
        let facts = regina_consensus::backup::restore_group(
            &state_dir,
            &raft_dir,
            g.group,
            &file,
            &mut segments,
            node_id,
            &addr,
        )?;
        eprintln!(
            "group {}: restored at log index {} ({} body segment(s))",
            g.group,
            facts.last_log_index.unwrap_or(0),
            g.segments.len()
        );
    }
    write_durably(&data_dir.join("raft-groups"), format!("{}\n", manifest.raft_groups).as_bytes())?;
    println!(
        "restored {} group(s) into {}; start it with: regina --data-dir {} --node-id {node_id} \
         (with the original --encryption-key-file if any queue is encrypted)",
        manifest.raft_groups,
        data_dir.display(),
        data_dir.display()
    );
    Ok(())
}

/// A directory that does not exist yet or is empty.
fn ensure_empty(dir: &Path) -> Result<(), String> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => match entries.next() {
            None => Ok(()),
            Some(_) => Err(format!("{} is not empty", dir.display())),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))
        }
        Err(e) => Err(format!("cannot read {}: {e}", dir.display())),
    }
}

fn write_durably(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let ctx = |e: std::io::Error| format!("cannot write {}: {e}", path.display());
    let mut f = std::fs::File::create(path).map_err(ctx)?;
    f.write_all(bytes).map_err(ctx)?;
    f.sync_all().map_err(ctx)
}

async fn send(req: reqwest::RequestBuilder) -> Result<reqwest::Response, String> {
    refusal(req.send().await.map_err(|e| format!("cannot reach the node: {e}"))?).await
}

/// The answer if it succeeded, else the node's refusal as a message.
async fn refusal(resp: reqwest::Response) -> Result<reqwest::Response, String> {
    if resp.status().is_success() {
        return Ok(resp);
    }
    let status = resp.status();
    let text = resp.text().await.unwrap_or_default();
    Err(format!("the node answered {status}: {text}"))
}

async fn read_json(req: reqwest::RequestBuilder) -> Result<serde_json::Value, String> {
    send(req).await?.json().await.map_err(|e| format!("not a JSON answer: {e}"))
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}
