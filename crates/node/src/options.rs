//! How a node opens its data directory and reaches its peers.

use std::collections::BTreeMap;
use std::sync::Arc;

/// How a node opens its data directory.
#[derive(Debug, Clone)]
pub struct NodeOptions {
    /// Key sealing payloads of encrypted queues; default `<data>/encryption.key`.
    pub encryption_key_file: Option<std::path::PathBuf>,
    /// Whether group commits wait for fdatasync (off only for measurements).
    pub fsync: bool,
    /// This node's id in its Raft group.
    pub node_id: u64,
    /// The address peers reach this node's Raft routes at; `None`: the
    /// HTTP address.
    pub raft_addr: Option<String>,
    /// The voters of a new cluster (id, Raft address), this node included;
    /// empty for a node that starts alone.
    pub peers: Vec<(u64, String)>,
    /// Raft groups this node runs (see `crate::raft_groups`).
    pub raft_groups: u16,
    /// Tenants the operator placed in a given group instead of the hashed
    /// one (Queen's `QUEEN_TENANT_GROUPS`); the same on every node.
    pub tenant_groups: BTreeMap<String, u16>,
    /// Sent with every request to a peer's Raft address, and required on
    /// this node's own.
    pub cluster_token: Option<String>,
    /// Whether this node listens on a Raft address apart from its HTTP
    /// port: without one it serves no internal routes and cannot have peers.
    pub internal_port: bool,
    /// Whether peers are reached over `https` (the doors serve TLS),
    /// trusted through `tls_ca` (PEM).
    pub peer_tls: bool,
    pub tls_ca: Option<Vec<u8>>,
    /// Requests that may wait for the proposer at once, per Raft group.
    pub max_queued_proposals: usize,
    /// Pops that may wait (long-poll) at once on the node.
    pub max_long_polls: usize,
    /// Bytes of the newest message bodies the node keeps in memory, so
    /// consumers near the head read no file (0: every read goes to its
    /// file), split evenly among its Raft groups
    /// ([`NodeOptions::recent_body_bytes_per_group`]).
    pub recent_body_bytes: usize,
    /// Percent of the data directory's filesystem in use past which writes
    /// that grow storage are refused (507 `storage_full`), and under which
    /// they are taken again (see `crate::disk`).
    pub disk_high_pct: u8,
    pub disk_low_pct: u8,
    /// Where the leader's stamps, minted ids and reads take their time
    /// (the wall clock; tests give a `TokioClock` on a paused runtime).
    pub clock: Arc<dyn crate::clock::Clock>,
}

impl NodeOptions {
    /// Each Raft group's share of [`NodeOptions::recent_body_bytes`]: the
    /// setting bounds the node's memory whatever the number of groups (per
    /// group, the default took 8 GiB at the 64 groups allowed).
    pub fn recent_body_bytes_per_group(&self) -> usize {
        self.recent_body_bytes / usize::from(self.raft_groups.max(1))
    }
}

impl Default for NodeOptions {
    fn default() -> Self {
        NodeOptions {
            encryption_key_file: None,
            fsync: true,
            node_id: 1,
            raft_addr: None,
            peers: Vec::new(),
            raft_groups: 1,
            tenant_groups: BTreeMap::new(),
            cluster_token: None,
            internal_port: false,
            peer_tls: false,
            tls_ca: None,
            max_queued_proposals: regina_types::limits::PROPOSER_QUEUE_REQUESTS_MAX,
            max_long_polls: regina_types::limits::LONG_POLLS_MAX,
            recent_body_bytes: regina_storage::RECENT_BODY_BYTES,
            disk_high_pct: regina_types::limits::DISK_HIGH_PCT_DEFAULT,
            disk_low_pct: regina_types::limits::DISK_LOW_PCT_DEFAULT,
            clock: crate::clock::system(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_bodies_are_split_among_the_groups() {
        let options = |raft_groups| NodeOptions { raft_groups, recent_body_bytes: 128 << 20, ..NodeOptions::default() };
        assert_eq!(options(1).recent_body_bytes_per_group(), 128 << 20);
        assert_eq!(options(4).recent_body_bytes_per_group(), 32 << 20);
        assert_eq!(options(64).recent_body_bytes_per_group(), 2 << 20);
        assert_eq!(options(0).recent_body_bytes_per_group(), 128 << 20, "no group is taken as one");
    }
}
