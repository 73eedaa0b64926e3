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
use axum::routing::{delete, get, post, put};
use axum::Json;
use serde::Deserialize;
use serde_json::json;

use crate::http::error::ApiError;
use regina_consensus::network::group_path;
use regina_node::membership::{Leader, MembershipError};
use regina_node::{ProposeError, Replica};
use regina_state::command::{KvCmd, KvOp};
use regina_state::Command;

/// The group-local route a group's leader makes a membership change on.
pub const MEMBERS_PATH: &str = "/internal/raft/members";

pub fn routes() -> crate::http::Routes {
    crate::http::Routes::default()
        .route("/api/v1/cluster", get(view))
        .route("/api/v1/cluster/members", post(add))
        .route("/api/v1/cluster/members/{id}", delete(remove))
        .route("/api/v1/cluster/snapshot", post(snapshot))
        .route("/api/v1/cluster/groups", get(groups))
        .route("/api/v1/cluster/groups/{group}/leader", put(pin_leader).delete(unpin_leader))
}

/// `GET /api/v1/cluster/groups`: every group's leader, preferred leader,
/// load and tenants, and the groups each node leads.
async fn groups(State(node): State<Arc<Replica>>) -> Response {
    let groups = node.all_groups();
    let pins = regina_node::balance::pins(&groups[0]);
    let mut rows = Vec::with_capacity(groups.len());
    for g in &groups {
        rows.push(crate::http::raft_views::group_row(g, &pins).await);
    }
    let leaders: std::collections::BTreeMap<String, usize> =
        node.leaders_per_node().into_iter().map(|(id, n)| (id.to_string(), n)).collect();
    Json(json!({ "groups": rows, "leadersPerNode": leaders })).into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PinLeader {
    node: u64,
}

/// `PUT /api/v1/cluster/groups/{group}/leader` `{"node": N}`: the group's
/// preferred leader is node N from now on; the balancer hands the group
/// there while N is up.
async fn pin_leader(State(node): State<Arc<Replica>>, Path(group): Path<String>, body: Bytes) -> Response {
    let group = match group_number(&node, &group) {
        Ok(g) => g,
        Err(e) => return e.into_response(),
    };
    let req: PinLeader = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return ApiError::bad_body(format!("expected {{\"node\": N}}: {e}")).into_response(),
    };
    let voter = node.raft().metrics().borrow().membership_config.membership().voter_ids().any(|v| v == req.node);
    if !voter {
        return ApiError::bad_request(format!("node {} is not a voter", req.node)).into_response();
    }
    let op = KvOp::Put {
        ns: regina_node::balance::PIN_NAMESPACE.into(),
        key: group.to_string(),
        value: req.node.to_string().into_bytes(),
        ttl_seconds: None,
        expect: None,
        required: false,
    };
    write_pin(&node, group, op).await
}

/// `DELETE /api/v1/cluster/groups/{group}/leader`: back to the default
/// preferred leader.
async fn unpin_leader(State(node): State<Arc<Replica>>, Path(group): Path<String>) -> Response {
    let group = match group_number(&node, &group) {
        Ok(g) => g,
        Err(e) => return e.into_response(),
    };
    let op = KvOp::Delete {
        ns: regina_node::balance::PIN_NAMESPACE.into(),
        key: group.to_string(),
        expect: None,
        required: false,
    };
    write_pin(&node, group, op).await
}

fn group_number(node: &Replica, group: &str) -> Result<u16, ApiError> {
    let count = node.all_groups().len();
    match group.parse::<u16>() {
        Ok(g) if (g as usize) < count => Ok(g),
        _ => Err(ApiError::new(
            crate::http::codes::NO_SUCH_GROUP,
            format!("no Raft group {group:?}; groups are 0 to {}", count - 1),
        )),
    }
}

/// Pins live in group 0's reserved tenant (this route runs on group 0's
/// leader), outside the request's own tenant.
async fn write_pin(node: &Replica, group: u16, op: KvOp) -> Response {
    let command = Command::ForTenant {
        tenant: regina_node::balance::PIN_TENANT.into(),
        command: Box::new(Command::Kv(KvCmd { ops: vec![op] })),
    };
    if let Err(e) = regina_node::tenant::scope(None, node.propose(command)).await {
        return ApiError::from(e).into_response();
    }
    let groups = node.all_groups();
    let pins = regina_node::balance::pins(&groups[0]);
    Json(json!({ "ok": true, "group": crate::http::raft_views::group_row(&groups[group as usize], &pins).await }))
        .into_response()
}

