//! `/metrics`: the same figures for two audiences. A Prometheus scraper
//! asks for `text/plain` or OpenMetrics in its `Accept` header and gets the
//! text exposition (format 0.0.4); any other caller (the Queen clients read
//! this route as JSON) gets a JSON object. `/metrics/prometheus` is always
//! the text exposition.

use std::fmt::Write as _;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use regina_state::views::{self, QueueSummary, StatusCounts};

use super::process::ProcessFigures;
use super::uptime_seconds;
use regina_node::Replica;

const PROMETHEUS_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Everything both renderings show, gathered under one read of the state.
struct Figures {
    queues: Vec<QueueSummary>,
    totals: StatusCounts,
    leases: u64,
    /// Timers waiting to fire and timers that gave up.
    timers_pending: u64,
    timers_failed: u64,
    /// Jobs as stored: pending, leased, finished (completed or failed).
    jobs: (u64, u64, u64),
    applied_entries: u64,
    applied_index: Option<u64>,
    last_log_index: Option<u64>,
    term: u64,
    process: ProcessFigures,
    uptime: u64,
    /// Every Raft group of the node: who leads it, its load, its tenants.
    groups: Vec<GroupFigures>,
}

struct GroupFigures {
    group: u16,
    leader: Option<u64>,
    load: regina_node::balance::Load,
    tenants: Vec<String>,
    tenant_count: usize,
}

fn group_figures(node: &Replica) -> Vec<GroupFigures> {
    node.all_groups()
        .iter()
        .map(|g| {
            let (tenants, tenant_count) = g.tenants_held();
            let leader = g.raft().metrics().borrow().current_leader;
            GroupFigures { group: g.group(), leader, load: g.load_rates(), tenants, tenant_count }
        })
        .collect()
}

fn gather(node: &Replica) -> Figures {
    let (queues, leases, applied_entries, timers_pending, timers_failed, jobs) = {
        let m = node.tenant_state();
        let now = node.read_time(m.now_ms);
        let live = m.leases.values().filter(|l| l.expires_ms > now).count() as u64;
        let (pending, failed) = (m.timers.pending_count() as u64, m.timers.failed_count() as u64);
        (views::queue_summaries(&m, now), live, m.applied_entries, pending, failed, m.jobs.stored_totals())
    };
    let mut totals = StatusCounts::default();
    queues.iter().for_each(|q| totals.add(q.counts));
    let raft = node.raft().metrics().borrow().clone();
    Figures {
        queues,
        totals,
        leases,
        timers_pending,
        timers_failed,
        jobs,
        applied_entries,
        applied_index: raft.last_applied.map(|l| l.index),
        last_log_index: raft.last_log_index,
        term: raft.current_term,
        process: ProcessFigures::read(),
        uptime: uptime_seconds(),
        groups: group_figures(node),
    }
}

fn wants_text(headers: &HeaderMap) -> bool {
    headers.get_all(header::ACCEPT).iter().filter_map(|v| v.to_str().ok()).any(|v| {
        let v = v.to_ascii_lowercase();
        v.contains("text/plain") || v.contains("openmetrics")
    })
}

