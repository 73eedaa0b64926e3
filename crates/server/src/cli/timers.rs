//! `regina timers list|cancel|retry`: a queue's timers.

use std::time::Duration;

use regina_client::{Client, Retried, TimerQuery, TimerRow, TimerState};
use serde_json::{json, Value};

use super::{short, table, CliError, Out};

#[derive(Debug, clap::Subcommand)]
pub enum TimersCommand {
    /// A queue's timers in key order.
    List {
        queue: String,
        /// Only `pending` or `failed` timers.
        #[arg(long, value_parser = ["pending", "failed"])]
        state: Option<String>,
        /// At most this many rows.
        #[arg(long, default_value_t = 100)]
        limit: u32,
    },
    /// Cancel a pending timer (exit 1 when none was pending).
    Cancel { queue: String, key: String },
    /// Make a failed timer pending again (exit 1 when it is not failed).
    Retry {
        queue: String,
        key: String,
        /// Fire this long from now (default: at the broker's next check).
        #[arg(long)]
        delay_ms: Option<u64>,
    },
}

pub(crate) async fn run(client: &Client, out: &Out, command: TimersCommand) -> Result<(), CliError> {
    let timers = client.timers();
    match command {
        TimersCommand::List { queue, state, limit } => {
            let state = match state.as_deref() {
                Some("failed") => Some(TimerState::Failed),
                Some(_) => Some(TimerState::Pending),
                None => None,
            };
            let mut rows = Vec::new();
            let mut after = None;
            while rows.len() < limit as usize {
                let want = (limit as usize - rows.len()).min(1_000) as u32;
                let query = TimerQuery { state, after, limit: want, ..TimerQuery::default() };
                let page = timers.query(&queue, &query).await?;
                rows.extend(page.rows);
                after = page.next_after;
                if after.is_none() {
                    break;
                }
            }
            if out.json {
                out.doc(&Value::Array(rows.iter().map(timer_json).collect()));
                return Ok(());
            }
            let cells: Vec<Vec<String>> = rows
                .iter()
                .map(|t| {
                    vec![
                        t.key.clone(),
                        state_name(t.state).to_string(),
                        t.deliver_at.clone(),
                        t.attempts.to_string(),
                        t.partition.clone(),
                        short(&t.payload),
                    ]
                })
                .collect();
            table(&["key", "state", "deliverAt", "attempts", "partition", "payload"], &cells);
            Ok(())
        }
        TimersCommand::Cancel { queue, key } => {
            let cancelled = timers.cancel(&queue, &key).await?;
            if out.json {
                out.doc(&json!({ "cancelled": cancelled }));
            } else if cancelled {
                say!("cancelled {queue}/{key}");
            }
            if !cancelled {
                return Err(CliError::Refused(format!("no pending timer {queue}/{key}")));
            }
            Ok(())
        }
        TimersCommand::Retry { queue, key, delay_ms } => {
            match timers.retry(&queue, &key, delay_ms.map(Duration::from_millis)).await? {
                Retried::Retried { txn, deliver_at } => {
                    if out.json {
                        out.doc(&json!({ "retried": true, "txn": txn, "deliverAt": deliver_at }));
                    } else {
                        say!("{queue}/{key} fires at {deliver_at}");
                    }
                    Ok(())
                }
                Retried::NotFailed { exists } => {
                    let why = if exists { "it is pending" } else { "there is none" };
                    Err(CliError::Refused(format!("TIMER_NOT_FAILED: {queue}/{key} is not failed ({why})")))
                }
            }
        }
    }
}

fn state_name(s: TimerState) -> &'static str {
    match s {
        TimerState::Pending => "pending",
        TimerState::Failed => "failed",
    }
}

fn timer_json(t: &TimerRow) -> Value {
    json!({
        "queue": t.queue,
        "timerKey": t.key,
        "partition": t.partition,
        "state": state_name(t.state),
        "deliverAt": t.deliver_at,
        "attempts": t.attempts,
        "error": t.error,
        "txn": t.txn,
        "messageId": t.message_id,
        "payload": t.payload,
        "createdAt": t.created_at,
        "updatedAt": t.updated_at,
    })
}
