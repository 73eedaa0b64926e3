//! Concurrent clients racing on a few KV keys and two semaphores of a real
//! broker (one node, then a three-node cluster with the clients spread over
//! its nodes). Every operation is recorded with the instants it was sent and
//! answered; each key's and each semaphore's history must be linearizable
//! against its sequential specification (queen-protocol.md §7 and §9), and
//! where exactly one may win, exactly one does: one `putIfAbsent` winner per
//! key, never more than two holders of a two-permit semaphore, and every
//! version and token handed out exactly once.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

#[path = "support/cluster.rs"]
mod cluster;
#[path = "support/linearizability.rs"]
mod linearizability;
mod support;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use linearizability::{check, describe, Model, Operation};
use support::{Broker, Workspace};

const NS: &str = "lin";
/// Raced by every client with `putIfAbsent` only: one winner, and every
/// loser sees the winner's value.
const ONCE_KEYS: [&str; 2] = ["once-0", "once-1"];
/// Registers: `putIfAbsent`, compare-and-set on the version, and reads.
const REGISTERS: [&str; 3] = ["reg-0", "reg-1", "reg-2"];
const LOCKS: [&str; 2] = ["sem-0", "sem-1"];
const PERMITS: u32 = 2;
const CLIENTS: usize = 16;
const OPS_PER_CLIENT: usize = 80;
/// Clients start no operation after this, however far they got.
const RUN_FOR: Duration = Duration::from_secs(15);
/// The whole race, start to finish; far above what it takes.
const RACE_TIMEOUT: Duration = Duration::from_secs(45);

// ---------------------------------------------------------------------------
// Sequential specifications.

/// A value is kept as its JSON text; a version is the row's.
type Versioned = (String, u64);

#[derive(Debug, Clone)]
enum KvIn {
    Get,
    PutIfAbsent(String),
    Cas { expect: u64, value: String },
}

#[derive(Debug, Clone)]
enum KvOut {
    Got(Option<Versioned>),
    Applied(u64),
    NotApplied { reason: String, current: Option<Versioned> },
}

/// One key. Versions come from one counter shared by every key, so a key's
/// next version is only known to be above its last one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Register {
    current: Option<Versioned>,
    last_version: u64,
}

struct RegisterModel;

impl Model for RegisterModel {
    type State = Register;
    type Input = KvIn;
    type Output = KvOut;

    fn init(&self) -> Register {
        Register { current: None, last_version: 0 }
    }

    fn step(&self, s: &Register, input: &KvIn, output: &KvOut) -> Option<Register> {
        let written = |value: &str, version: u64| {
            (version > s.last_version)
                .then(|| Register { current: Some((value.to_string(), version)), last_version: version })
        };
        let unchanged = |ok: bool| ok.then(|| s.clone());
        match (input, output) {
            (KvIn::Get, KvOut::Got(seen)) => unchanged(*seen == s.current),
            (KvIn::PutIfAbsent(v), KvOut::Applied(version)) if s.current.is_none() => written(v, *version),
            (KvIn::PutIfAbsent(_), KvOut::NotApplied { reason, current }) => {
                unchanged(s.current.is_some() && reason == "exists" && *current == s.current)
            }
            (KvIn::Cas { expect, value }, KvOut::Applied(version)) => match &s.current {
                Some((_, v)) if v == expect => written(value, *version),
                _ => None,
            },
            (KvIn::Cas { expect, .. }, KvOut::NotApplied { reason, current }) => match &s.current {
                None => unchanged(reason == "absent" && current.is_none()),
                Some((_, v)) => unchanged(v != expect && reason == "version" && *current == s.current),
            },
            _ => None,
        }
    }
}

#[derive(Debug, Clone)]
enum SemIn {
    Acquire,
    Release { slot: u32, token: u64 },
}

#[derive(Debug, Clone)]
enum SemOut {
    Acquired { slot: u32, token: u64 },
    Held,
    Released(bool),
}

/// A semaphore: who holds each slot (by token) and each slot's last token.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Permits {
    holder: [Option<u64>; PERMITS as usize],
    last: [u64; PERMITS as usize],
}

struct SemaphoreModel;

impl Model for SemaphoreModel {
    type State = Permits;
    type Input = SemIn;
    type Output = SemOut;

