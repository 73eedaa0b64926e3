//! Reading job operations: every field checked against its rule and limit,
//! every refusal a 400 `{"error", "code", "index", "field"}` that names the
//! operation and the field.

use crate::http::codes::{self, Code};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};

use regina_state::jobs::{Availability, JobConfigPatch, JobOp, JobState, JobTarget, LeaseProof, RetryPolicy};
use regina_types::limits::*;
use regina_types::time::parse_iso;
use regina_types::{validate_name, NameKind};

/// A refused jobs request.
#[derive(Debug, Clone)]
pub struct JobsError {
    pub code: &'static Code,
    pub message: String,
    pub index: Option<usize>,
    pub field: Option<&'static str>,
}

impl JobsError {
    pub fn invalid(index: Option<usize>, field: Option<&'static str>, message: impl Into<String>) -> Self {
        JobsError { code: codes::INVALID_ARGUMENT, message: message.into(), index, field }
    }

    pub fn with_code(mut self, code: &'static Code) -> Self {
        self.code = code;
        self
    }
}

impl IntoResponse for JobsError {
    fn into_response(self) -> Response {
        let mut body = json!({ "error": self.message, "code": self.code.name });
        if let Some(i) = self.index {
            body["index"] = json!(i);
        }
        if let Some(f) = self.field {
            body["field"] = json!(f);
        }
        let mut resp = (self.code.status, axum::Json(body)).into_response();
        if self.code.status == StatusCode::SERVICE_UNAVAILABLE {
            resp.headers_mut().insert("retry-after", axum::http::HeaderValue::from_static("1"));
        }
        resp
    }
}

/// Where operations come from: a jobs call, or the riders of a step
/// (which may only write, and are all required).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Surface {
    Call,
    Step,
}

/// One parsed operation, with what the edge needs beside the log's op.
#[derive(Debug, Clone)]
pub struct Parsed {
    pub op: JobOp,
    /// The op's name as written.
    pub name: &'static str,
    /// A claim's long-poll budget.
    pub wait_ms: Option<u64>,
}

const COMMON: [&str; 3] = ["op", "queue", "scope"];

struct Fields<'a> {
    index: usize,
    map: &'a Map<String, Value>,
}

impl<'a> Fields<'a> {
    fn err(&self, field: &'static str, message: impl std::fmt::Display) -> JobsError {
        JobsError::invalid(Some(self.index), Some(field), format!("operations[{}].{field}: {message}", self.index))
    }

    /// Refuses fields the op does not know, so a misspelt one is not ignored.
    fn only(&self, allowed: &[&str]) -> Result<(), JobsError> {
        match self.map.keys().find(|k| !COMMON.contains(&k.as_str()) && !allowed.contains(&k.as_str())) {
            Some(k) => Err(JobsError::invalid(
                Some(self.index),
                None,
                format!("operations[{}]: unknown field {k:?}", self.index),
            )),
            None => Ok(()),
        }
    }

    fn str(&self, field: &'static str) -> Result<Option<&'a str>, JobsError> {
        match self.map.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(self.err(field, "must be a string")),
        }
    }

    /// A free-text identifier: 1 to `max` bytes, no control characters.
    fn text(&self, field: &'static str, max: usize, required: bool) -> Result<Option<String>, JobsError> {
        let Some(s) = self.str(field)? else {
            return if required { Err(self.err(field, "is required")) } else { Ok(None) };
        };
        if s.is_empty() || s.len() > max {
            return Err(self.err(field, format!("must be 1 to {max} bytes, not {}", s.len())));
        }
        if s.chars().any(char::is_control) {
            return Err(self.err(field, "must not hold control characters"));
        }
        Ok(Some(s.to_string()))
    }

