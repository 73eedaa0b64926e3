//! The seeded fault schedule: what each step does besides passing time.
//!
//! A step is a client request most of the time; otherwise one fault:
//! - crash a node now (an append in flight fails; its unsynced bytes may
//!   be lost, torn, or kept),
//! - arm a crash at a node's next fsync (its batch is written but never
//!   synced, the purest form of "lost unsynced writes") or at its next
//!   write (nothing of the batch reaches the disk),
//! - partition: isolate a node, cut one direction of a link, or cut a
//!   group's leader from one follower, for a while (a cut is between nodes,
//!   so it hits every group on that link),
//! - change the weather: message loss, delays, slow outliers, for a while,
//! - take a snapshot of one group on a node (the log behind it is purged,
//!   so a lagging follower must install one, and the shared WAL may release
//!   a segment only once no group needs it),
//! - restart a crashed node early,
//! - move the leadership of one group: a follower that holds the group
//!   leader's whole log campaigns while the leader is alive, as the
//!   server's balancer makes one do (`regina_node::balance`), with client
//!   writes in flight; half the time toward the group's preferred node
//!   when that one is caught up, as the balancer would.
//!
//! A crash takes down every group of the node at once: a node leading
//! several groups leaves each of them to elect a new leader.
//!
//! Crashed nodes come back after a seeded number of steps; at most one
//! node is down at a time, now and then two (the cluster then stalls,
//! which safety must survive too).

use std::collections::BTreeSet;

use crate::gate::IoCall;
use crate::network::Weather;
use crate::sim::Failure;
use crate::world::{World, NODES};
use crate::NodeId;

impl World {
    /// Restarts and heals that are due.
    pub(crate) async fn scheduled(&mut self) -> Result<(), Failure> {
        let due: Vec<NodeId> = self.restart_at.iter().filter(|(_, at)| **at <= self.step).map(|(id, _)| *id).collect();
        for id in due {
            self.restart(id).await?;
        }
        if self.heal_at.is_some_and(|at| at <= self.step) {
            self.heal_at = None;
            self.ctx.net.set_cut(BTreeSet::new());
            self.note("partition healed");
        }
        if self.calm_at.is_some_and(|at| at <= self.step) {
            self.calm_at = None;
            self.ctx.net.set_weather(Weather::CALM);
            self.note("weather calm");
        }
        Ok(())
    }

    /// This step's action.
    pub(crate) async fn act(&mut self) -> Result<(), Failure> {
        let crash = self.cfg.crash_per_mille;
        let roll = self.rng.below(1000);
        if roll < crash {
            return self.crash_now().await;
        }
        match roll - crash {
            0..=11 => self.arm_disk_crash(),
            12..=36 => self.partition(),
            37..=56 => self.snapshot().await,
            57..=76 => self.weather(),
            77..=84 => {
                if let Some((&id, _)) = self.restart_at.iter().next() {
                    self.restart(id).await?;
                }
            }
            85..=649 => self.client_request(),
            650..=669 => self.move_leader().await,
            _ => {}
        }
        Ok(())
    }

    fn may_take_one_down(&mut self) -> bool {
        let down = NODES as usize - self.up().len();
        down == 0 || (down == 1 && self.rng.chance(100))
    }

    async fn crash_now(&mut self) -> Result<(), Failure> {
        let up = self.up();
        if up.is_empty() || !self.may_take_one_down() {
            return Ok(());
        }
        let id = *self.rng.pick(&up);
        self.take_down(id, "crashes").await
    }

    /// Tears a node down, lets its disk lose what no fsync covered, and
    /// schedules its restart.
    async fn take_down(&mut self, id: NodeId, how: &str) -> Result<(), Failure> {
        let led: Vec<u16> = self.groups().filter(|g| self.leader(*g).is_some_and(|(l, _)| l == id)).collect();
        let mut rng = self.rng.fork(u64::from(self.step) << 8 | id);
        let ctx = &self.ctx;
        let loss = self.nodes[(id - 1) as usize].crash(ctx, &mut rng).await;
        let loss = loss.map_err(|e| self.fail(e))?;
        self.stats.crashes += 1;
        if led.len() > 1 {
            self.stats.multi_leader_crashes += 1;
        }
        self.stats.lost_bytes += loss.bytes_lost;
        self.stats.lost_body_bytes += loss.body_bytes_lost;
        let back = self.step + self.rng.range(5, 50) as u32;
        self.restart_at.insert(id, back);
        let led = if led.is_empty() {
            String::new()
        } else {
            format!(" (it led {})", led.iter().map(|g| format!("g{g}")).collect::<Vec<_>>().join(", "))
        };
        self.note(format!(
            "n{id} {how}{led}: {} unsynced writes, {} bytes lost, {} kept; back at step {back}",
            loss.writes, loss.bytes_lost, loss.bytes_kept
        ));
        Ok(())
    }

    fn arm_disk_crash(&mut self) {
        let up = self.up();
        if up.is_empty() || !self.may_take_one_down() {
            return;
        }
        // A leader writes the most; aim at one half the time.
        let g = self.rng.below(u64::from(self.cfg.groups)) as u16;
        let id = match self.leader(g) {
            Some((l, _)) if self.rng.chance(500) => l,
            _ => *self.rng.pick(&up),
        };
        let (call, what) = if self.rng.chance(750) { (IoCall::Sync, "fsync") } else { (IoCall::Write, "write") };
        if let Some(r) = &self.node(id).running {
            r.gate.crash_at_next(call);
        }
        self.note(format!("n{id} will crash at its next {what}"));
    }

