//! The fencing rules of job queues, checked over the common history from
//! the answers the state machines gave, entry by entry:
//!
//! - per (queue, scope) claim tokens strictly rise; a token seen again is
//!   only the same claim answered again for its request id;
//! - a job gets a new lease only when its previous one ended or ran out
//!   (at most one live lease per job);
//! - renew, complete, fail and release are accepted only with the job's
//!   newest lease, unexpired and not yet ended (no stale token wins);
//! - a job is completed at most once until it is enqueued anew.

use std::collections::BTreeMap;

use regina_state::jobs::apply::{JobResult, JobsOutcome};
use regina_state::jobs::view::ClaimView;
use regina_state::jobs::{JobOp, JobTarget};
use regina_state::outcome::{TxnOutcome, TxnResult};
use regina_state::{Command, Outcome};

#[derive(Debug, Clone)]
struct Granted {
    /// As the claim answered it: a resent claim answers it again.
    claim: ClaimView,
    /// When the lease runs out, renews included.
    expires: u64,
    request_id: Option<String>,
    /// Ended by complete, fail, release, or its job cancelled or replaced.
    ended: bool,
}

type ScopeKey = (String, String);
type JobKey = (String, String, String);

/// What the history has shown so far, and how much of it.
#[derive(Debug, Default)]
pub struct JobLedger {
    tokens: BTreeMap<ScopeKey, BTreeMap<u64, Granted>>,
    newest: BTreeMap<JobKey, u64>,
    completed: BTreeMap<JobKey, u64>,
    pub figures: JobFigures,
}

/// Counts of what the job rules were checked on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JobFigures {
    pub claims: u64,
    pub replays: u64,
    pub renews: u64,
    pub completes: u64,
    pub fails: u64,
    pub releases: u64,
    pub lease_lost: u64,
}

impl JobFigures {
    /// Adds another group's figures to these.
    pub fn add(&mut self, o: &JobFigures) {
        self.claims += o.claims;
        self.replays += o.replays;
        self.renews += o.renews;
        self.completes += o.completes;
        self.fails += o.fails;
        self.releases += o.releases;
        self.lease_lost += o.lease_lost;
    }
}

fn scope_key(at: &JobTarget) -> ScopeKey {
    (at.queue.clone(), at.scope.clone())
}

fn job_key(at: &JobTarget, id: &str) -> JobKey {
    (at.queue.clone(), at.scope.clone(), id.to_string())
}

impl JobLedger {
    /// Takes in one applied command and its outcome at the state's time.
    pub fn entry(&mut self, cmd: &Command, out: &Outcome, now: u64) -> Result<(), String> {
        match (cmd, out) {
            (Command::Jobs(c), Outcome::Jobs(JobsOutcome::Done(rs))) => self.call(&c.ops, rs, now),
            (Command::Step { jobs, .. }, Outcome::Txn(TxnOutcome::Committed(rs))) => {
                let rs: Vec<JobResult> = rs
                    .iter()
                    .filter_map(|r| match r {
                        TxnResult::Job(j) => Some(j.clone()),
                        _ => None,
                    })
                    .collect();
                self.call(jobs, &rs, now)
            }
            _ => Ok(()),
        }
    }

    fn call(&mut self, ops: &[JobOp], results: &[JobResult], now: u64) -> Result<(), String> {
        for (op, r) in ops.iter().zip(results) {
            self.op(op, r, now)?;
        }
        Ok(())
    }

    fn end_newest(&mut self, at: &JobTarget, id: &str) {
        let Some(t) = self.newest.get(&job_key(at, id)) else { return };
        if let Some(g) = self.tokens.get_mut(&scope_key(at)).and_then(|m| m.get_mut(t)) {
            g.ended = true;
        }
    }

    /// An accepted proof must name the job's newest, live lease.
    fn proved(&self, at: &JobTarget, id: &str, owner: &str, token: u64, now: u64, what: &str) -> Result<(), String> {
        let newest = self.newest.get(&job_key(at, id)).copied();
        let g = self.tokens.get(&scope_key(at)).and_then(|m| m.get(&token));
        match g {
            Some(g)
                if newest == Some(token)
                    && g.claim.id == id
                    && g.claim.owner == owner
                    && !g.ended
                    && now < g.expires => {}
            _ => {
                return Err(format!(
                    "job {}/{:?}/{id}: {what} accepted with token {token} of {owner}, which is not its live lease \
                     (newest token {newest:?}, that lease {g:?}, now {now})",
                    at.queue, at.scope
                ))
            }
        }
        Ok(())
    }