    fn bool(&self, field: &'static str) -> Result<Option<bool>, JobsError> {
        match self.map.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(self.err(field, "must be true or false")),
        }
    }

    fn int(&self, field: &'static str, min: u64, max: u64) -> Result<Option<u64>, JobsError> {
        match self.map.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => match v.as_u64() {
                Some(n) if n >= min && n <= max => Ok(Some(n)),
                _ => Err(self.err(field, format!("must be an integer from {min} to {max}, not {v}"))),
            },
        }
    }

    /// A JSON value stored as its compact text; absent is `null`.
    fn json(&self, field: &'static str) -> Result<Vec<u8>, JobsError> {
        let text = match self.map.get(field) {
            None => b"null".to_vec(),
            Some(v) => serde_json::to_vec(v).map_err(|e| self.err(field, e))?,
        };
        if text.len() > JOB_PAYLOAD_BYTES_MAX {
            return Err(self
                .err(field, format!("is {} bytes; the limit is {JOB_PAYLOAD_BYTES_MAX}", text.len()))
                .with_code(codes::JOB_PAYLOAD_TOO_LARGE));
        }
        Ok(text)
    }

    fn target(&self) -> Result<JobTarget, JobsError> {
        let queue = self.str("queue")?.ok_or_else(|| self.err("queue", "is required"))?;
        validate_name(NameKind::Queue, queue).map_err(|e| self.err("queue", e))?;
        let scope = self.str("scope")?.unwrap_or("");
        if scope.len() > JOB_SCOPE_BYTES_MAX || scope.chars().any(char::is_control) {
            return Err(
                self.err("scope", format!("must be at most {JOB_SCOPE_BYTES_MAX} bytes without control characters"))
            );
        }
        Ok(JobTarget { queue: queue.to_string(), scope: scope.to_string() })
    }

    fn id(&self) -> Result<String, JobsError> {
        Ok(self.text("id", JOB_ID_BYTES_MAX, true)?.expect("required"))
    }

    fn proof(&self) -> Result<LeaseProof, JobsError> {
        Ok(LeaseProof {
            id: self.id()?,
            owner: self.text("owner", JOB_OWNER_BYTES_MAX, true)?.expect("required"),
            token: self.int("token", 1, u64::MAX)?.ok_or_else(|| self.err("token", "is required"))?,
        })
    }

    fn delay(&self) -> Result<Option<u64>, JobsError> {
        self.int("delayMs", 0, JOB_DELAY_MS_MAX)
    }

    fn lease_ms(&self) -> Result<Option<u64>, JobsError> {
        self.int("leaseMs", 1, JOB_LEASE_MS_MAX).map_err(|e| e.with_code(codes::LEASE_TOO_LONG))
    }

    /// `delayMs` or `at` (ISO-8601 or epoch ms), not both.
    fn availability(&self) -> Result<Availability, JobsError> {
        let delay = self.delay()?;
        let at = match self.map.get("at") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => {
                Some(parse_iso(s).ok_or_else(|| self.err("at", format!("{s:?} is not an ISO-8601 time")))?)
            }
            Some(v) => {
                Some(v.as_u64().ok_or_else(|| self.err("at", "must be an ISO-8601 time or epoch milliseconds"))?)
            }
        };
        match (delay, at) {
            (Some(_), Some(_)) => Err(self.err("at", "name delayMs or at, not both")),
            (Some(d), None) => Ok(Availability::AfterMs(d)),
            (None, Some(t)) => Ok(Availability::AtMs(t)),
            (None, None) => Ok(Availability::Now),
        }
    }

    fn required(&self, surface: Surface) -> Result<bool, JobsError> {
        Ok(surface == Surface::Step || self.bool("required")?.unwrap_or(false))
    }
}

/// Reads the operations of a call or a step.
pub fn parse_ops(raw: &[Value], surface: Surface) -> Result<Vec<Parsed>, JobsError> {
    if raw.len() > JOB_OPS_MAX {
        return Err(JobsError::invalid(None, None, format!("{} operations; the limit is {JOB_OPS_MAX}", raw.len())));
    }
    let ops = raw.iter().enumerate().map(|(i, v)| parse_op(i, v, surface)).collect::<Result<Vec<_>, _>>()?;
    if ops.len() > 1 {
        if let Some(i) = ops.iter().position(|p| p.wait_ms.is_some()) {
            return Err(JobsError::invalid(
                Some(i),
                Some("waitMs"),
                format!("operations[{i}]: a claim with waitMs must be the only operation of its call"),
            ));
        }
    }
    Ok(ops)
}

