//! `e2e`: open-loop producers offer `--rate` messages per second across
//! `--partitions` while consumers long-poll. Each message carries the time
//! it was *meant* to be sent, so latency (consumption minus intended send)
//! includes any time producers fell behind schedule: no coordinated
//! omission. The same delivery checks as `consume` apply.

use std::io::Write as _;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::args::Args;
use crate::check::{self, Expected};
use crate::consume::{check_queued, finish};
use crate::consumer::{self, now_micros, Shared};
use crate::http1::Http1;
use crate::progress::Progress;
use crate::scenarios::join_all;
use crate::stats::Samples;

/// After producers stop, consumers get this long to drain what was sent.
const DRAIN: Duration = Duration::from_secs(10);
/// How far past the run's end producers keep sending overdue messages.
const LATE_GRACE: Duration = Duration::from_secs(1);

struct Produced {
    /// What was sent, as (transaction id, (partition, sequence)). A list,
    /// made into the checks' map only once consumers are done: a map grown
    /// while sending stopped its producer for ~50 ms at each rehash,
    /// which the run then measured as the broker's latency.
    expected: Vec<(String, (String, u64))>,
    push: Samples,
    /// Messages whose intended time fell inside the run but were never sent.
    behind: u64,
}

/// One producer: owns `owned` partitions and sends message `k` at
/// `start + k / rate`, batching whatever is due (at most `batch`).
#[allow(clippy::too_many_arguments)]
async fn produce(
    a: Args,
    queue: String,
    id: usize,
    owned: Vec<usize>,
    rate: f64,
    start: Instant,
    start_epoch_us: u64,
    progress: Progress,
) -> Result<Produced, String> {
    let end = start + Duration::from_secs_f64(a.seconds);
    let pad = "x".repeat(a.payload.saturating_sub(40));
    let queue_json = Value::from(queue.as_str()).to_string();
    let mut conn = Http1::new(&a.url)?;
    let mut body = Vec::with_capacity(a.batch * (a.payload + queue_json.len() + 80));
    let total = (a.seconds * rate).floor() as u64;
    let mut out = Produced { expected: Vec::with_capacity(total as usize), push: Samples::default(), behind: 0 };
    let mut next_seq = vec![0u64; owned.len()];
    let mut k: u64 = 0;
    while k < total {
        let now = Instant::now();
        // A timer waking a hair late must not drop the last messages, but a
        // producer far behind schedule stops and reports what it never sent.
        if now >= end + LATE_GRACE {
            break;
        }
        // Messages due by now: all k with start + k/rate <= now.
        let due = (((now - start).as_secs_f64() * rate).floor() as u64 + 1).min(total);
        if k >= due {
            tokio::time::sleep_until((start + Duration::from_secs_f64(k as f64 / rate)).into()).await;
            continue;
        }
        let n = (due - k).min(a.batch as u64);
        let mut batch_expected = Vec::with_capacity(n as usize);
        body.clear();
        body.extend_from_slice(b"{\"items\":[");
        for j in k..k + n {
            let slot = (j % owned.len() as u64) as usize;
            let (part, seq) = (owned[slot], next_seq[slot]);
            next_seq[slot] += 1;
            let intended_us = start_epoch_us + (j as f64 * 1e6 / rate) as u64;
            let (txn, name) = (format!("e{id}-{j}"), format!("p{part}"));
            let comma = if j == k { "" } else { "," };
            let _ = write!(
                body,
                "{comma}{{\"queue\":{queue_json},\"partition\":\"{name}\",\"transactionId\":\"{txn}\",\
                 \"payload\":{{\"t\":{intended_us},\"s\":{seq},\"d\":\"{pad}\"}}}}"
            );
            batch_expected.push((txn, (name, seq)));
        }
        body.extend_from_slice(b"]}");
        let t = Instant::now();
        let r = conn.post("/api/v1/push", &[], &body).await.map_err(|e| format!("push failed: {e}"))?;
        check_queued(r.status, &r.body, n as usize)?;
        out.push.record(t.elapsed().as_micros() as u64);
        out.expected.extend(batch_expected);
        progress.add(1, n);
        k += n;
    }
    out.behind = total - k;
    Ok(out)
}

pub async fn run(a: &Args) -> Result<Value, String> {
    let queue = consumer::run_queue(&a.queue, "e2e");
    let progress = Progress::start("e2e", &["consumed", "sent"]);
    let offered = (a.seconds * a.rate) as usize;
    let shared = Shared::new(a.groups, u64::MAX, offered.saturating_mul(a.groups).saturating_add(offered / 10));
    let start = Instant::now();
    let start_epoch_us = now_micros();
    let deadline = start + Duration::from_secs_f64(a.seconds) + DRAIN;
    let consumers =
        consumer::spawn_groups(&a.url, &queue, a.groups, a.consumers, a.batch, deadline, &shared, &progress);

    let producers = a.producers.min(a.partitions).max(1);
    let per_producer = a.rate / producers as f64;
    let mut tasks = Vec::new();
    for p in 0..producers {
        let owned: Vec<usize> = (p..a.partitions).step_by(producers).collect();
        let (a, queue, progress) = (a.clone(), queue.clone(), progress.clone());
        tasks.push(tokio::spawn(produce(a, queue, p, owned, per_producer, start, start_epoch_us, progress)));
    }
    let (mut sent, mut push, mut behind) = (Vec::with_capacity(offered), Samples::default(), 0u64);
    let produced = join_all(tasks, |p: Produced| {
        sent.extend(p.expected);
        push.merge(p.push);
        behind += p.behind;
    })
    .await;
    let send_secs = start.elapsed().as_secs_f64();
    // Consumers now know how much to read, and stop once they have it. The
    // idle clock restarts here so a quiet send phase does not count.
    for g in &shared.last_progress {
        g.store(now_micros(), Ordering::Relaxed);
    }
    shared.target.store(sent.len() as u64, Ordering::Relaxed);
    let stats = consumer::join(consumers).await;
    let mut expected = Expected::with_capacity(sent.len());
    expected.extend(sent);
    progress.finish();
    produced?;
    let stats = stats?;
    let secs = start.elapsed().as_secs_f64();

    let records = std::mem::take(&mut *shared.records.lock().expect("records lock"));
    let verdict = check::check(&expected, a.groups, &records, shared.redelivery_seen.load(Ordering::Relaxed));
    let report = json!({
        "scenario": "e2e",
        "queue": queue,
        "offeredRate": a.rate,
        "partitions": a.partitions, "producers": producers, "groups": a.groups,
        "consumersPerGroup": a.consumers, "batch": a.batch,
        "sendSeconds": send_secs, "seconds": secs,
        "sent": expected.len(), "behindSchedule": behind,
        "achievedRate": expected.len() as f64 / send_secs,
        "consumed": records.len(),
        "latencyMs": stats.end_to_end.report(),
        "pushLatencyMs": push.report(),
        "popLatencyMs": stats.pop.report(),
        "ackLatencyMs": stats.ack.report(),
        "check": verdict.report(),
    });
    finish(report, &verdict)
}
