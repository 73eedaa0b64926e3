//! `regina export QUEUE [--partition P]` and `regina import QUEUE`: a
//! queue's kept messages as ndjson, one message a line:
//! `{"partition", "transactionId", "payload", "offset", "createdAt"}`.
//!
//! Export reads each partition by offset (`POST /api/v1/fetch`), from its
//! first kept message to the end it had when the read began, and writes
//! the lines as it reads them, in (partition, offset) order: no depth
//! limit and no copy in memory. Import pushes the lines in chunks, keeping
//! each transaction id, so importing the same file again is deduplicated
//! by the broker (inside the queue's dedup window).

use std::io::{BufRead, Write};

use regina_client::{Client, PushItem};
use serde_json::{json, Value};

use super::push::PUSH_CHUNK;
use super::{progress, CliError, Out};

#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// The queue.
    pub queue: String,
    /// Only this partition.
    #[arg(long, short)]
    pub partition: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// The queue the messages go to.
    pub queue: String,
    /// Push every line to this partition instead of the one it names.
    #[arg(long, short)]
    pub partition: Option<String>,
}

pub(crate) async fn export(client: &Client, _out: &Out, a: ExportArgs) -> Result<(), CliError> {
    // An unknown queue is an error, not an empty export.
    let detail = client.queue_detail(&a.queue).await?;
    let mut partitions: Vec<String> = match &a.partition {
        Some(p) => vec![p.clone()],
        None => detail["partitions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["name"].as_str().map(str::to_string))
            .collect(),
    };
    partitions.sort();
    let stdout = std::io::stdout();
    let mut w = std::io::BufWriter::new(stdout.lock());
    let write_err = |e: std::io::Error| CliError::Usage(format!("stdout: {e}"));
    let mut written = 0u64;
    for partition in &partitions {
        let first = client.fetch_from(&a.queue, partition, 0).await?;
        // The end as it stands now: what is pushed meanwhile is not exported.
        let end = first["highWatermark"].as_u64().unwrap_or(0);
        let mut offset = first["logStartOffset"].as_u64().unwrap_or(0);
        let mut answer = if offset == 0 { first } else { client.fetch_from(&a.queue, partition, offset).await? };
        while offset < end {
            if let Some(error) = answer["error"].as_str() {
                // Retention moved the start past `offset` meanwhile.
                match answer["logStartOffset"].as_u64() {
                    Some(start) if error == "OFFSET_OUT_OF_RANGE" && start > offset => offset = start,
                    _ => return Err(CliError::Refused(format!("{}/{partition}: {error}", a.queue))),
                }
            } else {
                let records = answer["records"].as_array().cloned().unwrap_or_default();
                if records.is_empty() {
                    break;
                }
                for r in records.iter().take_while(|r| r["offset"].as_u64().is_some_and(|o| o < end)) {
                    let line = json!({
                        "partition": partition,
                        "transactionId": r["transactionId"],
                        "payload": r["payload"],
                        "offset": r["offset"],
                        "createdAt": r["ts"],
                    });
                    writeln!(w, "{line}").map_err(write_err)?;
                    written += 1;
                }
                offset = records.last().and_then(|r| r["offset"].as_u64()).map_or(end, |o| o + 1);
                progress(&format!("export {}: {partition} at offset {offset} of {end}, {written} written", a.queue));
            }
            if offset < end {
                answer = client.fetch_from(&a.queue, partition, offset).await?;
            }
        }
    }
    w.flush().map_err(write_err)?;
    progress(&format!("export {}: {written} messages written", a.queue));
    Ok(())
}

pub(crate) async fn import(client: &Client, out: &Out, a: ImportArgs) -> Result<(), CliError> {
    let stdin = std::io::stdin();
    let (mut pushed, mut duplicates, mut line_no) = (0_u64, 0_u64, 0_usize);
    let mut chunk: Vec<PushItem> = Vec::with_capacity(PUSH_CHUNK);
    let mut lines = stdin.lock().lines();
    loop {
        let line = lines.next();
        if let Some(line) = &line {
            line_no += 1;
            let line = line.as_ref().map_err(|e| CliError::Usage(format!("stdin: {e}")))?;
            if !line.trim().is_empty() {
                chunk.push(item(&a, line, line_no)?);
            }
        }
        if chunk.len() >= PUSH_CHUNK || (line.is_none() && !chunk.is_empty()) {
            for p in client.push(&chunk).await? {
                if p.duplicate {
                    duplicates += 1;
                } else {
                    pushed += 1;
                }
            }
            chunk.clear();
            progress(&format!("import {}: {} pushed, {duplicates} duplicates", a.queue, pushed));
        }
        if line.is_none() {
            break;
        }
    }
    if out.json {
        out.doc(&json!({ "queue": a.queue, "pushed": pushed, "duplicates": duplicates }));
    } else {
        say!("imported {pushed} messages into {} ({duplicates} duplicates skipped)", a.queue);
    }
    Ok(())
}

/// One export line as an item to push.
fn item(a: &ImportArgs, line: &str, n: usize) -> Result<PushItem, CliError> {
    let v: Value = serde_json::from_str(line).map_err(|e| CliError::Usage(format!("line {n} is not JSON: {e}")))?;
    let text = |k: &str| v.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
    let payload = v.get("payload").cloned().ok_or_else(|| CliError::Usage(format!("line {n} has no payload")))?;
    let mut item = PushItem::new(&a.queue, payload);
    if let Some(p) = a.partition.as_deref().or(text("partition")) {
        item = item.partition(p);
    }
    if let Some(t) = text("transactionId") {
        item = item.transaction_id(t);
    }
    Ok(item)
}
