//! Online backups of a Raft group, and the restore that builds a data
//! directory from one.
//!
//! A group's backup is what a new follower would receive: the newest
//! snapshot (the state at one applied index, with the membership of that
//! moment) and every body segment on disk. The snapshot is taken for the
//! backup, after a read barrier, so it holds every write answered before
//! the backup began; writes go on meanwhile. Body segments are read after
//! the snapshot: they only grow past what it points at, and a restore cuts
//! them back to the snapshot's first free position, as a follower's install
//! does.
//!
//! A restore writes the snapshot with a membership of one voter (the
//! restored node), records the snapshot's last log id as purged (so the
//! empty log starts after it) and a vote in the snapshot's term. The node
//! then starts as the sole voter of a new cluster holding the backed-up
//! state; it can be grown with `regina cluster add`.

use std::collections::BTreeMap;
use std::path::Path;

use openraft::{BasicNode, Membership as RaftMembership, SnapshotMeta, StoredMembership};
use serde::{Deserialize, Serialize};

use crate::meta_file::{Meta, MetaFile};
use crate::state_machine::SharedState;
use crate::types::{NodeId, Vote};

/// The head a snapshot file carries (the same layout the state machine
/// writes).
#[derive(Serialize, Deserialize)]
pub(crate) struct SnapshotHead {
    pub(crate) meta: SnapshotMeta<NodeId, BasicNode>,
}

/// What a backup says about the snapshot it carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotFacts {
    pub snapshot_id: String,
    pub last_log_index: Option<u64>,
    pub last_log_term: Option<u64>,
    pub voters: Vec<u64>,
}

/// The facts of a snapshot file's head.
pub fn facts(file: &[u8]) -> Result<SnapshotFacts, String> {
    let (head, _) = regina_storage::snapshot::decode(file)?;
    let head: SnapshotHead = bincode::deserialize(&head).map_err(|e| format!("snapshot head: {e}"))?;
    let m = head.meta;
    Ok(SnapshotFacts {
        snapshot_id: m.snapshot_id,
        last_log_index: m.last_log_id.map(|l| l.index),
        last_log_term: m.last_log_id.map(|l| l.leader_id.term),
        voters: m.last_membership.membership().voter_ids().collect(),
    })
}

impl SharedState {
    /// The newest snapshot file's bytes, as stored (checked on load).
    pub fn latest_snapshot_file(&self) -> std::io::Result<Option<Vec<u8>>> {
        match self.snapshots().load_latest()? {
            Some((head, data)) => regina_storage::snapshot::encode(&head, &data).map(Some),
            None => Ok(None),
        }
    }
}

/// Builds one group's part of a data directory from its backup: the
/// snapshot (re-headed with `node_id` at `addr` as the only voter), its
/// body segments, and the group's meta file under `raft_dir`. `state_dir`
/// must not hold a snapshot or bodies yet.
pub fn restore_group(
    state_dir: &Path,
    raft_dir: &Path,
    group: u16,
    snapshot_file: &[u8],
    segments: &mut dyn Iterator<Item = Result<(u64, Vec<u8>), String>>,
    node_id: NodeId,
    addr: &str,
) -> Result<SnapshotFacts, String> {
    let (head, data) = regina_storage::snapshot::decode(snapshot_file)?;
    let head: SnapshotHead = bincode::deserialize(&head).map_err(|e| format!("snapshot head: {e}"))?;
    let mut meta = head.meta;
    let Some(last) = meta.last_log_id else {
        return Err("the backup's snapshot holds no applied entry".into());
    };
    let members = RaftMembership::new(vec![[node_id].into()], BTreeMap::from([(node_id, BasicNode::new(addr))]));
    meta.last_membership = StoredMembership::new(Some(last), members);
    // The state must decode here, or the node would refuse to start later.
    let state = regina_state::State::decode(&data)?;

    let bodies_dir = state_dir.join("bodies");
    std::fs::create_dir_all(&bodies_dir).map_err(|e| format!("cannot create {}: {e}", bodies_dir.display()))?;
    let bodies = regina_storage::BodyStore::open(&bodies_dir, regina_state::body::BODY_SEGMENT_BYTES)
        .map_err(|e| e.to_string())?;
    if !bodies.segments().map_err(|e| e.to_string())?.is_empty() {
        return Err(format!("{} already holds message bodies", bodies_dir.display()));
    }
    let staging = state_dir.join("bodies.restoring");
    for segment in segments {
        let (n, bytes) = segment?;
        bodies.stage_segment(&staging, n, &bytes).map_err(|e| e.to_string())?;
    }
    if staging.exists() {
        bodies.adopt(&staging).map_err(|e| e.to_string())?;
    }
    bodies.truncate_from(state.next_body_pos).map_err(|e| e.to_string())?;
    bodies.sync_all().map_err(|e| e.to_string())?;

    let snapshots = regina_storage::SnapshotStore::open(state_dir.join("snapshots")).map_err(|e| e.to_string())?;
    let head = bincode::serialize(&SnapshotHead { meta: meta.clone() }).map_err(|e| e.to_string())?;
    snapshots.save(&meta.snapshot_id, &head, &data).map_err(|e| e.to_string())?;

    std::fs::create_dir_all(raft_dir).map_err(|e| format!("cannot create {}: {e}", raft_dir.display()))?;
    let vote = Vote::new(last.leader_id.term, node_id);
    MetaFile::for_group(raft_dir, group)
        .store(&Meta { vote: Some(vote), last_purged: Some(last) })
        .map_err(|e| e.to_string())?;
    Ok(SnapshotFacts {
        snapshot_id: meta.snapshot_id,
        last_log_index: Some(last.index),
        last_log_term: Some(last.leader_id.term),
        voters: vec![node_id],
    })
}
