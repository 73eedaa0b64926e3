//! The node as a member of its Raft group: who leads, linearizable reads,
//! membership changes and the operator's view.
//!
//! Only the leader serves client routes (a follower forwards them, see
//! `http::forward`), so reads happen where the writes are applied. A leader
//! that alone is the group's voter serves reads from its state directly:
//! no other node can have been elected. With more voters a read first asks
//! openraft for a read index (a heartbeat round to a majority confirms the
//! leadership) and waits until that index is applied.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use openraft::error::{CheckIsLeaderError, ClientWriteError, RaftError};
use openraft::{BasicNode, ChangeMembers};

use crate::replica::{ProposeError, Replica};

/// Tenants a group's view names at most (it counts them all).
pub const TENANTS_LISTED: usize = regina_types::limits::TENANTS_LISTED_MAX;

/// Who leads this node's group, as far as it knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Leader {
    Me,
    Other { id: u64, addr: String },
    Unknown,
}

/// Why a membership change was refused.
#[derive(Debug, thiserror::Error)]
pub enum MembershipError {
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Unavailable(#[from] ProposeError),
}

impl Replica {
    /// Every Raft group of this node, in order (this one among them).
    pub fn all_groups(&self) -> Vec<std::sync::Arc<Replica>> {
        self.groups.get().map(|g| g.iter().filter_map(std::sync::Weak::upgrade).collect()).unwrap_or_default()
    }

    /// The named tenants with data in this group (the first
    /// [`TENANTS_LISTED`] in name order) and how many there are.
    pub fn tenants_held(&self) -> (Vec<String>, usize) {
        let machine = self.shared.machine.read();
        let named = machine.state.tenants.keys().filter(|t| !t.starts_with('@'));
        let count = named.clone().count();
        (named.take(TENANTS_LISTED).cloned().collect(), count)
    }

    /// Groups led per voter, as this node sees it (every voter listed).
    pub fn leaders_per_node(&self) -> BTreeMap<u64, usize> {
        let groups = self.all_groups();
        let mut counts: BTreeMap<u64, usize> =
            self.raft.metrics().borrow().membership_config.membership().voter_ids().map(|v| (v, 0)).collect();
        for g in &groups {
            if let Some(l) = g.raft.metrics().borrow().current_leader {
                *counts.entry(l).or_default() += 1;
            }
        }
        counts
    }

    pub fn is_leader(&self) -> bool {
        self.raft.metrics().borrow().current_leader == Some(self.id)
    }

    /// Whether this node is its group's only voter.
    pub fn is_sole_voter(&self) -> bool {
        let metrics = self.raft.metrics();
        let m = metrics.borrow();
        let mut voters = m.membership_config.membership().voter_ids();
        voters.next() == Some(self.id) && voters.next().is_none()
    }

    pub fn leader(&self) -> Leader {
        let metrics = self.raft.metrics();
        let m = metrics.borrow();
        match m.current_leader {
            Some(id) if id == self.id => Leader::Me,
            Some(id) => match m.membership_config.membership().get_node(&id) {
                Some(node) => Leader::Other { id, addr: node.addr.clone() },
                None => Leader::Unknown,
            },
            None => Leader::Unknown,
        }
    }

    /// The Raft address of the group's leader (this node's own when it
    /// leads), as far as this node knows.
    pub fn leader_addr(&self) -> Option<String> {
        let metrics = self.raft.metrics();
        let m = metrics.borrow();
        let leader = m.current_leader?;
        m.membership_config.membership().get_node(&leader).map(|n| n.addr.clone())
    }

    /// The leader once one is known, waiting up to `within` for an
    /// election to end.
    pub async fn wait_for_leader(&self, within: Duration) -> Leader {
        let deadline = tokio::time::Instant::now() + within;
        let mut metrics = self.raft.metrics();
        loop {
            let leader = self.leader();
            if leader != Leader::Unknown {
                return leader;
            }
            if tokio::time::timeout_at(deadline, metrics.changed()).await.is_err() {
                return Leader::Unknown;
            }
        }
    }

