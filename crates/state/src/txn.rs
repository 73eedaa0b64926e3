//! A transaction: acks, pushes, KV, timer and job riders of one step, applied as one
//! entry, all or nothing. Every ack is judged first, against copies of the
//! cursors, then the KV riders against a staged view of the store; only when
//! nothing is refused are the pushes stored, the acks committed and the KV
//! writes applied. An ack that would change nothing (already committed)
//! refuses the step too: a step sent twice must not push twice.

use crate::ack::AckPlan;
use crate::body::BodyWrite;
use crate::command::{AckItem, PushCmd, TxnCmd, TxnOp};
use crate::jobs::apply::JobsOutcome;
use crate::jobs::JobOp;
use crate::outcome::{AckResult, TxnOutcome, TxnResult};
use crate::state::State;

impl State {
    /// The index (and original offset) of the first push whose transaction
    /// id is already stored in its partition's dedup window. Repeats inside
    /// the step itself are not refusals: they collapse onto the first.
    fn first_stored_duplicate(&self, cmd: &TxnCmd) -> Option<(usize, u64)> {
        cmd.ops.iter().enumerate().find_map(|(i, op)| match op {
            TxnOp::Push(p) => self.stored_duplicate_offset(p).map(|off| (i, off)),
            TxnOp::Ack { .. } => None,
        })
    }

    /// The index of the first push that would find its queue full.
    fn overflowing_push(&self, cmd: &TxnCmd) -> Option<usize> {
        let mut added: std::collections::BTreeMap<&str, u64> = Default::default();
        for (i, op) in cmd.ops.iter().enumerate() {
            let TxnOp::Push(p) = op else { continue };
            let n = added.entry(p.queue.as_str()).or_insert(0);
            *n += 1;
            let Some(q) = self.queue(&p.queue) else { continue };
            if q.options.max_size > 0 && q.kept + *n > q.options.max_size {
                return Some(i);
            }
        }
        None
    }

    pub(crate) fn transaction(&mut self, cmd: &TxnCmd, jobs: &[JobOp], writes: &mut Vec<BodyWrite>) -> TxnOutcome {
        let acks: Vec<(usize, (&str, &AckItem))> = cmd
            .ops
            .iter()
            .enumerate()
            .filter_map(|(i, op)| match op {
                TxnOp::Ack { group, item } => Some((i, (group.as_str(), item))),
                TxnOp::Push(_) => None,
            })
            .collect();
        let items: Vec<(&str, &AckItem)> = acks.iter().map(|(_, a)| *a).collect();
        let plan = self.plan_acks(&items);
        if let Some(refusal) = self.refused_ack(&acks, &plan.results) {
            return refusal;
        }
        if let Some(refusal) = self.refused_duplicate(cmd) {
            return refusal;
        }
        let kv_plan = match self.kv.plan(&cmd.kv, self.now_ms) {
            Ok(plan) => plan,
            Err(refusal) => {
                return TxnOutcome::Refused {
                    reason: "kv_precondition".into(),
                    failed_index: cmd.ops.len() + refusal.index,
                    error: "QKV a required KV precondition failed; the transaction rolled back".into(),
                    kv: Some(refusal),
                    job: None,
                };
            }
        };
        if let Some(i) = self.overflowing_push(cmd) {
            let error = "QTXN a push would take its queue past maxSize; the transaction rolled back";
            return refused("queue_full", i, error.into());
        }
        // Job riders apply last among the judgements: a refusal rolls them
        // back, and nothing else has been written yet.
        let job_results = match self.jobs.call(jobs, self.now_ms) {
            JobsOutcome::Done(results) => results,
            JobsOutcome::Refused(refusal) => {
                return TxnOutcome::Refused {
                    reason: "job_precondition".into(),
                    failed_index: cmd.ops.len() + cmd.kv.len() + cmd.timers.len() + refusal.index,
                    error: format!(
                        "QJOB job rider {} was refused ({}); the transaction rolled back",
                        refusal.index,
                        refusal.code.as_str()
                    ),
                    kv: None,
                    job: Some(refusal),
                };
            }
        };
        let mut results = self.commit_ops(cmd, plan, writes);
        results.extend(self.kv.commit(kv_plan).into_iter().map(TxnResult::Kv));
        let now = self.now_ms;
        results.extend(cmd.timers.iter().map(|op| TxnResult::Timer(self.timers.apply(op, now))));
        results.extend(job_results.into_iter().map(TxnResult::Job));
        TxnOutcome::Committed(results)
    }

    /// The first ack of the step that cannot commit. A fenced ack needs its
    /// lease still held (live leases are exactly the ones in the table:
    /// lapsed ones were released when this entry began). Under a held
    /// lease, or unfenced, re-acking a committed message is a no-op and the
    /// rest of the step commits.
    fn refused_ack(&self, acks: &[(usize, (&str, &AckItem))], results: &[AckResult]) -> Option<TxnOutcome> {
        for ((op_index, (_, item)), r) in acks.iter().zip(results) {
            let lease_gone = item.lease_id.as_ref().is_some_and(|l| !self.leases.contains_key(l));
            if !r.success || lease_gone {
                let why = if lease_gone {
                    format!("ack of {}: its lease is no longer held", item.transaction_id)
                } else {
                    format!("ack of {} refused: {}", item.transaction_id, r.error.as_deref().unwrap_or("refused"))
                };
                return Some(refused("rejected_ack", *op_index, format!("QTXN {why}; the transaction rolled back")));
            }
        }
        None
    }

    /// A push of the step whose transaction id is already stored.
    fn refused_duplicate(&self, cmd: &TxnCmd) -> Option<TxnOutcome> {
        let (i, offset) = self.first_stored_duplicate(cmd)?;
        let TxnOp::Push(p) = &cmd.ops[i] else { unreachable!("duplicates are pushes") };
        let error = format!(
            "QDUP a pushed message to {}/{} is a duplicate (original offset {offset}); the transaction rolled back",
            p.queue, p.partition
        );
        Some(refused("duplicate", i, error))
    }

    /// Commits the step's pushes and acks, answering them in op order.
    fn commit_ops(&mut self, cmd: &TxnCmd, plan: AckPlan, writes: &mut Vec<BodyWrite>) -> Vec<TxnResult> {
        let pushes: Vec<_> = cmd
            .ops
            .iter()
            .filter_map(|op| match op {
                TxnOp::Push(p) => Some(p.clone()),
                TxnOp::Ack { .. } => None,
            })
            .collect();
        let mut pushed = self.push(&PushCmd { items: pushes }, writes).into_iter();
        let mut acked = self.commit_acks(plan).into_iter();
        cmd.ops
            .iter()
            .map(|op| match op {
                TxnOp::Push(_) => TxnResult::Push(pushed.next().expect("one result per push")),
                TxnOp::Ack { .. } => TxnResult::Ack(acked.next().expect("one result per ack")),
            })
            .collect()
    }
}

/// A refusal with no KV or job detail.
fn refused(reason: &str, failed_index: usize, error: String) -> TxnOutcome {
    TxnOutcome::Refused { reason: reason.into(), failed_index, error, kv: None, job: None }
}
