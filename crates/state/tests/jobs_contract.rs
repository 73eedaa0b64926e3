//! Job queues, one contract line at a time: backoff, leases that run out,
//! `retry: false`, request-id replay, all-or-nothing calls and steps, and
//! the rules that must not depend on whether a sweep ran (retention, a
//! policy change after a lease ran out, ties between equal instants).

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

use regina_state::command::TxnCmd;
use regina_state::jobs::apply::{JobCode, JobResult, JobsOutcome};
use regina_state::jobs::view::{ClaimView, JobView};
use regina_state::jobs::{Availability, JobConfigPatch, JobOp, JobState, JobTarget, JobsCmd, LeaseProof, RetryPolicy};
use regina_state::outcome::{TxnOutcome, TxnResult};
use regina_state::{Command, Entry, Outcome, State};

const Q: &str = "emails";

struct Jobs {
    state: State,
    now: u64,
}

fn at() -> JobTarget {
    JobTarget { queue: Q.into(), scope: String::new() }
}

fn proof(c: &ClaimView) -> LeaseProof {
    LeaseProof { id: c.id.clone(), owner: c.owner.clone(), token: c.token }
}

fn enqueue(id: &str) -> JobOp {
    enqueue_as(id, false)
}

fn enqueue_as(id: &str, required: bool) -> JobOp {
    JobOp::Enqueue {
        at: at(),
        id: id.into(),
        payload: format!("{{\"id\":\"{id}\"}}").into_bytes(),
        when: Availability::Now,
        replace: false,
        required,
    }
}

fn claim(owner: &str) -> JobOp {
    JobOp::Claim { at: at(), owner: owner.into(), lease_ms: None, request_id: None }
}

fn fail(c: &ClaimView) -> JobOp {
    JobOp::Fail {
        at: at(),
        proof: proof(c),
        error: b"{\"e\":1}".to_vec(),
        retry: true,
        delay_ms: None,
        required: false,
    }
}

fn configure(patch: JobConfigPatch) -> JobOp {
    JobOp::Configure { queue: Q.into(), patch }
}

fn retry_policy(max_attempts: u32) -> JobConfigPatch {
    JobConfigPatch {
        retry: Some(Some(RetryPolicy { max_attempts, initial_delay_ms: 1_000, max_delay_ms: 60_000 })),
        ..Default::default()
    }
}

impl Jobs {
    fn new() -> Jobs {
        Jobs { state: State::new(), now: 1_000_000 }
    }

    fn outcome(&mut self, ops: Vec<JobOp>) -> JobsOutcome {
        let out = self.state.apply(&Entry { now_ms: self.now, command: Command::Jobs(JobsCmd { ops }) });
        self.state.check_invariants().expect("invariants hold");
        match out.outcome {
            Outcome::Jobs(o) => o,
            o => panic!("a job call answered {o:?}"),
        }
    }

    fn call(&mut self, ops: Vec<JobOp>) -> Vec<JobResult> {
        match self.outcome(ops) {
            JobsOutcome::Done(rs) => rs,
            r => panic!("the call was refused: {r:?}"),
        }
    }

    fn one(&mut self, op: JobOp) -> JobResult {
        self.call(vec![op]).remove(0)
    }

    fn claim(&mut self, owner: &str) -> Option<ClaimView> {
        match self.one(claim(owner)) {
            JobResult::Claimed(c) => c,
            r => panic!("claim answered {r:?}"),
        }
    }

    fn get(&mut self, id: &str) -> Option<JobView> {
        self.state.jobs.view(&at(), id, self.now)
    }

    fn sweep(&mut self) {
        self.state.apply(&Entry { now_ms: self.now, command: Command::Sweep });
    }
}

#[test]
fn backoff_doubles_from_the_initial_delay_up_to_the_maximum() {
    let mut j = Jobs::new();
    j.call(vec![
        configure(JobConfigPatch {
            retry: Some(Some(RetryPolicy { max_attempts: 10, initial_delay_ms: 1_000, max_delay_ms: 10_000 })),
            ..Default::default()
        }),
        enqueue("a"),
    ]);
    let mut delays = Vec::new();
    for _ in 0..6 {
        let c = j.claim("w").expect("ready");
        let JobResult::Applied { job: Some(v), .. } = j.one(fail(&c)) else { panic!("fail applied") };
        assert_eq!(v.state, JobState::Pending);
        delays.push(v.available_ms - j.now);
        // Not claimable a millisecond before the backoff passes.
        j.now = v.available_ms - 1;
        assert!(j.claim("w").is_none());
        j.now += 1;
    }
    assert_eq!(delays, [1_000, 2_000, 4_000, 8_000, 10_000, 10_000]);
}

