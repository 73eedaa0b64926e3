//! Reading the bodies of the `/streams/v1/*` routes: every field checked
//! against its rule and limit before anything is proposed, every refusal a
//! 4xx JSON error naming the field. The wire is snake_case at the top level
//! and camelCase inside an ack and a push item, as the clients send it.

use serde::Deserialize;
use serde_json::value::RawValue;

use regina_state::command::PushItem;
use regina_state::hash::bytes_hash;
use regina_state::streams::{ClaimCmd, CycleAck, CycleCmd, RegisterCmd, StateOp};
use regina_types::limits::{
    STREAM_CLAIM_LEASE_SECONDS_DEFAULT, STREAM_CLAIM_LEASE_SECONDS_MAX, STREAM_CLAIM_PARTITIONS_MAX,
    STREAM_CONFIG_HASH_BYTES_MAX, STREAM_CYCLE_OPS_MAX, STREAM_PARTITIONS_PAGE_MAX, STREAM_QUERY_NAME_BYTES_MAX,
    STREAM_STATE_GET_KEYS_MAX, STREAM_STATE_KEY_BYTES_MAX, STREAM_STATE_VALUE_BYTES_MAX,
};
use regina_types::{validate_name, NameKind, QUEUE_MODE_GROUP};

use crate::http::error::{ApiError, ApiResult};
use crate::http::input::json_body;
use crate::http::routes::push::{all_checked, to_item, ItemBody};

/// A partition id: the decimal string the pop answers carry, or a number.
#[derive(Deserialize)]
#[serde(untagged)]
enum IdField {
    Text(String),
    Number(u64),
}

fn partition_id(field: &str, id: Option<IdField>) -> ApiResult<u64> {
    match id {
        Some(IdField::Number(n)) => Ok(n),
        Some(IdField::Text(s)) if !s.is_empty() => s.parse().map_err(|_| {
            ApiError::bad_request(format!("{field} {s:?} is not a partition id (a decimal number)")).at_field(field)
        }),
        _ => Err(ApiError::bad_request(format!("{field} is required")).at_field(field)),
    }
}

fn required<'a>(field: &str, v: &'a Option<String>) -> ApiResult<&'a str> {
    v.as_deref()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| ApiError::bad_request(format!("{field} is required")).at_field(field))
}

fn text_field(field: &str, v: &str, max: usize) -> ApiResult<()> {
    if v.len() > max {
        return Err(ApiError::too_large(format!("{field} is {} bytes; the limit is {max}", v.len())).at_field(field));
    }
    if v.chars().any(char::is_control) {
        return Err(ApiError::bad_request(format!("{field} holds a control character")).at_field(field));
    }
    Ok(())
}

fn group(consumer_group: Option<&str>) -> ApiResult<String> {
    match consumer_group {
        None | Some("") => Ok(QUEUE_MODE_GROUP.to_string()),
        Some(g) => {
            validate_name(NameKind::ConsumerGroup, g).map_err(ApiError::from_name)?;
            Ok(g.to_string())
        }
    }
}

// ------------------------------------------------------------- register

#[derive(Deserialize)]
struct RegisterBody {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    source_queue: Option<String>,
    #[serde(default)]
    sink_queue: Option<String>,
    #[serde(default)]
    config_hash: Option<String>,
    #[serde(default)]
    reset: bool,
}

pub fn register(bytes: &[u8], new_id: String) -> ApiResult<RegisterCmd> {
    let b: RegisterBody = json_body(bytes, false)?;
    let name = required("name", &b.name)?;
    text_field("name", name, STREAM_QUERY_NAME_BYTES_MAX)?;
    let source = required("source_queue", &b.source_queue)?;
    validate_name(NameKind::Queue, source).map_err(ApiError::from_name)?;
    let sink = b.sink_queue.filter(|s| !s.is_empty());
    if let Some(s) = &sink {
        validate_name(NameKind::Queue, s).map_err(ApiError::from_name)?;
    }
    let hash = required("config_hash", &b.config_hash)?;
    text_field("config_hash", hash, STREAM_CONFIG_HASH_BYTES_MAX)?;
    Ok(RegisterCmd {
        name: name.to_string(),
        source_queue: source.to_string(),
        sink_queue: sink,
        config_hash: hash.to_string(),
        reset: b.reset,
        new_id,
    })
}

// ------------------------------------------------------------ state get

#[derive(Deserialize)]
struct StateGetBody {
    #[serde(default)]
    query_id: Option<String>,
    #[serde(default)]
    partition_id: Option<IdField>,
    #[serde(default)]
    keys: Vec<String>,
    #[serde(default)]
    key_prefix: Option<String>,
    #[serde(default)]
    ripe_at_or_before: Option<serde_json::Number>,
}

pub struct StateGet {
    pub query_id: String,
    pub partition_id: u64,
    pub keys: Vec<String>,
    pub key_prefix: Option<String>,
    pub ripe_at_or_before: Option<i64>,
}

