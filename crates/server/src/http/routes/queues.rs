//! `POST /api/v1/configure` and `DELETE /api/v1/resources/queues/{queue}`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};

use regina_state::command::ConfigureCmd;
use regina_state::options::{OptionsPatch, QueueOptions, TimerPolicyPatch};
use regina_state::{Command, Outcome};
use regina_types::limits::{
    DURATION_SECONDS_MAX, LEASE_SECONDS_MAX, POP_WAIT_MS_MAX, RETRY_LIMIT_MAX, TIMER_MAX_ATTEMPTS_DEFAULT,
    TIMER_MAX_ATTEMPTS_MAX, TIMER_MAX_RETRY_DELAY_MS_DEFAULT, TIMER_RETRY_DELAY_MS_DEFAULT, TIMER_RETRY_DELAY_MS_MAX,
};
use regina_types::{validate_name, NameKind};

use crate::http::error::{ApiError, ApiResult};
use crate::http::input::{body_bytes, json_body};
use regina_node::Replica;

pub async fn configure(State(node): State<Arc<Replica>>, body: Result<Bytes, BytesRejection>) -> ApiResult<Response> {
    let bytes = body_bytes(body)?;
    let b: Map<String, Value> = json_body(&bytes, false)?;
    let queue = match b.get("queue") {
        Some(Value::String(q)) => q.clone(),
        Some(_) => return Err(ApiError::bad_request("queue must be a string").at_field("queue")),
        None => return Err(ApiError::bad_request("queue is required").at_field("queue")),
    };
    validate_name(NameKind::Queue, &queue).map_err(ApiError::from_name)?;
    // Labels may come at the top level or inside `options`; the top level wins.
    let inner = match b.get("options") {
        Some(Value::Object(o)) => Some(o),
        _ => None,
    };
    let namespace = match label(&b, "namespace", NameKind::Namespace)? {
        Some(v) => Some(v),
        None => inner.map(|o| label(o, "namespace", NameKind::Namespace)).transpose()?.flatten(),
    };
    let task = match label(&b, "task", NameKind::Task)? {
        Some(v) => Some(v),
        None => inner.map(|o| label(o, "task", NameKind::Task)).transpose()?.flatten(),
    };
    let replace = match b.get("mode") {
        None | Some(Value::Null) => false,
        Some(Value::String(m)) if m == "merge" => false,
        Some(Value::String(m)) if m == "replace" => true,
        Some(_) => return Err(ApiError::bad_request("mode must be \"merge\" or \"replace\"").at_field("mode")),
    };
    let options = match b.get("options") {
        None | Some(Value::Null) => OptionsPatch::default(),
        Some(Value::Object(o)) => patch(o)?,
        Some(_) => return Err(ApiError::bad_request("options must be an object").at_field("options")),
    };
    let policy = match b.get("options") {
        Some(Value::Object(o)) => timer_policy(o)?,
        _ => TimerPolicyPatch::default(),
    };
    let cmd = Command::Configure(ConfigureCmd { queue: queue.clone(), namespace, task, options, replace });
    // The timer retry options travel in a command of their own, applied
    // right after the configure in the same entry (old log entries hold
    // `OptionsPatch`, so it cannot grow).
    let cmd = if policy.is_empty() {
        cmd
    } else {
        Command::Batch(vec![cmd, Command::ConfigureTimerPolicy { queue: queue.clone(), policy }])
    };
    match node.propose(cmd).await? {
        Outcome::Configured { .. } => {}
        Outcome::Batch(outs) if matches!(outs.first(), Some(Outcome::Configured { .. })) => {}
        other => return Err(ApiError::internal(format!("configure answered {other:?}"))),
    }
    let m = node.tenant_state();
    let q = m.queue(&queue).ok_or_else(|| ApiError::internal("configured queue vanished"))?;
    let opts = options_json(&q.options);
    let mut body = json!({
        "configured": true,
        "queue": queue,
        "queueId": q.id,
        "namespace": q.namespace,
        "task": q.task,
        "options": opts.clone(),
    });
    // Options also at the top level: some clients read them there.
    if let (Value::Object(top), Value::Object(o)) = (&mut body, opts) {
        top.extend(o);
    }
    Ok(axum::Json(body).into_response())
}

