//! The consuming side shared by `consume` and `e2e`: workers of one group
//! pop with a long poll, record every message before acking it, then ack
//! the batch. What they record feeds the delivery checks.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::check::Record;
use crate::http1::Http1;
use crate::progress::Progress;
use crate::stats::Samples;

/// Leases long enough that a healthy short run never sees one expire, so a
/// duplicate can be blamed on the broker.
pub const LEASE_SECONDS: u64 = 120;
/// Upper bound of one long poll; also how quickly workers notice the end.
const POLL_MS: u64 = 1000;
/// Partitions one wildcard pop may claim, so many small partitions still
/// fill a batch.
const POP_PARTITIONS: usize = 16;
/// Once the target is known, a group that receives nothing for this long
/// stops waiting: the rest is judged lost rather than waited on until the
/// deadline. Long enough to ride out a broker pause.
const IDLE_MICROS: u64 = 5_000_000;

/// The parts of a pop answer the checks read. Typed and borrowing, so the
/// load generator spends its share of the machine on load, not on
/// building JSON trees.
#[derive(Deserialize)]
struct PopAnswer<'a> {
    #[serde(borrow, default)]
    messages: Vec<Option<PopMessage<'a>>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PopMessage<'a> {
    #[serde(borrow, default)]
    partition: Cow<'a, str>,
    #[serde(default = "no_offset")]
    offset: i64,
    #[serde(borrow)]
    transaction_id: Cow<'a, str>,
    #[serde(borrow)]
    partition_id: Cow<'a, str>,
    #[serde(borrow, default)]
    lease_id: Option<Cow<'a, str>>,
    #[serde(default)]
    delivery_attempt: Option<u64>,
    #[serde(default)]
    data: Option<Stamped>,
}

fn no_offset() -> i64 {
    -1
}

/// What producers of the bench put in a payload: send time and sequence.
#[derive(Deserialize, Default)]
struct Stamped {
    t: Option<u64>,
    s: Option<u64>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AckItem<'a> {
    transaction_id: &'a str,
    partition_id: &'a str,
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    lease_id: Option<&'a str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AckBody<'a> {
    acknowledgments: Vec<AckItem<'a>>,
    consumer_group: Option<&'a str>,
}

#[derive(Deserialize)]
struct AckAnswer {
    success: bool,
}

pub fn now_micros() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0)
}

/// State shared by every worker of every group.
pub struct Shared {
    pub records: Mutex<Vec<Record>>,
    /// Messages received per group, duplicates included.
    pub received: Vec<AtomicU64>,
    /// When each group last received anything (unix micros).
    pub last_progress: Vec<AtomicU64>,
    /// How many messages each group is to read; `u64::MAX` while producers
    /// are still writing.
    pub target: AtomicU64,
    pub redelivery_seen: AtomicBool,
    pub ack_refused: AtomicU64,
}

impl Shared {
    /// `room`: how many records to make room for at once. A record list
    /// grown by doubling copied itself under its lock (tens of megabytes
    /// late in a run), holding every worker up meanwhile.
    pub fn new(groups: usize, target: u64, room: usize) -> Arc<Shared> {
        Arc::new(Shared {
            records: Mutex::new(Vec::with_capacity(room)),
            received: (0..groups).map(|_| AtomicU64::new(0)).collect(),
            last_progress: (0..groups).map(|_| AtomicU64::new(now_micros())).collect(),
            target: AtomicU64::new(target),
            redelivery_seen: AtomicBool::new(false),
            ack_refused: AtomicU64::new(0),
        })
    }
}

#[derive(Default)]
pub struct WorkerStats {
    pub pop: Samples,
    pub ack: Samples,
    /// Consume time minus the send time the producer stamped into `t`.
    pub end_to_end: Samples,
}

impl WorkerStats {
    pub fn merge(&mut self, o: WorkerStats) {
        self.pop.merge(o.pop);
        self.ack.merge(o.ack);
        self.end_to_end.merge(o.end_to_end);
    }
}

pub struct Worker {
    pub url: String,
    pub queue: String,
    /// `None` = queue mode.
    pub group: Option<String>,
    pub group_index: usize,
    pub batch: usize,
    pub deadline: Instant,
}

impl Worker {
    fn pop_path(&self, wait: bool) -> String {
        let left = self.deadline.saturating_duration_since(Instant::now()).as_millis() as u64;
        let mut u = format!(
            "/api/v1/pop/queue/{}?batch={}&wait={wait}&timeout={}&partitions={POP_PARTITIONS}&leaseSeconds={LEASE_SECONDS}",
            self.queue,
            self.batch,
            left.clamp(1, POLL_MS)
        );
        if let Some(g) = &self.group {
            u.push_str(&format!("&consumerGroup={g}&subscriptionMode=all"));
        }
        u
    }

    fn stalled(&self, shared: &Shared) -> bool {
        let target_known = shared.target.load(Ordering::Relaxed) != u64::MAX;
        let last = shared.last_progress[self.group_index].load(Ordering::Relaxed);
        target_known && now_micros().saturating_sub(last) > IDLE_MICROS
    }

