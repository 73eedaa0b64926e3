//! `regina push QUEUE [--partition P] [--ndjson] [JSON | --file F | -]`.

use std::io::Read;

use regina_client::{Client, PushItem, Pushed};
use serde_json::{json, Value};

use super::{parse_json, table, CliError, Out};

/// Items sent per push call when many are read.
pub(crate) const PUSH_CHUNK: usize = 500;

#[derive(Debug, clap::Args)]
pub struct PushArgs {
    /// The queue.
    pub queue: String,
    /// The partition (default `Default`).
    #[arg(long, short)]
    pub partition: Option<String>,
    /// The payload as JSON; `-` (or nothing, without --file) reads stdin.
    #[arg(conflicts_with = "file")]
    pub payload: Option<String>,
    /// Read the payload from this file.
    #[arg(long, short)]
    pub file: Option<std::path::PathBuf>,
    /// The input holds one payload per line (blank lines skipped).
    #[arg(long)]
    pub ndjson: bool,
    /// The transaction id of a single payload (the broker deduplicates on it).
    #[arg(long)]
    pub transaction_id: Option<String>,
}

pub(crate) async fn push(client: &Client, out: &Out, a: PushArgs) -> Result<(), CliError> {
    let text = match (&a.payload, &a.file) {
        (Some(p), None) if p != "-" => p.clone(),
        (_, Some(f)) => std::fs::read_to_string(f).map_err(|e| CliError::Usage(format!("{}: {e}", f.display())))?,
        _ => {
            let mut s = String::new();
            std::io::stdin().read_to_string(&mut s).map_err(|e| CliError::Usage(format!("stdin: {e}")))?;
            s
        }
    };
    let payloads: Vec<Value> = if a.ndjson {
        let mut v = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if !line.trim().is_empty() {
                v.push(parse_json(line, &format!("line {}", i + 1))?);
            }
        }
        v
    } else {
        vec![parse_json(&text, "the payload")?]
    };
    if payloads.is_empty() {
        return Err(CliError::Usage("nothing to push: the input holds no payload".into()));
    }
    if a.transaction_id.is_some() && payloads.len() > 1 {
        return Err(CliError::Usage("--transaction-id names one payload, the input holds several".into()));
    }
    let mut answered = Vec::with_capacity(payloads.len());
    for chunk in payloads.chunks(PUSH_CHUNK) {
        let items: Vec<PushItem> = chunk
            .iter()
            .map(|p| {
                let mut item = PushItem::new(&a.queue, p.clone());
                if let Some(part) = &a.partition {
                    item = item.partition(part);
                }
                if let Some(t) = &a.transaction_id {
                    item = item.transaction_id(t);
                }
                item
            })
            .collect();
        answered.extend(client.push(&items).await?);
    }
    print_pushed(out, &answered);
    Ok(())
}

pub(crate) fn pushed_json(p: &Pushed) -> Value {
    json!({
        "messageId": p.message_id,
        "transactionId": p.transaction_id,
        "partitionId": p.partition_id,
        "offset": p.offset,
        "duplicate": p.duplicate,
    })
}

fn print_pushed(out: &Out, answered: &[Pushed]) {
    if out.json {
        out.doc(&Value::Array(answered.iter().map(pushed_json).collect()));
        return;
    }
    let rows: Vec<Vec<String>> = answered
        .iter()
        .map(|p| {
            vec![
                p.transaction_id.clone(),
                p.partition_id.clone(),
                p.offset.to_string(),
                if p.duplicate { "duplicate" } else { "queued" }.to_string(),
            ]
        })
        .collect();
    table(&["transactionId", "partitionId", "offset", "status"], &rows);
}
