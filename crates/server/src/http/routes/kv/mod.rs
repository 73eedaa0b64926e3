//! The key/value routes: `POST /api/v1/kv` (a batch of operations) and
//! `GET|PUT|DELETE /api/v1/kv/{ns}/{*key}` (one key, named in the path).
//!
//! A call with a write is one log entry, so its operations are judged in
//! order at one point and a `required` loss writes nothing. A call of
//! reads and checks only is answered from the applied state: on a single
//! node every acknowledged write is applied before it was answered. A lost
//! precondition or a missing key is a verdict (200), never an error status.

pub(crate) mod input;
pub(crate) mod lifetime;

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::Uri;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use regina_state::command::{KvCmd, KvOp};
use regina_state::outcome::{KvOutcome, KvReason, KvRefusal, KvResult, KvRowView};
use regina_state::{Command, Outcome};
use regina_types::limits::REQUEST_BODY_BYTES_MAX;
use regina_types::time::format_iso;

use crate::http::error::KvError;
use crate::http::routes::kv::input::{operations, parse_op, parse_ops, Fields, Scope, Surface};
use crate::http::routes::kv::lifetime::lifetime_json;
use regina_node::Replica;

/// The body as bytes, refused in the KV envelope when unreadable.
pub fn kv_body(body: Result<Bytes, BytesRejection>, surface: Surface) -> Result<Bytes, KvError> {
    body.map_err(|e| {
        if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
            let reason = if surface == Surface::Kv { "kv_call_too_large" } else { "locks_call_too_large" };
            KvError::too_large(reason, format!("the body is over {REQUEST_BODY_BYTES_MAX} bytes"))
        } else {
            surface.bad(surface.bad_body(), format!("could not read the body: {e}"))
        }
    })
}

pub async fn batch(State(node): State<Arc<Replica>>, body: Result<Bytes, BytesRejection>) -> Result<Response, KvError> {
    let bytes = kv_body(body, Surface::Kv)?;
    let raw = operations(&bytes, Surface::Kv)?;
    let ops = parse_ops(&raw, Scope::Call)?;
    let outcome = run(&node, &ops).await?;
    Ok(match outcome {
        KvOutcome::Refused(r) if r.reason == KvReason::NoLifetime => {
            return Err(no_lifetime(&format!("operations[{}]", r.index), &ops[r.index]))
        }
        KvOutcome::Refused(r) => precondition(&r, "nothing in the call was applied").into_response(),
        KvOutcome::Done(results) => {
            let results = ops.iter().zip(&results).enumerate().map(|(i, (op, r))| result_json(i, op, r)).collect();
            axum::Json(Results { results }).into_response()
        }
    })
}

/// Applies a call through the log, or reads it when it writes nothing.
pub async fn run(node: &Replica, ops: &[KvOp]) -> Result<KvOutcome, KvError> {
    if !ops.iter().any(KvOp::is_write) {
        let m = node.tenant_state();
        return Ok(m.kv_read(ops, node.stamp()));
    }
    let outcome = node
        .propose(Command::Kv(KvCmd { ops: ops.to_vec() }))
        .await
        .map_err(|e| KvError::unavailable(crate::http::codes::KV_UNAVAILABLE, e))?;
    match outcome {
        Outcome::Kv(o) => Ok(o),
        o => Err(KvError::new(crate::http::codes::KV_ERROR, "kv_error", format!("kv answered {o:?}"))),
    }
}

/// `GET /api/v1/kv/{ns}/{*key}`: one result element.
pub async fn get_one(
    State(node): State<Arc<Replica>>,
    path: Result<Path<(String, String)>, PathRejection>,
    uri: Uri,
) -> Result<Response, KvError> {
    if uri.query().is_some_and(|q| !q.is_empty()) {
        return Err(KvError::bad("kv_no_query_string", "this route takes no query string; a key belongs in the path"));
    }
    one(&node, path, "get", HashMap::new()).await
}