    fn init(&self) -> Permits {
        Permits { holder: [None; PERMITS as usize], last: [0; PERMITS as usize] }
    }

    fn step(&self, s: &Permits, input: &SemIn, output: &SemOut) -> Option<Permits> {
        let free = s.holder.iter().position(Option::is_none);
        match (input, output) {
            // The lowest free slot is granted, with a token above its last.
            (SemIn::Acquire, SemOut::Acquired { slot, token }) => {
                let slot = *slot as usize;
                (free == Some(slot) && *token > s.last[slot]).then(|| {
                    let mut next = s.clone();
                    next.holder[slot] = Some(*token);
                    next.last[slot] = *token;
                    next
                })
            }
            (SemIn::Acquire, SemOut::Held) => free.is_none().then(|| s.clone()),
            (SemIn::Release { slot, token }, SemOut::Released(ok)) => {
                let slot = *slot as usize;
                let mine = s.holder.get(slot) == Some(&Some(*token));
                (mine == *ok).then(|| {
                    let mut next = s.clone();
                    if mine {
                        next.holder[slot] = None;
                    }
                    next
                })
            }
            _ => None,
        }
    }
}

// ---------------------------------------------------------------------------
// The clients.

/// xorshift64*: each client's choices, reproducible from its number.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

#[derive(Default)]
struct Recorded {
    kv: Vec<(&'static str, Operation<KvIn, KvOut>)>,
    sem: Vec<(&'static str, Operation<SemIn, SemOut>)>,
}

fn versioned(result: &Value) -> Option<Versioned> {
    let version = result["version"].as_u64().unwrap_or_else(|| panic!("no version in {result}"));
    (version > 0).then(|| (result["value"].to_string(), version))
}

/// How often a refused operation is sent again. A leader that cannot
/// confirm its lead in time (a loaded machine delays its heartbeats)
/// refuses with 503 `no_quorum` before the handler runs (the read index
/// comes first, for KV and locks alike), and a group between leaders with
/// 503 `no_leader`: both say nothing was read or written, so a client may
/// simply send it again. A read is sent again after any 503; a write never
/// after `outcome_unknown`, which may have been applied.
const TRIES: u32 = 8;

async fn post_one(c: &reqwest::Client, url: &str, op: Value) -> Value {
    let read = op["op"] == "get";
    let mut tries = 0;
    loop {
        let (status, v) = support::post_json(c, url, &json!({ "operations": [op.clone()] })).await;
        tries += 1;
        let nothing_done = read || v["code"] == "no_quorum" || v["code"] == "no_leader";
        if status == 503 && nothing_done && tries < TRIES {
            tokio::time::sleep(Duration::from_millis(50 * u64::from(tries))).await;
            continue;
        }
        assert_eq!(status, 200, "{url} answered {status} (try {tries}): {v}");
        return v["results"][0].clone();
    }
}

struct Client {
    id: usize,
    c: reqwest::Client,
    base: String,
    rec: Recorded,
    /// The last version this client saw of each register, for its CAS.
    seen: HashMap<&'static str, u64>,
    writes: usize,
}

impl Client {
    async fn kv(&mut self, key: &'static str, input: KvIn) {
        let value = |v: &str| serde_json::from_str::<Value>(v).expect("values are JSON");
        let op = match &input {
            KvIn::Get => json!({ "op": "get", "ns": NS, "key": key }),
            KvIn::PutIfAbsent(v) => {
                json!({ "op": "putIfAbsent", "ns": NS, "key": key, "value": value(v), "forever": true })
            }
            KvIn::Cas { expect, value: v } => {
                json!({ "op": "put", "ns": NS, "key": key, "value": value(v), "forever": true, "expect": expect })
            }
        };
        let call = Instant::now();
        let r = post_one(&self.c, &format!("{}/api/v1/kv", self.base), op).await;
        let ret = Instant::now();
        let output = match (&input, r["found"].as_bool(), r["applied"].as_bool()) {
            (KvIn::Get, Some(true), _) => KvOut::Got(versioned(&r)),
            (KvIn::Get, Some(false), _) => KvOut::Got(None),
            (_, None, Some(true)) => KvOut::Applied(r["version"].as_u64().unwrap_or_else(|| panic!("{r}"))),
            (_, None, Some(false)) => KvOut::NotApplied {
                reason: r["reason"].as_str().unwrap_or_else(|| panic!("no reason in {r}")).to_string(),
                current: versioned(&r),
            },
            _ => panic!("{input:?} on {key} answered {r}"),
        };
        let version = match &output {
            KvOut::Applied(v) => Some(*v),
            KvOut::Got(cur) | KvOut::NotApplied { current: cur, .. } => cur.as_ref().map(|c| c.1),
        };
        if let Some(v) = version {
            self.seen.insert(key, v);
        }
        self.rec.kv.push((key, Operation { client: self.id, call, ret, input, output }));
    }

    /// A value no other write uses.
    fn fresh(&mut self) -> String {
        self.writes += 1;
        json!(format!("c{}-w{}", self.id, self.writes)).to_string()
    }

    async fn lock(&mut self, name: &'static str, op: Value, input: SemIn) -> Value {
        let call = Instant::now();
        let r = post_one(&self.c, &format!("{}/api/v1/locks", self.base), op).await;
        let ret = Instant::now();
        let output = match (&input, r["acquired"].as_bool(), r["released"].as_bool()) {
            (SemIn::Acquire, Some(true), _) => {
                let slot = r["slot"].as_u64().unwrap_or_else(|| panic!("{r}")) as u32;
                SemOut::Acquired { slot, token: r["token"].as_u64().unwrap_or_else(|| panic!("{r}")) }
            }
            (SemIn::Acquire, Some(false), _) => {
                let holders = r["holders"].as_array().map_or(0, Vec::len);
                assert!(
                    r["reason"] == "held" && holders == PERMITS as usize,
                    "a refused acquire must name every holder: {r}"
                );
                SemOut::Held
            }
            (SemIn::Release { .. }, _, Some(ok)) => SemOut::Released(ok),
            _ => panic!("{input:?} on {name} answered {r}"),
        };
        self.rec.sem.push((name, Operation { client: self.id, call, ret, input, output }));
        r
    }

    async fn run(mut self, start: Arc<tokio::sync::Barrier>, deadline: Instant) -> Recorded {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (self.id as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03));
        // A third of the clients do not race to create the registers: their
        // reads and CAS may reach a register before it exists.
        let racing: &[&'static str] = if self.id < CLIENTS / 3 { &[] } else { &REGISTERS };
        let mut first: Vec<&'static str> = ONCE_KEYS.iter().chain(racing).copied().collect();
        for i in (1..first.len()).rev() {
            first.swap(i, rng.below(i as u64 + 1) as usize);
        }
        start.wait().await;
        // The racers all try to create their keys at once.
        for key in first {
            let v = self.fresh();
            self.kv(key, KvIn::PutIfAbsent(v)).await;
        }
        for n in 0..OPS_PER_CLIENT {
            if Instant::now() >= deadline {
                break;
            }
            let key = REGISTERS[rng.below(REGISTERS.len() as u64) as usize];
            match rng.below(100) {
                0..35 => self.kv(key, KvIn::Get).await,
                35..70 => {
                    let mut expect = self.seen.get(key).copied().unwrap_or(1);
                    // Now and then a version already replaced.
                    if rng.below(4) == 0 && expect > 1 {
                        expect -= 1;
                    }
                    let value = self.fresh();
                    self.kv(key, KvIn::Cas { expect, value }).await;
                }
                70..80 => {
                    let v = self.fresh();
                    self.kv(key, KvIn::PutIfAbsent(v)).await;
                }
                _ => {
                    let name = LOCKS[rng.below(LOCKS.len() as u64) as usize];
                    let owner = format!("c{}-{n}", self.id);
                    let acquire =
                        json!({ "op": "acquire", "name": name, "ttlSeconds": 60, "owner": owner, "limit": PERMITS });
                    let r = self.lock(name, acquire, SemIn::Acquire).await;
                    if r["acquired"] == true {
                        let (slot, token) = (r["slot"].as_u64().unwrap(), r["token"].as_u64().unwrap());
                        tokio::time::sleep(Duration::from_millis(rng.below(4))).await;
                        let release = json!({ "op": "release", "name": name, "token": token, "slot": slot });
                        let input = SemIn::Release { slot: slot as u32, token };
                        let r = self.lock(name, release, input).await;
                        // TTLs are far beyond the run: a permit is lost only if
                        // someone else was handed it.
                        assert_eq!(r["released"], true, "{name}: release of slot {slot} token {token} answered {r}");
                    }
                }
            }
        }
        self.rec
    }
}

// ---------------------------------------------------------------------------
// The race.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_clients_see_a_linearizable_broker() {
    let ws = Workspace::new();
    let broker = Broker::start(&ws);
    race_and_check(vec![broker.base()], || broker.log_tail(3000)).await;
}

/// The same race against a three-node cluster, the clients spread over
/// all nodes: followers forward, the leader takes a read index.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_clients_see_a_linearizable_cluster() {
    let cluster = cluster::Cluster::start(3);
    let bases = cluster.nodes.iter().map(|n| n.base()).collect();
    race_and_check(bases, || cluster.logs()).await;
}

