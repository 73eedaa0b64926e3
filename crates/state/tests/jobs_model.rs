//! Job queues checked against the reference model in `jobs/model.rs`.
//!
//! Random sequences of job calls (configure, enqueue, claim, renew,
//! complete, fail, release, retry, cancel, get, scan, stats, some of them
//! required), batches of calls in one entry, steps with job riders, sweeps
//! and snapshot restores run over two queues of two scopes each, a few ids
//! and two owners, with time moving forward by random amounts so that
//! leases run out and backoffs pass. After every entry: the outcome equals the model's, every job, scan
//! and stats reads the same in the state and in the model (at the state's
//! time and a little later), the token counters agree, the state's
//! invariants hold, and the ledger of answers keeps the fencing rules.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod jobs;

use jobs::ledger::Ledger;
use jobs::model::Model;
use proptest::prelude::*;
use regina_state::command::TxnCmd;
use regina_state::jobs::apply::{JobResult, JobsOutcome};
use regina_state::jobs::{Availability, JobConfigPatch, JobOp, JobState, JobTarget, JobsCmd, LeaseProof, RetryPolicy};
use regina_state::outcome::{TxnOutcome, TxnResult};
use regina_state::{Command, Entry, Outcome, State};

const QUEUES: [&str; 2] = ["jq-a", "jq-b"];
/// `""` is the default scope.
const SCOPES: [&str; 2] = ["", "tenant-7"];
const IDS: [&str; 3] = ["j1", "j2", "j3"];
const OWNERS: [&str; 2] = ["w1", "w2"];
const REQUESTS: [&str; 2] = ["r1", "r2"];
const START_MS: u64 = 1_000_000;
/// Reads are also judged this long after the state's time.
const READ_AHEAD_MS: u64 = 1_500;

/// Which token a lease proof names.
#[derive(Debug, Clone, Copy)]
enum Tok {
    /// The job's current lease's (or the scope's last token).
    Current,
    /// One before it: a stale lease.
    Stale,
    /// One never handed out.
    Unminted,
}

#[derive(Debug, Clone, Copy)]
struct Proof {
    tok: Tok,
    /// Prove it as the other owner.
    other_owner: bool,
}

#[derive(Debug, Clone, Copy)]
struct Where {
    queue: usize,
    scope: usize,
    id: usize,
}

#[derive(Debug, Clone)]
enum Spec {
    Configure {
        queue: usize,
        lease: Option<(u64, u64)>,
        retry: Option<Option<(u32, u64, u64)>>,
        retention: Option<Option<u64>>,
    },
    Enqueue {
        at: Where,
        when: u8,
        delay: u64,
        replace: bool,
        required: bool,
    },
    Claim {
        at: Where,
        owner: usize,
        lease_ms: Option<u64>,
        request: Option<usize>,
    },
    Renew {
        at: Where,
        proof: Proof,
        lease_ms: Option<u64>,
        required: bool,
    },
    Complete {
        at: Where,
        proof: Proof,
        required: bool,
    },
    Fail {
        at: Where,
        proof: Proof,
        retry: bool,
        delay_ms: Option<u64>,
        required: bool,
    },
    Release {
        at: Where,
        proof: Proof,
        delay_ms: Option<u64>,
        required: bool,
    },
    Retry {
        at: Where,
        delay_ms: Option<u64>,
        required: bool,
    },
    Cancel {
        at: Where,
        required: bool,
    },
    Get {
        at: Where,
    },
    Scan {
        at: Where,
        state: Option<u8>,
        after: bool,
        limit: u32,
    },
    Stats {
        at: Where,
    },
}

#[derive(Debug, Clone)]
enum Step {
    Call(Vec<Spec>),
    /// A step carrying job riders only (all required).
    Riders(Vec<Spec>),
    /// Calls batched into one entry, as the leader does: each keeps its own
    /// all-or-nothing rule.
    Batch(Vec<Vec<Spec>>),
    Sweep,
    Noop,
    Restore,
}

fn place() -> impl Strategy<Value = Where> {
    (0..QUEUES.len(), 0..SCOPES.len(), 0..IDS.len()).prop_map(|(queue, scope, id)| Where { queue, scope, id })
}

fn proof() -> impl Strategy<Value = Proof> {
    let tok = prop_oneof![6 => Just(Tok::Current), 2 => Just(Tok::Stale), 1 => Just(Tok::Unminted)];
    (tok, prop::bool::weighted(0.1)).prop_map(|(tok, other_owner)| Proof { tok, other_owner })
}