/// `GET /metrics`: text for a scraper, JSON for everyone else.
pub async fn metrics(State(node): State<Arc<Replica>>, headers: HeaderMap) -> Response {
    let f = gather(&node);
    if wants_text(&headers) {
        return text_response(&f);
    }
    let partitions: u64 = f.queues.iter().map(|q| q.partitions).sum();
    let per_queue: Vec<_> = f
        .queues
        .iter()
        .map(|q| json!({ "queue": q.name, "messages": q.counts.total, "depth": q.depth, "deadLetterRows": q.dlq_rows }))
        .collect();
    // HTTP requests are not counted; `requests` reports the log entries
    // applied, i.e. every write that reached the state machine.
    Json(json!({
        "uptime": { "seconds": f.uptime },
        "cpu": { "userSeconds": f.process.user_seconds, "systemSeconds": f.process.system_seconds },
        "memory": { "residentBytes": f.process.resident_bytes, "virtualBytes": f.process.virtual_bytes },
        "messages": {
            "total": f.totals.total,
            "pending": f.totals.pending,
            "processing": f.totals.processing,
            "completed": f.totals.completed,
            "deadLetter": f.totals.dead_letter,
            "depth": f.queues.iter().map(|q| q.depth).sum::<u64>(),
        },
        "requests": { "appliedEntries": f.applied_entries },
        "queues": { "total": f.queues.len(), "partitions": partitions, "perQueue": per_queue },
        "leases": { "active": f.leases },
        "timers": { "pending": f.timers_pending, "failed": f.timers_failed },
        "jobs": { "pending": f.jobs.0, "leased": f.jobs.1, "finished": f.jobs.2 },
        "raft": { "appliedIndex": f.applied_index, "lastLogIndex": f.last_log_index, "term": f.term },
        "groups": f.groups.iter().map(|g| json!({
            "group": g.group,
            "leader": g.leader,
            "entriesPerSec": g.load.entries_per_sec,
            "requestsPerSec": g.load.requests_per_sec,
            "bytesPerSec": g.load.bytes_per_sec,
            "tenantCount": g.tenant_count,
            "tenants": g.tenants,
        })).collect::<Vec<_>>(),
    }))
    .into_response()
}

/// `GET /metrics/prometheus`: always the text exposition.
pub async fn prometheus(State(node): State<Arc<Replica>>) -> Response {
    let f = gather(&node);
    let mut text = render_text(&f);
    let groups = super::queen_metrics::groups(&node).await;
    let disk = node.disk();
    let queen = super::queen_metrics::QueenFigures {
        groups: &groups,
        storage_full: disk.full || node.storage_short().is_some(),
        dlq_by_queue: f.queues.iter().map(|q| (q.name.clone(), q.dlq_rows)).collect(),
        pop_lag: crate::http::pop_lag::figures(node.read_time(0)),
        uptime: f.uptime,
        resident_bytes: f.process.resident_bytes,
    };
    super::queen_metrics::render(&mut text, &queen);
    prometheus_text(text)
}

fn text_response(f: &Figures) -> Response {
    prometheus_text(render_text(f))
}

fn prometheus_text(text: String) -> Response {
    let mut resp = text.into_response();
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(PROMETHEUS_TYPE));
    resp
}

/// A label value with `\`, `"` and newlines escaped as the format requires.
pub(super) fn label(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn render_text(f: &Figures) -> String {
    let mut out = String::new();
    store_metrics(&mut out, f);
    group_metrics(&mut out, f);
    process_metrics(&mut out, f);
    out
}

/// Appends one metric in the Prometheus text format.
pub(super) fn metric(out: &mut String, name: &str, kind: &str, help: &str, samples: &[(String, String)]) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    for (labels, value) in samples {
        let _ = writeln!(out, "{name}{labels} {value}");
    }
}

/// One unlabelled sample.
fn one(v: u64) -> Vec<(String, String)> {
    vec![(String::new(), v.to_string())]
}

