//! The peer beside Regina: Redis streams in the same shapes as `push` and
//! `consume`, so one harness measures both on one machine (see
//! `scripts/bench-peers.sh`, which runs Redis with `appendfsync always`).
//!
//! - `redis-push`: `--producers` connections, each sending `--batch`
//!   pipelined `XADD`s at a time across `--partitions` stream keys (a
//!   batch's replies are awaited before the next, as a push's answer is).
//! - `redis-consume`: preloads `--messages` across the keys, then
//!   `--consumers` connections per group (`--groups`) each read `--batch`
//!   with `XREADGROUP` from one of their keys and `XACK` what they read.
//!   Every group must read every message once, each key in order.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::args::Args;
use crate::resp::{Conn, Reply};
use crate::stats::Samples;

fn key(a: &Args, part: usize) -> String {
    format!("{}:{part}", a.queue)
}

fn field_error(replies: &[Reply]) -> Result<(), String> {
    match replies.iter().find_map(|r| if let Reply::Error(e) = r { Some(e) } else { None }) {
        Some(e) => Err(format!("Redis refused a command: {e}")),
        None => Ok(()),
    }
}

/// A push whose server stops answering mid-run (a peer killed for
/// memory, say) still reports what it did until then, with `failed` and
/// `failedAfterSeconds`: over a long run that is an outcome, not a lost run.
pub async fn push(a: &Args) -> Result<Value, String> {
    let payload = "x".repeat(a.payload.saturating_sub(10));
    let sent = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs_f64(a.seconds);
    let started = Instant::now();
    let per_second = crate::progress::PerSecond::start(sent.clone());
    let mut tasks = Vec::new();
    for p in 0..a.producers {
        let (a, payload, sent) = (a.clone(), payload.clone(), sent.clone());
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::connect(&a.url).await?;
            let (mut samples, mut seq) = (Samples::default(), 0usize);
            while Instant::now() < deadline {
                for _ in 0..a.batch {
                    seq += 1;
                    let k = key(&a, (seq * 7919 + p) % a.partitions);
                    conn.queue(&[b"XADD", k.as_bytes(), b"*", b"d", payload.as_bytes()]);
                }
                let t = Instant::now();
                let replies = match conn.flush().await {
                    Ok(replies) => replies,
                    Err(e) => return Ok((samples, Some((e, started.elapsed())))),
                };
                field_error(&replies)?;
                samples.record(t.elapsed().as_micros() as u64);
                sent.fetch_add(a.batch as u64, Ordering::Relaxed);
            }
            Ok::<_, String>((samples, None))
        }));
    }
    let mut all = Samples::default();
    let mut failed: Option<(String, Duration)> = None;
    crate::scenarios::join_all(tasks, |(s, f)| {
        all.merge(s);
        if let Some((e, at)) = f {
            if failed.as_ref().is_none_or(|(_, first)| at < *first) {
                failed = Some((e, at));
            }
        }
    })
    .await?;
    let mut secs = started.elapsed().as_secs_f64();
    let msgs = sent.load(Ordering::Relaxed);
    let mut per_second = per_second.finish();
    if let Some((_, at)) = &failed {
        secs = at.as_secs_f64();
        per_second.truncate(secs.floor() as usize);
    }
    let mut out = json!({
        "scenario": "redis-push",
        "producers": a.producers, "batch": a.batch, "payloadBytes": a.payload, "partitions": a.partitions,
        "seconds": secs, "messages": msgs, "messagesPerSecond": msgs as f64 / secs,
        "requests": all.len(), "latencyMs": all.report(), "perSecond": per_second,
    });
    if let Some((e, _)) = failed {
        out["failed"] = json!(e);
        out["failedAfterSeconds"] = json!(secs);
    }
    Ok(out)
}

/// Writes `--messages` across the keys, field `s` holding each key's
/// sequence number, and makes every group at the start of every key.
async fn preload(a: &Args) -> Result<u64, String> {
    let mut conn = Conn::connect(&a.url).await?;
    for part in 0..a.partitions {
        conn.queue(&[b"DEL", key(a, part).as_bytes()]);
    }
    field_error(&conn.flush().await?)?;
    let payload = "x".repeat(a.payload.saturating_sub(24));
    let (base, rem) = (a.messages / a.partitions as u64, a.messages % a.partitions as u64);
    for part in 0..a.partitions {
        let k = key(a, part);
        for seq in 0..base + u64::from((part as u64) < rem) {
            let s = seq.to_string();
            conn.queue(&[b"XADD", k.as_bytes(), b"*", b"s", s.as_bytes(), b"d", payload.as_bytes()]);
        }
        for g in 0..a.groups {
            let group = format!("g{g}");
            conn.queue(&[b"XGROUP", b"CREATE", k.as_bytes(), group.as_bytes(), b"0", b"MKSTREAM"]);
        }
        field_error(&conn.flush().await?)?;
    }
    Ok(a.messages)
}