/// Lease lengths around the configured maxima (2s, 5s, the default 300s),
/// so some are too long.
fn lease_ms() -> impl Strategy<Value = Option<u64>> {
    prop_oneof![
        3 => Just(None),
        4 => prop::sample::select(vec![1u64, 500, 1_000, 1_500, 3_000]).prop_map(Some),
        1 => prop::sample::select(vec![6_000u64, 400_000]).prop_map(Some),
    ]
}

fn delay() -> impl Strategy<Value = Option<u64>> {
    prop::option::weighted(0.3, prop::sample::select(vec![0u64, 250, 1_000, 2_500]))
}

fn rider() -> impl Strategy<Value = Spec> {
    prop_oneof![
        3 => (place(), 0u8..3, 0u64..3_000, any::<bool>()).prop_map(|(at, when, delay, replace)| Spec::Enqueue {
            at, when, delay, replace, required: true
        }),
        3 => (place(), proof()).prop_map(|(at, proof)| Spec::Complete { at, proof, required: true }),
        2 => (place(), proof(), prop::bool::weighted(0.8), delay()).prop_map(|(at, proof, retry, delay_ms)| Spec::Fail {
            at, proof, retry, delay_ms, required: true
        }),
        1 => (place(), proof(), delay()).prop_map(|(at, proof, delay_ms)| Spec::Release { at, proof, delay_ms, required: true }),
        1 => (place(), delay()).prop_map(|(at, delay_ms)| Spec::Retry { at, delay_ms, required: true }),
        1 => place().prop_map(|at| Spec::Cancel { at, required: true }),
    ]
}

fn spec() -> impl Strategy<Value = Spec> {
    let required = || prop::bool::weighted(0.3);
    let configure = (
        0..QUEUES.len(),
        prop::option::weighted(0.4, prop::sample::select(vec![(500u64, 2_000u64), (1_000, 5_000), (2_000, 2_000)])),
        prop::option::weighted(
            0.5,
            prop::option::weighted(0.8, (1u32..4, prop::sample::select(vec![0u64, 100, 500]), 100u64..2_000)),
        ),
        prop::option::weighted(0.3, prop::option::weighted(0.8, prop::sample::select(vec![0u64, 1_000, 4_000]))),
    )
        .prop_map(|(queue, lease, retry, retention)| Spec::Configure { queue, lease, retry, retention });
    prop_oneof![
        1 => configure,
        5 => (place(), 0u8..3, 0u64..3_000, prop::bool::weighted(0.3), required())
            .prop_map(|(at, when, delay, replace, required)| Spec::Enqueue { at, when, delay, replace, required }),
        6 => (place(), 0..OWNERS.len(), lease_ms(), prop::option::weighted(0.3, 0..REQUESTS.len()))
            .prop_map(|(at, owner, lease_ms, request)| Spec::Claim { at, owner, lease_ms, request }),
        2 => (place(), proof(), lease_ms(), required())
            .prop_map(|(at, proof, lease_ms, required)| Spec::Renew { at, proof, lease_ms, required }),
        3 => (place(), proof(), required()).prop_map(|(at, proof, required)| Spec::Complete { at, proof, required }),
        3 => (place(), proof(), prop::bool::weighted(0.8), delay(), required())
            .prop_map(|(at, proof, retry, delay_ms, required)| Spec::Fail { at, proof, retry, delay_ms, required }),
        2 => (place(), proof(), delay(), required())
            .prop_map(|(at, proof, delay_ms, required)| Spec::Release { at, proof, delay_ms, required }),
        2 => (place(), delay(), required()).prop_map(|(at, delay_ms, required)| Spec::Retry { at, delay_ms, required }),
        1 => (place(), required()).prop_map(|(at, required)| Spec::Cancel { at, required }),
        2 => place().prop_map(|at| Spec::Get { at }),
        1 => (place(), prop::option::of(0u8..4), any::<bool>(), 1u32..4)
            .prop_map(|(at, state, after, limit)| Spec::Scan { at, state, after, limit }),
        1 => place().prop_map(|at| Spec::Stats { at }),
    ]
}

fn step() -> impl Strategy<Value = (i64, Step)> {
    // Mostly short steps, often in whole half seconds so that entries land
    // exactly on lease expiries and backoffs; now and then past the default
    // 30 s lease, rarely past the request-id window; sometimes behind the
    // state's time (a slower new leader).
    let dt = prop_oneof![
        16 => 0i64..1_500,
        12 => (0i64..6).prop_map(|k| k * 500),
        8 => 1_500i64..4_000,
        4 => 29_000i64..32_000,
        4 => -2_000i64..0,
        // Rarely past the 600 s request-id window.
        1 => 600_000i64..601_000,
    ];
    let step = prop_oneof![
        12 => prop::collection::vec(spec(), 1..4).prop_map(Step::Call),
        2 => prop::collection::vec(rider(), 1..3).prop_map(Step::Riders),
        2 => prop::collection::vec(prop::collection::vec(spec(), 1..3), 2..4).prop_map(Step::Batch),
        1 => Just(Step::Sweep),
        1 => Just(Step::Noop),
        1 => Just(Step::Restore),
    ];
    (dt, step)
}

