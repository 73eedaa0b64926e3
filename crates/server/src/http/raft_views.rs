//! The operator's JSON views of a node's Raft groups: role, leader, term,
//! indexes, members and their lag, load and tenants (for `/health`,
//! `GET /api/v1/cluster` and the metrics).

use std::collections::{BTreeMap, BTreeSet};

use openraft::ServerState;
use regina_node::Replica;
use serde_json::{json, Value};

/// One line per group (role, leader and its address, preferred
/// leader, term, indexes, write load while this node leads it, the
/// tenants it holds), for the operator views of a node with more than
/// one group.
pub async fn groups_view(node: &Replica) -> Option<Value> {
    let groups = node.all_groups();
    if groups.len() < 2 {
        return None;
    }
    let pins = regina_node::balance::pins(&groups[0]);
    let mut rows = Vec::with_capacity(groups.len());
    for g in groups {
        rows.push(group_row(&g, &pins).await);
    }
    Some(Value::Array(rows))
}

/// This group's line in [`groups_view`].
pub async fn group_row(node: &Replica, pins: &BTreeMap<u16, u64>) -> Value {
    let m = node.raft().metrics().borrow().clone();
    let committed = node.raft().with_raft_state(|st| st.committed).await.ok().flatten();
    let membership = m.membership_config.membership();
    let voters: Vec<u64> = membership.voter_ids().collect();
    let pin = pins.get(&node.group()).copied();
    let leader_addr = m.current_leader.and_then(|l| membership.get_node(&l)).map(|n| n.addr.clone());
    let (tenants, tenant_count) = node.tenants_held();
    json!({
        "group": node.group(),
        "role": role_name(m.state),
        "leader": m.current_leader,
        "leaderAddr": leader_addr,
        "preferredLeader": regina_node::balance::preferred(node.group(), &voters, pin),
        "pinnedLeader": pin,
        "term": m.current_term,
        "commitIndex": committed.map(|l| l.index),
        "appliedIndex": m.last_applied.map(|l| l.index),
        "load": node.load_rates(),
        "tenantCount": tenant_count,
        "tenants": tenants,
        "pinnedTenants": node.pinned_tenants(),
    })
}

/// This node's view of its group, as `/health` and the cluster route
/// show it.
pub async fn raft_view(node: &Replica) -> Value {
    let m = node.raft().metrics().borrow().clone();
    let committed = node.raft().with_raft_state(|st| st.committed).await.ok().flatten();
    let applied = m.last_applied.map(|l| l.index);
    let commit = committed.map(|l| l.index);
    let membership = m.membership_config.membership();
    let voters: BTreeSet<u64> = membership.voter_ids().collect();
    let matched: BTreeMap<u64, Option<u64>> =
        m.replication.as_ref().map(|r| r.iter().map(|(id, l)| (*id, l.map(|l| l.index))).collect()).unwrap_or_default();
    let last = m.last_log_index;
    let members: Vec<Value> = membership
        .nodes()
        .map(|(id, node)| {
            let mut member = json!({
                "id": id,
                "addr": node.addr,
                "voter": voters.contains(id),
                "leader": m.current_leader == Some(*id),
            });
            if let Some(matched) = matched.get(id) {
                member["matchedIndex"] = json!(matched);
                member["lag"] = json!(last.unwrap_or(0).saturating_sub(matched.unwrap_or(0)));
            }
            member
        })
        .collect();
    let leader_addr = m.current_leader.and_then(|l| membership.get_node(&l)).map(|n| n.addr.clone());
    let groups = groups_view(node).await;
    let leaders: BTreeMap<String, usize> =
        node.leaders_per_node().into_iter().map(|(id, n)| (id.to_string(), n)).collect();
    json!({
        "groups": groups,
        "leadersPerNode": leaders,
        "nodeId": node.id(),
        "role": role_name(m.state),
        "leader": m.current_leader,
        "leaderAddr": leader_addr,
        "term": m.current_term,
        "lastLogIndex": last,
        "commitIndex": commit,
        "appliedIndex": applied,
        // Committed entries this node has not applied yet.
        "lag": commit.unwrap_or(0).saturating_sub(applied.unwrap_or(0)),
        "snapshotIndex": m.snapshot.map(|l| l.index),
        "millisSinceQuorumAck": m.millis_since_quorum_ack,
        "members": members,
    })
}

fn role_name(state: ServerState) -> &'static str {
    match state {
        ServerState::Leader => "leader",
        ServerState::Follower => "follower",
        ServerState::Candidate => "candidate",
        ServerState::Learner => "learner",
        ServerState::Shutdown => "shutdown",
    }
}
