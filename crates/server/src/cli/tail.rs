//! `regina tail QUEUE [--partition P] [--group G] [--ack] [--batch N]
//! [--count N] [--timeout-ms N] [--from all|new]`: follows a queue as a
//! consumer group and prints each message as it comes.
//!
//! Without `--group` it reads as a group of its own (`regina-tail-<id>`),
//! so the queue's consumers are not disturbed. Without `--ack` each pop
//! commits at delivery (the group's cursor moves, no lease is left); with
//! `--ack` the pop takes a lease and tail acks what it printed, after
//! printing it.

use std::io::Write;
use std::time::{Duration, Instant};

use regina_client::{Ack, Client, Message, Subscription};
use serde_json::{json, Value};

use super::{cell, short, CliError, Out};

/// Longest single long poll; tail polls again until `--count` or `--timeout-ms`.
const POLL: Duration = Duration::from_secs(10);

#[derive(Debug, clap::Args)]
pub struct TailArgs {
    /// The queue.
    pub queue: String,
    /// Only this partition.
    #[arg(long, short)]
    pub partition: Option<String>,
    /// The consumer group (default: a group of its own).
    #[arg(long, short)]
    pub group: Option<String>,
    /// Ack each printed message (pop under a lease) instead of committing at delivery.
    #[arg(long)]
    pub ack: bool,
    /// Messages per pop.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub batch: u32,
    /// Stop after this many messages.
    #[arg(long)]
    pub count: Option<u64>,
    /// Stop after this long (exit 4 when --count was not reached).
    #[arg(long)]
    pub timeout_ms: Option<u64>,
    /// Where a group new to the queue starts: `all` (the oldest kept message) or `new`.
    #[arg(long, value_parser = ["all", "new"])]
    pub from: Option<String>,
}

pub(crate) async fn tail(client: &Client, out: &Out, a: TailArgs) -> Result<(), CliError> {
    let group =
        a.group.clone().unwrap_or_else(|| format!("regina-tail-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]));
    let deadline = a.timeout_ms.map(|ms| Instant::now() + Duration::from_millis(ms));
    let mut printed = 0_u64;
    loop {
        if a.count.is_some_and(|c| printed >= c) {
            return Ok(());
        }
        let now = Instant::now();
        let wait = match deadline {
            Some(d) if d <= now => {
                return match a.count {
                    Some(c) => Err(CliError::TimedOut(format!("timed out after {printed} of {c} messages"))),
                    None => Ok(()),
                }
            }
            Some(d) => (d - now).min(POLL),
            None => POLL,
        };
        // Never take more than is still wanted: what is popped is committed or leased.
        let want = a.count.map_or(a.batch, |c| (c - printed).min(u64::from(a.batch)) as u32);
        let mut pop = client.pop(&a.queue).group(&group).batch(want).wait(wait.max(Duration::from_millis(1)));
        if let Some(p) = &a.partition {
            pop = pop.partition(p);
        }
        match a.from.as_deref() {
            Some("all") => pop = pop.subscription(Subscription::All),
            Some(_) => pop = pop.subscription(Subscription::New),
            None => {}
        }
        if !a.ack {
            pop = pop.auto_ack();
        }
        let batch = pop.send().await?;
        for m in &batch {
            print_message(out, m);
        }
        let _ = std::io::stdout().flush();
        if a.ack && !batch.is_empty() {
            let acks: Vec<Ack> = batch.iter().map(Ack::completed).collect();
            for (m, r) in batch.iter().zip(client.ack_batch(&acks).await?) {
                if !r.success {
                    eprintln!("regina: ack of {} refused: {}", m.transaction_id, r.error.as_deref().unwrap_or("-"));
                }
            }
        }
        printed += batch.len() as u64;
    }
}

pub(crate) fn message_json(m: &Message) -> Value {
    json!({
        "queue": m.queue,
        "partition": m.partition,
        "partitionId": m.partition_id,
        "transactionId": m.transaction_id,
        "id": m.id,
        "offset": m.offset,
        "createdAt": m.created_at,
        "deliveryAttempt": m.delivery_attempt,
        "data": m.data,
    })
}

fn print_message(out: &Out, m: &Message) {
    if out.json {
        say!("{}", message_json(m));
    } else {
        say!(
            "{} {}#{} {} {}",
            cell(&Value::String(m.created_at.clone())),
            m.partition,
            m.offset,
            m.transaction_id,
            short(&m.data)
        );
    }
}