fn target(w: Where) -> JobTarget {
    JobTarget { queue: QUEUES[w.queue].into(), scope: SCOPES[w.scope].into() }
}

/// Turns specs into ops, naming leases the way clients would: from what
/// the model says the job holds.
fn resolve(spec: &Spec, model: &Model, serial: &mut u64) -> JobOp {
    *serial += 1;
    let n = *serial;
    let proof = |w: Where, p: Proof| {
        let at = target(w);
        let id = IDS[w.id].to_string();
        let lease = model.job(&at, &id).and_then(|j| j.lease.clone());
        let last = model.scopes.get(&(at.queue.clone(), at.scope.clone())).map_or(0, |s| s.last_token);
        let (owner, token) = match &lease {
            Some(l) => (l.owner.clone(), l.token),
            None => (OWNERS[0].to_string(), last.max(1)),
        };
        let token = match p.tok {
            Tok::Current => token,
            Tok::Stale => token.saturating_sub(1).max(1),
            Tok::Unminted => last + 1,
        };
        let owner =
            if p.other_owner { if owner == OWNERS[0] { OWNERS[1] } else { OWNERS[0] }.to_string() } else { owner };
        LeaseProof { id, owner, token }
    };
    match *spec {
        Spec::Configure { queue, lease, retry, retention } => JobOp::Configure {
            queue: QUEUES[queue].into(),
            patch: JobConfigPatch {
                lease_default_ms: lease.map(|l| l.0),
                lease_max_ms: lease.map(|l| l.1),
                retry: retry.map(|r| {
                    r.map(|(max_attempts, initial_delay_ms, max_delay_ms)| RetryPolicy {
                        max_attempts,
                        initial_delay_ms,
                        max_delay_ms,
                    })
                }),
                payload_schema: None,
                result_schema: None,
                completed_retention_ms: retention,
            },
        },
        Spec::Enqueue { at, when, delay, replace, required } => JobOp::Enqueue {
            at: target(at),
            id: IDS[at.id].into(),
            payload: format!("{{\"n\":{n}}}").into_bytes(),
            when: match when {
                0 => Availability::Now,
                1 => Availability::AfterMs(delay),
                // Around the model's time, so some instants are past.
                _ => Availability::AtMs((model.now + delay).saturating_sub(1_000)),
            },
            replace,
            required,
        },
        Spec::Claim { at, owner, lease_ms, request } => JobOp::Claim {
            at: target(at),
            owner: OWNERS[owner].into(),
            lease_ms,
            request_id: request.map(|r| REQUESTS[r].to_string()),
        },
        Spec::Renew { at, proof: p, lease_ms, required } => {
            JobOp::Renew { at: target(at), proof: proof(at, p), lease_ms, required }
        }
        Spec::Complete { at, proof: p, required } => JobOp::Complete {
            at: target(at),
            proof: proof(at, p),
            result: format!("{{\"done\":{n}}}").into_bytes(),
            required,
        },
        Spec::Fail { at, proof: p, retry, delay_ms, required } => JobOp::Fail {
            at: target(at),
            proof: proof(at, p),
            error: format!("{{\"failed\":{n}}}").into_bytes(),
            retry,
            delay_ms,
            required,
        },
        Spec::Release { at, proof: p, delay_ms, required } => {
            JobOp::Release { at: target(at), proof: proof(at, p), delay_ms, required }
        }
        Spec::Retry { at, delay_ms, required } => {
            JobOp::Retry { at: target(at), id: IDS[at.id].into(), delay_ms, required }
        }
        Spec::Cancel { at, required } => JobOp::Cancel { at: target(at), id: IDS[at.id].into(), required },
        Spec::Get { at } => JobOp::Get { at: target(at), id: IDS[at.id].into() },
        Spec::Scan { at, state, after, limit } => JobOp::Scan {
            at: target(at),
            state: state
                .map(|s| [JobState::Pending, JobState::Leased, JobState::Completed, JobState::Failed][s as usize]),
            after: after.then(|| IDS[at.id].to_string()),
            limit,
        },
        Spec::Stats { at } => JobOp::Stats { at: target(at) },
    }
}

