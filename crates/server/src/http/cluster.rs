//! The cluster's membership, for operators: `GET /api/v1/cluster` shows the
//! members and their replication state as the leader sees them; `POST
//! /api/v1/cluster/members` adds a voter and `DELETE
//! /api/v1/cluster/members/{id}` removes a member. Like every client route
//! they run on the leader (a follower forwards them).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;

use super::error::ApiError;
use crate::cluster::MembershipError;
use crate::node::Node;

pub fn routes() -> Router<Arc<Node>> {
    Router::new()
        .route("/api/v1/cluster", get(view))
        .route("/api/v1/cluster/members", post(add))
        .route("/api/v1/cluster/members/{id}", delete(remove))
        .route("/api/v1/cluster/snapshot", post(snapshot))
}

/// Takes a snapshot on the leader now and purges its log behind it, so a
/// lagging follower catches up from the snapshot (operators compact with
/// it; tests use it to exercise snapshot transfer).
async fn snapshot(State(node): State<Arc<Node>>) -> Response {
    match node.snapshot_and_purge().await {
        Ok(index) => Json(json!({ "ok": true, "snapshotIndex": index })).into_response(),
        Err(e) => ApiError::internal(e).into_response(),
    }
}

async fn view(State(node): State<Arc<Node>>) -> Response {
    Json(node.raft_view().await).into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AddMember {
    id: u64,
    addr: String,
}

async fn add(State(node): State<Arc<Node>>, body: Bytes) -> Response {
    let req: AddMember = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return ApiError::bad_body(format!("expected {{\"id\": N, \"addr\": \"IP:PORT\"}}: {e}")).into_response()
        }
    };
    if req.id == 0 {
        return ApiError::bad_request("id must be a positive integer").into_response();
    }
    answer(node.add_voter(req.id, req.addr).await, &node).await
}

async fn remove(State(node): State<Arc<Node>>, Path(id): Path<String>) -> Response {
    let Ok(id) = id.parse::<u64>() else {
        return ApiError::bad_request(format!("{id:?} is not a node id")).into_response();
    };
    answer(node.remove_member(id).await, &node).await
}

async fn answer(result: Result<(), MembershipError>, node: &Node) -> Response {
    match result {
        Ok(()) => (StatusCode::OK, Json(json!({ "ok": true, "cluster": node.raft_view().await }))).into_response(),
        Err(MembershipError::Invalid(why)) => {
            ApiError { status: StatusCode::CONFLICT, code: "membership_refused", message: why }.into_response()
        }
        Err(MembershipError::Unavailable(e)) => ApiError::from(e).into_response(),
    }
}
