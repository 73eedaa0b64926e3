//! The reads of an online backup, per Raft group (`regina backup` calls
//! them; see `regina_consensus::backup`):
//!
//! - `GET /api/v1/system/backup/{group}`: builds a snapshot after a read
//!   barrier (so it holds every write answered before the call) and answers
//!   its file, with the body segments on disk listed in
//!   `x-regina-backup-segments` (comma-separated, ascending).
//! - `GET /api/v1/system/backup/{group}/segments/{segment}`: one body
//!   segment file. Read after the snapshot: it holds at least what the
//!   snapshot points at.
//!
//! Dispatch sends these paths to the group they name, whatever the tenant,
//! and the group's leader answers them (a follower forwards).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::http::codes;
use crate::http::error::{ApiError, ApiResult};
use regina_node::Replica;

/// Lists the backup's body segments.
pub const SEGMENTS_HEADER: &str = "x-regina-backup-segments";

pub fn routes() -> crate::http::Routes {
    crate::http::Routes::default()
        .route("/api/v1/system/backup/{group}", get(snapshot))
        .route("/api/v1/system/backup/{group}/segments/{segment}", get(segment))
}

/// The group a backup path names: dispatch already sent it here.
fn this_group(node: &Replica, group: &str) -> ApiResult<()> {
    match group.parse::<u16>() {
        Ok(g) if g == node.group() => Ok(()),
        _ => Err(ApiError::new(codes::NO_SUCH_GROUP, format!("no Raft group {group:?} here"))),
    }
}

fn octets(bytes: Vec<u8>) -> Response {
    let mut resp = bytes.into_response();
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
    resp
}

async fn snapshot(State(node): State<Arc<Replica>>, Path(group): Path<String>) -> ApiResult<Response> {
    this_group(&node, &group)?;
    let file = node.backup_snapshot().await.map_err(|e| ApiError::new(codes::BACKUP_FAILED, e))?;
    let segments = node.body_segments().map_err(|e| ApiError::new(codes::BACKUP_FAILED, e.to_string()))?;
    let list: Vec<String> = segments.iter().map(u64::to_string).collect();
    let mut resp = octets(file);
    let value = HeaderValue::from_str(&list.join(",")).map_err(|e| ApiError::internal(e.to_string()))?;
    resp.headers_mut().insert(SEGMENTS_HEADER, value);
    Ok(resp)
}

async fn segment(
    State(node): State<Arc<Replica>>,
    Path((group, segment)): Path<(String, String)>,
) -> ApiResult<Response> {
    this_group(&node, &group)?;
    let Ok(segment) = segment.parse::<u64>() else {
        return Err(ApiError::bad_request(format!("segment {segment:?} is not a segment number")).at_field("segment"));
    };
    let read = tokio::task::spawn_blocking(move || node.body_segment(segment))
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?;
    match read {
        Ok(bytes) => Ok(octets(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(ApiError::new(codes::NOT_FOUND, format!("body segment {segment} is not on disk")))
        }
        Err(e) => Err(ApiError::new(codes::STORAGE_FAILED, e.to_string())),
    }
}