fn parse_op(index: usize, v: &Value, surface: Surface) -> Result<Parsed, JobsError> {
    let Value::Object(map) = v else {
        return Err(JobsError::invalid(Some(index), None, format!("operations[{index}] is not an object")));
    };
    let f = Fields { index, map };
    let name = f.str("op")?.ok_or_else(|| f.err("op", "is required"))?;
    let at = f.target()?;
    let (name, op, wait_ms): (&'static str, JobOp, Option<u64>) = match name {
        "configure" if surface == Surface::Call => ("configure", configure_op(&f, at)?, None),
        "enqueue" => {
            f.only(&["id", "payload", "delayMs", "at", "replace", "required"])?;
            let op = JobOp::Enqueue {
                id: f.id()?,
                payload: f.json("payload")?,
                when: f.availability()?,
                replace: f.bool("replace")?.unwrap_or(false),
                required: f.required(surface)?,
                at,
            };
            ("enqueue", op, None)
        }
        "claim" if surface == Surface::Call => ("claim", claim_op(&f, at)?, f.int("waitMs", 0, JOB_WAIT_MS_MAX)?),
        "renew" if surface == Surface::Call => {
            f.only(&["id", "owner", "token", "leaseMs", "required"])?;
            let op = JobOp::Renew { proof: f.proof()?, lease_ms: f.lease_ms()?, required: f.required(surface)?, at };
            ("renew", op, None)
        }
        "complete" => {
            f.only(&["id", "owner", "token", "result", "required"])?;
            let op =
                JobOp::Complete { proof: f.proof()?, result: f.json("result")?, required: f.required(surface)?, at };
            ("complete", op, None)
        }
        "fail" => {
            f.only(&["id", "owner", "token", "error", "retry", "delayMs", "required"])?;
            let op = JobOp::Fail {
                proof: f.proof()?,
                error: f.json("error")?,
                retry: f.bool("retry")?.unwrap_or(true),
                delay_ms: f.delay()?,
                required: f.required(surface)?,
                at,
            };
            ("fail", op, None)
        }
        "release" => {
            f.only(&["id", "owner", "token", "delayMs", "required"])?;
            let op = JobOp::Release { proof: f.proof()?, delay_ms: f.delay()?, required: f.required(surface)?, at };
            ("release", op, None)
        }
        "retry" => {
            f.only(&["id", "delayMs", "required"])?;
            ("retry", JobOp::Retry { id: f.id()?, delay_ms: f.delay()?, required: f.required(surface)?, at }, None)
        }
        "cancel" => {
            f.only(&["id", "required"])?;
            ("cancel", JobOp::Cancel { id: f.id()?, required: f.required(surface)?, at }, None)
        }
        "get" if surface == Surface::Call => {
            f.only(&["id"])?;
            ("get", JobOp::Get { id: f.id()?, at }, None)
        }
        "scan" if surface == Surface::Call => ("scan", scan_op(&f, at)?, None),
        "stats" if surface == Surface::Call => {
            f.only(&[])?;
            ("stats", JobOp::Stats { at }, None)
        }
        other => {
            let allowed = match surface {
                Surface::Call => {
                    "configure, enqueue, claim, renew, complete, fail, release, retry, cancel, get, scan or stats"
                }
                Surface::Step => "enqueue, complete, fail, release, retry or cancel",
            };
            return Err(f.err("op", format!("{other:?} is not {allowed}")));
        }
    };
    Ok(Parsed { op, name, wait_ms })
}

/// `configure`: a patch of the queue's config, for every scope at once.
fn configure_op(f: &Fields, at: JobTarget) -> Result<JobOp, JobsError> {
    f.only(&["lease", "retry", "payloadSchema", "resultSchema", "completedRetentionMs"])?;
    if !at.scope.is_empty() {
        return Err(f.err("scope", "a queue's configuration covers every scope; name none"));
    }
    Ok(JobOp::Configure { queue: at.queue, patch: config_patch(f)? })
}

/// `claim`: the next available job of a scope, leased to `owner`.
fn claim_op(f: &Fields, at: JobTarget) -> Result<JobOp, JobsError> {
    f.only(&["owner", "leaseMs", "requestId", "waitMs"])?;
    Ok(JobOp::Claim {
        owner: f.text("owner", JOB_OWNER_BYTES_MAX, true)?.expect("required"),
        lease_ms: f.lease_ms()?,
        request_id: f.text("requestId", JOB_OWNER_BYTES_MAX, false)?,
        at,
    })
}

