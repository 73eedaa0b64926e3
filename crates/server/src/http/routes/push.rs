//! `POST /api/v1/push` (JSON): one log entry for the whole request, one
//! answer per item in request order.

use std::borrow::Cow;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;
use serde_json::value::RawValue;

use regina_state::command::PushItem;
use regina_state::outcome::{PushResult, PushStatus};
use regina_state::{Command, Outcome};
use regina_types::limits::{PAYLOAD_BYTES_MAX, PUSH_ITEMS_MAX, TRANSACTION_ID_BYTES_MAX};
use regina_types::{validate_name, NameKind, DEFAULT_PARTITION};

use crate::http::error::{ApiError, ApiResult};
use crate::http::input::{body_bytes, json_body};
use crate::http::plain_push::{self, PlainItem};
use crate::http::routes::binary;
use regina_node::Replica;

#[derive(Deserialize)]
struct PushBody<'a> {
    #[serde(borrow)]
    items: Vec<ItemBody<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ItemBody<'a> {
    // Borrowed from the body where no escape forces a copy: an item's
    // names are copied once, into the `PushItem`.
    #[serde(borrow)]
    pub(crate) queue: Cow<'a, str>,
    #[serde(default, borrow)]
    partition: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    payload: Option<&'a RawValue>,
    #[serde(default, borrow)]
    transaction_id: Option<Cow<'a, str>>,
    #[serde(default)]
    trace_id: Option<serde_json::Value>,
}

pub async fn push(State(node): State<Arc<Replica>>, body: Result<Bytes, BytesRejection>) -> ApiResult<Response> {
    let bytes = body_bytes(body)?;
    if bytes.starts_with(binary::PUSH_MAGIC) {
        return push_binary(node, &bytes).await;
    }
    let items = json_items(&bytes)?;
    let labels = Labels::of(&items);
    let results = store(&node, items).await?;
    answer(&node, &labels, &results)
}

/// The items of a JSON push body, checked. The plain push does not store
/// trace ids (as upstream); a transaction's push does.
pub(crate) fn json_items(bytes: &[u8]) -> ApiResult<Vec<PushItem>> {
    if let Some(plain) = plain_push::items(bytes) {
        check_count(plain.len())?;
        return all_checked(plain.iter().enumerate().map(|(i, it)| plain_item(i, it)));
    }
    let parsed: PushBody = json_body(bytes, false)?;
    check_count(parsed.items.len())?;
    all_checked(
        parsed.items.iter().enumerate().map(|(i, it)| to_item(i, it).map(|item| PushItem { trace_id: None, ..item })),
    )
}

/// Every item, or the first one's error, in a vector sized once.
/// (`collect` into `Result<Vec<_>>` loses the iterator's length: a batch of
/// 100 items grew its vector five times, copying the items again each
/// time: ~250 instructions per pushed message in callgrind.)
pub(crate) fn all_checked<T>(items: impl ExactSizeIterator<Item = ApiResult<T>>) -> ApiResult<Vec<T>> {
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        out.push(item?);
    }
    Ok(out)
}

/// An item the plain reader read (`crate::http::plain_push`).
fn plain_item(i: usize, it: &PlainItem) -> ApiResult<PushItem> {
    let payload = it.payload.unwrap_or("null").as_bytes().to_vec();
    let fields = ItemFields {
        queue: it.queue,
        partition: it.partition,
        transaction_id: it.transaction_id,
        trace_id: None,
        message_id: None,
    };
    checked_item(i, fields, payload)
}

/// A step's item the plain reader read: checked as a plain push's, and
/// with its trace id (which a step's push stores).
pub(crate) fn traced_plain_item(i: usize, it: &PlainItem) -> ApiResult<PushItem> {
    Ok(PushItem { trace_id: it.trace_id.and_then(trace_uuid), ..plain_item(i, it)? })
}

/// A trace id names a message's trace when it is a UUID; anything else is
/// not kept.
fn trace_uuid(text: &str) -> Option<[u8; 16]> {
    uuid::Uuid::parse_str(text).ok().map(|u| *u.as_bytes())
}

/// Whether the plain reader agrees with serde on `bytes`: a body it reads,
/// serde reads too, to the same items (the `json_push` fuzz target and a
/// property test hold it to this).
pub fn plain_reader_agrees(bytes: &[u8]) -> bool {
    let Some(plain) = plain_push::items(bytes) else { return true };
    let Ok(full) = serde_json::from_slice::<PushBody>(bytes) else { return false };
    full.items.len() == plain.len() && full.items.iter().zip(&plain).all(|(f, p)| item_agrees(f, p))
}

