//! The real `StateMachineStore` under openraft, watched.
//!
//! Each entry is applied on its own so that after every one the node's
//! state can be checked (`State::check_invariants` and the lease rule) and
//! the entry and its outcome recorded in its group's history; a client
//! entry must have been sent to this group. Snapshots are
//! built by the real builder, but on a thread of their own with its own
//! small runtime, while the simulation's runtime thread waits: the builder
//! hands its work to `spawn_blocking`, whose completion would otherwise
//! wake the simulation from another thread at an unpredictable moment.

use std::io::Cursor;
use std::sync::Arc;

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{EntryPayload, RaftSnapshotBuilder, SnapshotMeta, StorageIOError};
use parking_lot::Mutex;
use regina_consensus::answers::Ticket;
use regina_consensus::state_machine::Membership;
use regina_consensus::types::{LogId, NodeId, RaftEntry, StorageError};
use regina_consensus::{StateMachineStore, TypeConfig};
use regina_state::Outcome;

use crate::history::{History, Registry};
use crate::invariants::state_invariants;

pub struct SimSm {
    inner: StateMachineStore,
    node: NodeId,
    group: u16,
    history: Arc<Mutex<History>>,
    registry: Arc<Mutex<Registry>>,
    /// The last index this incarnation applied or installed.
    last: Option<u64>,
}

impl SimSm {
    pub fn new(
        inner: StateMachineStore,
        node: NodeId,
        group: u16,
        history: Arc<Mutex<History>>,
        registry: Arc<Mutex<Registry>>,
    ) -> SimSm {
        let last = inner.shared().machine.read().last_applied.map(|l| l.index);
        SimSm { inner, node, group, history, registry, last }
    }

    fn check_after(&self, log_id: LogId) {
        let shared = self.inner.shared();
        let verdict = state_invariants(&shared.machine.read().state);
        if let Err(e) = verdict {
            self.history
                .lock()
                .violation(format!("node {} group {} after applying {log_id}: {e}", self.node, self.group));
        }
    }
}

pub struct SimBuilder {
    inner: StateMachineStore,
}

impl RaftSnapshotBuilder<TypeConfig> for SimBuilder {
    // openraft's error type is what it is.
    #[allow(clippy::result_large_err)]
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        let mut inner = self.inner.clone();
        let built = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .map_err(|e| StorageIOError::write_snapshot(None, &e))?;
            rt.block_on(inner.build_snapshot())
        })
        .join();
        built.unwrap_or_else(|_| panic!("the snapshot builder thread panicked"))
    }
}

impl RaftStateMachine<TypeConfig> for SimSm {
    type SnapshotBuilder = SimBuilder;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, Membership), StorageError> {
        self.inner.applied_state().await
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Outcome>, StorageError>
    where
        I: IntoIterator<Item = RaftEntry> + openraft::OptionalSend,
        I::IntoIter: openraft::OptionalSend,
    {
        let mut out = Vec::new();
        for mut e in entries {
            let log_id = e.log_id;
            // The outcome is recorded before it is delivered, so the inner
            // apply gets no ticket and this wrapper delivers what it recorded.
            let ticket = Ticket::take(&mut e);
            let entry = match &e.payload {
                EntryPayload::Normal(x) => Some(x.entry.clone()),
                _ => None,
            };
            if self.last.is_some_and(|l| log_id.index != l + 1) || (self.last.is_none() && log_id.index != 0) {
                self.history.lock().violation(format!(
                    "node {} group {} applied index {} right after {:?}: applying must be gapless",
                    self.node, self.group, log_id.index, self.last
                ));
            }
            if let Some(x) = &entry {
                let sent = self.registry.lock().groups_of_entry(x);
                if !sent.contains(&self.group) {
                    self.history.lock().violation(format!(
                        "node {} group {} applied {log_id}, an entry sent to group(s) {sent:?}: groups mixed up",
                        self.node, self.group
                    ));
                }
            }
            let outcome = self.inner.apply(std::iter::once(e)).await?.pop().expect("one outcome per entry");
            self.last = Some(log_id.index);
            self.history.lock().applied(self.node, log_id, entry, outcome.clone());
            self.check_after(log_id);
            out.push(self.inner.shared().deliver(ticket, log_id, outcome).unwrap_or(Outcome::Done));
        }
        Ok(out)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        SimBuilder { inner: self.inner.clone() }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        self.inner.begin_receiving_snapshot().await
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, openraft::BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        self.inner.install_snapshot(meta, snapshot).await?;
        self.last = meta.last_log_id.map(|l| l.index);
        self.history.lock().snapshot_installed(self.node, meta.last_log_id);
        if let Some(l) = meta.last_log_id {
            self.check_after(l);
        }
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        self.inner.get_current_snapshot().await
    }
}
