//! Queue lifecycle: configure (create or change), delete, and the periodic
//! sweep that applies retention.

use crate::command::ConfigureCmd;
use crate::options::QueueOptions;
use crate::outcome::Outcome;
use crate::state::State;

impl State {
    pub(crate) fn configure(&mut self, cmd: &ConfigureCmd) -> Outcome {
        let (q, created) = self.queue_or_create(&cmd.queue, QueueOptions::configured_defaults());
        if cmd.replace {
            q.options = QueueOptions::configured_defaults();
        }
        q.options.apply(&cmd.options);
        if let Some(ns) = &cmd.namespace {
            q.namespace = ns.clone();
        }
        if let Some(t) = &cmd.task {
            q.task = t.clone();
        }
        Outcome::Configured { created }
    }

    /// Removes a queue with its partitions, cursors, leases and DLQ.
    pub(crate) fn delete_queue(&mut self, name: &str) -> Outcome {
        let Some(qid) = self.queue_names.remove(name) else {
            return Outcome::Deleted { existed: false };
        };
        let q = self.queues.remove(&qid).expect("queue index is consistent");
        for p in &q.partitions {
            self.partition_ids.remove(&p.id);
        }
        let ids: Vec<u64> = q.partitions.iter().map(|p| p.id).collect();
        self.streams.forget_partitions(name, &ids);
        let dead: Vec<String> =
            self.leases.iter().filter(|(_, e)| e.claims.iter().any(|c| c.0 == qid)).map(|(id, _)| id.clone()).collect();
        for id in dead {
            if let Some(e) = self.leases.get_mut(&id) {
                e.claims.retain(|c| c.0 != qid);
                if e.claims.is_empty() {
                    let expires = e.expires_ms;
                    self.leases.remove(&id);
                    self.lease_expiry.remove(&(expires, id));
                }
            }
        }
        Outcome::Deleted { existed: true }
    }

    /// Drops messages older than their queue's retention, and messages every
    /// group has consumed once they pass the completed-retention age.
    pub(crate) fn sweep(&mut self) {
        let now = self.now_ms;
        let mut ids: Vec<u32> = self.queues.keys().copied().collect();
        ids.sort_unstable();
        for qid in ids {
            let q = self.queues.get_mut(&qid).expect("listed above");
            let (ret, done_ret) = q.options.retention();
            if ret == 0 && done_ret == 0 {
                continue;
            }
            let groups = q.groups.len();
            let (mut dropped, mut dropped_bytes) = (0, 0);
            for pidx in 0..q.partitions.len() as u32 {
                // Read first: a partition a snapshot still shares is copied
                // only when something is really dropped from it.
                let p = &q.partitions[pidx as usize];
                let mut floor = p.base;
                if ret > 0 {
                    floor = floor.max(p.first_at_or_after(now.saturating_sub(ret * 1000)));
                }
                if done_ret > 0 && groups > 0 {
                    let consumed =
                        (0..groups as u32).map(|g| p.cursor(g).map_or(p.base, |c| c.next)).min().unwrap_or(p.base);
                    let aged = p.first_at_or_after(now.saturating_sub(done_ret * 1000));
                    floor = floor.max(consumed.min(aged));
                }
                // Never drop what a live lease is holding.
                let leased_floor = p
                    .cursors
                    .iter()
                    .flatten()
                    .filter_map(|c| c.live_lease(now).map(|l| l.start))
                    .min()
                    .unwrap_or(u64::MAX);
                if floor.min(leased_floor) <= p.base {
                    continue;
                }
                let (p, index) = q.partition_and_index_mut(pidx).expect("in range");
                let before = p.msgs.len() as u64;
                dropped_bytes += p.drop_before(index, floor.min(leased_floor));
                dropped += before - p.msgs.len() as u64;
            }
            q.kept -= dropped;
            q.kept_bytes -= dropped_bytes;
        }
    }
}
