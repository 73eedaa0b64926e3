//! Job queues over HTTP: `POST /api/v1/jobs` (a batch of operations,
//! index-aligned results), and the reads `GET /api/v1/jobs/{queue}` (a scan)
//! and `GET /api/v1/jobs/{queue}/stats`.
//!
//! A call with a write is one log entry, judged at the entry's time. A call
//! of reads only is answered from the applied state. A claim that would
//! find nothing writes nothing: it answers `{"claim": null}` at once, or
//! with `waitMs` waits for an applied entry that makes work available.

pub(crate) mod input;
pub(crate) mod render;
pub(crate) mod schema;

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use tokio::time::Instant;

use regina_state::jobs::apply::{JobResult, JobsOutcome};
use regina_state::jobs::{JobOp, JobStore, JobTarget, JobsCmd};
use regina_state::{Command, Outcome};
use regina_types::limits::{JOB_SCAN_LIMIT_DEFAULT, JOB_SCAN_LIMIT_MAX, REQUEST_BODY_BYTES_MAX};

use crate::http::codes;
use crate::http::input::{query_get, query_pairs};
use crate::http::routes::jobs::input::{parse_ops, JobsError, Parsed, Surface};
use regina_node::{ProposeError, Replica};

/// How often a waiting claim looks again without a wake-up: leases run out
/// and delayed jobs come due without an entry.
const RECHECK: Duration = Duration::from_millis(100);

fn unavailable(e: ProposeError) -> JobsError {
    let code = crate::http::error::propose_refusal(&e);
    JobsError { code, message: e.to_string(), index: None, field: None }
}

fn internal(what: String) -> JobsError {
    JobsError { code: codes::INTERNAL, message: what, index: None, field: None }
}

pub async fn batch(
    State(node): State<Arc<Replica>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, JobsError> {
    let bytes = body.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            JobsError::invalid(None, None, format!("the body is over {REQUEST_BODY_BYTES_MAX} bytes"))
                .with_code(codes::JOB_PAYLOAD_TOO_LARGE)
        } else {
            JobsError::invalid(None, None, format!("could not read the body: {e}"))
        }
    })?;
    let raw = operations(&bytes)?;
    let ops = parse_ops(&raw, Surface::Call)?;
    check_schemas(&node, &ops)?;
    let results = match ops.as_slice() {
        [Parsed { op: JobOp::Claim { at, request_id, .. }, wait_ms, .. }] => {
            claim(&node, &ops, at, request_id.as_deref(), wait_ms.unwrap_or(0)).await?
        }
        _ => run(&node, &ops).await?,
    };
    Ok(match results {
        JobsOutcome::Refused(r) if r.code.is_invalid() => {
            let max = node.tenant_state().jobs.config(op_queue(&ops[r.index].op)).lease_max_ms;
            JobsError::invalid(
                Some(r.index),
                Some("leaseMs"),
                format!("operations[{}].leaseMs is above the queue's lease.maxMs of {max}", r.index),
            )
            .with_code(codes::LEASE_TOO_LONG)
            .into_response()
        }
        JobsOutcome::Refused(r) => {
            axum::Json(render::refused(&r, r.index, "nothing in the call was applied")).into_response()
        }
        JobsOutcome::Done(results) => {
            let results: Vec<Value> = ops.iter().zip(&results).map(|(p, r)| render::result(p.name, r)).collect();
            axum::Json(json!({ "results": results })).into_response()
        }
    })
}

fn op_queue(op: &JobOp) -> &str {
    match op {
        JobOp::Configure { queue, .. } => queue,
        JobOp::Enqueue { at, .. }
        | JobOp::Claim { at, .. }
        | JobOp::Renew { at, .. }
        | JobOp::Complete { at, .. }
        | JobOp::Fail { at, .. }
        | JobOp::Release { at, .. }
        | JobOp::Retry { at, .. }
        | JobOp::Cancel { at, .. }
        | JobOp::Get { at, .. }
        | JobOp::Scan { at, .. }
        | JobOp::Stats { at } => &at.queue,
    }
}

/// The `operations` array of a call body.
fn operations(bytes: &[u8]) -> Result<Vec<Value>, JobsError> {
    let body: Value = serde_json::from_slice(bytes)
        .map_err(|e| JobsError::invalid(None, None, format!("the body must be a JSON object: {e}")))?;
    let Value::Object(mut map) = body else {
        return Err(JobsError::invalid(None, None, "the body must be a JSON object {\"operations\": [...]}"));
    };
    if let Some(k) = map.keys().find(|k| k.as_str() != "operations") {
        return Err(JobsError::invalid(None, None, format!("unknown field {k:?}; the body holds operations only")));
    }
    match map.remove("operations") {
        Some(Value::Array(ops)) if !ops.is_empty() => Ok(ops),
        Some(Value::Array(_)) => Err(JobsError::invalid(None, Some("operations"), "operations is empty")),
        _ => Err(JobsError::invalid(None, Some("operations"), "operations (an array of operations) is required")),
    }
}

