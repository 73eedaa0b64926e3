//! What the state machines of one Raft group applied, index by index,
//! across all nodes; and, across groups, which group each client command
//! was sent to ([`Registry`]).
//!
//! The first node to apply an index records the entry and the outcome;
//! every later application of that index, by any node or by the same node
//! after a restart, must bring the same log id, the same entry and the same
//! outcome. A difference is a broken log (two histories) or a state machine
//! that is not deterministic. The recorder also checks that each node
//! incarnation applies indexes one after another, with jumps only through
//! an installed snapshot.

use std::collections::{BTreeMap, BTreeSet};

use regina_consensus::types::LogId;
use regina_state::{Command, Entry, Outcome};

use crate::NodeId;

/// One applied index as first seen.
#[derive(Debug, Clone)]
pub struct Applied {
    pub log_id: LogId,
    /// `None` for a blank or membership entry.
    pub entry: Option<Entry>,
    pub outcome: Outcome,
    pub by: NodeId,
}

#[derive(Default)]
pub struct History {
    pub entries: BTreeMap<u64, Applied>,
    /// Log ids learnt from installed snapshots, by index.
    snapshot_points: BTreeMap<u64, LogId>,
    /// Violations noticed while applying, with the node and index.
    pub violations: Vec<String>,
    /// Applied entries, all nodes together (replays included).
    pub applications: u64,
}

impl History {
    pub fn applied(&mut self, node: NodeId, log_id: LogId, entry: Option<Entry>, outcome: Outcome) {
        self.applications += 1;
        let index = log_id.index;
        if let Some(point) = self.snapshot_points.get(&index) {
            if *point != log_id {
                self.violations
                    .push(format!("node {node} applied {log_id} at index {index}, where a snapshot said {point}"));
            }
        }
        match self.entries.get(&index) {
            None => {
                self.entries.insert(index, Applied { log_id, entry, outcome, by: node });
            }
            Some(first) => {
                if first.log_id != log_id {
                    self.violations.push(format!(
                        "two histories: node {node} applied {log_id} at index {index}, node {} applied {}",
                        first.by, first.log_id
                    ));
                } else if first.entry != entry {
                    self.violations.push(format!(
                        "node {node} applied a different entry under {log_id} than node {} did",
                        first.by
                    ));
                } else if first.outcome != outcome {
                    self.violations.push(format!(
                        "the state machine is not deterministic: {log_id} answered {:?} on node {node} but {:?} on \
                         node {}",
                        outcome, first.outcome, first.by
                    ));
                }
            }
        }
    }

    pub fn snapshot_installed(&mut self, node: NodeId, last: Option<LogId>) {
        let Some(last) = last else { return };
        if let Some(first) = self.entries.get(&last.index) {
            if first.log_id != last {
                self.violations.push(format!(
                    "node {node} installed a snapshot up to {last}, but node {} applied {} at that index",
                    first.by, first.log_id
                ));
            }
        }
        self.snapshot_points.insert(last.index, last);
    }

    pub fn violation(&mut self, text: String) {
        self.violations.push(text);
    }

    /// The log id applied at `index`, if any node applied it.
    pub fn log_id_at(&self, index: u64) -> Option<LogId> {
        self.entries.get(&index).map(|a| a.log_id).or_else(|| self.snapshot_points.get(&index).copied())
    }
}

/// Which group each client command was sent to, by a digest of the
/// command. Commands carry ids minted once for the whole run (transaction,
/// lease and request ids), so two groups share a digest only for commands
/// without any (a no-op, the drivers' `FireTimers` and `Sweep`).
#[derive(Default)]
pub struct Registry {
    sent: BTreeMap<u64, BTreeSet<u16>>,
}

fn digest(command: &Command) -> u64 {
    crate::canon::fnv(&crate::canon::canonical(command))
}

impl Registry {
    pub fn sent(&mut self, command: &Command, group: u16) {
        self.sent.entry(digest(command)).or_default().insert(group);
    }

    /// The groups `command` was sent to (none if no client sent it).
    pub fn groups_of(&self, command: &Command) -> BTreeSet<u16> {
        self.sent.get(&digest(command)).cloned().unwrap_or_default()
    }

    /// The groups an applied entry may belong to: those its command was
    /// sent to, or, for a batch the proposer packed from several requests,
    /// those every one of them was sent to.
    pub fn groups_of_entry(&self, entry: &Entry) -> BTreeSet<u16> {
        let whole = self.groups_of(&entry.command);
        if !whole.is_empty() {
            return whole;
        }
        let Command::Batch(parts) = &entry.command else { return whole };
        let mut groups = parts.iter().map(|p| self.groups_of(p));
        let Some(first) = groups.next() else { return whole };
        groups.fold(first, |acc, g| acc.intersection(&g).copied().collect())
    }
}
