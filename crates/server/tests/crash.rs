//! The crash test: producers and a consumer keep a broker busy while it is
//! killed with SIGKILL three times and restarted on the same data directory.
//! Afterwards every push the broker answered must be stored exactly once, at
//! the offset it was answered with; offsets must be gapless and in order; and
//! no committed cursor may have moved back.
//!
//! A push whose answer was lost (the broker died, or answered 503) is retried
//! with the same transaction ids, so dedup decides: the retry answers
//! `queued` when the first attempt never reached the log and `duplicate`
//! (with the original offset) when it did. Either way the id must be stored
//! once.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use support::{Broker, Workspace};

const QUEUE: &str = "crash-load";
const PARTITIONS: usize = 40;
const PRODUCERS: u64 = 4;
const PUSH_BATCH_MAX: u64 = 20;
const CONSUMER_BATCH: u64 = 50;
/// Base delays before each kill, in ms; a seeded jitter ([`crash_seed`]) is
/// added so the kills land at different points of the traffic from run to
/// run, and a failing run can be replayed.
const KILL_AFTER_MS: [u64; 3] = [500, 1500, 900];
/// How long the broker stays down, so clients really see the outage.
const OUTAGE: Duration = Duration::from_millis(150);
/// Load kept running after the last restart, against the recovered state.
const LOAD_AFTER_LAST_RESTART: Duration = Duration::from_millis(1000);
/// Short, so a lease orphaned by a kill (the pop answer was lost) lapses
/// quickly instead of blocking its partition for the default minute.
const LEASE_SECONDS: u64 = 2;
/// The whole test, load and checks, must finish within this.
const TEST_BUDGET: Duration = Duration::from_secs(55);
/// Client-side bound on one request during the load.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
const RETRY_PAUSE: Duration = Duration::from_millis(50);

/// What the producers push to.
#[derive(Clone, Copy)]
struct Load {
    queue: &'static str,
    partitions: usize,
    batch_max: u64,
}

const MAIN_LOAD: Load = Load { queue: QUEUE, partitions: PARTITIONS, batch_max: PUSH_BATCH_MAX };

fn partition_name(i: usize) -> String {
    format!("p{i:02}")
}

fn txn_id(producer: u64, seq: u64) -> String {
    format!("t{producer}-{seq}")
}

/// (producer, seq) from a transaction id minted by [`txn_id`].
fn parse_txn(t: &str) -> Option<(u64, u64)> {
    let (p, s) = t.strip_prefix('t')?.split_once('-')?;
    Some((p.parse().ok()?, s.parse().ok()?))
}

/// A tiny deterministic generator, so batch shapes differ per producer
/// without a dependency.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The seed of this run's kill timing: `REGINA_CRASH_SEED` when set (to
/// replay a failure), else taken from the clock. Printed once, so a failing
/// run names the seed that reproduces its timing.
fn crash_seed() -> u64 {
    static SEED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *SEED.get_or_init(|| {
        let seed = std::env::var("REGINA_CRASH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
            SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1) | 1
        });
        eprintln!("crash timing seed: {seed} (replay with REGINA_CRASH_SEED={seed})");
        seed
    })
}

/// A delay below `max` ms, drawn from the run's seeded generator.
fn jitter_ms(max: u64) -> u64 {
    static RNG: std::sync::Mutex<Option<XorShift>> = std::sync::Mutex::new(None);
    let mut rng = RNG.lock().expect("jitter lock");
    rng.get_or_insert_with(|| XorShift(crash_seed())).below(max)
}

/// The broker's current address; a restart may have to move it to a new
/// port when the old one cannot be bound again.
type SharedBase = Arc<RwLock<String>>;

fn base_of(b: &SharedBase) -> String {
    b.read().expect("base lock").clone()
}

fn load_client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(REQUEST_TIMEOUT)
        .connect_timeout(Duration::from_secs(1))
        .build()
        .expect("build an HTTP client")
}

/// A push item the broker answered for.
#[derive(Debug, Clone)]
struct Answered {
    txn: String,
    partition: String,
    partition_id: String,
    offset: u64,
    status: String,
    /// The request was sent more than once.
    retried: bool,
}