/// What the state holds: queues, messages, leases, timers, jobs, the log.
fn store_metrics(out: &mut String, f: &Figures) {
    let opt = |v: Option<u64>| v.map_or_else(Vec::new, one);
    let per_queue = |get: fn(&QueueSummary) -> u64| -> Vec<(String, String)> {
        f.queues.iter().map(|q| (format!("{{queue=\"{}\"}}", label(&q.name)), get(q).to_string())).collect()
    };
    metric(out, "regina_queues", "gauge", "Queues that exist.", &one(f.queues.len() as u64));
    metric(
        out,
        "regina_partitions",
        "gauge",
        "Partitions across all queues.",
        &one(f.queues.iter().map(|q| q.partitions).sum()),
    );
    metric(out, "regina_messages", "gauge", "Messages kept across all queues.", &one(f.totals.total));
    metric(out, "regina_leases_active", "gauge", "Live leases (one per pop that claimed messages).", &one(f.leases));
    metric(
        out,
        "regina_timers",
        "gauge",
        "Timers by state: pending (waiting to fire or to retry) and failed (every fire attempt refused).",
        &[
            ("{state=\"pending\"}".to_string(), f.timers_pending.to_string()),
            ("{state=\"failed\"}".to_string(), f.timers_failed.to_string()),
        ],
    );
    metric(
        out,
        "regina_jobs",
        "gauge",
        "Jobs as stored: pending, leased (a lapsed lease counts until a claim or sweep settles it), finished.",
        &[
            ("{state=\"pending\"}".to_string(), f.jobs.0.to_string()),
            ("{state=\"leased\"}".to_string(), f.jobs.1.to_string()),
            ("{state=\"finished\"}".to_string(), f.jobs.2.to_string()),
        ],
    );
    metric(out, "regina_queue_messages", "gauge", "Messages kept, per queue.", &per_queue(|q| q.counts.total));
    metric(
        out,
        "regina_queue_pending",
        "gauge",
        "Messages the slowest group has not settled, per queue.",
        &per_queue(|q| q.depth),
    );
    metric(
        out,
        "regina_queue_processing",
        "gauge",
        "Messages under a live lease, per queue.",
        &per_queue(|q| q.counts.processing),
    );
    metric(out, "regina_queue_dead_letters", "gauge", "Dead-letter rows, per queue.", &per_queue(|q| q.dlq_rows));
    metric(
        out,
        "regina_queue_retained_bytes",
        "gauge",
        "Body bytes of kept messages, per queue.",
        &per_queue(|q| q.bytes),
    );
    metric(
        out,
        "regina_applied_entries_total",
        "counter",
        "Log entries applied to the state machine.",
        &one(f.applied_entries),
    );
    metric(out, "regina_raft_applied_index", "gauge", "Index of the last applied log entry.", &opt(f.applied_index));
    metric(out, "regina_raft_last_log_index", "gauge", "Index of the last log entry.", &opt(f.last_log_index));
    metric(out, "regina_raft_term", "gauge", "Current Raft term.", &one(f.term));
}

/// Each Raft group's leader, load and tenants.
fn group_metrics(out: &mut String, f: &Figures) {
    let per_group = |get: &dyn Fn(&GroupFigures) -> String| -> Vec<(String, String)> {
        f.groups.iter().map(|g| (format!("{{group=\"{}\"}}", g.group), get(g))).collect()
    };
    metric(
        out,
        "regina_group_leader",
        "gauge",
        "Replica id leading each Raft group, as this node knows it (0: none known).",
        &per_group(&|g| g.leader.unwrap_or(0).to_string()),
    );
    metric(
        out,
        "regina_group_entries_per_second",
        "gauge",
        "Log entries appended per second, per Raft group.",
        &per_group(&|g| format!("{:.1}", g.load.entries_per_sec)),
    );
    metric(
        out,
        "regina_group_bytes_per_second",
        "gauge",
        "Log bytes appended per second, per Raft group.",
        &per_group(&|g| format!("{:.0}", g.load.bytes_per_sec)),
    );
    metric(
        out,
        "regina_group_requests_per_second",
        "gauge",
        "Requests this node proposed per second while leading, per Raft group.",
        &per_group(&|g| format!("{:.1}", g.load.requests_per_sec)),
    );
    metric(
        out,
        "regina_group_tenants",
        "gauge",
        "Named tenants with data, per Raft group.",
        &per_group(&|g| g.tenant_count.to_string()),
    );
    let tenants: Vec<(String, String)> = f
        .groups
        .iter()
        .flat_map(|g| g.tenants.iter().map(move |t| (format!("{{tenant=\"{}\"}}", label(t)), g.group.to_string())))
        .collect();
    metric(out, "regina_tenant_group", "gauge", "The Raft group holding each named tenant.", &tenants);
}

/// The process: uptime, memory, CPU.
fn process_metrics(out: &mut String, f: &Figures) {
    metric(out, "regina_uptime_seconds", "gauge", "Seconds since this process started serving.", &one(f.uptime));
    if let Some(rss) = f.process.resident_bytes {
        metric(out, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", &one(rss));
    }
    if let Some(cpu) = f.process.cpu_seconds() {
        metric(
            out,
            "process_cpu_seconds_total",
            "counter",
            "User and system CPU time spent, seconds.",
            &[(String::new(), format!("{cpu}"))],
        );
    }
}
