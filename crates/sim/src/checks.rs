//! The checks the step loop runs, and the final ones (see `invariants`
//! for the rules themselves), each group on its own; and across groups,
//! that no group's log or state holds another group's entries (see
//! `history::Registry`, `node` and `machine`).

use std::collections::{BTreeMap, BTreeSet};

use openraft::RaftLogReader;

use crate::canon::{canonical, fnv};
use crate::client::Reply;
use crate::drivers::timers_fired_once;
use crate::invariants::{final_pushes, history_invariants, own_names};
use crate::jobs::JobFigures;
use crate::panics;
use crate::sim::{Failure, Report};
use crate::world::World;
use crate::NodeId;

/// How long past its due time a timer must have fired by the end.
const TIMER_SLACK_MS: u64 = 1_000;

impl World {
    /// Every invariant that can be checked now.
    pub(crate) fn check(&mut self) -> Result<(), Failure> {
        if let Some(p) = panics::take().first() {
            return Err(self.fail(format!("a task panicked: {p}")));
        }
        for n in &self.nodes {
            let Some(r) = n.running.as_ref().filter(|r| !r.gate.crashed()) else { continue };
            for (g, rep) in r.groups.iter().enumerate() {
                let state = rep.raft.metrics().borrow().running_state.clone();
                if let Err(fatal) = state {
                    return Err(self.fail(format!("node {}'s Raft of g{g} stopped on its own: {fatal}", n.id)));
                }
            }
        }
        for g in self.groups() {
            let gi = usize::from(g);
            let history = self.ctx.history[gi].clone();
            let history = history.lock();
            if let Some(v) = history.violations.first() {
                return Err(self.fail(format!("g{g}: {v}")));
            }
            history_invariants(&history).map_err(|e| self.fail(format!("g{g}: {e}")))?;
            for n in &self.nodes {
                let Some(r) = n.running.as_ref().filter(|r| !r.gate.crashed()) else { continue };
                let m = r.groups[gi].shared.machine.read();
                let book = &mut self.books[gi];
                let checked = book
                    .checker
                    .node(n.id, n.incarnation, m.last_applied, &m.state, &history, &book.acked)
                    .and_then(|_| own_names(&m.state, g).map_err(|e| format!("node {}: {e}", n.id)));
                if let Err(e) = checked {
                    drop(m);
                    return Err(self.fail(format!("g{g}: {e}")));
                }
            }
        }
        Ok(())
    }

    /// An acknowledged entry is committed: a majority of its group holds it
    /// in its log (or has applied past it) from then on, whatever crashes.
    /// So at most one running node may lack it. Crashed nodes are not asked.
    pub(crate) async fn check_acked_durable(&mut self) -> Result<(), Failure> {
        for g in self.groups() {
            let gi = usize::from(g);
            // For each acknowledged index, the running nodes that lack it.
            let mut lacking: BTreeMap<u64, Vec<NodeId>> = BTreeMap::new();
            for n in &self.nodes {
                let Some(r) = n.running.as_ref().filter(|r| !r.gate.crashed()) else { continue };
                let rep = &r.groups[gi];
                let applied = rep.shared.machine.read().last_applied.map(|l| l.index);
                let mut log = rep.log.clone();
                // What a node applied is checked against the history
                // elsewhere; past that point, its log must hold the entry.
                let from = applied.map_or(0, |a| a + 1);
                for (index, (_, at)) in self.books[gi].acked_ops.range(from..) {
                    let found = log.try_get_log_entries(*index..=*index).await;
                    let found =
                        found.map_err(|e| self.fail(format!("node {} cannot read g{g}'s log at {at}: {e}", n.id)))?;
                    if found.first().map(|e| e.log_id) != Some(*at) {
                        lacking.entry(*index).or_default().push(n.id);
                    }
                }
            }
            if let Some((index, nodes)) = lacking.iter().find(|(_, nodes)| nodes.len() > 1) {
                let (op, at) = self.books[gi].acked_ops[index];
                let names: Vec<String> = nodes.iter().map(|n| format!("n{n}")).collect();
                return Err(self.fail(format!(
                    "acknowledged op{op} at {at} of g{g} is held by no majority: {} have neither applied it nor \
                     logged it",
                    names.join(" and ")
                )));
            }
        }
        Ok(())
    }

