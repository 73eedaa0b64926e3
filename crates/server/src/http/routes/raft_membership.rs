//! Queen's membership routes, under `/api/v1/system/raft/membership`, made
//! with the same changes as `/api/v1/cluster/members` (in every Raft group,
//! by each group's leader; one change at a time, checked by openraft):
//!
//! - `GET`: `{"membership": {"leader", "term", "voters", "learners",
//!   "source", "members": [{"nodeId", "voter", "raft", "lag"}]}}`;
//! - `POST .../learners` `{"id", "raft", "http"?}`: adds a learner, caught
//!   up before the answer;
//! - `POST .../promote` `{"ids": [..]}`: makes learners voters;
//! - `PUT .../voters` `{"voters": [..]}`: exactly these voters, the others
//!   stay as learners;
//! - `DELETE .../members/{id}`: removes a member.

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::cluster::{answer, change_every_group, MemberChange};
use crate::http::error::ApiError;
use regina_node::Replica;

pub fn routes() -> crate::http::Routes {
    crate::http::Routes::default()
        .route("/api/v1/system/raft/membership", get(view))
        .route("/api/v1/system/raft/membership/learners", post(add_learner))
        .route("/api/v1/system/raft/membership/promote", post(promote))
        .route("/api/v1/system/raft/membership/voters", put(set_voters))
        .route("/api/v1/system/raft/membership/members/{id}", delete(remove))
}

async fn view(State(node): State<Arc<Replica>>) -> Response {
    let v = crate::http::raft_views::raft_view(&node).await;
    let members: Vec<Value> = v["members"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| json!({ "nodeId": m["id"], "voter": m["voter"], "raft": m["addr"], "lag": m["lag"] }))
        .collect();
    let ids = |voter: bool| -> Vec<Value> {
        members.iter().filter(|m| m["voter"] == voter).map(|m| m["nodeId"].clone()).collect()
    };
    let source = if v["role"] == "leader" { "leader" } else { "local" };
    Json(json!({ "membership": {
        "leader": v["leader"], "term": v["term"], "voters": ids(true), "learners": ids(false),
        "source": source, "members": members,
    }}))
    .into_response()
}

/// Reads the body as `T` (or refuses it, naming `shape`), then makes the
/// change it stands for in every group.
async fn change_from<T: for<'de> Deserialize<'de>>(
    node: &Replica,
    bytes: &Bytes,
    shape: &str,
    change: impl FnOnce(T) -> Result<MemberChange, ApiError>,
) -> Response {
    let req: T = match serde_json::from_slice(bytes) {
        Ok(r) => r,
        Err(e) => return ApiError::bad_body(format!("expected {shape}: {e}")).into_response(),
    };
    match change(req) {
        Ok(change) => answer(change_every_group(node, &change).await, node).await,
        Err(refused) => refused.into_response(),
    }
}

#[derive(Deserialize)]
struct Learner {
    id: u64,
    raft: String,
    /// Queen's clients send the learner's HTTP address too; a Regina node
    /// learns it from the node itself.
    #[serde(default, rename = "http")]
    _http: Option<String>,
}

async fn add_learner(State(node): State<Arc<Replica>>, bytes: Bytes) -> Response {
    change_from(&node, &bytes, r#"{"id": N, "raft": "IP:PORT"}"#, |l: Learner| match l.id {
        0 => Err(ApiError::bad_request("id must be a positive integer").at_field("id")),
        id => Ok(MemberChange::AddLearner { id, addr: l.raft }),
    })
    .await
}

#[derive(Deserialize)]
struct Ids {
    ids: BTreeSet<u64>,
}

async fn promote(State(node): State<Arc<Replica>>, bytes: Bytes) -> Response {
    change_from(&node, &bytes, r#"{"ids": [N, ...]}"#, |r: Ids| Ok(MemberChange::Promote { ids: r.ids })).await
}

#[derive(Deserialize)]
struct Voters {
    voters: BTreeSet<u64>,
}

async fn set_voters(State(node): State<Arc<Replica>>, bytes: Bytes) -> Response {
    change_from(&node, &bytes, r#"{"voters": [N, ...]}"#, |r: Voters| Ok(MemberChange::SetVoters { ids: r.voters }))
        .await
}

async fn remove(State(node): State<Arc<Replica>>, Path(id): Path<String>) -> Response {
    let Ok(id) = id.parse::<u64>() else {
        return ApiError::bad_request(format!("{id:?} is not a node id")).into_response();
    };
    answer(change_every_group(&node, &MemberChange::Remove { id }).await, &node).await
}
