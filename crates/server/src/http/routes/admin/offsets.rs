//! `POST /api/v1/fetch/offsets`: where a partition's log reaches a point in
//! time, the twin of `POST /api/v1/fetch` for a reader that knows when it
//! wants to start rather than where. Body
//! `{"entries": [{"queue", "partition", "timestamp": ISO-8601}]}`; each
//! entry answers the first kept offset created at or after the time
//! (`null` when every kept message is older), with the partition's
//! `highWatermark` (the next offset) and `logStartOffset`. An unknown
//! queue or partition answers `error: "UNKNOWN_TOPIC_OR_PARTITION"` in its
//! entry, as fetch does.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use regina_types::time::parse_iso;

use crate::http::error::{ApiError, ApiResult};
use crate::http::input::{body_bytes, json_body};
use regina_node::Replica;

/// Most entries one call may carry (as for fetch).
const ENTRIES_MAX: usize = 1024;

#[derive(Deserialize)]
struct OffsetsBody {
    #[serde(default)]
    entries: Vec<OffsetsEntry>,
}

#[derive(Deserialize)]
struct OffsetsEntry {
    queue: String,
    #[serde(default)]
    partition: Option<Value>,
    timestamp: String,
}

pub async fn offsets(State(node): State<Arc<Replica>>, body: Result<Bytes, BytesRejection>) -> ApiResult<Json<Value>> {
    let bytes = body_bytes(body)?;
    let req: OffsetsBody = json_body(&bytes, false)?;
    if req.entries.len() > ENTRIES_MAX {
        return Err(ApiError::bad_body(format!("at most {ENTRIES_MAX} entries per call, got {}", req.entries.len()))
            .at_field("entries"));
    }
    let mut asks = Vec::with_capacity(req.entries.len());
    for (i, e) in req.entries.iter().enumerate() {
        let partition = super::reads::partition_name(e.partition.as_ref())
            .map_err(|why| ApiError::bad_body(why).at_field(format!("entries[{i}].partition")))?;
        let Some(ms) = parse_iso(&e.timestamp) else {
            return Err(ApiError::bad_body(format!("timestamp {:?} is not an ISO-8601 time", e.timestamp))
                .at_field(format!("entries[{i}].timestamp")));
        };
        asks.push((e.queue.as_str(), partition, ms));
    }
    let m = node.tenant_state();
    let entries: Vec<Value> = asks
        .into_iter()
        .map(|(queue, partition, ms)| {
            let found = m.queue(queue).and_then(|q| q.partition_by_name(&partition).map(|i| &q.partitions[i as usize]));
            match found {
                None => json!({ "queue": queue, "partition": partition, "offset": null,
                                "error": "UNKNOWN_TOPIC_OR_PARTITION" }),
                Some(p) => {
                    let (at, end) = (p.first_at_or_after(ms), p.next_offset());
                    json!({
                        "queue": queue,
                        "partition": partition,
                        "offset": (at < end).then_some(at),
                        "highWatermark": end,
                        "logStartOffset": p.base,
                    })
                }
            }
        })
        .collect();
    Ok(Json(json!({ "entries": entries })))
}
