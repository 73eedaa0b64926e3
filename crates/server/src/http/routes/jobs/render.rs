//! Job answers as JSON: jobs, claims, pages and stats, times written as the
//! rest of the API writes them.

use serde_json::{json, Value};

use regina_state::jobs::apply::{JobRefusal, JobResult};
use regina_state::jobs::view::{ClaimView, JobPage, JobStats, JobView};
use regina_state::jobs::{JobConfig, JobState};
use regina_types::time::format_iso;

/// A stored JSON text as a value (`null` when absent).
pub fn json_of(text: Option<&[u8]>) -> Value {
    text.and_then(|t| serde_json::from_slice(t).ok()).unwrap_or(Value::Null)
}

pub fn job(j: &JobView) -> Value {
    let lease =
        j.lease.as_ref().map(|l| json!({ "owner": l.owner, "token": l.token, "expiresAt": format_iso(l.expires_ms) }));
    json!({
        "queue": j.queue,
        "scope": j.scope,
        "id": j.id,
        "payload": json_of(Some(&j.payload)),
        "state": j.state.as_str(),
        // When the job is (or next becomes) claimable: a leased job at its
        // lease's expiry; a finished one never.
        "availableAt": match j.state {
            JobState::Pending => Some(format_iso(j.available_ms)),
            JobState::Leased => j.lease.as_ref().map(|l| format_iso(l.expires_ms)),
            _ => None,
        },
        "leaseExpiresAt": j.lease.as_ref().map(|l| format_iso(l.expires_ms)),
        "lease": lease,
        "attempts": j.attempts,
        "createdAt": format_iso(j.created_ms),
        "updatedAt": format_iso(j.updated_ms),
        "result": json_of(j.result.as_deref()),
        "error": json_of(j.error.as_deref()),
    })
}

fn job_or_null(j: &Option<JobView>) -> Value {
    j.as_ref().map_or(Value::Null, job)
}

pub fn claim(c: &ClaimView) -> Value {
    json!({
        "scope": c.scope,
        "id": c.id,
        "payload": json_of(Some(&c.payload)),
        "attempt": c.attempt,
        "owner": c.owner,
        "token": c.token,
        "expiresAt": format_iso(c.expires_ms),
    })
}

pub fn config(c: &JobConfig) -> Value {
    let retry = match &c.retry {
        None => json!(false),
        Some(r) => {
            json!({ "maxAttempts": r.max_attempts, "initialDelayMs": r.initial_delay_ms, "maxDelayMs": r.max_delay_ms })
        }
    };
    let schema = |s: &Option<String>| s.as_deref().and_then(|t| serde_json::from_str::<Value>(t).ok());
    json!({
        "lease": { "defaultMs": c.lease_default_ms, "maxMs": c.lease_max_ms },
        "retry": retry,
        "payloadSchema": schema(&c.payload_schema),
        "resultSchema": schema(&c.result_schema),
        "completedRetentionMs": c.completed_retention_ms,
    })
}

pub fn page(p: &JobPage) -> Value {
    json!({
        "rows": p.rows.iter().map(job).collect::<Vec<_>>(),
        "truncated": p.truncated,
        "nextAfter": p.next_after,
    })
}

pub fn stats(s: &JobStats) -> Value {
    json!({
        "ready": s.ready,
        "readyCount": s.ready_count,
        "counts": {
            "pending": s.counts.pending,
            "leased": s.counts.leased,
            "completed": s.counts.completed,
            "failed": s.counts.failed,
        },
        "oldestReadyAt": s.oldest_ready_ms.map(format_iso),
        "nextAvailableAt": s.next_available_ms.map(format_iso),
    })
}

/// One result element of a call (or of a step's job riders).
pub fn result(op_name: &str, r: &JobResult) -> Value {
    let mut v = match r {
        JobResult::Configured(c) => json!({ "applied": true, "config": config(c) }),
        JobResult::Applied { job: j, existed } => {
            let mut v = json!({ "applied": true, "job": job_or_null(j) });
            if op_name == "cancel" {
                v["existed"] = json!(existed);
            }
            if op_name == "enqueue" {
                v["replaced"] = json!(existed);
            }
            v
        }
        JobResult::Refused { code, job: j } => {
            json!({ "applied": false, "code": code.as_str(), "job": job_or_null(j) })
        }
        JobResult::Claimed(c) => json!({ "claim": c.as_ref().map(claim) }),
        JobResult::Renewed(c) => json!({ "applied": true, "claim": claim(c) }),
        JobResult::Got(j) => json!({ "found": j.is_some(), "job": job_or_null(j) }),
        JobResult::Page(p) => page(p),
        JobResult::Stats(s) => stats(s),
    };
    v["op"] = json!(op_name);
    v
}

/// The verdict of a call a required operation refused: nothing applied.
pub fn refused(r: &JobRefusal, flat_index: usize, what: &str) -> Value {
    json!({
        "ok": false,
        "success": false,
        "reason": "job_precondition",
        "failedIndex": flat_index,
        "jobIndex": r.index,
        "code": r.code.as_str(),
        "job": job_or_null(&r.job),
        "error": format!("QJOB operation {} was refused ({}); {what}", r.index, r.code.as_str()),
        "results": [],
    })
}
