//! `regina jobs list|get|stats|retry`: job queues.

use regina_client::{Client, Job, JobQueue, JobState};
use serde_json::{json, Value};

use super::{short, table, CliError, Out};

#[derive(Debug, clap::Subcommand)]
pub enum JobsCommand {
    /// A queue's jobs in id order.
    List {
        queue: String,
        /// Only `pending`, `leased`, `completed` or `failed` jobs.
        #[arg(long, value_parser = ["pending", "leased", "completed", "failed"])]
        state: Option<String>,
        /// At most this many rows.
        #[arg(long, default_value_t = 100)]
        limit: u32,
        /// The scope within the queue.
        #[arg(long)]
        scope: Option<String>,
    },
    /// One job (exit 1 when there is none).
    Get {
        queue: String,
        id: String,
        #[arg(long)]
        scope: Option<String>,
    },
    /// Jobs per state.
    Stats {
        queue: String,
        #[arg(long)]
        scope: Option<String>,
    },
    /// Make a failed job pending again (exit 1 when it is not failed).
    Retry {
        queue: String,
        id: String,
        #[arg(long)]
        scope: Option<String>,
    },
}

pub(crate) async fn run(client: &Client, out: &Out, command: JobsCommand) -> Result<(), CliError> {
    let queue_of = |q: &str, scope: Option<String>| {
        let jq = client.jobs().queue(q);
        match scope {
            Some(s) => jq.scope(s),
            None => jq,
        }
    };
    match command {
        JobsCommand::List { queue, state, limit, scope } => list(&queue_of(&queue, scope), out, state, limit).await,
        JobsCommand::Get { queue, id, scope } => {
            let Some(job) = queue_of(&queue, scope).get(&id).await? else {
                return Err(CliError::Refused(format!("no job {queue}/{id}")));
            };
            out.doc(&job_json(&job));
            Ok(())
        }
        JobsCommand::Stats { queue, scope } => {
            let s = queue_of(&queue, scope).read_stats().await?;
            let c = s.counts;
            if out.json {
                out.doc(&json!({
                    "ready": s.ready,
                    "readyCount": s.ready_count,
                    "counts": { "pending": c.pending, "leased": c.leased, "completed": c.completed, "failed": c.failed },
                    "oldestReadyAt": s.oldest_ready_at,
                    "nextAvailableAt": s.next_available_at,
                }));
                return Ok(());
            }
            let n = |v: u64| v.to_string();
            table(
                &["pending", "ready", "leased", "completed", "failed", "oldestReadyAt"],
                &[vec![
                    n(c.pending),
                    n(s.ready_count),
                    n(c.leased),
                    n(c.completed),
                    n(c.failed),
                    s.oldest_ready_at.unwrap_or_else(|| "-".into()),
                ]],
            );
            Ok(())
        }
        JobsCommand::Retry { queue, id, scope } => {
            let w = queue_of(&queue, scope).retry(&id).await?;
            if out.json {
                out.doc(&json!({ "applied": w.applied, "code": w.code, "job": w.job.as_ref().map(job_json) }));
            } else if w.applied {
                say!("{queue}/{id} is pending again");
            }
            if !w.applied {
                let code = w.code.unwrap_or_else(|| "refused".into());
                return Err(CliError::Refused(format!("{code}: {queue}/{id} was not retried")));
            }
            Ok(())
        }
    }
}

async fn list(jq: &JobQueue, out: &Out, state: Option<String>, limit: u32) -> Result<(), CliError> {
    let state = state.as_deref().and_then(JobState::parse);
    let mut rows = Vec::new();
    let mut after: Option<String> = None;
    while rows.len() < limit as usize {
        let want = (limit as usize - rows.len()).min(1_000) as u32;
        let page = jq.list(state, after.as_deref(), want).await?;
        rows.extend(page.rows);
        after = page.next_after;
        if after.is_none() {
            break;
        }
    }
    if out.json {
        out.doc(&Value::Array(rows.iter().map(job_json).collect()));
        return Ok(());
    }
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|j| {
            vec![
                j.id.clone(),
                j.state.to_string(),
                j.attempts.to_string(),
                j.updated_at.clone(),
                short(&j.payload),
                if j.error.is_null() { "-".into() } else { short(&j.error) },
            ]
        })
        .collect();
    table(&["id", "state", "attempts", "updatedAt", "payload", "error"], &cells);
    Ok(())
}

fn job_json(j: &Job) -> Value {
    json!({
        "queue": j.queue,
        "scope": j.scope,
        "id": j.id,
        "state": j.state.as_str(),
        "payload": j.payload,
        "attempts": j.attempts,
        "availableAt": j.available_at,
        "leaseExpiresAt": j.lease_expires_at,
        "createdAt": j.created_at,
        "updatedAt": j.updated_at,
        "result": j.result,
        "error": j.error,
    })
}