pub fn state_get(bytes: &[u8]) -> ApiResult<StateGet> {
    let b: StateGetBody = json_body(bytes, false)?;
    let query_id = required("query_id", &b.query_id)?.to_string();
    let partition_id = partition_id("partition_id", b.partition_id)?;
    if b.keys.len() > STREAM_STATE_GET_KEYS_MAX {
        return Err(ApiError::too_large(format!(
            "{} keys in one read; the limit is {STREAM_STATE_GET_KEYS_MAX}",
            b.keys.len()
        )));
    }
    let ripe_at_or_before = match b.ripe_at_or_before {
        None => None,
        Some(n) => Some(n.as_i64().or_else(|| n.as_f64().map(|f| f.floor() as i64)).ok_or_else(|| {
            ApiError::bad_request("ripe_at_or_before must be a number of ms").at_field("ripe_at_or_before")
        })?),
    };
    Ok(StateGet {
        query_id,
        partition_id,
        keys: b.keys,
        key_prefix: b.key_prefix.filter(|p| !p.is_empty()),
        ripe_at_or_before,
    })
}

// ---------------------------------------------------------- partitions

#[derive(Deserialize)]
struct PartitionsBody {
    #[serde(default)]
    query_id: Option<String>,
    #[serde(default)]
    untouched_for_ms: Option<i64>,
    #[serde(default)]
    after: Option<IdField>,
    #[serde(default)]
    limit: Option<u64>,
}

pub struct Partitions {
    pub query_id: String,
    pub untouched_for_ms: Option<u64>,
    pub after: Option<u64>,
    pub limit: usize,
}

pub fn partitions(bytes: &[u8]) -> ApiResult<Partitions> {
    let b: PartitionsBody = json_body(bytes, false)?;
    let query_id = required("query_id", &b.query_id)?.to_string();
    let after = match b.after {
        None => None,
        Some(IdField::Text(s)) if s.is_empty() => None,
        a => Some(partition_id("after", a)?),
    };
    let untouched_for_ms = match b.untouched_for_ms {
        Some(ms) if ms < 0 => {
            return Err(ApiError::bad_request("untouched_for_ms must not be negative").at_field("untouched_for_ms"))
        }
        ms => ms.map(|m| m as u64),
    };
    let limit = match b.limit {
        Some(0) => return Err(ApiError::bad_request("limit must be at least 1").at_field("limit")),
        Some(n) => (n as usize).min(STREAM_PARTITIONS_PAGE_MAX),
        None => STREAM_PARTITIONS_PAGE_MAX,
    };
    Ok(Partitions { query_id, untouched_for_ms, after, limit })
}

// ---------------------------------------------------------------- claim

#[derive(Deserialize)]
struct ClaimBody {
    #[serde(default)]
    query_id: Option<String>,
    #[serde(default)]
    partition_ids: Vec<IdField>,
    #[serde(default)]
    consumer_group: Option<String>,
    #[serde(default)]
    lease_seconds: Option<i64>,
}

pub fn claim(bytes: &[u8], lease_id: String) -> ApiResult<ClaimCmd> {
    let b: ClaimBody = json_body(bytes, false)?;
    let query_id = required("query_id", &b.query_id)?.to_string();
    if b.partition_ids.len() > STREAM_CLAIM_PARTITIONS_MAX {
        return Err(ApiError::too_large(format!(
            "{} partitions in one claim; the limit is {STREAM_CLAIM_PARTITIONS_MAX}",
            b.partition_ids.len()
        )));
    }
    let partition_ids = all_checked(
        b.partition_ids.into_iter().enumerate().map(|(i, id)| partition_id(&format!("partition_ids[{i}]"), Some(id))),
    )?;
    let seconds = match b.lease_seconds {
        None => STREAM_CLAIM_LEASE_SECONDS_DEFAULT,
        Some(s) if (1..=STREAM_CLAIM_LEASE_SECONDS_MAX as i64).contains(&s) => s as u64,
        Some(s) => {
            return Err(ApiError::bad_request(format!(
                "lease_seconds {s} is out of range (1..{STREAM_CLAIM_LEASE_SECONDS_MAX})"
            )))
        }
    };
    let group = match b.consumer_group.as_deref() {
        None | Some("") => None,
        g => Some(group(g)?),
    };
    Ok(ClaimCmd { query_id, partition_ids, group, lease_id, lease_ms: seconds * 1000 })
}

// ---------------------------------------------------------------- cycle

#[derive(Deserialize)]
struct CycleBody<'a> {
    #[serde(default)]
    query_id: Option<String>,
    #[serde(default)]
    partition_id: Option<IdField>,
    #[serde(default)]
    consumer_group: Option<String>,
    #[serde(default, borrow)]
    state_ops: Vec<StateOpBody<'a>>,
    #[serde(default, borrow)]
    push_items: Vec<ItemBody<'a>>,
    #[serde(default)]
    ack: Option<AckBody>,
    #[serde(default)]
    release_lease: Option<bool>,
}

