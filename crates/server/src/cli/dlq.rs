//! `regina dlq list|replay|delete|purge`: the dead-letter queue.
//!
//! `replay --all QUEUE` first lists every dead letter of the queue, then
//! replays each one, with a progress line on stderr; a row that cannot be
//! replayed is named and the rest go on. `purge QUEUE` is one call: the
//! server deletes every row (`DELETE /api/v1/dlq`).

use regina_client::{Client, DeadLetter, DLQ_PAGE_MAX};
use serde_json::{json, Value};

use super::{progress, short, table, CliError, Out};

/// How often (in rows) `replay --all` reports progress.
const PROGRESS_EVERY: usize = 100;

#[derive(Debug, clap::Subcommand)]
pub enum DlqCommand {
    /// List dead letters of a queue (or of every queue).
    List {
        /// The queue (default: every queue).
        queue: Option<String>,
        /// At most this many rows.
        #[arg(long, default_value_t = 100)]
        limit: u32,
        /// Rows skipped.
        #[arg(long, default_value_t = 0)]
        offset: u64,
    },
    /// Push a dead letter back to its partition: one by PARTITION_ID TRANSACTION_ID, or `--all QUEUE`.
    Replay {
        /// Replay every dead letter of this queue.
        #[arg(long, value_name = "QUEUE", conflicts_with_all = ["partition_id", "transaction_id"])]
        all: Option<String>,
        /// The dead letter's partition id (as `dlq list` shows it).
        #[arg(required_unless_present = "all")]
        partition_id: Option<String>,
        /// The dead letter's transaction id.
        #[arg(required_unless_present = "all")]
        transaction_id: Option<String>,
    },
    /// Drop one dead letter.
    Delete { partition_id: String, transaction_id: String },
    /// Drop every dead letter of a queue.
    Purge {
        /// The queue.
        queue: String,
    },
}

pub(crate) async fn run(client: &Client, out: &Out, command: DlqCommand) -> Result<(), CliError> {
    match command {
        DlqCommand::List { queue, limit, offset } => {
            if let Some(q) = &queue {
                // An unknown queue is an error, not an empty list.
                client.queue_detail(q).await?;
            }
            let page = client.dead_letters(queue.as_deref(), limit, offset).await?;
            if out.json {
                let rows: Vec<Value> = page.rows.iter().map(dead_letter_json).collect();
                out.doc(&json!({ "messages": rows, "total": page.total }));
                return Ok(());
            }
            let rows: Vec<Vec<String>> = page
                .rows
                .iter()
                .map(|d| {
                    vec![
                        d.queue.clone(),
                        d.partition.clone(),
                        d.partition_id.clone(),
                        d.transaction_id.clone(),
                        d.failed_at.clone(),
                        d.error_message.clone().unwrap_or_else(|| "-".into()),
                        short(&d.data),
                    ]
                })
                .collect();
            table(&["queue", "partition", "partitionId", "transactionId", "failedAt", "error", "data"], &rows);
            say!("{} of {} dead letters", page.rows.len(), page.total);
            Ok(())
        }
        DlqCommand::Replay { all: Some(queue), .. } => replay_all(client, out, &queue).await,
        DlqCommand::Replay { partition_id, transaction_id, .. } => {
            let (pid, txn) = (partition_id.unwrap_or_default(), transaction_id.unwrap_or_default());
            let answer = client.replay_dead_letter(&pid, &txn).await?;
            if out.json {
                out.doc(&answer);
            } else {
                say!("replayed {txn} to partition {pid} at offset {}", super::cell(&answer["offset"]));
            }
            Ok(())
        }
        DlqCommand::Delete { partition_id, transaction_id } => {
            client.delete_dead_letter(&partition_id, &transaction_id).await?;
            if out.json {
                out.doc(&json!({ "deleted": 1 }));
            } else {
                say!("deleted {transaction_id}");
            }
            Ok(())
        }
        DlqCommand::Purge { queue } => {
            let purged = client.purge_dead_letters(&queue, None).await?;
            if out.json {
                out.doc(&json!({ "queue": queue, "purged": purged }));
            } else {
                say!("purged {purged} dead letter(s) of {queue}");
            }
            Ok(())
        }
    }
}

/// Every dead letter of `queue`, listed first, then replayed one by one.
async fn replay_all(client: &Client, out: &Out, queue: &str) -> Result<(), CliError> {
    client.queue_detail(queue).await?;
    let rows = list_all(client, queue).await?;
    progress(&format!("{queue}: {} dead letters to replay", rows.len()));
    let (mut done, mut failed) = (0_usize, 0_usize);
    for (i, d) in rows.iter().enumerate() {
        match client.replay_dead_letter(&d.partition_id, &d.transaction_id).await.map(|_| ()) {
            Ok(()) => done += 1,
            Err(e @ regina_client::Error::Transport(_)) => return Err(e.into()),
            Err(e) => {
                failed += 1;
                eprintln!("regina: replay {} {}: {}", d.partition_id, d.transaction_id, CliError::from(e));
            }
        }
        if (i + 1) % PROGRESS_EVERY == 0 || i + 1 == rows.len() {
            progress(&format!("{queue}: replayed {done} of {}", rows.len()));
        }
    }
    if out.json {
        out.doc(&json!({ "queue": queue, "replayed": done, "failed": failed, "listed": rows.len() }));
    } else {
        say!("replayed {done} of {} dead letters of {queue}", rows.len());
    }
    if failed > 0 {
        return Err(CliError::Refused(format!("{failed} dead letters could not be replayed")));
    }
    Ok(())
}

async fn list_all(client: &Client, queue: &str) -> Result<Vec<DeadLetter>, CliError> {
    let mut rows = Vec::new();
    loop {
        let page = client.dead_letters(Some(queue), DLQ_PAGE_MAX, rows.len() as u64).await?;
        let n = page.rows.len();
        rows.extend(page.rows);
        if n == 0 || rows.len() as u64 >= page.total {
            return Ok(rows);
        }
    }
}

fn dead_letter_json(d: &DeadLetter) -> Value {
    json!({
        "queue": d.queue,
        "partition": d.partition,
        "partitionId": d.partition_id,
        "transactionId": d.transaction_id,
        "id": d.message_id,
        "offset": d.offset,
        "consumerGroup": d.consumer_group,
        "errorMessage": d.error_message,
        "retryCount": d.retry_count,
        "createdAt": d.created_at,
        "failedAt": d.failed_at,
        "data": d.data,
    })
}