fn label(b: &Map<String, Value>, key: &str, kind: NameKind) -> ApiResult<Option<Option<String>>> {
    match b.get(key) {
        None => Ok(None),
        Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(Some(None)),
        Some(Value::String(s)) => {
            validate_name(kind, s).map_err(ApiError::from_name)?;
            Ok(Some(Some(s.clone())))
        }
        Some(_) => Err(ApiError::bad_request(format!("{key} must be a string or null")).at_field(key)),
    }
}

/// One integer option: absent is `None`, `null` names `default`, anything
/// else must be a JSON integer in `[min, max]`.
fn option_int(o: &Map<String, Value>, key: &str, min: u64, max: u64, default: u64) -> ApiResult<Option<u64>> {
    match o.get(key) {
        None => Ok(None),
        Some(Value::Null) => Ok(Some(default)),
        Some(v) => match v.as_u64() {
            Some(n) if n >= min && n <= max => Ok(Some(n)),
            _ => Err(ApiError::bad_request(format!("options.{key} must be an integer from {min} to {max}, not {v}"))
                .at_field(format!("options.{key}"))),
        },
    }
}

/// Reads the options a configure names; integers must be JSON integers in
/// range and flags JSON booleans. Unknown keys are ignored.
fn patch(o: &Map<String, Value>) -> ApiResult<OptionsPatch> {
    let d = QueueOptions::configured_defaults();
    let int = |key: &str, min: u64, max: u64, default: u64| option_int(o, key, min, max, default);
    let flag = |key: &str, default: bool| -> ApiResult<Option<bool>> {
        match o.get(key) {
            None => Ok(None),
            Some(Value::Null) => Ok(Some(default)),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(ApiError::bad_request(format!("options.{key} must be true or false, not {v}"))
                .at_field(format!("options.{key}"))),
        }
    };
    let priority = match o.get("priority") {
        None => None,
        Some(Value::Null) => Some(0),
        Some(v) => Some(v.as_i64().filter(|p| p.abs() <= 1_000_000).ok_or_else(|| {
            ApiError::bad_request(format!("options.priority must be an integer from -1000000 to 1000000, not {v}"))
                .at_field("options.priority")
        })?),
    };
    Ok(OptionsPatch {
        lease_time: int("leaseTime", 1, LEASE_SECONDS_MAX, d.lease_time)?,
        retry_limit: int("retryLimit", 0, RETRY_LIMIT_MAX as u64, d.retry_limit as u64)?.map(|v| v as u32),
        priority,
        delayed_processing: int("delayedProcessing", 0, DURATION_SECONDS_MAX, 0)?,
        window_buffer: int("windowBuffer", 0, DURATION_SECONDS_MAX, 0)?,
        max_size: int("maxSize", 0, u32::MAX as u64 * 1024, 0)?,
        retention_seconds: int("retentionSeconds", 0, DURATION_SECONDS_MAX, 0)?,
        completed_retention_seconds: int("completedRetentionSeconds", 0, DURATION_SECONDS_MAX, 0)?,
        retention_enabled: flag("retentionEnabled", false)?,
        encryption_enabled: flag("encryptionEnabled", false)?,
        dlq_after_max_retries: flag("dlqAfterMaxRetries", true)?,
        dedup_window_seconds: int("dedupWindowSeconds", 0, DURATION_SECONDS_MAX, d.dedup_window_seconds)?,
        dead_letter_queue: flag("deadLetterQueue", true)?,
        retry_delay_ms: int("retryDelay", 0, DURATION_SECONDS_MAX * 1000, d.retry_delay_ms)?,
        ttl: int("ttl", 0, DURATION_SECONDS_MAX, 0)?,
        max_wait_time_seconds: int("maxWaitTimeSeconds", 0, POP_WAIT_MS_MAX / 1000, 0)?,
        // Clamped, not refused: the clients send what their users typed.
        min_pop_wait_time_ms: clamped("minPopWaitTime", 0, POP_WAIT_MS_MAX, o)?,
    })
}