/// `PUT /api/v1/kv/{ns}/{*key}` with `{value, ttlSeconds|forever, expect?, required?}`.
pub async fn put_one(
    State(node): State<Arc<Replica>>,
    path: Result<Path<(String, String)>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, KvError> {
    let bytes = kv_body(body, Surface::Kv)?;
    one(&node, path, "put", path_body(&bytes)?).await
}

/// `DELETE /api/v1/kv/{ns}/{*key}` with an optional `{expect?, required?}`.
pub async fn delete_one(
    State(node): State<Arc<Replica>>,
    path: Result<Path<(String, String)>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, KvError> {
    let bytes = kv_body(body, Surface::Kv)?;
    one(&node, path, "delete", path_body(&bytes)?).await
}

fn path_body(bytes: &[u8]) -> Result<HashMap<String, &RawValue>, KvError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(HashMap::new());
    }
    serde_json::from_slice(bytes)
        .map_err(|e| KvError::bad("kv_bad_body", format!("the body must be a JSON object: {e}")))
}

async fn one(
    node: &Replica,
    path: Result<Path<(String, String)>, PathRejection>,
    kind: &str,
    map: HashMap<String, &RawValue>,
) -> Result<Response, KvError> {
    let Path((ns, key)) = path.map_err(|e| KvError::bad("kv_bad_key", format!("unreadable path: {e}")))?;
    if let Some(f) = ["op", "ns", "key"].iter().find(|f| map.contains_key(**f)) {
        return Err(KvError::bad("kv_field_in_path", format!("{f} is named by the path, not the body")));
    }
    let named = [("op", kind.to_string()), ("ns", ns), ("key", key)]
        .map(|(f, v)| (f, RawValue::from_string(Value::String(v).to_string()).expect("a JSON string")));
    let mut map: HashMap<String, &RawValue> = map;
    for (f, v) in &named {
        map.insert(f.to_string(), &**v);
    }
    let fields = Fields::from_map(map, "body".into());
    let op = parse_op(&fields, Scope::Call)?;
    let ops = [op];
    Ok(match run(node, &ops).await? {
        KvOutcome::Refused(r) if r.reason == KvReason::NoLifetime => return Err(no_lifetime("body", &ops[0])),
        KvOutcome::Refused(r) => precondition(&r, "nothing was applied").into_response(),
        KvOutcome::Done(results) => axum::Json(result_json(0, &ops[0], &results[0])).into_response(),
    })
}

/// A write that named no lifetime in a namespace without a default: the
/// state refuses it (the default is judged where it is stored, at the
/// entry's time), and it answers as the malformed request it is.
pub fn no_lifetime(at: &str, op: &KvOp) -> KvError {
    let ns = match op {
        KvOp::PutWith { ns, .. } | KvOp::IncrWith { ns, .. } | KvOp::Touch { ns, .. } => ns.as_str(),
        _ => "",
    };
    KvError::bad(
        "kv_expiry_not_specified",
        format!(
            "{at}: a write names one of ttlSeconds, forever: true, expiresAt, afterCreationMs and afterUpdateMs, \
             and namespace {ns:?} has no default expiration"
        ),
    )
}

/// The answer to a call a `required` operation refused.
pub fn precondition(r: &KvRefusal, what: &str) -> axum::Json<Value> {
    axum::Json(json!({
        "ok": false,
        "success": false,
        "reason": "kv_precondition",
        "failedIndex": r.index,
        "kvReason": r.reason.as_str(),
        "version": r.current.as_ref().map_or(0, |c| c.version),
        "value": r.current.as_ref().map_or(Value::Null, value_of),
        "error": format!("QKV a required KV precondition failed; {what}"),
        "results": [],
    }))
}

/// A row's value as a JSON value, for verdict bodies.
pub fn value_of(row: &KvRowView) -> Value {
    row.value.as_deref().and_then(|v| serde_json::from_slice(v).ok()).unwrap_or(Value::Null)
}

#[derive(Serialize)]
struct Results<'a> {
    results: Vec<KvJson<'a>>,
}

/// One result element. Values are written back as their stored JSON text.
#[derive(Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct KvJson<'a> {
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    kind: Option<&'static str>,
    index: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    op_index: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    success: Option<bool>,
    op: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    key: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    applied: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    found: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<u64>,
    /// `Some(None)`: a row that never expires, written as `null`.
    #[serde(skip_serializing_if = "Option::is_none")]
    expires_at: Option<Option<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    updated_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    created_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ns: Option<&'a str>,
    /// A configure's answer: the namespace default now (`null`: none).
    #[serde(skip_serializing_if = "Option::is_none")]
    expiration: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rows: Option<Vec<RowJson<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    missing: Option<&'a [String]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    truncated: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_after: Option<Option<&'a str>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RowJson<'a> {
    key: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<&'a RawValue>,
    version: u64,
    expires_at: Option<String>,
    updated_at: String,
    created_at: String,
}

