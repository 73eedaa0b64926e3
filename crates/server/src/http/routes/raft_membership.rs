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

fn body<T: for<'de> Deserialize<'de>>(bytes: &Bytes, shape: &str) -> Result<T, Response> {
    serde_json::from_slice(bytes).map_err(|e| ApiError::bad_body(format!("expected {shape}: {e}")).into_response())
}

#[derive(Deserialize)]
struct Learner {
    id: u64,
    raft: String,
    #[serde(default)]
    #[allow(dead_code)]
    http: Option<String>,
}

async fn add_learner(State(node): State<Arc<Replica>>, bytes: Bytes) -> Response {
    let req: Learner = match body(&bytes, r#"{"id": N, "raft": "IP:PORT"}"#) {
        Ok(r) => r,
        Err(refused) => return refused,
    };
    if req.id == 0 {
        return ApiError::bad_request("id must be a positive integer").at_field("id").into_response();
    }
    answer(change_every_group(&node, &MemberChange::AddLearner { id: req.id, addr: req.raft }).await, &node).await
}

#[derive(Deserialize)]
struct Ids {
    ids: BTreeSet<u64>,
}

async fn promote(State(node): State<Arc<Replica>>, bytes: Bytes) -> Response {
    let req: Ids = match body(&bytes, r#"{"ids": [N, ...]}"#) {
        Ok(r) => r,
        Err(refused) => return refused,
    };
    answer(change_every_group(&node, &MemberChange::Promote { ids: req.ids }).await, &node).await
}

#[derive(Deserialize)]
struct Voters {
    voters: BTreeSet<u64>,
}

async fn set_voters(State(node): State<Arc<Replica>>, bytes: Bytes) -> Response {
    let req: Voters = match body(&bytes, r#"{"voters": [N, ...]}"#) {
        Ok(r) => r,
        Err(refused) => return refused,
    };
    answer(change_every_group(&node, &MemberChange::SetVoters { ids: req.voters }).await, &node).await
}

async fn remove(State(node): State<Arc<Replica>>, Path(id): Path<String>) -> Response {
    let Ok(id) = id.parse::<u64>() else {
        return ApiError::bad_request(format!("{id:?} is not a node id")).into_response();
    };
    answer(change_every_group(&node, &MemberChange::Remove { id }).await, &node).await
}