/// Whether serde's reading of an item and the plain reader's are the same.
pub(crate) fn item_agrees(f: &ItemBody, p: &PlainItem) -> bool {
    let trace = match &f.trace_id {
        Some(serde_json::Value::String(s)) => Some(s.as_str()),
        _ => None,
    };
    *f.queue == *p.queue
        && f.partition.as_deref() == p.partition
        && f.transaction_id.as_deref() == p.transaction_id
        && f.payload.map_or("null", |r| r.get()) == p.payload.unwrap_or("null")
        && trace == p.trace_id
}

async fn push_binary(node: Arc<Replica>, bytes: &[u8]) -> ApiResult<Response> {
    let (flags, parsed) = binary::parse_push(bytes).map_err(ApiError::bad_body)?;
    check_count(parsed.len())?;
    let items = all_checked(parsed.into_iter().enumerate().map(|(i, b)| from_binary(i, b)))?;
    let labels = Labels::of(&items);
    let results = store(&node, items).await?;
    if flags & binary::FLAG_COUNTS != 0 {
        let queued = results.iter().filter(|r| r.status == PushStatus::Queued).count();
        let body = json!({ "count": results.len(), "queued": queued, "duplicate": results.len() - queued, "error": 0 });
        return Ok((StatusCode::CREATED, axum::Json(body)).into_response());
    }
    answer(&node, &labels, &results)
}

fn check_count(n: usize) -> ApiResult<()> {
    if n == 0 {
        return Err(ApiError::bad_request("items must hold at least one item").at_field("items"));
    }
    if n > PUSH_ITEMS_MAX {
        return Err(
            ApiError::too_large(format!("{n} items in one push; the limit is {PUSH_ITEMS_MAX}")).at_field("items")
        );
    }
    Ok(())
}

async fn store(node: &Replica, mut items: Vec<PushItem>) -> ApiResult<Vec<PushResult>> {
    seal_items(node, items.iter_mut());
    match node.propose(Command::push(items)).await? {
        Outcome::Push(results) => Ok(results),
        other => Err(ApiError::internal(format!("push answered {other:?}"))),
    }
}

/// Stamps every item with the request's producer (`crate::http::producer`) and
/// seals the payloads of items bound for queues with `encryptionEnabled`,
/// so neither the log nor the body files hold their plaintext.
pub(crate) fn seal_items<'a>(node: &Replica, items: impl Iterator<Item = &'a mut PushItem>) {
    let mut items: Vec<&mut PushItem> = items.collect();
    if let Some(sub) = crate::doors::auth::subject() {
        for item in items.iter_mut() {
            item.payload = crate::http::producer::stamp(&sub, &item.payload);
        }
    }
    let seal: Vec<bool> = {
        let m = node.tenant_state();
        items.iter().map(|i| m.queue(&i.queue).is_some_and(|q| q.options.encryption_enabled)).collect()
    };
    for (item, seal) in items.into_iter().zip(seal) {
        if seal {
            item.payload = node.sealer().seal(&item.payload);
        }
    }
}

/// What the answer names of each item, its transaction id (twice, as the
/// clients read either spelling) and its queue, rendered before the items
/// move into the log entry: into one buffer for the whole request, so a
/// pushed message costs no allocation of its own here.
struct Labels {
    text: Vec<u8>,
    /// Where each item's part of `text` ends.
    ends: Vec<usize>,
}

impl Labels {
    fn of(items: &[PushItem]) -> Labels {
        use crate::http::json_out as j;
        let names: usize = items.iter().map(|i| 2 * i.transaction_id.len() + i.queue.len()).sum();
        let mut text = Vec::with_capacity(names + items.len() * 64);
        let mut ends = Vec::with_capacity(items.len());
        for item in items {
            text.extend_from_slice(b",\"transaction_id\":");
            let id = text.len();
            j::string(&mut text, &item.transaction_id);
            let id = id..text.len();
            text.extend_from_slice(b",\"transactionId\":");
            text.extend_from_within(id);
            text.extend_from_slice(b",\"queueName\":");
            j::string(&mut text, &item.queue);
            ends.push(text.len());
        }
        Labels { text, ends }
    }

    /// Item `i`'s part: `,"transaction_id":..,"transactionId":..,"queueName":..`.
    fn of_item(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.text[start..self.ends[i]]
    }
}