impl KvJson<'_> {
    /// The element as a transaction lists it: `index` in the flat space,
    /// `opIndex` inside the `kv` array.
    pub fn in_transaction(self, flat_index: usize) -> Self {
        KvJson { kind: Some("kv"), op_index: Some(self.index), index: flat_index, success: Some(true), ..self }
    }
}

fn raw(row: &KvRowView) -> Option<&RawValue> {
    let text = std::str::from_utf8(row.value.as_deref()?).ok()?;
    serde_json::from_str(text).ok()
}

fn row_json(row: &KvRowView) -> RowJson<'_> {
    RowJson {
        key: &row.key,
        value: raw(row),
        version: row.version,
        expires_at: row.expires_ms.map(format_iso),
        updated_at: format_iso(row.updated_ms),
        created_at: format_iso(row.created_ms),
    }
}

fn op_name(op: &KvOp) -> (&'static str, Option<&str>) {
    match op {
        KvOp::Get { key, .. } => ("get", Some(key)),
        KvOp::GetMany { .. } => ("getMany", None),
        KvOp::GetPrefix { .. } => ("getPrefix", None),
        // putIfAbsent is a put with expect 0, and answers as one.
        KvOp::Put { key, .. } | KvOp::PutWith { key, .. } => ("put", Some(key)),
        KvOp::Delete { key, .. } => ("delete", Some(key)),
        KvOp::Incr { key, .. } | KvOp::IncrWith { key, .. } => ("incr", Some(key)),
        KvOp::Check { key, .. } => ("check", Some(key)),
        KvOp::Touch { key, .. } => ("touch", Some(key)),
        KvOp::Configure { .. } => ("configure", None),
        KvOp::Scan { .. } => ("scan", None),
    }
}

pub fn result_json<'a>(index: usize, op: &'a KvOp, r: &'a KvResult) -> KvJson<'a> {
    let (name, key) = op_name(op);
    let base = KvJson { index, op: name, key, ..Default::default() };
    let with_row = |j: KvJson<'a>, row: &'a KvRowView| KvJson {
        value: raw(row),
        version: Some(row.version),
        expires_at: Some(row.expires_ms.map(format_iso)),
        updated_at: Some(format_iso(row.updated_ms)),
        created_at: Some(format_iso(row.created_ms)),
        ..j
    };
    match r {
        KvResult::Got(None) => KvJson { found: Some(false), ..base },
        KvResult::Got(Some(row)) => with_row(KvJson { found: Some(true), ..base }, row),
        KvResult::Many { rows, missing, truncated } => KvJson {
            rows: Some(rows.iter().map(row_json).collect()),
            missing: Some(missing),
            truncated: Some(*truncated),
            ..base
        },
        KvResult::Prefix { rows, truncated, next_after } => KvJson {
            rows: Some(rows.iter().map(row_json).collect()),
            truncated: Some(*truncated),
            next_after: Some(next_after.as_deref()),
            ..base
        },
        KvResult::Written { row: Some(row) } => with_row(KvJson { applied: Some(true), ..base }, row),
        KvResult::Written { row: None } => KvJson { applied: Some(true), version: Some(0), ..base },
        KvResult::Checked { version } => KvJson { applied: Some(true), version: Some(*version), ..base },
        KvResult::Configured { expiration } => KvJson {
            applied: Some(true),
            ns: match op {
                KvOp::Configure { ns, .. } => Some(ns),
                _ => None,
            },
            expiration: Some(expiration.as_ref().map_or(Value::Null, lifetime_json)),
            ..base
        },
        KvResult::NotApplied { reason, current } => {
            let j = KvJson { applied: Some(false), reason: Some(reason.as_str()), version: Some(0), ..base };
            match current {
                Some(row) => with_row(j, row),
                // An absent counter counts from zero, so that is its value.
                None if matches!(op, KvOp::Incr { .. }) => KvJson { value: serde_json::from_str("0").ok(), ..j },
                None => j,
            }
        }
    }
}
