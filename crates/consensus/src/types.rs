//! The openraft type configuration: Regina's log entry is
//! `regina_state::Entry` (carried as `answers::Proposed`, which encodes
//! as the bare entry), the answer is `regina_state::Outcome`.

use std::io::Cursor;

pub type NodeId = u64;

openraft::declare_raft_types!(
    pub TypeConfig:
        D = crate::answers::Proposed,
        R = regina_state::Outcome,
        NodeId = NodeId,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
);

pub type Raft = openraft::Raft<TypeConfig>;
pub type LogId = openraft::LogId<NodeId>;
pub type Vote = openraft::Vote<NodeId>;
pub type StorageError = openraft::StorageError<NodeId>;
pub type RaftEntry = openraft::Entry<TypeConfig>;