async fn race_and_check(bases: Vec<String>, logs: impl Fn() -> String) {
    let c = support::client();
    let start = Arc::new(tokio::sync::Barrier::new(CLIENTS));
    let deadline = Instant::now() + RUN_FOR;
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|id| {
            let client = Client {
                id,
                c: c.clone(),
                base: bases[id % bases.len()].clone(),
                rec: Recorded::default(),
                seen: HashMap::new(),
                writes: 0,
            };
            tokio::spawn(client.run(start.clone(), deadline))
        })
        .collect();
    let mut kv: BTreeMap<&str, Vec<Operation<KvIn, KvOut>>> = BTreeMap::new();
    let mut sem: BTreeMap<&str, Vec<Operation<SemIn, SemOut>>> = BTreeMap::new();
    let joined = tokio::time::timeout(RACE_TIMEOUT, futures_join(tasks)).await;
    let recorded = joined.unwrap_or_else(|_| panic!("the race took over {RACE_TIMEOUT:?}\n{}", logs()));
    for rec in recorded {
        for (key, op) in rec.kv {
            kv.entry(key).or_default().push(op);
        }
        for (name, op) in rec.sem {
            sem.entry(name).or_default().push(op);
        }
    }

    // Exactly one putIfAbsent wins each key; on a key nobody else writes,
    // every loser is shown the winner's row.
    for (key, ops) in &kv {
        let wins: Vec<u64> = ops
            .iter()
            .filter_map(|o| match (&o.input, &o.output) {
                (KvIn::PutIfAbsent(_), KvOut::Applied(v)) => Some(*v),
                _ => None,
            })
            .collect();
        assert_eq!(wins.len(), 1, "{key}: {} putIfAbsent winners\n{}", wins.len(), describe(ops));
        if ONCE_KEYS.contains(key) {
            let winner = ops.iter().find_map(|o| match (&o.input, &o.output) {
                (KvIn::PutIfAbsent(v), KvOut::Applied(ver)) => Some((v.clone(), *ver)),
                _ => None,
            });
            for o in ops {
                if let KvOut::NotApplied { reason, current } = &o.output {
                    assert!(reason == "exists" && *current == winner, "{key}: a loser saw {:?}", o.output);
                }
            }
        }
    }

    // Versions and tokens come from one counter: none is handed out twice.
    let mut minted = HashSet::new();
    let versions = kv.values().flatten().filter_map(|o| match o.output {
        KvOut::Applied(v) => Some(v),
        _ => None,
    });
    let tokens = sem.values().flatten().filter_map(|o| match o.output {
        SemOut::Acquired { token, .. } => Some(token),
        _ => None,
    });
    for v in versions.chain(tokens) {
        assert!(minted.insert(v), "version {v} was handed out twice");
    }

    // Never more than PERMITS holders, and never two on one slot: a permit
    // is surely held from its grant's answer to its release's sending.
    for (name, ops) in &sem {
        let released: HashMap<u64, Instant> = ops
            .iter()
            .filter_map(|o| match o.input {
                SemIn::Release { token, .. } => Some((token, o.call)),
                SemIn::Acquire => None,
            })
            .collect();
        let mut edges: Vec<(Instant, i32, u32)> = Vec::new();
        for o in ops {
            if let SemOut::Acquired { slot, token } = o.output {
                let until = *released.get(&token).unwrap_or_else(|| panic!("{name}: token {token} never released"));
                if o.ret < until {
                    edges.push((o.ret, 1, slot));
                    edges.push((until, -1, slot));
                }
            }
        }
        // Releases sort before grants at one instant: touching is not overlap.
        edges.sort_by_key(|e| (e.0, e.1));
        let (mut held, mut per_slot) = (0, [0; PERMITS as usize]);
        for (at, d, slot) in edges {
            held += d;
            per_slot[slot as usize] += d;
            assert!(held <= PERMITS as i32, "{name}: {held} holders at once\n{}", describe(ops));
            assert!(per_slot[slot as usize] <= 1, "{name}: two holders of slot {slot} at {at:?}\n{}", describe(ops));
        }
    }

    // What the race exercised, shown with --nocapture.
    let mut tally: BTreeMap<String, usize> = BTreeMap::new();
    for o in kv.values().flatten() {
        let kind = match (&o.input, &o.output) {
            (KvIn::Get, KvOut::Got(v)) => format!("get found={}", v.is_some()),
            (KvIn::PutIfAbsent(_), KvOut::Applied(_)) => "putIfAbsent applied".into(),
            (KvIn::Cas { .. }, KvOut::Applied(_)) => "cas applied".into(),
            (KvIn::PutIfAbsent(_), KvOut::NotApplied { reason, .. }) => format!("putIfAbsent {reason}"),
            (KvIn::Cas { .. }, KvOut::NotApplied { reason, .. }) => format!("cas {reason}"),
            (i, o) => format!("{i:?} {o:?}"),
        };
        *tally.entry(kind).or_default() += 1;
    }
    for o in sem.values().flatten() {
        let kind = match o.output {
            SemOut::Acquired { .. } => "acquire granted",
            SemOut::Held => "acquire held",
            SemOut::Released(_) => "release",
        };
        *tally.entry(kind.into()).or_default() += 1;
    }
    let overlap = max_overlap(kv.values().flatten().map(|o| (o.call, o.ret)));
    eprintln!("{tally:?}; at most {overlap} operations in flight at once");

    let kv_ops: usize = kv.values().map(Vec::len).sum();
    let sem_ops: usize = sem.values().map(Vec::len).sum();
    assert!(kv_ops >= CLIENTS * (ONCE_KEYS.len() + 1), "too few KV operations ran: {kv_ops}");
    assert!(sem_ops > 0, "no semaphore operation ran");
    for (key, ops) in &kv {
        check(&RegisterModel, ops).unwrap_or_else(|e| panic!("{key}: {e}"));
    }
    for (name, ops) in &sem {
        check(&SemaphoreModel, ops).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

/// The most operations whose intervals overlap at one instant.
fn max_overlap(intervals: impl Iterator<Item = (Instant, Instant)>) -> usize {
    let mut edges: Vec<(Instant, i32)> = intervals.flat_map(|(a, b)| [(a, 1), (b, -1)]).collect();
    edges.sort();
    let (mut now, mut most) = (0, 0);
    for (_, d) in edges {
        now += d;
        most = most.max(now);
    }
    most as usize
}

/// Awaits every task, failing on the first that panicked.
async fn futures_join<T>(tasks: Vec<tokio::task::JoinHandle<T>>) -> Vec<T> {
    let mut out = Vec::with_capacity(tasks.len());
    for t in tasks {
        out.push(t.await.unwrap_or_else(|e| panic!("a client failed: {e}")));
    }
    out
}

// ---------------------------------------------------------------------------
// The checker itself must reject what is not linearizable.

fn op<I, O>(t0: Instant, client: usize, from_ms: u64, to_ms: u64, input: I, output: O) -> Operation<I, O> {
    let at = |ms| t0 + Duration::from_millis(ms);
    Operation { client, call: at(from_ms), ret: at(to_ms), input, output }
}

fn text(s: &str) -> String {
    json!(s).to_string()
}

#[test]
fn the_checker_accepts_concurrent_reads_of_either_value() {
    let t0 = Instant::now();
    let h = vec![
        op(t0, 0, 0, 10, KvIn::PutIfAbsent(text("a")), KvOut::Applied(3)),
        op(t0, 1, 20, 40, KvIn::Cas { expect: 3, value: text("b") }, KvOut::Applied(7)),
        // Both overlap the CAS, in opposite orders: still linearizable.
        op(t0, 2, 25, 35, KvIn::Get, KvOut::Got(Some((text("b"), 7)))),
        op(t0, 3, 30, 50, KvIn::Get, KvOut::Got(Some((text("b"), 7)))),
        op(t0, 4, 15, 45, KvIn::Get, KvOut::Got(Some((text("a"), 3)))),
        op(
            t0,
            5,
            12,
            13,
            KvIn::Cas { expect: 9, value: text("c") },
            KvOut::NotApplied { reason: "version".into(), current: Some((text("a"), 3)) },
        ),
    ];
    check(&RegisterModel, &h).unwrap();
}

#[test]
fn the_checker_rejects_a_read_of_an_overwritten_value() {
    let t0 = Instant::now();
    let h = vec![
        op(t0, 0, 0, 10, KvIn::PutIfAbsent(text("a")), KvOut::Applied(3)),
        op(t0, 1, 20, 30, KvIn::Cas { expect: 3, value: text("b") }, KvOut::Applied(7)),
        // Invoked after the CAS answered, yet it sees the value before it.
        op(t0, 2, 40, 50, KvIn::Get, KvOut::Got(Some((text("a"), 3)))),
    ];
    let err = check(&RegisterModel, &h).unwrap_err();
    assert!(err.contains("not linearizable"), "{err}");
}

#[test]
fn the_checker_rejects_two_winners_and_a_lost_update() {
    let t0 = Instant::now();
    let two_winners = vec![
        op(t0, 0, 0, 10, KvIn::PutIfAbsent(text("a")), KvOut::Applied(3)),
        op(t0, 1, 5, 15, KvIn::PutIfAbsent(text("b")), KvOut::Applied(4)),
    ];
    assert!(check(&RegisterModel, &two_winners).is_err());
    let lost_update = vec![
        op(t0, 0, 0, 10, KvIn::PutIfAbsent(text("a")), KvOut::Applied(3)),
        op(t0, 1, 20, 30, KvIn::Cas { expect: 3, value: text("b") }, KvOut::Applied(5)),
        op(t0, 2, 21, 31, KvIn::Cas { expect: 3, value: text("c") }, KvOut::Applied(6)),
    ];
    assert!(check(&RegisterModel, &lost_update).is_err());
    // A version that does not rise is as wrong as a value that vanished.
    let version_back = vec![
        op(t0, 0, 0, 10, KvIn::PutIfAbsent(text("a")), KvOut::Applied(3)),
        op(t0, 1, 20, 30, KvIn::Cas { expect: 3, value: text("b") }, KvOut::Applied(2)),
    ];
    assert!(check(&RegisterModel, &version_back).is_err());
}

#[test]
fn the_checker_rejects_a_third_holder_and_a_stale_release() {
    let t0 = Instant::now();
    let acquired = |slot, token| SemOut::Acquired { slot, token };
    let three = vec![
        op(t0, 0, 0, 10, SemIn::Acquire, acquired(0, 1)),
        op(t0, 1, 0, 10, SemIn::Acquire, acquired(1, 2)),
        op(t0, 2, 0, 10, SemIn::Acquire, acquired(0, 3)),
    ];
    assert!(check(&SemaphoreModel, &three).is_err());
    let fine = vec![
        op(t0, 0, 0, 10, SemIn::Acquire, acquired(0, 1)),
        op(t0, 1, 0, 10, SemIn::Acquire, acquired(1, 2)),
        op(t0, 2, 5, 12, SemIn::Acquire, SemOut::Held),
        op(t0, 0, 20, 30, SemIn::Release { slot: 0, token: 1 }, SemOut::Released(true)),
        op(t0, 2, 25, 40, SemIn::Acquire, acquired(0, 5)),
    ];
    check(&SemaphoreModel, &fine).unwrap();
    let stale_release = vec![
        op(t0, 0, 0, 10, SemIn::Acquire, acquired(0, 1)),
        op(t0, 0, 20, 30, SemIn::Release { slot: 0, token: 1 }, SemOut::Released(true)),
        op(t0, 1, 40, 50, SemIn::Acquire, acquired(0, 4)),
        op(t0, 0, 60, 70, SemIn::Release { slot: 0, token: 1 }, SemOut::Released(true)),
    ];
    assert!(check(&SemaphoreModel, &stale_release).is_err());
}