#[derive(Deserialize)]
struct StateOpBody<'a> {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    key: Option<String>,
    #[serde(default, borrow)]
    value: Option<&'a RawValue>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AckBody {
    #[serde(default)]
    transaction_id: Option<String>,
    #[serde(default)]
    lease_id: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    count: Option<i64>,
}

/// Only `windowEnd` of a state value matters to the broker.
#[derive(Deserialize)]
struct WindowEnd {
    #[serde(rename = "windowEnd", default)]
    window_end: Option<serde_json::Value>,
}

fn window_end(value: &RawValue) -> Option<i64> {
    let w: WindowEnd = serde_json::from_str(value.get()).ok()?;
    match w.window_end? {
        serde_json::Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f.floor() as i64)),
        _ => None,
    }
}

/// The ack spellings the clients send for a completion; anything else is
/// a nack.
fn status_is_ok(status: Option<&str>) -> bool {
    matches!(status, None | Some("completed" | "success" | "acked" | "ok"))
}

pub fn cycle(bytes: &[u8]) -> ApiResult<CycleCmd> {
    let b: CycleBody = json_body(bytes, false)?;
    let query_id = required("query_id", &b.query_id)?.to_string();
    let partition_id = partition_id("partition_id", b.partition_id)?;
    let ops = b.state_ops.len() + b.push_items.len();
    if ops > STREAM_CYCLE_OPS_MAX {
        return Err(ApiError::too_large(format!(
            "{ops} state_ops and push_items in one cycle; the limit is {STREAM_CYCLE_OPS_MAX} (STREAM_CYCLE_OPS_MAX)"
        )));
    }
    let state_ops = all_checked(b.state_ops.iter().enumerate().map(|(i, op)| state_op(i, op)))?;
    let pushes = all_checked(b.push_items.iter().enumerate().map(|(i, it)| {
        to_item(i, it)
            .map(|item| PushItem { trace_id: None, ..item })
            .map_err(|e| ApiError { message: format!("push_items: {}", e.message), ..e })
    }))?;
    let ack = b.ack.map(ack).transpose()?;
    Ok(CycleCmd {
        query_id,
        partition_id,
        group: group(b.consumer_group.as_deref())?,
        state_ops,
        pushes,
        ack,
        release_lease: b.release_lease.unwrap_or(true),
        digest: bytes_hash(bytes),
    })
}

fn state_op(i: usize, op: &StateOpBody) -> ApiResult<StateOp> {
    let key = op.key.as_deref().ok_or_else(|| {
        ApiError::bad_request(format!("state_ops[{i}].key is required")).at_field(format!("state_ops[{i}].key"))
    })?;
    if key.is_empty() {
        return Err(
            ApiError::bad_request(format!("state_ops[{i}].key is empty")).at_field(format!("state_ops[{i}].key"))
        );
    }
    if key.len() > STREAM_STATE_KEY_BYTES_MAX {
        return Err(ApiError::too_large(format!(
            "state_ops[{i}].key is {} bytes; the limit is {STREAM_STATE_KEY_BYTES_MAX} (STREAM_STATE_KEY_BYTES_MAX)",
            key.len()
        )));
    }
    match op.kind.as_deref() {
        Some("upsert") => {
            let value = op.value.ok_or_else(|| {
                ApiError::bad_request(format!("state_ops[{i}].value is required for an upsert"))
                    .at_field(format!("state_ops[{i}].value"))
            })?;
            let text = value.get().as_bytes();
            if text.len() > STREAM_STATE_VALUE_BYTES_MAX {
                return Err(ApiError::too_large(format!(
                    "state_ops[{i}].value is {} bytes; the limit is {STREAM_STATE_VALUE_BYTES_MAX} \
                     (STREAM_STATE_VALUE_BYTES_MAX)",
                    text.len()
                )));
            }
            Ok(StateOp::Upsert { key: key.to_string(), value: text.to_vec(), window_end: window_end(value) })
        }
        Some("delete") => Ok(StateOp::Delete { key: key.to_string() }),
        Some(other) => Err(ApiError::bad_request(format!("state_ops[{i}].type {other:?} is not upsert or delete"))
            .at_field(format!("state_ops[{i}].type"))),
        None => {
            Err(ApiError::bad_request(format!("state_ops[{i}].type is required"))
                .at_field(format!("state_ops[{i}].type")))
        }
    }
}

fn ack(a: AckBody) -> ApiResult<CycleAck> {
    let lease_id = required("ack.leaseId", &a.lease_id)?.to_string();
    let count = match a.count.unwrap_or(0) {
        n if n < 0 => return Err(ApiError::bad_request("ack.count must not be negative").at_field("ack.count")),
        n => n as u64,
    };
    let transaction_id = a.transaction_id.unwrap_or_default();
    let ok = status_is_ok(a.status.as_deref());
    if ok && transaction_id.is_empty() && count > 0 {
        return Err(ApiError::bad_request("ack.transactionId is required when ack.count is above 0")
            .at_field("ack.transactionId"));
    }
    Ok(CycleAck { transaction_id, lease_id, ok, count })
}