/// The push answer (201): one element per item, in request order, written
/// straight to bytes (`crate::http::json_out`). A full queue's item is
/// `failed`: the clients surface a per-item failure only as that.
fn answer(node: &Replica, labels: &Labels, results: &[PushResult]) -> ApiResult<Response> {
    use crate::http::json_out as j;
    if labels.ends.len() != results.len() {
        return Err(ApiError::internal(format!("{} items answered {} results", labels.ends.len(), results.len())));
    }
    let mut out = Vec::with_capacity(64 + results.len() * 192 + labels.text.len());
    out.push(b'[');
    for (i, r) in results.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"index\":");
        j::number(&mut out, i as u64);
        out.extend_from_slice(b",\"message_id\":");
        let stored = (r.status != PushStatus::Full).then_some(r);
        match stored {
            Some(r) => {
                let id = match r.message_id {
                    Some(id) => id,
                    None => original_id(node, r.pos, r.len)?,
                };
                j::uuid(&mut out, &id);
            }
            None => out.extend_from_slice(b"null"),
        }
        out.extend_from_slice(labels.of_item(i));
        match stored {
            Some(r) => {
                out.extend_from_slice(b",\"partitionId\":");
                j::number_text(&mut out, r.partition_id);
                out.extend_from_slice(b",\"offset\":");
                j::number(&mut out, r.offset);
                let status: &[u8] = if r.status == PushStatus::Queued { b"queued" } else { b"duplicate" };
                out.extend_from_slice(b",\"status\":\"");
                out.extend_from_slice(status);
                out.extend_from_slice(b"\"}");
            }
            None => {
                out.extend_from_slice(b",\"status\":\"failed\",\"error\":\"queue is full: it holds maxSize messages\"}")
            }
        }
    }
    out.push(b']');
    Ok(j::answer(StatusCode::CREATED, out))
}

/// The id of an already stored message, read from its body (from what is
/// left of its head when the body was damaged: the duplicate's answer still
/// names its offset).
fn original_id(node: &Replica, pos: u64, len: u32) -> ApiResult<[u8; 16]> {
    Ok(match crate::http::render::stored_body(node, pos, len)? {
        Ok(b) => b.id,
        Err(damaged) => crate::http::render::damaged_message(&damaged).id,
    })
}

pub(crate) fn to_item(i: usize, it: &ItemBody) -> ApiResult<PushItem> {
    let payload = it.payload.map(|p| p.get().as_bytes().to_vec()).unwrap_or_else(|| b"null".to_vec());
    let trace_id = match &it.trace_id {
        Some(serde_json::Value::String(s)) => trace_uuid(s),
        _ => None,
    };
    let fields = ItemFields {
        queue: &it.queue,
        partition: it.partition.as_deref(),
        transaction_id: it.transaction_id.as_deref(),
        trace_id,
        message_id: None,
    };
    checked_item(i, fields, payload)
}

/// An item read from a binary body; its payload must be JSON.
pub(crate) fn from_binary(i: usize, b: binary::BinaryItem) -> ApiResult<PushItem> {
    if !crate::http::input::is_json_document(&b.payload) {
        return Err(ApiError::bad_body(format!("items[{i}]: payload is not a JSON document in UTF-8"))
            .at_field(format!("items[{i}].payload")));
    }
    let fields = ItemFields {
        queue: &b.queue,
        partition: Some(&b.partition),
        transaction_id: Some(&b.transaction_id),
        trace_id: None,
        message_id: b.message_id,
    };
    checked_item(i, fields, b.payload)
}

struct ItemFields<'a> {
    queue: &'a str,
    partition: Option<&'a str>,
    transaction_id: Option<&'a str>,
    trace_id: Option<[u8; 16]>,
    message_id: Option<[u8; 16]>,
}

/// Checks one item against the name and size limits and fills defaults: the
/// `Default` partition, a minted transaction id, a minted message id.
fn checked_item(i: usize, f: ItemFields, payload: Vec<u8>) -> ApiResult<PushItem> {
    let at = |e: String| format!("items[{i}]: {e}");
    let named = |e: regina_types::NameError| {
        let field = format!("items[{i}].{}", e.field());
        ApiError { message: at(e.to_string()), ..ApiError::from_name(e) }.at_field(field)
    };
    validate_name(NameKind::Queue, f.queue).map_err(named)?;
    let partition = match f.partition {
        None | Some("") => DEFAULT_PARTITION.to_string(),
        Some(p) => {
            validate_name(NameKind::Partition, p).map_err(named)?;
            p.to_string()
        }
    };
    let transaction_id = match f.transaction_id {
        None | Some("") => regina_node::ids::new_id().to_string(),
        Some(t) if t.len() > TRANSACTION_ID_BYTES_MAX => {
            return Err(ApiError::too_large(at(format!(
                "transactionId is {} bytes; the limit is {TRANSACTION_ID_BYTES_MAX}",
                t.len()
            )))
            .at_field(format!("items[{i}].transactionId")))
        }
        Some(t) => t.to_string(),
    };
    if payload.len() > PAYLOAD_BYTES_MAX {
        return Err(ApiError::too_large(at(format!(
            "payload is {} bytes; the limit is {PAYLOAD_BYTES_MAX}",
            payload.len()
        )))
        .at_field(format!("items[{i}].payload")));
    }
    Ok(PushItem {
        queue: f.queue.to_string(),
        partition,
        transaction_id,
        trace_id: f.trace_id,
        message_id: f.message_id.unwrap_or_else(|| *regina_node::ids::new_id().as_bytes()),
        payload,
    })
}