/// Every read the state serves, compared with the model's, at `at`.
fn compare_at(state: &State, model: &Model) -> Result<(), String> {
    let now = model.now;
    for q in QUEUES {
        for s in SCOPES {
            let at = JobTarget { queue: q.into(), scope: s.into() };
            for id in IDS {
                let got = state.jobs.view(&at, id, now);
                let want = model.view(&at, id);
                if got != want {
                    return Err(format!("job {q}/{s:?}/{id} at {now}: {got:?}, the model has {want:?}"));
                }
            }
            let got = state.jobs.stats(&at, now);
            let want = model.stats(&at);
            if got != want {
                return Err(format!("stats of {q}/{s:?} at {now}: {got:?}, the model has {want:?}"));
            }
            let got = state.jobs.scan(&at, None, None, 100, now);
            let want = model.scan(&at, None, None, 100);
            if got != want {
                return Err(format!("scan of {q}/{s:?} at {now}: {got:?}, the model has {want:?}"));
            }
            let claimable = state.jobs.claimable(&at, None, now);
            let ready = want.rows.iter().any(|r| r.state == JobState::Pending && r.available_ms <= now);
            if claimable != ready {
                return Err(format!("{q}/{s:?} claimable at {now}: {claimable}, the model says {ready}"));
            }
        }
    }
    Ok(())
}

fn compare(state: &State, model: &Model) -> Result<(), String> {
    if state.now_ms != model.now {
        return Err(format!("time is {} in the state, {} in the model", state.now_ms, model.now));
    }
    compare_at(state, model)?;
    let mut later = model.clone();
    later.advance(model.now + READ_AHEAD_MS);
    compare_at(state, &later)?;
    for q in QUEUES {
        if *state.jobs.config(q) != model.config(q) {
            return Err(format!("config of {q}: {:?}, the model has {:?}", state.jobs.config(q), model.config(q)));
        }
        for s in SCOPES {
            let at = JobTarget { queue: q.into(), scope: s.into() };
            let got = state.jobs.scope(&at).map_or(0, |s| s.last_token());
            let want = model.scopes.get(&(q.to_string(), s.to_string())).map_or(0, |s| s.last_token);
            if got != want {
                return Err(format!("last token of {q}/{s:?}: {got}, the model's {want}"));
            }
        }
    }
    Ok(())
}

/// What the model expects a step with job riders to answer.
fn step_outcome(out: JobsOutcome) -> Outcome {
    Outcome::Txn(match out {
        JobsOutcome::Done(rs) => TxnOutcome::Committed(rs.into_iter().map(TxnResult::Job).collect()),
        JobsOutcome::Refused(r) => TxnOutcome::Refused {
            reason: "job_precondition".into(),
            failed_index: r.index,
            error: String::new(),
            kv: None,
            job: Some(r),
        },
    })
}

fn same(got: &Outcome, want: &Outcome) -> bool {
    match (got, want) {
        (
            Outcome::Txn(TxnOutcome::Refused { reason, failed_index, error, kv, job }),
            Outcome::Txn(TxnOutcome::Refused { reason: r, failed_index: f, kv: k, job: j, .. }),
        ) => reason == r && failed_index == f && kv == k && job == j && error.contains("rolled back"),
        _ => got == want,
    }
}

/// The results of a call or step that took effect, for the ledger.
fn taken(out: &Outcome) -> Option<Vec<JobResult>> {
    match out {
        Outcome::Jobs(JobsOutcome::Done(rs)) => Some(rs.clone()),
        Outcome::Txn(TxnOutcome::Committed(rs)) => Some(
            rs.iter()
                .filter_map(|r| match r {
                    TxnResult::Job(j) => Some(j.clone()),
                    _ => None,
                })
                .collect(),
        ),
        _ => None,
    }
}

/// How often each kind of answer came up, so a generator that stopped
/// reaching them would show.
#[derive(Debug, Default)]
pub struct Reach {
    pub claims: u64,
    pub lost: u64,
    pub refused_calls: u64,
    pub expired_to_failed: u64,
    pub replays: u64,
    pub restores: u64,
}

/// What the model expects `command` to answer, applying it to the model.
fn expect(model: &mut Model, command: &Command) -> Outcome {
    match command {
        Command::Jobs(cmd) => Outcome::Jobs(model.call(&cmd.ops)),
        Command::Step { jobs, .. } => step_outcome(model.call(jobs)),
        Command::Batch(cmds) => Outcome::Batch(cmds.iter().map(|c| expect(model, c)).collect()),
        Command::Sweep => {
            model.sweep();
            Outcome::Done
        }
        _ => Outcome::Done,
    }
}

