//! This process's own figures (memory, CPU time, threads) and the worker
//! view: who holds leases on what.
//!
//! Nothing is sampled in the background, so each series holds one point:
//! the figures at the time of the request. The process figures come from
//! `/proc/self`; where it cannot be read they are `null`.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::Json;
use serde_json::{json, Value};

use regina_state::views;
use regina_types::time::format_iso;

use super::{uptime_seconds, Window};
use crate::http::error::ApiResult;
use crate::http::input::query_pairs;
use regina_node::Replica;

/// Clock ticks per second of `/proc/self/stat` CPU times (USER_HZ): 100 on
/// x86 and arm Linux, the platforms this is built for.
const TICKS_PER_SECOND: f64 = 100.0;
const PAGE_BYTES: u64 = 4096;

/// What the kernel reports about this process.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessFigures {
    pub resident_bytes: Option<u64>,
    pub virtual_bytes: Option<u64>,
    pub user_seconds: Option<f64>,
    pub system_seconds: Option<f64>,
    pub threads: Option<u64>,
}

impl ProcessFigures {
    pub fn read() -> ProcessFigures {
        let mut f = ProcessFigures::default();
        if let Ok(statm) = std::fs::read_to_string("/proc/self/statm") {
            let mut it = statm.split_whitespace().map(|x| x.parse::<u64>().ok());
            f.virtual_bytes = it.next().flatten().map(|p| p * PAGE_BYTES);
            f.resident_bytes = it.next().flatten().map(|p| p * PAGE_BYTES);
        }
        if let Ok(stat) = std::fs::read_to_string("/proc/self/stat") {
            // Fields after the command name, which may itself hold spaces.
            if let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) {
                let fields: Vec<&str> = rest.split_whitespace().collect();
                let num = |i: usize| fields.get(i).and_then(|x| x.parse::<u64>().ok());
                f.user_seconds = num(11).map(|t| t as f64 / TICKS_PER_SECOND);
                f.system_seconds = num(12).map(|t| t as f64 / TICKS_PER_SECOND);
                f.threads = num(17);
            }
        }
        f
    }

    pub fn cpu_seconds(&self) -> Option<f64> {
        Some(self.user_seconds? + self.system_seconds?)
    }
}

/// `GET /api/v1/analytics/system-metrics[?from=&to=]`: one replica (this
/// node) with one point, now.
pub async fn system_metrics(State(node): State<Arc<Replica>>, RawQuery(q): RawQuery) -> ApiResult<Json<Value>> {
    let pairs = query_pairs(q.as_deref())?;
    let (now, applied) = {
        let m = node.tenant_state();
        (node.read_time(m.now_ms), m.applied_entries)
    };
    let w = Window::parse(&pairs, now)?;
    let raft = node.raft().metrics().borrow().clone();
    let f = ProcessFigures::read();
    let point = json!({
        "timestamp": format_iso(now),
        "memoryRssBytes": f.resident_bytes,
        "memoryVirtualBytes": f.virtual_bytes,
        "cpuUserSeconds": f.user_seconds,
        "cpuSystemSeconds": f.system_seconds,
        "threads": f.threads,
        "appliedEntries": applied,
        "appliedIndex": raft.last_applied.map(|l| l.index),
        "lastLogIndex": raft.last_log_index,
    });
    Ok(Json(json!({
        "timeRange": w.range_json(),
        "bucketMinutes": w.bucket_minutes(),
        "pointCount": 1,
        "replicas": [{
            "nodeId": raft.id,
            "role": format!("{:?}", raft.state).to_lowercase(),
            "uptimeSeconds": uptime_seconds(),
            "points": [point],
        }],
    })))
}

/// `GET /api/v1/analytics/worker-metrics[?from=&to=]`: a worker is a live
/// lease (one pop's claim, over one or more partitions).
pub async fn worker_metrics(State(node): State<Arc<Replica>>, RawQuery(q): RawQuery) -> ApiResult<Json<Value>> {
    let pairs = query_pairs(q.as_deref())?;
    let m = node.tenant_state();
    let now = node.read_time(m.now_ms);
    let w = Window::parse(&pairs, now)?;
    // lease id -> (expiry, queues, partitions, messages)
    let mut workers: BTreeMap<String, (u64, Vec<String>, u64, u64)> = BTreeMap::new();
    // queue -> (lease ids, messages)
    let mut queues: BTreeMap<String, (Vec<String>, u64)> = BTreeMap::new();
    for l in views::lanes(&m, None, now) {
        let Some((id, expires, n)) = l.lease else { continue };
        let wk = workers.entry(id.clone()).or_insert((expires, Vec::new(), 0, 0));
        if !wk.1.contains(&l.queue) {
            wk.1.push(l.queue.clone());
        }
        wk.2 += 1;
        wk.3 += n;
        let qe = queues.entry(l.queue).or_default();
        if !qe.0.contains(&id) {
            qe.0.push(id);
        }
        qe.1 += n;
    }
    drop(m);
    let leased: u64 = workers.values().map(|w| w.3).sum();
    let partitions: u64 = workers.values().map(|w| w.2).sum();
    Ok(Json(json!({
        "timeRange": w.range_json(),
        "bucketMinutes": w.bucket_minutes(),
        "pointCount": 1,
        "summary": {
            "activeWorkers": workers.len(),
            "leasedPartitions": partitions,
            "leasedMessages": leased,
        },
        "timeSeries": [{
            "timestamp": format_iso(now),
            "activeWorkers": workers.len(),
            "leasedMessages": leased,
        }],
        "workers": workers.iter().map(|(id, (exp, qs, parts, n))| json!({
            "workerId": id,
            "queues": qs,
            "partitions": parts,
            "leasedMessages": n,
            "leaseExpiresAt": format_iso(*exp),
        })).collect::<Vec<_>>(),
        "queues": queues.iter().map(|(q, (ids, n))| json!({
            "queue": q,
            "activeWorkers": ids.len(),
            "leasedMessages": n,
        })).collect::<Vec<_>>(),
    })))
}
