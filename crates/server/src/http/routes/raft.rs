//! The Raft routes peers call (see `regina_consensus::network` for the
//! sender): bincode in, bincode out, 503 when the Raft core refuses.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use openraft::Snapshot;
use regina_consensus::network::{SnapshotTransfer, APPEND_PATH, SNAPSHOT_PATH, VOTE_PATH};
use regina_types::limits::RAFT_BODY_BYTES_MAX;
use serde::Serialize;

use regina_node::Replica;

/// This node's applied state, encoded, with the log index it reflects in
/// [`APPLIED_HEADER`]: replicas at the same index must hold equal states.
pub const STATE_PATH: &str = "/internal/state";
pub const APPLIED_HEADER: &str = "x-regina-applied-index";

pub fn routes() -> crate::http::Routes {
    crate::http::Routes::default()
        .route(APPEND_PATH, post(append))
        .route(VOTE_PATH, post(vote))
        .route(SNAPSHOT_PATH, post(snapshot))
        .route(&format!("{SNAPSHOT_PATH}/{{snapshot_id}}/segment/{{segment}}"), post(stage_segment))
        .route(STATE_PATH, get(applied_state))
        .route(crate::http::routes::cluster::MEMBERS_PATH, post(change_members))
        .route(regina_node::balance::CAMPAIGN_PATH, post(campaign))
        .map(|r| r.layer(DefaultBodyLimit::max(RAFT_BODY_BYTES_MAX)))
}

async fn applied_state(State(node): State<Arc<Replica>>) -> Response {
    let encoded = tokio::task::spawn_blocking(move || node.encode_applied_state()).await;
    match encoded {
        Ok((index, bytes)) => ([(APPLIED_HEADER, index.to_string())], bytes).into_response(),
        Err(e) => refused(StatusCode::INTERNAL_SERVER_ERROR, e),
    }
}

/// A membership change another node's handler asks this group's leader
/// to make (see `http::cluster`).
async fn change_members(State(node): State<Arc<Replica>>, body: Bytes) -> Response {
    let change: crate::http::routes::cluster::MemberChange = match serde_json::from_slice(&body) {
        Ok(c) => c,
        Err(e) => return refused(StatusCode::BAD_REQUEST, format!("undecodable change: {e}")),
    };
    match crate::http::routes::cluster::change_here(&node, &change).await {
        Ok(()) => StatusCode::OK.into_response(),
        Err(regina_node::membership::MembershipError::Invalid(why)) => refused(StatusCode::CONFLICT, why),
        Err(e) => refused(StatusCode::SERVICE_UNAVAILABLE, e),
    }
}

/// The target's side of a leadership hand-over (see `regina_node::balance`).
async fn campaign(State(node): State<Arc<Replica>>, body: Bytes) -> Response {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Campaign {
        last_log_index: u64,
    }
    let req: Campaign = match serde_json::from_slice(&body) {
        Ok(c) => c,
        Err(e) => return refused(StatusCode::BAD_REQUEST, format!("expected {{\"lastLogIndex\": N}}: {e}")),
    };
    match regina_node::balance::campaign(&node, req.last_log_index).await {
        Ok(()) => StatusCode::OK.into_response(),
        Err(why) => refused(StatusCode::CONFLICT, why),
    }
}

fn refused(status: StatusCode, why: impl std::fmt::Display) -> Response {
    (status, why.to_string()).into_response()
}

fn reply<T: Serialize>(value: &T) -> Response {
    match bincode::serialize(value) {
        Ok(bytes) => (StatusCode::OK, bytes).into_response(),
        Err(e) => refused(StatusCode::INTERNAL_SERVER_ERROR, e),
    }
}

async fn append(State(node): State<Arc<Replica>>, body: Bytes) -> Response {
    rpc(&body, "append", |req| node.raft().append_entries(req)).await
}

async fn vote(State(node): State<Arc<Replica>>, body: Bytes) -> Response {
    rpc(&body, "vote", |req| node.raft().vote(req)).await
}

/// Decodes a Raft request, hands it to the Raft core and encodes its reply.
async fn rpc<Req, Resp, E, F>(body: &[u8], what: &str, call: impl FnOnce(Req) -> F) -> Response
where
    Req: serde::de::DeserializeOwned,
    Resp: Serialize,
    E: std::fmt::Display,
    F: std::future::Future<Output = Result<Resp, E>>,
{
    let req = match bincode::deserialize(body) {
        Ok(r) => r,
        Err(e) => return refused(StatusCode::BAD_REQUEST, format!("undecodable {what}: {e}")),
    };
    match call(req).await {
        Ok(resp) => reply(&resp),
        Err(e) => refused(StatusCode::SERVICE_UNAVAILABLE, e),
    }
}

/// One body segment of a snapshot about to be sent, staged until the
/// snapshot itself arrives.
async fn stage_segment(
    State(node): State<Arc<Replica>>,
    Path((snapshot_id, segment)): Path<(String, u64)>,
    body: Bytes,
) -> Response {
    if node.staging_dir(&snapshot_id).is_none() {
        return refused(StatusCode::BAD_REQUEST, format!("{snapshot_id:?} is not a snapshot id"));
    }
    let staged = tokio::task::spawn_blocking(move || node.stage_body_segment(&snapshot_id, segment, &body)).await;
    match staged {
        Ok(Ok(())) => StatusCode::OK.into_response(),
        Ok(Err(e)) => refused(StatusCode::INTERNAL_SERVER_ERROR, e),
        Err(e) => refused(StatusCode::INTERNAL_SERVER_ERROR, e),
    }
}

async fn snapshot(State(node): State<Arc<Replica>>, body: Bytes) -> Response {
    let transfer: SnapshotTransfer = match bincode::deserialize(&body) {
        Ok(t) => t,
        Err(e) => return refused(StatusCode::BAD_REQUEST, format!("undecodable snapshot: {e}")),
    };
    // A leader without body segments sends none; the empty staging
    // directory still tells the install to drop this node's own.
    let Some(dir) = node.staging_dir(&transfer.meta.snapshot_id) else {
        return refused(StatusCode::BAD_REQUEST, "not a snapshot id");
    };
    if let Err(e) = std::fs::create_dir_all(&dir) {
        return refused(StatusCode::INTERNAL_SERVER_ERROR, e);
    }
    let snapshot = Snapshot { meta: transfer.meta, snapshot: Box::new(std::io::Cursor::new(transfer.data)) };
    match node.raft().install_full_snapshot(transfer.vote, snapshot).await {
        Ok(resp) => reply(&resp),
        Err(e) => refused(StatusCode::SERVICE_UNAVAILABLE, e),
    }
}