#[derive(Default)]
struct ProducerLog {
    producer: u64,
    answered: Vec<Answered>,
    /// Items sent (so seq numbers 0..sent exist in some request).
    sent: u64,
    /// Items whose request never got an answer.
    unanswered: u64,
    retries: u64,
    problems: Vec<String>,
}

/// Pushes batches of 1..=`batch_max` items to random partitions until told
/// to stop.
/// A request with no answer is resent with the same ids until it gets one.
async fn produce(
    producer: u64,
    load: Load,
    base: SharedBase,
    stop: Arc<AtomicBool>,
    answered_count: Arc<AtomicU64>,
    deadline: Instant,
) -> ProducerLog {
    let client = load_client();
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15 ^ (producer + 1).wrapping_mul(0x2545_F491));
    let mut log = ProducerLog { producer, ..Default::default() };
    let mut seq = 0u64;
    'batches: while !stop.load(Ordering::Acquire) && Instant::now() < deadline {
        let n = 1 + rng.below(load.batch_max);
        let mut items = Vec::with_capacity(n as usize);
        let mut meta = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let partition = partition_name(rng.below(load.partitions as u64) as usize);
            let txn = txn_id(producer, seq);
            items.push(json!({
                "queue": load.queue,
                "partition": partition,
                "transactionId": txn,
                "payload": {
                    "producer": producer,
                    "seq": seq,
                    "pad": "x".repeat((seq % 97) as usize),
                },
            }));
            meta.push((txn, partition));
            seq += 1;
        }
        log.sent = seq;
        let body = json!({ "items": items });
        let mut attempts = 0u32;
        loop {
            if Instant::now() >= deadline {
                log.unanswered += n;
                break 'batches;
            }
            attempts += 1;
            if attempts > 1 {
                log.retries += 1;
            }
            let url = format!("{}/api/v1/push", base_of(&base));
            let resp = match client.post(&url).json(&body).send().await {
                Ok(r) => r,
                Err(_) => {
                    // No answer: the broker may or may not have stored it.
                    tokio::time::sleep(RETRY_PAUSE).await;
                    continue;
                }
            };
            let status = resp.status().as_u16();
            let text = match resp.text().await {
                Ok(t) => t,
                Err(_) => {
                    tokio::time::sleep(RETRY_PAUSE).await;
                    continue;
                }
            };
            if status == 503 {
                tokio::time::sleep(RETRY_PAUSE).await;
                continue;
            }
            if status != 201 {
                log.problems.push(format!("producer {producer}: push answered {status}: {text:.300}"));
                break 'batches;
            }
            let v: Value = match serde_json::from_str(&text) {
                Ok(v) => v,
                Err(e) => {
                    log.problems.push(format!("producer {producer}: push answer not JSON ({e})"));
                    break 'batches;
                }
            };
            let Some(arr) = v.as_array().filter(|a| a.len() == meta.len()) else {
                log.problems
                    .push(format!("producer {producer}: push answer not aligned with {} items: {v:.300}", meta.len()));
                break 'batches;
            };
            for (i, (r, (txn, partition))) in arr.iter().zip(&meta).enumerate() {
                let status = r["status"].as_str().unwrap_or_default().to_string();
                let (Some(offset), Some(pid)) = (r["offset"].as_u64(), r["partitionId"].as_str()) else {
                    log.problems.push(format!("producer {producer}: bad result {r}"));
                    continue;
                };
                if r["transactionId"].as_str() != Some(txn.as_str())
                    || r["index"].as_u64() != Some(i as u64)
                    || !(status == "queued" || status == "duplicate")
                {
                    log.problems.push(format!("producer {producer}: result {r} does not match {txn}"));
                    continue;
                }
                log.answered.push(Answered {
                    txn: txn.clone(),
                    partition: partition.clone(),
                    partition_id: pid.to_string(),
                    offset,
                    status,
                    retried: attempts > 1,
                });
            }
            answered_count.fetch_add(n, Ordering::AcqRel);
            break;
        }
    }
    log
}

#[derive(Default)]
struct ConsumerLog {
    /// Highest offset whose `completed` ack was answered `success: true`.
    acked: Vec<Option<u64>>,
    /// Highest offset ever delivered, per partition.
    delivered: Vec<Option<u64>>,
    pops_with_messages: u64,
    acks_ok: u64,
    acks_refused: u64,
    problems: Vec<String>,
}