/// Takes a snapshot on the leader now and purges its log behind it, so a
/// lagging follower catches up from the snapshot (operators compact with
/// it; tests use it to exercise snapshot transfer).
async fn snapshot(State(node): State<Arc<Replica>>) -> Response {
    let mut index = None;
    for group in node.all_groups() {
        match group.snapshot_and_purge().await {
            Ok(i) if group.group() == node.group() => index = i,
            Ok(_) => {}
            Err(e) => return ApiError::internal(format!("group {}: {e}", group.group())).into_response(),
        }
    }
    Json(json!({ "ok": true, "snapshotIndex": index })).into_response()
}

async fn view(State(node): State<Arc<Replica>>) -> Response {
    Json(crate::http::raft_views::raft_view(&node).await).into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AddMember {
    id: u64,
    addr: String,
}

async fn add(State(node): State<Arc<Replica>>, body: Bytes) -> Response {
    let req: AddMember = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return ApiError::bad_body(format!("expected {{\"id\": N, \"addr\": \"IP:PORT\"}}: {e}")).into_response()
        }
    };
    if req.id == 0 {
        return ApiError::bad_request("id must be a positive integer").into_response();
    }
    let change = MemberChange::Add { id: req.id, addr: req.addr };
    answer(change_every_group(&node, &change).await, &node).await
}

async fn remove(State(node): State<Arc<Replica>>, Path(id): Path<String>) -> Response {
    let Ok(id) = id.parse::<u64>() else {
        return ApiError::bad_request(format!("{id:?} is not a node id")).into_response();
    };
    answer(change_every_group(&node, &MemberChange::Remove { id }).await, &node).await
}

/// A membership change, made in every Raft group of the node.
#[derive(Debug, Clone, serde::Serialize, Deserialize)]
#[serde(tag = "change", rename_all = "camelCase")]
pub enum MemberChange {
    Add { id: u64, addr: String },
    Remove { id: u64 },
    AddLearner { id: u64, addr: String },
    Promote { ids: std::collections::BTreeSet<u64> },
    SetVoters { ids: std::collections::BTreeSet<u64> },
}

/// Makes `change` in `node`'s own group (which this node must lead).
pub async fn change_here(node: &Replica, change: &MemberChange) -> Result<(), MembershipError> {
    match change {
        MemberChange::Add { id, addr } => node.add_voter(*id, addr.clone()).await,
        MemberChange::Remove { id } => node.remove_member(*id).await,
        MemberChange::AddLearner { id, addr } => node.add_learner(*id, addr.clone()).await,
        MemberChange::Promote { ids } => node.promote(ids.clone()).await,
        MemberChange::SetVoters { ids } => node.set_voters(ids.clone()).await,
    }
}

/// Every group has the same members: the change is made in each, by each
/// group's leader (this node, or another reached at its Raft address).
pub(crate) async fn change_every_group(node: &Replica, change: &MemberChange) -> Result<(), MembershipError> {
    for group in node.all_groups() {
        match group.wait_for_leader(std::time::Duration::from_secs(5)).await {
            Leader::Me => change_here(&group, change).await?,
            Leader::Other { addr, .. } => {
                let url = format!("{}://{addr}{}", node.peer_scheme(), group_path(group.group(), MEMBERS_PATH));
                let sent = node.forwarder().post(&url).json(change).send().await;
                let resp = sent.map_err(|e| ProposeError::Unknown(format!("group {}'s leader: {e}", group.group())))?;
                if !resp.status().is_success() {
                    let status = resp.status();
                    let text = resp.text().await.unwrap_or_default();
                    return Err(MembershipError::Invalid(format!("group {}: {status} {text}", group.group())));
                }
            }
            Leader::Unknown => return Err(ProposeError::NoLeader.into()),
        }
    }
    Ok(())
}

pub(crate) async fn answer(result: Result<(), MembershipError>, node: &Replica) -> Response {
    match result {
        Ok(()) => {
            (StatusCode::OK, Json(json!({ "ok": true, "cluster": crate::http::raft_views::raft_view(node).await })))
                .into_response()
        }
        Err(MembershipError::Invalid(why)) => {
            ApiError::new(crate::http::codes::MEMBERSHIP_REFUSED, why).into_response()
        }
        Err(MembershipError::Unavailable(e)) => ApiError::from(e).into_response(),
    }
}