fn run(steps: &[(i64, Step)], reach: &mut Reach) -> Result<(), String> {
    let mut state = State::new();
    let mut model = Model::new(0);
    let mut ledger = Ledger::default();
    let mut clock = START_MS;
    let mut serial = 0;
    for (i, (dt, step)) in steps.iter().enumerate() {
        clock = clock.saturating_add_signed(*dt);
        let ctx = |e: String| format!("step {i} ({step:?}): {e}");
        let (command, calls) = match step {
            Step::Restore => {
                let restored = State::decode(&state.encode())?;
                if restored != state {
                    return Err(ctx("the restored state differs from the one encoded".into()));
                }
                state = restored;
                reach.restores += 1;
                state.check_invariants().map_err(ctx)?;
                compare(&state, &model).map_err(ctx)?;
                continue;
            }
            Step::Noop => (Command::Noop, vec![]),
            Step::Sweep => (Command::Sweep, vec![]),
            Step::Call(_) | Step::Riders(_) | Step::Batch(_) => {
                let mut ahead = model.clone();
                ahead.advance(clock);
                let mut resolve_all =
                    |specs: &[Spec]| -> Vec<JobOp> { specs.iter().map(|s| resolve(s, &ahead, &mut serial)).collect() };
                match step {
                    Step::Call(specs) => {
                        let ops = resolve_all(specs);
                        (Command::Jobs(JobsCmd { ops: ops.clone() }), vec![ops])
                    }
                    Step::Riders(specs) => {
                        let ops = resolve_all(specs);
                        let txn = TxnCmd { ops: vec![], kv: vec![], timers: vec![] };
                        (Command::Step { txn, jobs: ops.clone() }, vec![ops])
                    }
                    Step::Batch(calls) => {
                        let calls: Vec<Vec<JobOp>> = calls.iter().map(|c| resolve_all(c)).collect();
                        let cmds = calls.iter().map(|ops| Command::Jobs(JobsCmd { ops: ops.clone() })).collect();
                        (Command::Batch(cmds), calls)
                    }
                    _ => unreachable!("matched above"),
                }
            }
        };
        let entry = Entry { now_ms: clock, command };
        let applied = state.apply(&entry);
        let ctx = |e: String| format!("step {i} ({entry:?}): {e}");
        state.check_invariants().map_err(ctx)?;

        model.advance(clock);
        let want = expect(&mut model, &entry.command);
        if !same(&applied.outcome, &want) {
            return Err(ctx(format!("outcome {:?}, the model expects {want:?}", applied.outcome)));
        }
        let outcomes = match &applied.outcome {
            Outcome::Batch(os) => os.clone(),
            o => vec![o.clone()],
        };
        for (ops, out) in calls.iter().zip(&outcomes) {
            match taken(out) {
                Some(results) => {
                    ledger.learn(ops, &results, model.now).map_err(ctx)?;
                    for r in &results {
                        match r {
                            JobResult::Claimed(Some(_)) => reach.claims += 1,
                            JobResult::Refused { code, .. } if code.as_str() == "LEASE_LOST" => reach.lost += 1,
                            _ => {}
                        }
                    }
                }
                None => reach.refused_calls += 1,
            }
        }
        compare(&state, &model).map_err(ctx)?;
        reach.expired_to_failed += model
            .scopes
            .values()
            .flat_map(|s| s.jobs.values())
            .filter(|j| j.error.as_deref() == Some(jobs::model::LEASE_EXPIRED))
            .count() as u64;
    }
    reach.replays += ledger.replays;
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn job_queues_agree_with_the_model(steps in prop::collection::vec(step(), 1..120)) {
        run(&steps, &mut Reach::default()).map_err(TestCaseError::fail)?;
    }
}

/// The generator must reach what the contract is about: leases lost,
/// refused calls, leases that ran out into failure, restores.
#[test]
fn the_generator_reaches_claims_losses_refusals_and_restores() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let mut reach = Reach::default();
    for _ in 0..64 {
        let steps = prop::collection::vec(step(), 60..120).new_tree(&mut runner).unwrap().current();
        run(&steps, &mut reach).unwrap();
    }
    eprintln!("{reach:?}");
    assert!(reach.claims > 100, "{reach:?}");
    assert!(reach.lost > 20, "{reach:?}");
    assert!(reach.refused_calls > 20, "{reach:?}");
    assert!(reach.expired_to_failed > 0, "{reach:?}");
    assert!(reach.replays > 10, "{reach:?}");
    assert!(reach.restores > 10, "{reach:?}");
}
