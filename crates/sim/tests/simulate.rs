//! The simulation's entry points.
//!
//! - `simulate_seeds`: the CI seeds (`SIM_SEEDS=N` runs seeds 1..=N instead,
//!   `SIM_SEED=S` runs only seed S). Every failing seed is listed with its
//!   replay command; the first one's trace is printed.
//! - `a_seed_replays_exactly`: one seed twice, same digest.
//! - The checker's own tests: broken components must be caught.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

use regina_sim::{run, Sabotage, SimConfig};

/// Seeds CI runs: enough to cover every fault kind many times, few enough
/// to keep the crate's tests well under a minute on two cores.
const CI_SEEDS: u64 = 32;

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    Some(v.trim().parse().unwrap_or_else(|_| panic!("{name}={v:?} is not a number")))
}

/// The config of one seed: `SIM_STEPS` overrides the step count,
/// `SIM_CRASH` the crashes per thousand steps and `SIM_GROUPS` the Raft
/// groups per node (`SIM_GROUPS=1` runs one group, as before groups).
fn config(seed: u64) -> SimConfig {
    let mut cfg = SimConfig::new(seed);
    if let Some(groups) = env_u64("SIM_GROUPS") {
        cfg.groups = u16::try_from(groups).unwrap_or_else(|_| panic!("SIM_GROUPS={groups} is too many"));
    }
    if let Some(steps) = env_u64("SIM_STEPS") {
        cfg.steps = steps as u32;
    }
    if let Some(crash) = env_u64("SIM_CRASH") {
        cfg.crash_per_mille = crash;
    }
    cfg
}

fn seeds() -> Vec<u64> {
    if let Some(seed) = env_u64("SIM_SEED") {
        return vec![seed];
    }
    (1..=env_u64("SIM_SEEDS").unwrap_or(CI_SEEDS)).collect()
}

#[test]
fn simulate_seeds() {
    let mut failed = Vec::new();
    let seeds = seeds();
    // What the passing runs exercised, summed.
    let (mut joint, mut multi, mut moves, mut groups) = (0, 0, 0, 0);
    let (mut batched, mut fired, mut bodies_lost) = (0, 0, 0);
    for &seed in &seeds {
        let started = std::time::Instant::now();
        match run(config(seed)) {
            Ok(report) => {
                if std::env::var_os("SIM_TRACE").is_some() {
                    println!("{}", report.trace.join("\n"));
                }
                println!("ok  {report} ({:.2?} real)", started.elapsed());
                joint += report.joint_batches;
                multi += report.multi_leader_crashes;
                moves += report.moves;
                groups = report.groups;
                batched += report.batched;
                fired += report.timers_fired;
                bodies_lost += report.lost_body_bytes;
            }
            Err(f) => {
                println!("FAILED seed {seed}: {}", f.message);
                failed.push(f);
            }
        }
    }
    if let Some(first) = failed.first() {
        let seeds: Vec<String> = failed.iter().map(|f| f.seed.to_string()).collect();
        panic!("{} seed(s) failed: {}\n\n{first}", failed.len(), seeds.join(", "));
    }
    println!(
        "{} seeds: {joint} fsyncs shared by groups, {multi} crashes of a leader of several groups, {moves} leader \
         moves, {batched} requests batched by the proposer, {fired} timers fired once by the driver, \
         {bodies_lost} unsynced body bytes lost to crashes",
        seeds.len()
    );
    // The server's proposer and timer driver must have been exercised.
    if seeds.len() >= 16 {
        assert!(batched > 0, "the proposer never packed two requests into one entry");
        assert!(fired > 0, "no timer was fired by the driver and checked");
        assert!(bodies_lost > 0, "no crash dropped an unsynced message body: replay never had to write one again");
    }
    // Enough seeds of several groups must have exercised what groups bring.
    if seeds.len() >= 16 && groups > 1 {
        assert!(joint > 0, "no WAL batch covered appends of two groups: the shared group commit went untested");
        assert!(multi > 0, "no crash took down the leader of two groups at once");
        assert!(moves > 0, "no leader moved");
    }
}

#[test]
fn a_seed_replays_exactly() {
    let seed = env_u64("SIM_SEED").unwrap_or(7);
    let first = run(config(seed)).unwrap_or_else(|f| panic!("{f}"));
    let second = run(config(seed)).unwrap_or_else(|f| panic!("{f}"));
    if first.digest != second.digest {
        let at = first
            .trace
            .iter()
            .zip(&second.trace)
            .position(|(a, b)| a != b)
            .unwrap_or(first.trace.len().min(second.trace.len()));
        let from = at.saturating_sub(15);
        let show = |t: &[String]| t[from.min(t.len())..(at + 5).min(t.len())].join("\n    ");
        panic!(
            "seed {seed} ran differently twice, first apart at trace line {at}:\n  {first}\n  {second}\nfirst run:\n    {}\nsecond run:\n    {}",
            show(&first.trace),
            show(&second.trace)
        );
    }
    println!("{first}");
}

#[test]
fn the_checker_catches_a_network_that_acks_without_delivering() {
    for seed in 1..=2 {
        let cfg = SimConfig { sabotage: Some(Sabotage::AckWithoutDelivery), ..config(seed) };
        match run(cfg) {
            Ok(report) => panic!("a network that acknowledges undelivered appends went unnoticed: {report}"),
            Err(f) => println!("caught, as it should be: seed {seed}: {}", f.message),
        }
    }
}

#[test]
fn the_checker_catches_a_disk_that_loses_synced_writes() {
    // Losing a follower's log is only visible when it then decides an
    // election or a commit, so crash often and give it a few seeds.
    let mut caught = Vec::new();
    for seed in 1..=6 {
        let cfg = SimConfig { sabotage: Some(Sabotage::ForgetSyncs), crash_per_mille: 80, ..config(seed) };
        if let Err(f) = run(cfg) {
            println!("caught, as it should be: seed {seed}: {}", f.message);
            caught.push(seed);
        }
    }
    assert!(!caught.is_empty(), "a disk that loses acknowledged writes went unnoticed in every seed");
}

#[test]
fn the_checker_catches_a_recovery_that_mixes_groups_up() {
    // Every restart hands group 0's recovered log to group 1 and back; a
    // run crashes a node within its first steps often enough that each of
    // these seeds restarts one.
    for seed in 1..=2 {
        let cfg =
            SimConfig { sabotage: Some(Sabotage::SwapGroupsOnRecovery), crash_per_mille: 80, ..SimConfig::new(seed) };
        match run(cfg) {
            Ok(report) => panic!("a recovery that swapped two groups' logs went unnoticed: {report}"),
            Err(f) => {
                println!("caught, as it should be: seed {seed}: {}", f.message);
                assert!(f.message.contains("mixed groups up"), "caught, but not as mixed groups: {f}");
            }
        }
    }
}