/// Checks enqueued payloads and completed results against their queue's
/// schemas (including schemas a configure earlier in the same call sets).
pub fn check_schemas(node: &Replica, ops: &[Parsed]) -> Result<(), JobsError> {
    let state = node.tenant_state();
    // Only a queue configured inside the call needs a copy of its config.
    let mut patched: std::collections::BTreeMap<&str, regina_state::jobs::JobConfig> = Default::default();
    for (i, p) in ops.iter().enumerate() {
        let (queue, text, which, field) = match &p.op {
            JobOp::Configure { queue, patch } => {
                let c = patched.entry(queue).or_insert_with(|| state.jobs.config(queue).clone());
                *c = c.patched(patch);
                continue;
            }
            JobOp::Enqueue { at, payload, .. } => (&at.queue, payload, false, "payload"),
            JobOp::Complete { at, result, .. } => (&at.queue, result, true, "result"),
            _ => continue,
        };
        let c = patched.get(queue.as_str()).unwrap_or_else(|| state.jobs.config(queue));
        let schema = if which { &c.result_schema } else { &c.payload_schema };
        if let Some(schema) = schema {
            crate::http::routes::jobs::schema::check(schema, text).map_err(|e| {
                JobsError::invalid(
                    Some(i),
                    Some(field),
                    format!("operations[{i}].{field} does not match the queue's schema: {e}"),
                )
            })?;
        }
    }
    Ok(())
}

/// Applies a call through the log, or reads it when it writes nothing.
pub async fn run(node: &Replica, ops: &[Parsed]) -> Result<JobsOutcome, JobsError> {
    if !ops.iter().any(|p| p.op.is_write()) {
        let m = node.tenant_state();
        let now = node.stamp();
        return Ok(JobsOutcome::Done(ops.iter().map(|p| read(&m.jobs, &p.op, now)).collect()));
    }
    let cmd = Command::Jobs(JobsCmd { ops: ops.iter().map(|p| p.op.clone()).collect() });
    match node.propose(cmd).await.map_err(unavailable)? {
        Outcome::Jobs(o) => Ok(o),
        o => Err(internal(format!("jobs answered {o:?}"))),
    }
}

fn read(jobs: &JobStore, op: &JobOp, now: u64) -> JobResult {
    match op {
        JobOp::Get { at, id } => JobResult::Got(jobs.view(at, id, now)),
        JobOp::Scan { at, state, after, limit } => {
            JobResult::Page(jobs.scan(at, *state, after.as_deref(), *limit, now))
        }
        JobOp::Stats { at } => JobResult::Stats(jobs.stats(at, now)),
        _ => unreachable!("only reads are read"),
    }
}

/// A call of one claim: proposed only when a claim would take a job, and
/// with `wait_ms` proposed again whenever work may have become available,
/// until a job is taken or the time is up.
async fn claim(
    node: &Replica,
    ops: &[Parsed],
    at: &JobTarget,
    request_id: Option<&str>,
    wait_ms: u64,
) -> Result<JobsOutcome, JobsError> {
    let deadline = Instant::now() + Duration::from_millis(wait_ms);
    loop {
        let notified = node.applied_signal().notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if node.tenant_state().jobs.claimable(at, request_id, node.stamp()) {
            let outcome = run(node, ops).await?;
            if !matches!(&outcome, JobsOutcome::Done(r) if r.first() == Some(&JobResult::Claimed(None))) {
                return Ok(outcome);
            }
        }
        let now = Instant::now();
        if now >= deadline {
            return Ok(JobsOutcome::Done(vec![JobResult::Claimed(None)]));
        }
        tokio::select! {
            _ = &mut notified => {}
            _ = tokio::time::sleep(RECHECK.min(deadline - now)) => {}
            _ = node.stopped() => return Ok(JobsOutcome::Done(vec![JobResult::Claimed(None)])),
        }
    }
}

/// The (queue, scope) a read route names, and its query parameters.
fn read_target(queue: String, raw: Option<String>) -> Result<(JobTarget, Vec<(String, String)>), JobsError> {
    let pairs = query_pairs(raw.as_deref()).map_err(|e| JobsError::invalid(None, None, e.message))?;
    regina_types::validate_name(regina_types::NameKind::Queue, &queue)
        .map_err(|e| JobsError::invalid(None, Some("queue"), e.to_string()))?;
    let scope = query_get(&pairs, "scope").unwrap_or("").to_string();
    Ok((JobTarget { queue, scope }, pairs))
}

/// `GET /api/v1/jobs/{queue}?scope=&state=&after=&limit=`: a scan.
pub async fn scan(
    State(node): State<Arc<Replica>>,
    Path(queue): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Response, JobsError> {
    let (at, pairs) = read_target(queue, raw)?;
    let state = match query_get(&pairs, "state") {
        None | Some("") => None,
        Some(s) => Some(regina_state::jobs::JobState::parse(s).ok_or_else(|| {
            JobsError::invalid(None, Some("state"), format!("state {s:?} is not pending, leased, completed or failed"))
        })?),
    };
    let limit = match query_get(&pairs, "limit") {
        None | Some("") => JOB_SCAN_LIMIT_DEFAULT,
        Some(l) => match l.parse::<u64>() {
            Ok(n) if n >= 1 => n.min(u64::from(JOB_SCAN_LIMIT_MAX)) as u32,
            _ => {
                return Err(JobsError::invalid(
                    None,
                    Some("limit"),
                    format!("limit must be a positive integer, not {l:?}"),
                ))
            }
        },
    };
    let after = query_get(&pairs, "after").filter(|a| !a.is_empty());
    let page = node.tenant_state().jobs.scan(&at, state, after, limit, node.stamp());
    Ok(axum::Json(render::page(&page)).into_response())
}

/// `GET /api/v1/jobs/{queue}/stats?scope=`.
pub async fn stats(
    State(node): State<Arc<Replica>>,
    Path(queue): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Response, JobsError> {
    let (at, _) = read_target(queue, raw)?;
    let stats = node.tenant_state().jobs.stats(&at, node.stamp());
    Ok(axum::Json(render::stats(&stats)).into_response())
}