    /// Tears down nodes whose armed crash went off.
    pub(crate) async fn reap(&mut self) -> Result<(), Failure> {
        let crashed: Vec<NodeId> =
            self.nodes.iter().filter(|n| n.running.as_ref().is_some_and(|r| r.gate.crashed())).map(|n| n.id).collect();
        for id in crashed {
            self.stats.wal_crashes += 1;
            self.take_down(id, "crashed in a disk write or fsync").await?;
        }
        Ok(())
    }

    pub(crate) async fn restart(&mut self, id: NodeId) -> Result<(), Failure> {
        self.restart_at.remove(&id);
        let ctx = &self.ctx;
        let started = self.nodes[(id - 1) as usize].start(ctx).await;
        started.map_err(|e| self.fail(e))?;
        for g in self.groups() {
            self.ctx.net.hear(id, g);
        }
        let inc = self.node(id).incarnation;
        self.note(format!("n{id} restarts (incarnation {inc})"));
        Ok(())
    }

    fn partition(&mut self) {
        let a = self.rng.range(1, NODES + 1);
        let b = a % NODES + 1;
        let c = b % NODES + 1;
        let mut cut = BTreeSet::new();
        let group = self.rng.below(u64::from(self.cfg.groups)) as u16;
        let what = match self.rng.below(4) {
            0 | 1 => {
                for other in [b, c] {
                    cut.insert((a, other));
                    cut.insert((other, a));
                }
                format!("n{a} isolated")
            }
            2 => {
                cut.insert((a, b));
                format!("n{a} cannot reach n{b} (one way)")
            }
            _ => match self.leader(group) {
                Some((l, _)) => {
                    let f = if l == a { b } else { a };
                    cut.insert((l, f));
                    cut.insert((f, l));
                    format!("a leader, n{l}, cut from n{f}")
                }
                None => {
                    self.ctx.net.set_cut(BTreeSet::new());
                    self.heal_at = None;
                    self.note("partition healed early");
                    return;
                }
            },
        };
        let until = self.step + self.rng.range(10, 60) as u32;
        self.ctx.net.set_cut(cut);
        self.heal_at = Some(until);
        self.note(format!("partition: {what} until step {until}"));
    }

    fn weather(&mut self) {
        let w = Weather {
            drop_per_mille: *self.rng.pick(&[0, 20, 50, 150]),
            delay_max_ms: *self.rng.pick(&[2, 10, 40]),
            spike_per_mille: *self.rng.pick(&[0, 10, 50]),
            duplicate_per_mille: *self.rng.pick(&[0, 0, 20, 100]),
        };
        let until = self.step + self.rng.range(20, 100) as u32;
        self.ctx.net.set_weather(w);
        self.calm_at = Some(until);
        self.note(format!(
            "weather: {}‰ lost, delays to {} ms, {}‰ slow, {}‰ twice, until step {until}",
            w.drop_per_mille, w.delay_max_ms, w.spike_per_mille, w.duplicate_per_mille
        ));
    }

    /// A targeted election in one group: a caught-up follower campaigns
    /// while the group's leader lives. The leader, whose own lease has run
    /// out, grants the vote of a candidate with its whole log and steps
    /// down.
    async fn move_leader(&mut self) {
        let g = self.rng.below(u64::from(self.cfg.groups)) as u16;
        let Some((leader, _)) = self.leader(g) else { return };
        let Some(m) = self.node(leader).raft(g).map(|r| r.metrics().borrow().clone()) else { return };
        let last = m.last_log_index.unwrap_or(0);
        let caught_up: Vec<NodeId> = self
            .up()
            .into_iter()
            .filter(|id| *id != leader)
            .filter(|id| {
                m.replication.as_ref().and_then(|r| r.get(id).cloned()).flatten().is_some_and(|l| l.index >= last)
            })
            .collect();
        if caught_up.is_empty() {
            self.note(format!("leader move in g{g} skipped: no follower holds n{leader}'s log to {last}"));
            return;
        }
        let home = Self::preferred(g);
        let target = if caught_up.contains(&home) && self.rng.chance(500) { home } else { *self.rng.pick(&caught_up) };
        let Some(raft) = self.node(target).raft(g) else { return };
        let _ = raft.trigger().elect().await;
        self.ctx.net.hear(target, g);
        self.stats.moves += 1;
        self.note(format!(
            "leader move in g{g}: n{target} (holding the log to {last}) campaigns to take over from n{leader}"
        ));
    }

    async fn snapshot(&mut self) {
        let up = self.up();
        if up.is_empty() {
            return;
        }
        let id = *self.rng.pick(&up);
        let g = self.rng.below(u64::from(self.cfg.groups)) as u16;
        let Some(raft) = self.node(id).raft(g) else { return };
        let _ = raft.trigger().snapshot().await;
        self.note(format!("n{id} takes a snapshot of g{g}"));
    }
}
