//! The leader's time-driven entries, as the server proposes them.
//!
//! After every step, for each group, the node the simulator believes leads
//! asks the server's own drivers (`regina_node::drivers`) whether timers are
//! due or a sweep is wanted, judged against its applied state and the
//! leader's clock, and proposes what they answer through its proposer. So a
//! timer fires only through the same decision and the same proposal path as
//! in the server, across crashes and leader changes.
//!
//! At the end every acknowledged timer whose due time has passed must have
//! fired exactly once, never before its due time ([`timers_fired_once`]).

use regina_node::drivers::{sweep_due, timers_due};
use regina_state::hash::txn_hash;
use regina_state::State;

use crate::world::World;

/// An acknowledged timer: where it pushes and when it is due.
#[derive(Debug, Clone)]
pub struct AckedTimer {
    pub queue: String,
    pub partition: String,
    pub txn: String,
    pub due_ms: u64,
}

impl World {
    /// Proposes the entries the drivers ask for, at most one of each kind
    /// in flight per group.
    pub(crate) fn drive(&mut self) {
        let now = self.ctx.clock.now_ms();
        for g in self.groups() {
            let Some((leader, _)) = self.leader(g) else { continue };
            let Some(peer) = self.node(leader).peer(g) else { continue };
            let wanted = {
                let m = peer.shared.machine.read();
                [timers_due(&m.state, now), sweep_due(&m.state, now)]
            };
            for (kind, command) in wanted.into_iter().enumerate() {
                let Some(command) = command else { continue };
                let gi = usize::from(g);
                let busy = self.books[gi].driving[kind]
                    .is_some_and(|op| self.clients.lock().ops.get(&op).is_some_and(|o| o.reply.is_none()));
                if busy {
                    continue;
                }
                let label = format!("driver: {command:?}");
                let op = self.send((leader, g), peer.clone(), label, command);
                self.books[gi].driving[kind] = Some(op);
                self.stats.driven += 1;
            }
        }
    }
}

/// Every timer in `timers` due at or before `now_ms - slack_ms` pushed its
/// message exactly once, and not before it was due. Answers how many fired.
pub fn timers_fired_once(state: &State, timers: &[AckedTimer], slack_ms: u64) -> Result<u64, String> {
    let mut fired = 0;
    for t in timers.iter().filter(|t| t.due_ms + slack_ms <= state.now_ms) {
        let q = state
            .queue(&t.queue)
            .ok_or_else(|| format!("timer {} due at {} never fired: no queue {}", t.txn, t.due_ms, t.queue))?;
        let pi = q
            .partition_by_name(&t.partition)
            .ok_or_else(|| format!("timer {} due at {} never fired: no partition {}", t.txn, t.due_ms, t.partition))?;
        let p = &q.partitions[pi as usize];
        let hash = txn_hash(&t.txn);
        let found: Vec<u64> =
            (0..p.next_offset()).filter_map(|o| p.meta(o).filter(|m| m.txn() == hash).map(|m| m.created_ms)).collect();
        match found.as_slice() {
            [created] if *created >= t.due_ms => fired += 1,
            [created] => {
                return Err(format!("timer {} due at {} fired early, at {created}", t.txn, t.due_ms));
            }
            [] => return Err(format!("timer {} due at {} never fired (state at {})", t.txn, t.due_ms, state.now_ms)),
            many => return Err(format!("timer {} fired {} times", t.txn, many.len())),
        }
    }
    Ok(fired)
}

#[cfg(test)]
mod tests {
    use regina_state::timers::{ScheduleOp, TimerOp};
    use regina_state::{Command, Entry, Outcome, State};

    use super::*;
    use crate::invariants::acked_timers;

    fn scheduled(s: &mut State, txn: &str, delay_ms: i64) -> Vec<AckedTimer> {
        let op = ScheduleOp {
            queue: "q".into(),
            timer_key: format!("k{txn}"),
            partition: "p".into(),
            txn: txn.into(),
            message_id: [txn.len() as u8; 16],
            payload: b"{}".to_vec(),
            delay_ms,
        };
        let command = Command::Timers(vec![TimerOp::Schedule(op)]);
        let out: Outcome = s.apply(&Entry { now_ms: 1_000, command: command.clone() }).outcome;
        acked_timers(&command, &out)
    }

    #[test]
    fn a_timer_the_driver_fires_passes_and_one_it_never_fires_is_caught() {
        let mut s = State::new();
        let timers = scheduled(&mut s, "t1", 500);
        assert_eq!(timers.len(), 1);
        assert!(timers_due(&s, 1_400).is_none(), "not due yet");
        let fire = timers_due(&s, 1_500).expect("due at 1,500");
        s.apply(&Entry { now_ms: 1_500, command: fire });
        s.apply(&Entry { now_ms: 9_000, command: Command::Noop });
        assert_eq!(timers_fired_once(&s, &timers, 1_000), Ok(1));

        let mut never = State::new();
        let timers = scheduled(&mut never, "t2", 500);
        never.apply(&Entry { now_ms: 9_000, command: Command::Noop });
        let e = timers_fired_once(&never, &timers, 1_000).expect_err("never fired");
        assert!(e.contains("never fired"), "{e}");
    }
}
