//! `regina export QUEUE [--partition P]` and `regina import QUEUE`: a
//! queue's kept messages as ndjson, one message a line:
//! `{"partition", "transactionId", "payload", "offset", "createdAt"}`.
//!
//! Export reads the message browser page by page and writes the lines in
//! (partition, offset) order. Import pushes the lines in chunks, keeping
//! each transaction id, so importing the same file again is deduplicated
//! by the broker (inside the queue's dedup window).

use std::io::{BufRead, Write};

use regina_client::{Client, MessageQuery, PushItem, StoredMessage, MESSAGES_PAGE_MAX};
use serde_json::{json, Value};

use super::push::PUSH_CHUNK;
use super::{progress, CliError, Out};

/// Deepest page start the message browser serves: a larger queue is
/// exported a partition at a time.
const BROWSE_OFFSET_MAX: u64 = 100_000;

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
    client.queue_detail(&a.queue).await?;
    let mut all: Vec<StoredMessage> = Vec::new();
    loop {
        if all.len() as u64 > BROWSE_OFFSET_MAX {
            return Err(CliError::Refused(format!(
                "{} holds more than {BROWSE_OFFSET_MAX} messages: export it a partition at a time (--partition)",
                a.queue
            )));
        }
        let query = MessageQuery {
            queue: Some(a.queue.clone()),
            partition: a.partition.clone(),
            status: None,
            offset: all.len() as u64,
            limit: MESSAGES_PAGE_MAX,
        };
        let page = client.messages(&query).await?;
        let n = page.len();
        all.extend(page);
        if n > 0 {
            progress(&format!("export {}: read {}", a.queue, all.len()));
        }
        if n < MESSAGES_PAGE_MAX as usize {
            break;
        }
    }
    // Pages come newest first; a line's place is its partition's order.
    all.sort_by(|x, y| (&x.partition, x.offset).cmp(&(&y.partition, y.offset)));
    all.dedup_by(|x, y| x.partition == y.partition && x.offset == y.offset);
    let stdout = std::io::stdout();
    let mut w = std::io::BufWriter::new(stdout.lock());
    for m in &all {
        let line = json!({
            "partition": m.partition,
            "transactionId": m.transaction_id,
            "payload": m.payload,
            "offset": m.offset,
            "createdAt": m.created_at,
        });
        writeln!(w, "{line}").map_err(|e| CliError::Usage(format!("stdout: {e}")))?;
    }
    w.flush().map_err(|e| CliError::Usage(format!("stdout: {e}")))?;
    progress(&format!("export {}: {} messages written", a.queue, all.len()));
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