/// `scan`: a page of a scope's jobs, optionally of one state.
fn scan_op(f: &Fields, at: JobTarget) -> Result<JobOp, JobsError> {
    f.only(&["state", "after", "limit"])?;
    let state = match f.str("state")? {
        None => None,
        Some(s) => Some(
            JobState::parse(s)
                .ok_or_else(|| f.err("state", format!("{s:?} is not pending, leased, completed or failed")))?,
        ),
    };
    let after = f.text("after", JOB_ID_BYTES_MAX, false)?;
    let limit = f
        .int("limit", 1, u64::from(u32::MAX))?
        .map_or(JOB_SCAN_LIMIT_DEFAULT, |l| l.min(u64::from(JOB_SCAN_LIMIT_MAX)) as u32);
    Ok(JobOp::Scan { state, after, limit, at })
}

fn config_patch(f: &Fields) -> Result<JobConfigPatch, JobsError> {
    let mut p = JobConfigPatch::default();
    match f.map.get("lease") {
        None | Some(Value::Null) => {}
        Some(Value::Object(lease)) => {
            let sub = Fields { index: f.index, map: lease };
            if let Some(k) = lease.keys().find(|k| !["defaultMs", "maxMs"].contains(&k.as_str())) {
                return Err(f.err("lease", format!("unknown field {k:?}")));
            }
            p.lease_default_ms = sub.int("defaultMs", 1, JOB_LEASE_MS_MAX)?;
            p.lease_max_ms = sub.int("maxMs", 1, JOB_LEASE_MS_MAX)?;
            if let (Some(d), Some(m)) = (p.lease_default_ms, p.lease_max_ms) {
                if d > m {
                    return Err(f.err("lease", format!("defaultMs {d} is above maxMs {m}")));
                }
            }
        }
        Some(_) => return Err(f.err("lease", "must be an object {defaultMs, maxMs}")),
    }
    match f.map.get("retry") {
        None | Some(Value::Null) => {}
        Some(Value::Bool(false)) => p.retry = Some(None),
        Some(Value::Object(retry)) => {
            let sub = Fields { index: f.index, map: retry };
            if let Some(k) =
                retry.keys().find(|k| !["maxAttempts", "initialDelayMs", "maxDelayMs"].contains(&k.as_str()))
            {
                return Err(f.err("retry", format!("unknown field {k:?}")));
            }
            let max_attempts = sub.int("maxAttempts", 1, u64::from(JOB_MAX_ATTEMPTS_MAX))?;
            let policy = RetryPolicy {
                max_attempts: max_attempts.map_or(JOB_MAX_ATTEMPTS_DEFAULT, |n| n as u32),
                initial_delay_ms: sub
                    .int("initialDelayMs", 0, JOB_DELAY_MS_MAX)?
                    .unwrap_or(JOB_RETRY_INITIAL_DELAY_MS_DEFAULT),
                max_delay_ms: sub.int("maxDelayMs", 0, JOB_DELAY_MS_MAX)?.unwrap_or(JOB_RETRY_MAX_DELAY_MS_DEFAULT),
            };
            p.retry = Some(Some(policy));
        }
        Some(_) => return Err(f.err("retry", "must be an object {maxAttempts, initialDelayMs, maxDelayMs} or false")),
    }
    p.payload_schema = schema(f, "payloadSchema")?;
    p.result_schema = schema(f, "resultSchema")?;
    p.completed_retention_ms = match f.map.get("completedRetentionMs") {
        None => None,
        Some(Value::Null) => Some(None),
        Some(_) => Some(f.int("completedRetentionMs", 0, JOB_DELAY_MS_MAX)?),
    };
    Ok(p)
}

/// A JSON Schema, checked to compile; `null` clears it.
fn schema(f: &Fields, field: &'static str) -> Result<Option<Option<String>>, JobsError> {
    match f.map.get(field) {
        None => Ok(None),
        Some(Value::Null) => Ok(Some(None)),
        Some(v) => {
            let text = v.to_string();
            if text.len() > JOB_SCHEMA_BYTES_MAX {
                return Err(f.err(field, format!("is {} bytes; the limit is {JOB_SCHEMA_BYTES_MAX}", text.len())));
            }
            crate::http::routes::jobs::schema::compile(&text)
                .map_err(|e| f.err(field, format!("is not a usable JSON Schema: {e}")))?;
            Ok(Some(Some(text)))
        }
    }
}