    fn op(&mut self, op: &JobOp, r: &JobResult, now: u64) -> Result<(), String> {
        match (op, r) {
            (JobOp::Claim { at, request_id, .. }, JobResult::Claimed(Some(c))) => {
                let seen = self.tokens.entry(scope_key(at)).or_default();
                if let Some(g) = seen.get(&c.token) {
                    if g.request_id.is_none() || g.request_id != *request_id || g.claim != *c {
                        return Err(format!(
                            "job queue {}/{:?}: token {} handed out twice ({c:?} after {:?})",
                            at.queue, at.scope, c.token, g.claim
                        ));
                    }
                    self.figures.replays += 1;
                    return Ok(());
                }
                if let Some(last) = seen.keys().next_back() {
                    if *last >= c.token {
                        return Err(format!(
                            "job queue {}/{:?}: token {} does not rise above {last}",
                            at.queue, at.scope, c.token
                        ));
                    }
                }
                let key = job_key(at, &c.id);
                if let Some(prev) = self.newest.get(&key).and_then(|t| seen.get(t)) {
                    if !prev.ended && now < prev.expires {
                        return Err(format!(
                            "job {}/{:?}/{}: leased under token {} while token {} was live until {} (now {now})",
                            at.queue, at.scope, c.id, c.token, prev.claim.token, prev.expires
                        ));
                    }
                }
                seen.insert(
                    c.token,
                    Granted { claim: c.clone(), expires: c.expires_ms, request_id: request_id.clone(), ended: false },
                );
                self.newest.insert(key, c.token);
                self.figures.claims += 1;
            }
            (JobOp::Renew { at, proof, .. }, JobResult::Renewed(c)) => {
                self.proved(at, &proof.id, &proof.owner, proof.token, now, "a renew")?;
                if c.token != proof.token {
                    return Err(format!("job {}: a renew changed token {} to {}", proof.id, proof.token, c.token));
                }
                let g = self.tokens.get_mut(&scope_key(at)).and_then(|m| m.get_mut(&proof.token));
                g.expect("proved above").expires = c.expires_ms;
                self.figures.renews += 1;
            }
            (JobOp::Complete { at, proof, .. }, JobResult::Applied { .. }) => {
                self.proved(at, &proof.id, &proof.owner, proof.token, now, "a complete")?;
                let done = self.completed.entry(job_key(at, &proof.id)).or_insert(0);
                *done += 1;
                if *done > 1 {
                    return Err(format!("job {}/{:?}/{}: completed twice", at.queue, at.scope, proof.id));
                }
                self.end_newest(at, &proof.id);
                self.figures.completes += 1;
            }
            (JobOp::Fail { at, proof, .. }, JobResult::Applied { .. }) => {
                self.proved(at, &proof.id, &proof.owner, proof.token, now, "a fail")?;
                self.end_newest(at, &proof.id);
                self.figures.fails += 1;
            }
            (JobOp::Release { at, proof, .. }, JobResult::Applied { .. }) => {
                self.proved(at, &proof.id, &proof.owner, proof.token, now, "a release")?;
                self.end_newest(at, &proof.id);
                self.figures.releases += 1;
            }
            // A new job under the id (or none): its completions count afresh.
            (JobOp::Enqueue { at, id, .. } | JobOp::Cancel { at, id, .. }, JobResult::Applied { .. }) => {
                self.end_newest(at, id);
                self.completed.remove(&job_key(at, id));
            }
            (_, JobResult::Refused { code, .. }) if code.as_str() == "LEASE_LOST" => self.figures.lease_lost += 1,
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use regina_state::jobs::apply::JobResult;
    use regina_state::jobs::JobsCmd;

    use super::*;

    fn at() -> JobTarget {
        JobTarget { queue: "q".into(), scope: String::new() }
    }

    fn claimed(id: &str, token: u64, expires_ms: u64) -> (JobOp, JobResult) {
        let op = JobOp::Claim { at: at(), owner: "w".into(), lease_ms: None, request_id: None };
        let c = ClaimView {
            scope: String::new(),
            id: id.into(),
            payload: b"{}".to_vec(),
            attempt: 1,
            owner: "w".into(),
            token,
            expires_ms,
        };
        (op, JobResult::Claimed(Some(c)))
    }

    fn completed(id: &str, token: u64) -> (JobOp, JobResult) {
        let proof = regina_state::jobs::LeaseProof { id: id.into(), owner: "w".into(), token };
        let op = JobOp::Complete { at: at(), proof, result: b"1".to_vec(), required: false };
        (op, JobResult::Applied { job: None, existed: true })
    }

    fn feed(ledger: &mut JobLedger, now: u64, pairs: Vec<(JobOp, JobResult)>) -> Result<(), String> {
        let (ops, rs): (Vec<JobOp>, Vec<JobResult>) = pairs.into_iter().unzip();
        ledger.entry(&Command::Jobs(JobsCmd { ops }), &Outcome::Jobs(JobsOutcome::Done(rs)), now)
    }

    #[test]
    fn a_sound_history_passes() {
        let mut l = JobLedger::default();
        feed(&mut l, 0, vec![claimed("a", 1, 100), claimed("b", 2, 100)]).unwrap();
        feed(&mut l, 50, vec![completed("a", 1)]).unwrap();
        feed(&mut l, 100, vec![claimed("b", 3, 200)]).unwrap();
        assert_eq!((l.figures.claims, l.figures.completes), (3, 1));
    }

    #[test]
    fn a_resent_claim_answers_the_claim_as_first_made_even_after_a_renew() {
        let mut l = JobLedger::default();
        let with_request = |(op, r): (JobOp, JobResult)| match op {
            JobOp::Claim { at, owner, lease_ms, .. } => {
                (JobOp::Claim { at, owner, lease_ms, request_id: Some("r".into()) }, r)
            }
            _ => unreachable!(),
        };
        feed(&mut l, 0, vec![with_request(claimed("a", 1, 100))]).unwrap();
        let proof = regina_state::jobs::LeaseProof { id: "a".into(), owner: "w".into(), token: 1 };
        let JobResult::Claimed(Some(c)) = claimed("a", 1, 100).1 else { unreachable!() };
        let renewed = ClaimView { expires_ms: 300, ..c };
        let renew = JobOp::Renew { at: at(), proof, lease_ms: None, required: false };
        feed(&mut l, 50, vec![(renew, JobResult::Renewed(renewed))]).unwrap();
        feed(&mut l, 60, vec![with_request(claimed("a", 1, 100))]).unwrap();
        assert_eq!(l.figures.replays, 1);
        // The renewed lease is live past the first expiry.
        assert!(feed(&mut l, 200, vec![claimed("a", 2, 400)]).unwrap_err().contains("was live"));
    }

    #[test]
    fn tokens_that_do_not_rise_are_caught() {
        let mut l = JobLedger::default();
        feed(&mut l, 0, vec![claimed("a", 2, 100)]).unwrap();
        assert!(feed(&mut l, 0, vec![claimed("b", 1, 100)]).unwrap_err().contains("does not rise"));
    }

    #[test]
    fn a_second_live_lease_is_caught() {
        let mut l = JobLedger::default();
        feed(&mut l, 0, vec![claimed("a", 1, 100)]).unwrap();
        assert!(feed(&mut l, 99, vec![claimed("a", 2, 200)]).unwrap_err().contains("was live"));
    }

    #[test]
    fn a_stale_complete_is_caught() {
        let mut l = JobLedger::default();
        feed(&mut l, 0, vec![claimed("a", 1, 100)]).unwrap();
        feed(&mut l, 100, vec![claimed("a", 2, 200)]).unwrap();
        assert!(feed(&mut l, 150, vec![completed("a", 1)]).unwrap_err().contains("not its live lease"));
        // Nor with the newest token once its lease ran out.
        assert!(feed(&mut l, 200, vec![completed("a", 2)]).unwrap_err().contains("not its live lease"));
    }

    #[test]
    fn a_job_completed_twice_is_caught() {
        let mut l = JobLedger::default();
        feed(&mut l, 0, vec![claimed("a", 1, 100)]).unwrap();
        feed(&mut l, 10, vec![completed("a", 1)]).unwrap();
        // A state machine that let the job be claimed again and completed.
        feed(&mut l, 20, vec![claimed("a", 2, 100)]).unwrap();
        assert!(feed(&mut l, 30, vec![completed("a", 2)]).unwrap_err().contains("completed twice"));
    }
}
