//! The fencing rules checked from the answers alone, as a worker fleet would
//! see them, without the model: per (queue, scope) tokens strictly rise
//! (a token seen twice is the same claim answered again for its request
//! id), a job never has two live leases at once, and only a job's newest,
//! unexpired, unfinished lease is ever accepted by renew, complete, fail or
//! release.

use std::collections::BTreeMap;

use regina_state::jobs::apply::JobResult;
use regina_state::jobs::view::ClaimView;
use regina_state::jobs::{JobOp, JobTarget};

#[derive(Debug, Clone)]
struct Granted {
    id: String,
    owner: String,
    expires: u64,
    /// Completed, failed, released, or its job cancelled or replaced.
    ended: bool,
    request_id: Option<String>,
    claim: ClaimView,
}

#[derive(Debug, Clone, Default)]
pub struct Ledger {
    /// (queue, scope) to token to the lease it named.
    tokens: BTreeMap<(String, String), BTreeMap<u64, Granted>>,
    /// (queue, scope, job id) to the newest token granted on it.
    newest: BTreeMap<(String, String, String), u64>,
    /// Claims answered again for their request id.
    pub replays: u64,
}

fn key(at: &JobTarget) -> (String, String) {
    (at.queue.clone(), at.scope.clone())
}

impl Ledger {
    /// Learns from the ops and results of a call that took effect.
    pub fn learn(&mut self, ops: &[JobOp], results: &[JobResult], now: u64) -> Result<(), String> {
        for (op, r) in ops.iter().zip(results) {
            self.learn_one(op, r, now)?;
        }
        Ok(())
    }

    fn end_newest(&mut self, at: &JobTarget, id: &str) {
        if let Some(t) = self.newest.get(&(at.queue.clone(), at.scope.clone(), id.to_string())) {
            if let Some(g) = self.tokens.get_mut(&key(at)).and_then(|m| m.get_mut(t)) {
                g.ended = true;
            }
        }
    }

    /// The lease `token` names, when it is the job's newest and still live.
    fn live(&self, at: &JobTarget, id: &str, owner: &str, token: u64, now: u64) -> Result<(), String> {
        let newest = self.newest.get(&(at.queue.clone(), at.scope.clone(), id.to_string()));
        let g = self.tokens.get(&key(at)).and_then(|m| m.get(&token));
        match g {
            Some(g) if newest == Some(&token) && g.id == id && g.owner == owner && !g.ended && now < g.expires => {
                Ok(())
            }
            _ => Err(format!(
                "{at:?}/{id}: token {token} of {owner} was accepted but is not the job's live lease ({g:?})"
            )),
        }
    }

    fn learn_one(&mut self, op: &JobOp, r: &JobResult, now: u64) -> Result<(), String> {
        match (op, r) {
            (JobOp::Claim { at, request_id, .. }, JobResult::Claimed(Some(c))) => {
                let seen = self.tokens.entry(key(at)).or_default();
                if let Some(g) = seen.get(&c.token) {
                    // The same token again: only as the answer to a resent request.
                    if g.request_id.is_none() || g.request_id != *request_id || g.claim != *c {
                        return Err(format!("{at:?}: token {} handed out twice: {c:?} after {g:?}", c.token));
                    }
                    self.replays += 1;
                    return Ok(());
                }
                if let Some((last, _)) = seen.last_key_value() {
                    if *last >= c.token {
                        return Err(format!("{at:?}: token {} after token {last}", c.token));
                    }
                }
                let job_key = (at.queue.clone(), at.scope.clone(), c.id.clone());
                if let Some(prev) = self.newest.get(&job_key).and_then(|t| seen.get(t)) {
                    if !prev.ended && now < prev.expires {
                        return Err(format!(
                            "{at:?}/{}: leased to token {} while token {} is live",
                            c.id, c.token, prev.claim.token
                        ));
                    }
                }
                seen.insert(
                    c.token,
                    Granted {
                        id: c.id.clone(),
                        owner: c.owner.clone(),
                        expires: c.expires_ms,
                        ended: false,
                        request_id: request_id.clone(),
                        claim: c.clone(),
                    },
                );
                self.newest.insert(job_key, c.token);
            }
            (JobOp::Renew { at, proof, .. }, JobResult::Renewed(c)) => {
                self.live(at, &proof.id, &proof.owner, proof.token, now)?;
                if c.token != proof.token {
                    return Err(format!("{at:?}/{}: renew changed token {} to {}", proof.id, proof.token, c.token));
                }
                let g = self.tokens.get_mut(&key(at)).and_then(|m| m.get_mut(&proof.token)).expect("live");
                g.expires = c.expires_ms;
            }
            (
                JobOp::Complete { at, proof, .. } | JobOp::Fail { at, proof, .. } | JobOp::Release { at, proof, .. },
                JobResult::Applied { .. },
            ) => {
                self.live(at, &proof.id, &proof.owner, proof.token, now)?;
                self.end_newest(at, &proof.id);
            }
            (JobOp::Cancel { at, id, .. }, JobResult::Applied { .. })
            | (JobOp::Enqueue { at, id, .. }, JobResult::Applied { .. }) => self.end_newest(at, id),
            _ => {}
        }
        Ok(())
    }
}