    /// Whether `marker` (sent to `group`) was acknowledged and every node
    /// applied everything in its log of the group, up to the same entry.
    pub(crate) fn converged(&self, group: u16, marker: u64) -> bool {
        let clients = self.clients.lock();
        let Some(Reply::Acked { log_id: mark, .. }) = clients.ops.get(&marker).and_then(|o| o.reply.clone()) else {
            return false;
        };
        let mut at = BTreeSet::new();
        for n in &self.nodes {
            let Some(r) = n.running.as_ref().filter(|r| !r.gate.crashed()) else { return false };
            let rep = &r.groups[usize::from(group)];
            let m = rep.raft.metrics().borrow().clone();
            let applied = rep.shared.machine.read().last_applied;
            if applied.is_none_or(|a| a.index < mark.index) || m.last_log_index != applied.map(|a| a.index) {
                return false;
            }
            at.insert(applied);
        }
        at.len() == 1
    }

    /// The final word on one group: every node's state is valid, holds
    /// every acknowledged push, and equals the others'. Answers the state's
    /// digest, the applied index and the job figures.
    fn final_group(&mut self, group: u16) -> Result<(u64, u64, JobFigures, u64), Failure> {
        let gi = usize::from(group);
        let mut reference: Option<(NodeId, Vec<u8>, regina_state::State)> = None;
        let mut applied = BTreeSet::new();
        let mut fired = 0;
        for n in &self.nodes {
            let r = n.running.as_ref().expect("every node runs after converging");
            let rep = &r.groups[gi];
            let m = rep.shared.machine.read();
            let state = m.state.clone();
            applied.insert(m.last_applied);
            drop(m);
            state.check_invariants().map_err(|e| self.fail(format!("node {} final state of g{group}: {e}", n.id)))?;
            let read = |pos: u64, len: u32| rep.shared.read_body(pos, len);
            final_pushes(n.id, &state, &read, &self.books[gi].acked)
                .map_err(|e| self.fail(format!("g{group}: {e}")))?;
            // A driver checks every step: a timer a second past due has
            // had its chance to fire.
            fired = timers_fired_once(&state, &self.books[gi].timers, TIMER_SLACK_MS)
                .map_err(|e| self.fail(format!("node {} g{group}: {e}", n.id)))?;
            let bytes = canonical(&state);
            match &reference {
                None => reference = Some((n.id, bytes, state)),
                Some((first, b, s)) => {
                    if *b != bytes || *s != state {
                        return Err(
                            self.fail(format!("nodes {first} and {} converged to different states of g{group}", n.id))
                        );
                    }
                }
            }
        }
        if applied.len() != 1 {
            return Err(self.fail(format!("the nodes converged to different applied points of g{group}: {applied:?}")));
        }
        let applied_index = applied.first().copied().flatten().map_or(0, |l| l.index);
        let jobs = history_invariants(&self.ctx.history[gi].lock()).map_err(|e| self.fail(format!("g{group}: {e}")))?;
        let (_, bytes, _) = reference.expect("three nodes");
        Ok((fnv(&bytes), applied_index, jobs, fired))
    }

    pub(crate) fn final_check(&mut self) -> Result<Report, Failure> {
        let mut digests = String::new();
        let mut applied = Vec::new();
        let mut jobs = JobFigures::default();
        let mut timers_fired = 0;
        for g in self.groups() {
            let (state_digest, applied_index, figures, fired) = self.final_group(g)?;
            timers_fired += fired;
            self.note(format!("g{g} converged at index {applied_index}, state {state_digest:016x}"));
            digests += &format!("{state_digest:016x}{applied_index};");
            applied.push(applied_index);
            jobs.add(&figures);
        }
        let leaders = self.leaders();
        let net = self.ctx.net.stats();
        let digest = fnv(format!("{:016x}{digests}", self.trace.digest()).as_bytes());
        let applications = self.ctx.history.iter().map(|h| h.lock().applications).sum();
        Ok(Report {
            seed: self.cfg.seed,
            digest,
            steps: self.cfg.steps,
            groups: self.cfg.groups,
            virtual_ms: self.elapsed_ms(),
            acked: self.stats.acked,
            unknown: self.stats.unknown,
            crashes: self.stats.crashes,
            multi_leader_crashes: self.stats.multi_leader_crashes,
            lost_unsynced_bytes: self.stats.lost_bytes,
            lost_body_bytes: self.stats.lost_body_bytes,
            wal_crashes: self.stats.wal_crashes,
            truncations: self.ctx.truncations.load(std::sync::atomic::Ordering::Relaxed),
            joint_batches: self.ctx.joint_batches.load(std::sync::atomic::Ordering::Relaxed),
            elections: self.stats.elections,
            moves: self.stats.moves,
            batched: self.stats.batched,
            driven: self.stats.driven,
            timers_fired,
            snapshots: net.snapshots,
            applied,
            leaders,
            applications,
            net,
            jobs,
            trace: self.trace.lines().to_vec(),
        })
    }
}