    /// Makes the next read linearizable: returns once this node's state
    /// holds every write acknowledged before the call, or refuses when this
    /// node cannot confirm that it still leads.
    pub async fn read_barrier(&self) -> Result<(), ProposeError> {
        if self.is_sole_voter() {
            return Ok(());
        }
        match self.raft.ensure_linearizable().await {
            Ok(_) => Ok(()),
            Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(_))) => Err(ProposeError::NoLeader),
            Err(RaftError::APIError(e)) => Err(ProposeError::NoQuorum(e.to_string())),
            Err(RaftError::Fatal(f)) => Err(ProposeError::Unknown(f.to_string())),
        }
    }

    /// Adds `id` at `addr` as a voter: first as a learner that is brought
    /// up to date (from the log or a snapshot), then promoted.
    pub async fn add_voter(&self, id: u64, addr: String) -> Result<(), MembershipError> {
        self.add_learner(id, addr).await?;
        self.promote(BTreeSet::from([id])).await
    }

    /// Makes learners voters (they must be members already).
    pub async fn promote(&self, ids: BTreeSet<u64>) -> Result<(), MembershipError> {
        let membership = self.raft.metrics().borrow().membership_config.membership().clone();
        if let Some(id) = ids.iter().find(|id| membership.get_node(id).is_none()) {
            return Err(MembershipError::Invalid(format!("node {id} is not a member; add it as a learner first")));
        }
        let change = ChangeMembers::AddVoterIds(ids);
        self.raft.change_membership(change, false).await.map_err(change_error)?;
        Ok(())
    }

    /// Makes exactly `ids` the voters; members left out stay as learners.
    pub async fn set_voters(&self, ids: BTreeSet<u64>) -> Result<(), MembershipError> {
        if ids.is_empty() {
            return Err(MembershipError::Invalid("a group needs at least one voter".into()));
        }
        let membership = self.raft.metrics().borrow().membership_config.membership().clone();
        if let Some(id) = ids.iter().find(|id| membership.get_node(id).is_none()) {
            return Err(MembershipError::Invalid(format!("node {id} is not a member; add it as a learner first")));
        }
        self.raft.change_membership(ChangeMembers::ReplaceAllVoters(ids), true).await.map_err(change_error)?;
        Ok(())
    }

    /// Adds `id` at `addr` as a learner, brought up to date before this
    /// returns.
    pub async fn add_learner(&self, id: u64, addr: String) -> Result<(), MembershipError> {
        if addr.parse::<std::net::SocketAddr>().is_err() {
            return Err(MembershipError::Invalid(format!("addr {addr:?} is not an IP:PORT address")));
        }
        if !self.internal_port {
            return Err(MembershipError::Invalid(
                "this node has no Raft address of its own, so peers cannot reach it: \
                 restart it with --raft-addr (and a cluster token) before adding members"
                    .to_string(),
            ));
        }
        let node = BasicNode { addr };
        self.raft.add_learner(id, node, true).await.map_err(change_error)?;
        Ok(())
    }

    /// Removes `id` from the group, voter or learner.
    pub async fn remove_member(&self, id: u64) -> Result<(), MembershipError> {
        let membership = self.raft.metrics().borrow().membership_config.membership().clone();
        if membership.get_node(&id).is_none() {
            return Err(MembershipError::Invalid(format!("node {id} is not a member")));
        }
        let voters: BTreeSet<u64> = membership.voter_ids().collect();
        if voters.contains(&id) {
            if voters.len() == 1 {
                return Err(MembershipError::Invalid(format!("node {id} is the last voter")));
            }
            let change = ChangeMembers::RemoveVoters(BTreeSet::from([id]));
            self.raft.change_membership(change, false).await.map_err(change_error)?;
        } else {
            let change = ChangeMembers::RemoveNodes(BTreeSet::from([id]));
            self.raft.change_membership(change, false).await.map_err(change_error)?;
        }
        Ok(())
    }

    /// Snapshots the applied state now and purges the log up to it.
    /// Answers the snapshot's last index.
    pub async fn snapshot_and_purge(&self) -> Result<Option<u64>, String> {
        let applied = self.raft.metrics().borrow().last_applied.map(|l| l.index);
        self.raft.trigger().snapshot().await.map_err(|e| e.to_string())?;
        let Some(applied) = applied else { return Ok(None) };
        self.raft
            .wait(Some(Duration::from_secs(60)))
            .metrics(|m| m.snapshot.is_some_and(|s| s.index >= applied), "snapshot built")
            .await
            .map_err(|e| e.to_string())?;
        let index = self.raft.metrics().borrow().snapshot.map(|s| s.index);
        if let Some(index) = index {
            self.raft.trigger().purge_log(index).await.map_err(|e| e.to_string())?;
        }
        Ok(index)
    }
}

fn change_error(e: RaftError<u64, ClientWriteError<u64, BasicNode>>) -> MembershipError {
    match e {
        RaftError::APIError(ClientWriteError::ForwardToLeader(_)) => ProposeError::NoLeader.into(),
        RaftError::APIError(ClientWriteError::ChangeMembershipError(c)) => MembershipError::Invalid(c.to_string()),
        RaftError::Fatal(f) => ProposeError::Unknown(f.to_string()).into(),
    }
}