/// Reads the timer retry options (`timerMaxAttempts`, `timerRetryDelayMs`,
/// `timerMaxRetryDelayMs`); `null` names the default.
fn timer_policy(o: &Map<String, Value>) -> ApiResult<TimerPolicyPatch> {
    let int = |key: &str, min: u64, max: u64, default: u64| option_int(o, key, min, max, default);
    Ok(TimerPolicyPatch {
        max_attempts: int("timerMaxAttempts", 1, TIMER_MAX_ATTEMPTS_MAX as u64, TIMER_MAX_ATTEMPTS_DEFAULT as u64)?
            .map(|v| v as u32),
        retry_delay_ms: int("timerRetryDelayMs", 1, TIMER_RETRY_DELAY_MS_MAX, TIMER_RETRY_DELAY_MS_DEFAULT)?,
        max_retry_delay_ms: int("timerMaxRetryDelayMs", 1, TIMER_RETRY_DELAY_MS_MAX, TIMER_MAX_RETRY_DELAY_MS_DEFAULT)?,
    })
}

/// An integer option clamped into `[min, max]` (negative values become
/// `min`); only a non-integer is refused.
fn clamped(key: &str, min: u64, max: u64, o: &Map<String, Value>) -> ApiResult<Option<u64>> {
    match o.get(key) {
        None => Ok(None),
        Some(Value::Null) => Ok(Some(min)),
        Some(v) => match v.as_i64() {
            Some(n) => Ok(Some((n.max(0) as u64).clamp(min, max))),
            None => match v.as_u64() {
                Some(n) => Ok(Some(n.clamp(min, max))),
                None => Err(ApiError::bad_request(format!("options.{key} must be an integer, not {v}"))
                    .at_field(format!("options.{key}"))),
            },
        },
    }
}

pub fn options_json(o: &QueueOptions) -> Value {
    json!({
        "leaseTime": o.lease_time,
        "retryLimit": o.retry_limit,
        "priority": o.priority,
        "delayedProcessing": o.delayed_processing,
        "windowBuffer": o.window_buffer,
        "maxSize": o.max_size,
        "retentionSeconds": o.retention_seconds,
        "completedRetentionSeconds": o.completed_retention_seconds,
        "retentionEnabled": o.retention_enabled,
        "encryptionEnabled": o.encryption_enabled,
        "dlqAfterMaxRetries": o.dlq_after_max_retries,
        "dedupWindowSeconds": o.dedup_window_seconds,
        "deadLetterQueue": o.dead_letter_queue,
        "retryDelay": o.retry_delay_ms,
        "ttl": o.ttl,
        "maxWaitTimeSeconds": o.max_wait_time_seconds,
        "minPopWaitTime": o.min_pop_wait_time_ms,
        "timerMaxAttempts": o.timer_max_attempts,
        "timerRetryDelayMs": o.timer_retry_delay_ms,
        "timerMaxRetryDelayMs": o.timer_max_retry_delay_ms,
    })
}

pub async fn delete_queue(State(node): State<Arc<Replica>>, Path(queue): Path<String>) -> ApiResult<Response> {
    validate_name(NameKind::Queue, &queue).map_err(ApiError::from_name)?;
    let existed = match node.propose(Command::DeleteQueue { queue: queue.clone() }).await? {
        Outcome::Deleted { existed } => existed,
        other => return Err(ApiError::internal(format!("delete answered {other:?}"))),
    };
    Ok(axum::Json(json!({ "deleted": existed, "existed": existed, "queue": queue })).into_response())
}