#[test]
fn the_default_policy_backs_off_one_two_four_seconds_and_fails_on_the_fifth_attempt() {
    let mut j = Jobs::new();
    j.one(enqueue("a"));
    let mut delays = Vec::new();
    for attempt in 1..=5 {
        let c = j.claim("w").expect("ready");
        assert_eq!(c.attempt, attempt);
        let JobResult::Applied { job: Some(v), .. } = j.one(fail(&c)) else { panic!("fail applied") };
        if attempt < 5 {
            delays.push(v.available_ms - j.now);
            j.now = v.available_ms;
        } else {
            assert_eq!(v.state, JobState::Failed);
            assert_eq!(v.error.as_deref(), Some(&b"{\"e\":1}"[..]));
        }
    }
    assert_eq!(delays, [1_000, 2_000, 4_000, 8_000]);
}

#[test]
fn a_lease_that_runs_out_on_the_last_attempt_fails_the_job_with_lease_expired() {
    let mut j = Jobs::new();
    j.call(vec![configure(retry_policy(2)), enqueue("a")]);
    let first = j.claim("w").unwrap();
    assert_eq!(first.expires_ms, j.now + 30_000, "the default lease");
    j.now = first.expires_ms - 1;
    assert_eq!(j.get("a").unwrap().state, JobState::Leased, "current while now < expires");
    j.now = first.expires_ms;
    let v = j.get("a").unwrap();
    assert_eq!((v.state, v.available_ms, v.attempts), (JobState::Pending, first.expires_ms, 1), "no backoff");
    let second = j.claim("w").unwrap();
    assert_eq!((second.attempt, second.token), (2, first.token + 1));
    // The old lease is lost, the new one is not.
    assert!(matches!(
        j.one(JobOp::Complete { at: at(), proof: proof(&first), result: b"1".to_vec(), required: false }),
        JobResult::Refused { code: JobCode::LeaseLost, .. }
    ));
    j.now = second.expires_ms;
    let v = j.get("a").unwrap();
    assert_eq!(v.state, JobState::Failed);
    assert_eq!(v.error.as_deref(), Some(&br#"{"code":"LEASE_EXPIRED"}"#[..]));
    assert!(j.claim("w").is_none());
    // retry makes it pending again with its attempts reset.
    let JobResult::Applied { job: Some(v), .. } =
        j.one(JobOp::Retry { at: at(), id: "a".into(), delay_ms: None, required: false })
    else {
        panic!("retry applied")
    };
    assert_eq!((v.state, v.attempts, v.error), (JobState::Pending, 0, None));
}

#[test]
fn without_a_retry_policy_a_lease_that_runs_out_requeues_without_limit() {
    let mut j = Jobs::new();
    j.call(vec![configure(JobConfigPatch { retry: Some(None), ..Default::default() }), enqueue("a")]);
    let mut last = 0;
    for attempt in 1..=12 {
        let c = j.claim("w").expect("requeued");
        assert_eq!(c.attempt, attempt);
        assert!(c.token > last);
        last = c.token;
        j.now = c.expires_ms;
    }
    // And a failure under retry: false is final at once.
    let c = j.claim("w").unwrap();
    let JobResult::Applied { job: Some(v), .. } = j.one(fail(&c)) else { panic!("fail applied") };
    assert_eq!(v.state, JobState::Failed);
}

#[test]
fn a_resent_claim_answers_the_original_claim_within_the_window() {
    let mut j = Jobs::new();
    j.call(vec![enqueue("a"), enqueue("b")]);
    let asked = || JobOp::Claim { at: at(), owner: "w".into(), lease_ms: Some(1_000), request_id: Some("r".into()) };
    let JobResult::Claimed(Some(first)) = j.one(asked()) else { panic!("claimed") };
    j.now += 5_000;
    let JobResult::Claimed(Some(again)) = j.one(asked()) else { panic!("claimed") };
    assert_eq!(again, first, "the same claim, not job b");
    // Still the original claim after its job was cancelled.
    j.one(JobOp::Cancel { at: at(), id: first.id.clone(), required: false });
    let JobResult::Claimed(Some(again)) = j.one(asked()) else { panic!("claimed") };
    assert_eq!(again, first);
    j.now = 1_000_000 + 600_000;
    let JobResult::Claimed(Some(fresh)) = j.one(asked()) else { panic!("claimed") };
    assert_eq!((fresh.id.as_str(), fresh.token), ("b", first.token + 1));
}

#[test]
fn a_required_refusal_rolls_back_the_whole_call_and_hands_out_no_token() {
    let mut j = Jobs::new();
    j.one(enqueue("a"));
    let JobsOutcome::Refused(r) = j.outcome(vec![enqueue("b"), claim("w"), enqueue_as("a", true)]) else {
        panic!("refused")
    };
    assert_eq!((r.index, r.code), (2, JobCode::Exists));
    assert_eq!(r.job.as_ref().map(|v| v.state), Some(JobState::Leased), "the job as the call left it");
    assert_eq!(j.get("b"), None);
    assert_eq!(j.get("a").unwrap().state, JobState::Pending);
    assert_eq!(j.claim("w").unwrap().token, 1, "the rolled-back claim's token was never handed out");
    // Not required: the refusal is that op's answer and the rest applies.
    let rs = j.call(vec![enqueue("a"), enqueue("b")]);
    assert!(matches!(rs[0], JobResult::Refused { code: JobCode::Exists, .. }));
    assert!(matches!(rs[1], JobResult::Applied { existed: false, .. }));
}

#[test]
fn a_lease_too_long_refuses_the_call_whole() {
    let mut j = Jobs::new();
    j.one(enqueue("a"));
    let too_long = JobOp::Claim { at: at(), owner: "w".into(), lease_ms: Some(300_001), request_id: None };
    let JobsOutcome::Refused(r) = j.outcome(vec![enqueue("b"), too_long]) else { panic!("refused") };
    assert_eq!((r.index, r.code), (1, JobCode::LeaseTooLong));
    assert_eq!(j.get("b"), None);
    let at_max = JobOp::Claim { at: at(), owner: "w".into(), lease_ms: Some(300_000), request_id: None };
    assert!(matches!(j.one(at_max), JobResult::Claimed(Some(_))));
}

#[test]
fn a_step_with_a_refused_rider_commits_nothing() {
    let mut j = Jobs::new();
    j.one(enqueue("a"));
    let c = j.claim("w").unwrap();
    let step = |jobs| Command::Step { txn: TxnCmd { ops: vec![], kv: vec![], timers: vec![] }, jobs };
    let complete = JobOp::Complete { at: at(), proof: proof(&c), result: b"1".to_vec(), required: true };
    let stale = LeaseProof { token: c.token + 1, ..proof(&c) };
    let lost = JobOp::Release { at: at(), proof: stale, delay_ms: None, required: true };
    let out = j.state.apply(&Entry { now_ms: j.now, command: step(vec![complete.clone(), lost]) });
    let Outcome::Txn(TxnOutcome::Refused { reason, failed_index, job: Some(r), .. }) = out.outcome else {
        panic!("refused: {:?}", out.outcome)
    };
    assert_eq!((reason.as_str(), failed_index, r.index, r.code), ("job_precondition", 1, 1, JobCode::LeaseLost));
    assert_eq!(j.get("a").unwrap().state, JobState::Leased);
    let out = j.state.apply(&Entry { now_ms: j.now, command: step(vec![complete]) });
    let Outcome::Txn(TxnOutcome::Committed(rs)) = out.outcome else { panic!("committed") };
    assert!(
        matches!(&rs[0], TxnResult::Job(JobResult::Applied { job: Some(v), .. }) if v.state == JobState::Completed)
    );
}

#[test]
fn a_job_read_as_failed_stays_failed_when_the_policy_changes_later() {
    // Judged when its lease ran out, under the policy of that time; before,
    // a later configure re-judged it and it came back pending.
    let mut j = Jobs::new();
    j.call(vec![configure(retry_policy(1)), enqueue("a")]);
    let c = j.claim("w").unwrap();
    j.now = c.expires_ms + 10;
    assert_eq!(j.get("a").unwrap().state, JobState::Failed);
    j.one(configure(retry_policy(5)));
    assert_eq!(j.get("a").unwrap().state, JobState::Failed);
    assert!(j.claim("w").is_none());
}

#[test]
fn a_finished_job_past_retention_is_gone_for_writers_and_stats_too() {
    // Before, it was gone for get and scan but enqueue answered JOB_EXISTS
    // (with no job), retry revived it, cancel said it existed, and stats
    // counted a job whose last lease ran out.
    let mut j = Jobs::new();
    let retention = JobConfigPatch { completed_retention_ms: Some(Some(1_000)), ..retry_policy(1) };
    j.call(vec![configure(retention), enqueue("a"), enqueue("b")]);
    let c = j.claim("w").unwrap();
    j.claim("w").unwrap();
    j.one(fail(&c));
    j.now = c.expires_ms + 1_000;
    assert_eq!(j.get("a"), None);
    assert_eq!(j.get("b"), None, "b failed when its lease ran out, retention counts from then");
    let counts = j.state.jobs.stats(&at(), j.now).counts;
    assert_eq!((counts.failed, counts.pending, counts.leased), (0, 0, 0));
    let retry = JobOp::Retry { at: at(), id: "b".into(), delay_ms: None, required: false };
    assert!(matches!(j.one(retry), JobResult::Refused { code: JobCode::NotFailed, job: None }));
    assert!(matches!(
        j.one(JobOp::Cancel { at: at(), id: "b".into(), required: false }),
        JobResult::Applied { existed: false, .. }
    ));
    assert!(matches!(j.one(enqueue("a")), JobResult::Applied { existed: false, job: Some(_) }));
    // The same answers after a sweep dropped them.
    let mut swept = Jobs::new();
    swept.call(vec![configure(JobConfigPatch { completed_retention_ms: Some(Some(0)), ..Default::default() })]);
    swept.one(enqueue("a"));
    let c = swept.claim("w").unwrap();
    swept.one(JobOp::Complete { at: at(), proof: proof(&c), result: b"1".to_vec(), required: false });
    swept.sweep();
    assert!(swept.state.jobs.scope(&at()).unwrap().is_empty());
    assert!(matches!(swept.one(enqueue("a")), JobResult::Applied { existed: false, job: Some(_) }));
}

#[test]
fn a_job_claimed_again_after_its_lease_ran_out_reads_the_same_with_or_without_a_sweep() {
    let run = |sweep: bool| {
        let mut j = Jobs::new();
        j.one(enqueue("a"));
        let c = j.claim("w").unwrap();
        j.now = c.expires_ms + 5;
        if sweep {
            j.sweep();
        }
        j.claim("w").unwrap();
        j.get("a").unwrap()
    };
    let (plain, swept) = (run(false), run(true));
    assert_eq!(plain, swept);
    assert_eq!(plain.available_ms, 1_030_000, "available from the first lease's expiry");
}

#[test]
fn equal_instants_go_to_the_job_whose_instant_was_set_first() {
    // a and b become available again at the same instant, when their leases
    // run out. b's expiry was set by its claim, a's later by a renew, so b
    // goes first, although a was enqueued first.
    let mut j = Jobs::new();
    j.call(vec![enqueue("a"), enqueue("b")]);
    let lease = |ms| JobOp::Claim { at: at(), owner: "w".into(), lease_ms: Some(ms), request_id: None };
    let JobResult::Claimed(Some(a)) = j.one(lease(5_000)) else { panic!("claimed") };
    let JobResult::Claimed(Some(b)) = j.one(lease(2_000)) else { panic!("claimed") };
    assert_eq!((a.id.as_str(), b.id.as_str()), ("a", "b"));
    j.now += 1_000;
    let JobResult::Renewed(a) =
        j.one(JobOp::Renew { at: at(), proof: proof(&a), lease_ms: Some(1_000), required: false })
    else {
        panic!("renewed")
    };
    assert_eq!(a.expires_ms, b.expires_ms);
    j.now = a.expires_ms;
    assert_eq!(j.claim("w").unwrap().id, "b");
    assert_eq!(j.claim("w").unwrap().id, "a");
}

#[test]
fn tokens_keep_rising_across_cancel_and_re_enqueue() {
    let mut j = Jobs::new();
    j.one(enqueue("a"));
    let first = j.claim("w").unwrap();
    j.one(JobOp::Cancel { at: at(), id: "a".into(), required: false });
    let complete =
        |c: &ClaimView| JobOp::Complete { at: at(), proof: proof(c), result: b"1".to_vec(), required: false };
    assert!(matches!(j.one(complete(&first)), JobResult::Refused { code: JobCode::LeaseLost, job: None }));
    j.one(enqueue("a"));
    let second = j.claim("w").unwrap();
    assert_eq!(second.token, first.token + 1);
    assert!(matches!(j.one(complete(&first)), JobResult::Refused { code: JobCode::LeaseLost, .. }));
    assert!(matches!(j.one(complete(&second)), JobResult::Applied { .. }));
}