/// Pops each partition in turn (queue mode, named partition) and acks the
/// last message of every batch.
async fn consume(base: SharedBase, stop: Arc<AtomicBool>, deadline: Instant) -> ConsumerLog {
    let client = load_client();
    let mut log =
        ConsumerLog { acked: vec![None; PARTITIONS], delivered: vec![None; PARTITIONS], ..Default::default() };
    let mut idle_in_a_row = 0usize;
    let mut i = 0usize;
    while !stop.load(Ordering::Acquire) && Instant::now() < deadline {
        let p = i % PARTITIONS;
        i += 1;
        if idle_in_a_row >= PARTITIONS {
            // A whole round found nothing; do not spin.
            idle_in_a_row = 0;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let name = partition_name(p);
        let url =
            format!("{}/api/v1/pop/queue/{QUEUE}/partition/{name}?batch={CONSUMER_BATCH}&wait=false", base_of(&base));
        let v = match client.get(&url).send().await {
            Ok(r) if r.status().as_u16() == 200 => match r.json::<Value>().await {
                Ok(v) => v,
                Err(_) => continue,
            },
            Ok(r) if r.status().as_u16() == 503 => continue,
            Ok(r) => {
                let s = r.status();
                let t = r.text().await.unwrap_or_default();
                log.problems.push(format!("pop {name} answered {s}: {t:.300}"));
                return log;
            }
            Err(_) => {
                tokio::time::sleep(RETRY_PAUSE).await;
                continue;
            }
        };
        let msgs = support::messages(&v);
        if msgs.is_empty() {
            idle_in_a_row += 1;
            continue;
        }
        idle_in_a_row = 0;
        log.pops_with_messages += 1;
        let offs = support::offsets(&msgs);
        if let Some(a) = log.acked[p] {
            if offs[0] <= a {
                log.problems.push(format!("{name}: delivered offset {} again after offset {a} was acked", offs[0]));
            }
        }
        if offs.windows(2).any(|w| w[1] != w[0] + 1) {
            log.problems.push(format!("{name}: a batch is not consecutive offsets: {offs:?}"));
        }
        for m in &msgs {
            if m["partition"].as_str() != Some(name.as_str()) {
                log.problems.push(format!("{name}: a message of another partition: {m:.300}"));
            }
            if let Err(e) = check_data(m) {
                log.problems.push(format!("{name}: {e}"));
            }
        }
        let last = msgs.last().expect("not empty");
        let last_offset = *offs.last().expect("not empty");
        log.delivered[p] = log.delivered[p].max(Some(last_offset));
        let body = json!({
            "transactionId": last["transactionId"],
            "partitionId": last["partitionId"],
            "leaseId": v["leaseId"],
            "status": "completed",
        });
        let url = format!("{}/api/v1/ack", base_of(&base));
        match client.post(&url).json(&body).send().await {
            Ok(r) if r.status().as_u16() == 200 => {
                let Ok(a) = r.json::<Value>().await else {
                    continue;
                };
                if a[0]["success"] == json!(true) {
                    log.acks_ok += 1;
                    log.acked[p] = log.acked[p].max(Some(last_offset));
                } else {
                    // An expired lease, for instance: the batch comes back.
                    log.acks_refused += 1;
                }
            }
            Ok(r) if r.status().as_u16() == 503 => {}
            Ok(r) => {
                let s = r.status();
                let t = r.text().await.unwrap_or_default();
                log.problems.push(format!("ack on {name} answered {s}: {t:.300}"));
                return log;
            }
            Err(_) => {}
        }
    }
    log
}

/// The payload must be the one its transaction id was pushed with.
fn check_data(m: &Value) -> Result<(), String> {
    let txn = m["transactionId"].as_str().unwrap_or_default();
    let (p, s) = parse_txn(txn).ok_or(format!("unexpected transaction id {txn:?}"))?;
    let want = json!({ "producer": p, "seq": s, "pad": "x".repeat((s % 97) as usize) });
    if m["data"] != want {
        return Err(format!("payload of {txn} is {:.200}", m["data"]));
    }
    Ok(())
}

/// One stored message as the audit read it.
#[derive(Debug, Clone)]
struct Stored {
    partition: String,
    partition_id: String,
    offset: u64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answered_pushes_survive_sigkill_exactly_once() {
    let ws = Workspace::new();
    let started = Instant::now();
    let deadline = started + TEST_BUDGET;
    if tokio::time::timeout(TEST_BUDGET, run(&ws, deadline)).await.is_err() {
        // Dropping `run` killed the broker; its output tells where it hung.
        panic!(
            "the crash test overran {TEST_BUDGET:?}\n--- broker log ---\n{}",
            support::file_tail(&ws.log_path(), 3000)
        );
    }
    eprintln!("crash test took {:?}", started.elapsed());
}

async fn run(ws: &Workspace, deadline: Instant) {
    let mut broker = Broker::start(ws);
    let base: SharedBase = Arc::new(RwLock::new(broker.base()));
    let setup = support::client();
    let v = support::configure(&setup, &broker.base(), QUEUE, json!({ "leaseTime": LEASE_SECONDS })).await;
    assert_eq!(v["options"]["leaseTime"], json!(LEASE_SECONDS), "{v}");

    let stop = Arc::new(AtomicBool::new(false));
    let answered = Arc::new(AtomicU64::new(0));
    // The load gets its own, shorter deadline so the checks still fit.
    let load_deadline = deadline - Duration::from_secs(20);
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| tokio::spawn(produce(p, MAIN_LOAD, base.clone(), stop.clone(), answered.clone(), load_deadline)))
        .collect();
    let consumer = tokio::spawn(consume(base.clone(), stop.clone(), load_deadline));

    let mut kill_log = Vec::new();
    for (round, base_ms) in KILL_AFTER_MS.iter().enumerate() {
        let before = answered.load(Ordering::Acquire);
        let delay = base_ms + jitter_ms(250);
        tokio::time::sleep(Duration::from_millis(delay)).await;
        // Make sure the kill lands on live traffic: at least one push must
        // have been answered since the (re)start.
        wait_for_progress(&answered, before, Duration::from_secs(10)).await;
        let at = answered.load(Ordering::Acquire);
        broker = tokio::task::spawn_blocking(move || {
            broker.kill();
            broker
        })
        .await
        .expect("kill");
        kill_log.push(format!("kill {round} after {delay} ms, {at} items answered"));
        tokio::time::sleep(OUTAGE).await;
        broker = tokio::task::spawn_blocking(move || {
            broker.restart();
            broker
        })
        .await
        .expect("restart");
        *base.write().expect("base lock") = broker.base();
    }
    // Load against the recovered broker, with traffic actually flowing.
    let before = answered.load(Ordering::Acquire);
    tokio::time::sleep(LOAD_AFTER_LAST_RESTART).await;
    wait_for_progress(&answered, before, Duration::from_secs(10)).await;
    stop.store(true, Ordering::Release);

    let mut logs = Vec::new();
    for p in producers {
        logs.push(p.await.expect("a producer task"));
    }
    let consumer = consumer.await.expect("the consumer task");
    let consumer_stopped = Instant::now();
    eprintln!("{}", kill_log.join("\n"));

    let problems: Vec<&String> = logs.iter().flat_map(|l| &l.problems).chain(&consumer.problems).collect();
    assert!(problems.is_empty(), "the load saw protocol violations:\n{problems:#?}");
    let total_answered: usize = logs.iter().map(|l| l.answered.len()).sum();
    let total_unanswered: u64 = logs.iter().map(|l| l.unanswered).sum();
    let total_retries: u64 = logs.iter().map(|l| l.retries).sum();
    eprintln!(
        "answered items {total_answered}, unanswered {total_unanswered}, resent requests \
         {total_retries}; consumer: {} batches, {} acks ok, {} refused",
        consumer.pops_with_messages, consumer.acks_ok, consumer.acks_refused
    );
    assert!(total_answered > 0, "no push was ever answered");
    assert!(consumer.acks_ok > 0, "the consumer never committed anything");

    let c = support::client();
    let base = broker.base();
    let stored = audit(&c, &base, MAIN_LOAD, &logs).await;
    check_answers(&logs, &stored);

    // Queue mode: once leases taken before the stop have lapsed, the next
    // pop of each partition starts after the highest acked offset, and no
    // later than one past the highest offset ever delivered (the cursor
    // moves only by acks of delivered messages).
    let lapse = Duration::from_millis(LEASE_SECONDS * 1000 + 300);
    let since = consumer_stopped.elapsed();
    if since < lapse {
        tokio::time::sleep(lapse - since).await;
    }
    let mut per_partition_len: BTreeMap<String, u64> = BTreeMap::new();
    for s in stored.values() {
        let e = per_partition_len.entry(s.partition.clone()).or_default();
        *e = (*e).max(s.offset + 1);
    }
    for p in 0..PARTITIONS {
        let name = partition_name(p);
        let len = per_partition_len.get(&name).copied().unwrap_or(0);
        let v = support::pop(&c, &base, &format!("/api/v1/pop/queue/{QUEUE}/partition/{name}?batch=10000&wait=false"))
            .await;
        let offs = support::offsets(&support::messages(&v));
        let acked = consumer.acked[p];
        let resume_at_most = consumer.delivered[p].map_or(0, |d| d + 1);
        if let (Some(a), Some(first)) = (acked, offs.first()) {
            assert!(*first > a, "{name}: queue mode redelivered offset {first} after {a} was acked");
        }
        if len > resume_at_most {
            assert!(
                !offs.is_empty(),
                "{name}: {len} messages stored, at most {resume_at_most} ever delivered, yet \
                 queue mode delivers nothing (cursor moved forward without an ack?)"
            );
        }
        if let Some(first) = offs.first() {
            assert!(
                *first <= resume_at_most,
                "{name}: queue mode resumes at {first}, past everything delivered \
                 ({resume_at_most})"
            );
            let want: Vec<u64> = (*first..len.min(first + 10_000)).collect();
            assert_eq!(offs, want, "{name}: queue mode must hand out the rest in order");
        }
    }
}

/// A snapshot comes after about 20 000 small entries (`node::drivers::snapshot_due`); small requests from
/// several producers reach that in a few seconds.
const SNAPSHOT_LOAD: Load = Load { queue: "crash-snapshot", partitions: 8, batch_max: 2 };
const SNAPSHOT_PRODUCERS: u64 = 6;
/// How long to wait for the first snapshot before giving up.
const SNAPSHOT_WAIT: Duration = Duration::from_secs(35);

/// A crash after a snapshot (and the log purge that follows it) must
/// recover from the snapshot plus the log tail: nothing answered before or
/// after the snapshot point may be lost, and cursors committed before it
/// must hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_after_a_snapshot_recovers_snapshot_and_log_tail() {
    let ws = Workspace::new();
    let started = Instant::now();
    let deadline = started + TEST_BUDGET;
    if tokio::time::timeout(TEST_BUDGET, run_snapshot(&ws, deadline)).await.is_err() {
        panic!(
            "the snapshot crash test overran {TEST_BUDGET:?}\n--- broker log ---\n{}",
            support::file_tail(&ws.log_path(), 3000)
        );
    }
    eprintln!("snapshot crash test took {:?}", started.elapsed());
}