/// The ids and sequence numbers of one `XREADGROUP` reply on one key.
fn read_entries(reply: &Reply) -> Result<Vec<(String, u64)>, String> {
    if let Reply::Error(e) = reply {
        return Err(format!("XREADGROUP: {e}"));
    }
    let mut out = Vec::new();
    for stream in reply.items() {
        for entry in stream.items().get(1).map_or(&[][..], Reply::items) {
            let id = entry.items().first().and_then(Reply::text).ok_or("an entry without an id")?;
            let fields = entry.items().get(1).map_or(&[][..], Reply::items);
            let seq = fields.get(1).and_then(Reply::text).and_then(|s| s.parse().ok()).ok_or("an entry without s")?;
            out.push((id, seq));
        }
    }
    Ok(out)
}

struct Consumed {
    pop: Samples,
    ack: Samples,
    messages: u64,
    out_of_order: u64,
}

/// One consumer: reads its keys round robin until its group has read
/// everything or the deadline passes.
async fn consume_keys(
    a: Args,
    group: usize,
    keys: Vec<usize>,
    left: Arc<AtomicU64>,
    deadline: Instant,
) -> Result<Consumed, String> {
    let mut conn = Conn::connect(&a.url).await?;
    let (g, me) = (format!("g{group}"), format!("c{}", keys.first().copied().unwrap_or(0)));
    let batch = a.batch.to_string();
    let mut next_seq = vec![0u64; keys.len()];
    let mut done = Consumed { pop: Samples::default(), ack: Samples::default(), messages: 0, out_of_order: 0 };
    while left.load(Ordering::Relaxed) > 0 && Instant::now() < deadline {
        let mut idle = true;
        for (i, part) in keys.iter().enumerate() {
            let k = key(&a, *part);
            let t = Instant::now();
            let args: [&[u8]; 8] = [
                b"XREADGROUP",
                b"GROUP",
                g.as_bytes(),
                me.as_bytes(),
                b"COUNT",
                batch.as_bytes(),
                b"STREAMS",
                k.as_bytes(),
            ];
            conn.queue(&[&args[..], &[b">"]].concat());
            let entries = read_entries(&conn.flush().await?.remove(0))?;
            done.pop.record(t.elapsed().as_micros() as u64);
            if entries.is_empty() {
                continue;
            }
            idle = false;
            for (_, seq) in &entries {
                done.out_of_order += u64::from(*seq != next_seq[i]);
                next_seq[i] = seq + 1;
            }
            let mut ack: Vec<&[u8]> = vec![b"XACK", k.as_bytes(), g.as_bytes()];
            ack.extend(entries.iter().map(|(id, _)| id.as_bytes()));
            let t = Instant::now();
            conn.call(&ack).await?;
            done.ack.record(t.elapsed().as_micros() as u64);
            done.messages += entries.len() as u64;
            left.fetch_sub(entries.len() as u64, Ordering::Relaxed);
        }
        if idle {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    Ok(done)
}

pub async fn consume(a: &Args) -> Result<Value, String> {
    let t0 = Instant::now();
    let preloaded = preload(a).await?;
    let preload_secs = t0.elapsed().as_secs_f64();
    eprintln!("redis-consume: preloaded {preloaded} messages in {preload_secs:.1}s");
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(a.seconds);
    let mut tasks = Vec::new();
    for group in 0..a.groups {
        let left = Arc::new(AtomicU64::new(preloaded));
        for c in 0..a.consumers {
            let keys: Vec<usize> = (c..a.partitions).step_by(a.consumers).collect();
            tasks.push(tokio::spawn(consume_keys(a.clone(), group, keys, left.clone(), deadline)));
        }
    }
    let (mut pop, mut ack, mut consumed, mut out_of_order) = (Samples::default(), Samples::default(), 0, 0);
    crate::scenarios::join_all(tasks, |d| {
        pop.merge(d.pop);
        ack.merge(d.ack);
        consumed += d.messages;
        out_of_order += d.out_of_order;
    })
    .await?;
    let secs = started.elapsed().as_secs_f64();
    let whole = consumed == preloaded * a.groups as u64 && out_of_order == 0;
    let report = json!({
        "scenario": "redis-consume",
        "partitions": a.partitions, "groups": a.groups, "consumersPerGroup": a.consumers, "batch": a.batch,
        "preloaded": preloaded, "preloadSeconds": preload_secs, "seconds": secs,
        "consumed": consumed, "messagesPerSecond": consumed as f64 / secs,
        "pops": pop.len(), "popLatencyMs": pop.report(), "ackLatencyMs": ack.report(),
        "check": { "ok": whole, "outOfOrder": out_of_order, "expected": preloaded * a.groups as u64 },
    });
    if whole {
        Ok(report)
    } else {
        println!("{}", serde_json::to_string_pretty(&report).expect("reports encode"));
        Err(format!("redis-consume read {consumed} of {} ({out_of_order} out of order)", preloaded * a.groups as u64))
    }
}