    /// What a pop delivered: the records the audit keeps (with end-to-end
    /// latency sampled) and the acks that settle them.
    fn records_of<'m>(
        &self,
        msgs: &'m [PopMessage],
        now: u64,
        st: &mut WorkerStats,
    ) -> (Vec<Record>, Vec<AckItem<'m>>) {
        let mut recs = Vec::with_capacity(msgs.len());
        let mut acks = Vec::with_capacity(msgs.len());
        for m in msgs {
            let data = m.data.as_ref();
            if let Some(sent) = data.and_then(|d| d.t) {
                st.end_to_end.record(now.saturating_sub(sent));
            }
            recs.push(Record {
                group: self.group_index,
                partition: m.partition.to_string(),
                offset: m.offset,
                txn: m.transaction_id.to_string(),
                seq: data.and_then(|d| d.s),
                attempt: m.delivery_attempt.unwrap_or(1),
            });
            acks.push(AckItem {
                transaction_id: &m.transaction_id,
                partition_id: &m.partition_id,
                status: "completed",
                lease_id: m.lease_id.as_deref().filter(|l| !l.is_empty()),
            });
        }
        (recs, acks)
    }

    /// Pops and acks until the group has its target and the queue answers
    /// empty, or the deadline passes.
    /// (Through one keep-alive connection of its own, `crate::http1`.)
    pub async fn run(self, shared: Arc<Shared>, progress: Progress) -> Result<WorkerStats, String> {
        let mut st = WorkerStats::default();
        let mut conn = Http1::new(&self.url)?;
        let received = &shared.received[self.group_index];
        while Instant::now() < self.deadline {
            let done = received.load(Ordering::Relaxed) >= shared.target.load(Ordering::Relaxed);
            let t = Instant::now();
            let r = conn.get(&self.pop_path(!done)).await.map_err(|e| format!("pop failed: {e}"))?;
            let (status, body) = (r.status, r.body);
            st.pop.record(t.elapsed().as_micros() as u64);
            if status == 204 {
                if done || self.stalled(&shared) {
                    break;
                }
                continue;
            }
            if !(200..300).contains(&status) {
                return Err(format!("pop answered {status}: {}", String::from_utf8_lossy(&body)));
            }
            let answer: PopAnswer =
                serde_json::from_slice(&body).map_err(|e| format!("pop answer is not the expected JSON: {e}"))?;
            let msgs: Vec<PopMessage> = answer.messages.into_iter().flatten().collect();
            if msgs.is_empty() {
                if done || self.stalled(&shared) {
                    break;
                }
                continue;
            }
            let now = now_micros();
            let (recs, acks) = self.records_of(&msgs, now, &mut st);
            // Recorded before the ack: the partition's next lease (maybe in
            // another worker) can only start after the ack commits, so the
            // shared log keeps each partition's delivery order.
            shared.records.lock().expect("records lock").extend(recs);
            received.fetch_add(msgs.len() as u64, Ordering::Relaxed);
            shared.last_progress[self.group_index].store(now, Ordering::Relaxed);
            progress.add(0, msgs.len() as u64);
            let t = Instant::now();
            let body = serde_json::to_vec(&AckBody { acknowledgments: acks, consumer_group: self.group.as_deref() })
                .expect("acks encode");
            let r = conn.post("/api/v1/ack/batch", &[], &body).await.map_err(|e| format!("ack failed: {e}"))?;
            if !(200..300).contains(&r.status) {
                return Err(format!("ack answered {}", r.status));
            }
            let answer: Vec<AckAnswer> =
                serde_json::from_slice(&r.body).map_err(|e| format!("ack answer is not the expected JSON: {e}"))?;
            st.ack.record(t.elapsed().as_micros() as u64);
            let refused = answer.iter().filter(|x| !x.success).count();
            if refused > 0 {
                // A refused ack (usually an expired lease) means the broker
                // will legitimately deliver those messages again.
                shared.ack_refused.fetch_add(refused as u64, Ordering::Relaxed);
                shared.redelivery_seen.store(true, Ordering::Relaxed);
            }
        }
        Ok(st)
    }
}

/// Starts `per_group` workers for each of `groups` groups. With one group
/// the queue is read in queue mode, the common case.
#[allow(clippy::too_many_arguments)]
pub fn spawn_groups(
    url: &str,
    queue: &str,
    groups: usize,
    per_group: usize,
    batch: usize,
    deadline: Instant,
    shared: &Arc<Shared>,
    progress: &Progress,
) -> Vec<tokio::task::JoinHandle<Result<WorkerStats, String>>> {
    let mut tasks = Vec::new();
    for g in 0..groups {
        for _ in 0..per_group {
            let w = Worker {
                url: url.to_string(),
                queue: queue.to_string(),
                group: (groups > 1).then(|| format!("g{g}")),
                group_index: g,
                batch,
                deadline,
            };
            tasks.push(tokio::spawn(w.run(shared.clone(), progress.clone())));
        }
    }
    tasks
}

pub async fn join(tasks: Vec<tokio::task::JoinHandle<Result<WorkerStats, String>>>) -> Result<WorkerStats, String> {
    let mut all = WorkerStats::default();
    for t in tasks {
        all.merge(t.await.map_err(|e| e.to_string())??);
    }
    Ok(all)
}

/// A fresh queue name per run so leftovers of earlier runs never count as
/// unexpected deliveries.
pub fn run_queue(base: &str, scenario: &str) -> String {
    format!("{base}-{scenario}-{}", now_micros() % 1_000_000_000)
}