async fn health(c: &reqwest::Client, base: &str) -> Value {
    let (s, v) = support::get_json(c, &format!("{base}/health")).await;
    assert_eq!(s, 200, "{v}");
    v
}

async fn run_snapshot(ws: &Workspace, deadline: Instant) {
    let mut broker = Broker::start(ws);
    let c = support::client();
    let q = SNAPSHOT_LOAD.queue;
    // A cursor committed before the snapshot: group g at offset 4 of "c".
    let items: Vec<Value> = (0..10)
        .map(|n| json!({ "queue": q, "partition": "c", "transactionId": format!("c{n}"), "payload": n }))
        .collect();
    support::push(&c, &broker.base(), items).await;
    let v = support::pop(
        &c,
        &broker.base(),
        &format!("/api/v1/pop/queue/{q}/partition/c?batch=4&wait=false&consumerGroup=g&subscriptionMode=all"),
    )
    .await;
    let msgs = support::messages(&v);
    assert_eq!(support::offsets(&msgs), vec![0, 1, 2, 3], "{v}");
    let a = support::ack(
        &c,
        &broker.base(),
        json!({
            "transactionId": "c3",
            "partitionId": msgs[3]["partitionId"],
            "leaseId": v["leaseId"],
            "consumerGroup": "g",
            "status": "completed",
        }),
    )
    .await;
    assert_eq!(a["success"], json!(true), "{a}");

    let base: SharedBase = Arc::new(RwLock::new(broker.base()));
    let stop = Arc::new(AtomicBool::new(false));
    let answered = Arc::new(AtomicU64::new(0));
    let load_deadline = deadline - Duration::from_secs(12);
    let producers: Vec<_> = (0..SNAPSHOT_PRODUCERS)
        .map(|p| tokio::spawn(produce(p, SNAPSHOT_LOAD, base.clone(), stop.clone(), answered.clone(), load_deadline)))
        .collect();

    let snapshot_deadline = Instant::now() + SNAPSHOT_WAIT;
    let snapshot_index = loop {
        let h = health(&c, &broker.base()).await;
        if let Some(i) = h["snapshotIndex"].as_u64() {
            break i;
        }
        if Instant::now() >= snapshot_deadline {
            stop.store(true, Ordering::Release);
            panic!(
                "no snapshot within {SNAPSHOT_WAIT:?} ({} items answered, log at {})",
                answered.load(Ordering::Acquire),
                h["lastLogIndex"]
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // Land the kill in live traffic, shortly after the snapshot.
    let before = answered.load(Ordering::Acquire);
    tokio::time::sleep(Duration::from_millis(200 + jitter_ms(200))).await;
    wait_for_progress(&answered, before, Duration::from_secs(10)).await;
    broker = tokio::task::spawn_blocking(move || {
        broker.kill();
        broker
    })
    .await
    .expect("kill");
    eprintln!(
        "killed after the snapshot at log index {snapshot_index}, {} items answered",
        answered.load(Ordering::Acquire)
    );
    // The partitions had sealed chunks of messages by then, so the snapshot
    // the restart reads is holed: its chunks are read from their packs.
    let packs = files_named(&ws.data_dir(), ".chunks");
    assert!(!packs.is_empty(), "the snapshot left its sealed chunks in no pack");
    tokio::time::sleep(OUTAGE).await;
    broker = tokio::task::spawn_blocking(move || {
        broker.restart();
        broker
    })
    .await
    .expect("restart");
    *base.write().expect("base lock") = broker.base();
    let c = support::client();
    let h = health(&c, &broker.base()).await;
    assert!(h["snapshotIndex"].as_u64() >= Some(snapshot_index), "the snapshot at {snapshot_index} was lost: {h}");

    let before = answered.load(Ordering::Acquire);
    tokio::time::sleep(Duration::from_millis(300)).await;
    wait_for_progress(&answered, before, Duration::from_secs(10)).await;
    stop.store(true, Ordering::Release);
    let mut logs = Vec::new();
    for p in producers {
        logs.push(p.await.expect("a producer task"));
    }
    let problems: Vec<&String> = logs.iter().flat_map(|l| &l.problems).collect();
    assert!(problems.is_empty(), "the load saw protocol violations:\n{problems:#?}");

    let base = broker.base();
    let stored = audit(&c, &base, SNAPSHOT_LOAD, &logs).await;
    check_answers(&logs, &stored);
    // The cursor committed before the snapshot holds.
    let v = support::pop(&c, &base, &format!("/api/v1/pop/queue/{q}/partition/c?batch=100&wait=false&consumerGroup=g"))
        .await;
    assert_eq!(support::offsets(&support::messages(&v)), (4..10).collect::<Vec<u64>>(), "{v:.500}");
}

/// Drains every partition with a fresh group from the beginning and checks
/// the partition layout; answers every stored message by transaction id.
async fn audit(c: &reqwest::Client, base: &str, load: Load, logs: &[ProducerLog]) -> HashMap<String, Stored> {
    let queue = load.queue;
    let sent: HashMap<u64, u64> = logs.iter().map(|l| (l.producer, l.sent)).collect();
    let mut stored: HashMap<String, Stored> = HashMap::new();
    for p in 0..load.partitions {
        let name = partition_name(p);
        let mut offs: Vec<u64> = Vec::new();
        let mut last_seq: HashMap<u64, u64> = HashMap::new();
        let mut partition_id: Option<String> = None;
        let mut drained = false;
        for _ in 0..100 {
            let v = support::pop(
                c,
                base,
                &format!(
                    "/api/v1/pop/queue/{queue}/partition/{name}\
                     ?batch=10000&wait=false&consumerGroup=audit&subscriptionMode=all"
                ),
            )
            .await;
            let msgs = support::messages(&v);
            if msgs.is_empty() {
                drained = true;
                break;
            }
            for m in &msgs {
                let txn = m["transactionId"].as_str().expect("transactionId").to_string();
                let offset = m["offset"].as_u64().expect("offset");
                let pid = m["partitionId"].as_str().expect("partitionId").to_string();
                assert_eq!(m["partition"].as_str(), Some(name.as_str()), "{m:.300}");
                check_data(m).unwrap_or_else(|e| panic!("{name}: {e}"));
                let (producer, seq) = parse_txn(&txn).expect("an id the producers minted");
                assert!(seq < sent.get(&producer).copied().unwrap_or(0), "{name}: {txn} was never sent");
                // Each producer sends one request at a time, so its items
                // must sit in a partition in the order it sent them.
                if let Some(prev) = last_seq.insert(producer, seq) {
                    assert!(seq > prev, "{name}: producer {producer} seq {seq} stored after seq {prev}");
                }
                match &partition_id {
                    None => partition_id = Some(pid.clone()),
                    Some(known) => assert_eq!(known, &pid, "{name}: two partition ids"),
                }
                if let Some(prev) =
                    stored.insert(txn.clone(), Stored { partition: name.clone(), partition_id: pid, offset })
                {
                    panic!("{txn} stored twice: at {prev:?} and at {name} offset {offset}");
                }
                offs.push(offset);
            }
            let last = msgs.last().expect("not empty");
            let r = support::ack(
                c,
                base,
                json!({
                    "transactionId": last["transactionId"],
                    "partitionId": last["partitionId"],
                    "leaseId": v["leaseId"],
                    "consumerGroup": "audit",
                    "status": "completed",
                }),
            )
            .await;
            assert_eq!(r["success"], json!(true), "{name}: audit ack refused: {r}");
            assert_eq!(r["leaseReleased"], json!(true), "{name}: {r}");
        }
        assert!(drained, "{name}: not drained within 100 pops");
        let want: Vec<u64> = (0..offs.len() as u64).collect();
        assert_eq!(offs, want, "{name}: offsets must be gapless from 0 and in order");
    }
    stored
}

/// Every answered push is stored exactly once where its answer said.
fn check_answers(logs: &[ProducerLog], stored: &HashMap<String, Stored>) {
    let mut seen: HashSet<&str> = HashSet::new();
    let mut duplicates_answered = 0;
    for log in logs {
        for a in &log.answered {
            assert!(seen.insert(&a.txn), "{} answered twice", a.txn);
            if a.status == "duplicate" {
                duplicates_answered += 1;
                assert!(a.retried, "{} answered duplicate on its first attempt (ids are unique)", a.txn);
            }
            let s = stored.get(&a.txn).unwrap_or_else(|| panic!("{} was answered {:?} but is not stored", a.txn, a));
            assert_eq!(
                (&s.partition, &s.partition_id, s.offset),
                (&a.partition, &a.partition_id, a.offset),
                "{} is stored elsewhere than answered",
                a.txn
            );
        }
    }
    let unanswered_stored = stored.len() - seen.len();
    eprintln!(
        "{} stored, {duplicates_answered} answered duplicate after a resend, \
         {unanswered_stored} stored without an answer",
        stored.len()
    );
}

/// Waits until the answered counter passes `before`.
async fn wait_for_progress(answered: &AtomicU64, before: u64, within: Duration) {
    let deadline = Instant::now() + within;
    while answered.load(Ordering::Acquire) <= before {
        assert!(Instant::now() < deadline, "no push was answered within {within:?}: the broker is not serving");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Files under `dir` whose names end with `suffix`.
fn files_named(dir: &std::path::Path, suffix: &str) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_named(&path, suffix));
        } else if path.to_string_lossy().ends_with(suffix) {
            found.push(path);
        }
    }
    found
}
