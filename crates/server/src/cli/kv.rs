//! `regina kv get|put|scan|delete`: key/value rows.

use regina_client::{Client, Lifetime, Row};
use serde_json::{json, Value};

use super::{cell, short, table, CliError, Out};

#[derive(Debug, clap::Subcommand)]
pub enum KvCommand {
    /// One row's value (exit 1 when there is none).
    Get { namespace: String, key: String },
    /// Write a row. VALUE is JSON; text that is not JSON is stored as a string.
    Put {
        namespace: String,
        key: String,
        value: String,
        /// Expire after this many seconds (default: never).
        #[arg(long, conflicts_with = "namespace_default")]
        ttl: Option<u64>,
        /// Take the namespace's configured default lifetime.
        #[arg(long)]
        namespace_default: bool,
        /// Write only when the key is absent (exit 1 when it exists).
        #[arg(long)]
        if_absent: bool,
    },
    /// Rows in key order, optionally under a prefix.
    Scan {
        namespace: String,
        /// Only keys starting with this.
        #[arg(long)]
        prefix: Option<String>,
        /// At most this many rows (default: all).
        #[arg(long)]
        limit: Option<u32>,
    },
    /// Delete a row.
    Delete { namespace: String, key: String },
}

pub(crate) async fn run(client: &Client, out: &Out, command: KvCommand) -> Result<(), CliError> {
    let kv = client.kv();
    match command {
        KvCommand::Get { namespace, key } => {
            let row = kv.get(&namespace, &key).await?;
            let Some(row) = row else {
                return Err(CliError::Refused(format!("no row {namespace}/{key}")));
            };
            if out.json {
                out.doc(&row_json(&row));
            } else {
                say!("{}", serde_json::to_string_pretty(&row.value).unwrap_or_default());
            }
            Ok(())
        }
        KvCommand::Put { namespace, key, value, ttl, namespace_default, if_absent } => {
            let value: Value = serde_json::from_str(&value).unwrap_or(Value::String(value));
            let lifetime = match (ttl, namespace_default) {
                (Some(s), _) => Lifetime::seconds(s),
                (None, true) => Lifetime::NAMESPACE_DEFAULT,
                (None, false) => Lifetime::FOREVER,
            };
            let w = if if_absent {
                kv.put_if_absent(&namespace, &key, value, lifetime).await?
            } else {
                kv.put(&namespace, &key, value, lifetime).await?
            };
            print_write(out, &w, &format!("{namespace}/{key}"))
        }
        KvCommand::Scan { namespace, prefix, limit } => {
            let mut rows = Vec::new();
            let mut after: Option<String> = None;
            loop {
                let want = limit.map_or(1_000, |l| (l as usize - rows.len()).min(1_000) as u32);
                let page = match &prefix {
                    Some(p) => kv.get_prefix(&namespace, p, after.as_deref(), want).await?,
                    None => kv.scan(&namespace, after.as_deref(), want).await?,
                };
                rows.extend(page.rows);
                after = page.next_after;
                if after.is_none() || limit.is_some_and(|l| rows.len() >= l as usize) {
                    break;
                }
            }
            if out.json {
                out.doc(&Value::Array(rows.iter().map(row_json).collect()));
                return Ok(());
            }
            let cells: Vec<Vec<String>> = rows
                .iter()
                .map(|r| {
                    vec![
                        r.key.clone(),
                        r.version.to_string(),
                        r.expires_at.clone().unwrap_or_else(|| "-".into()),
                        short(&r.value),
                    ]
                })
                .collect();
            table(&["key", "version", "expiresAt", "value"], &cells);
            Ok(())
        }
        KvCommand::Delete { namespace, key } => {
            let w = kv.delete(&namespace, &key).await?;
            if out.json {
                out.doc(&json!({ "applied": w.applied, "deleted": w.applied }));
            } else if w.applied {
                say!("deleted {namespace}/{key}");
            } else {
                say!("{namespace}/{key} was not there");
            }
            Ok(())
        }
    }
}

fn print_write(out: &Out, w: &regina_client::Write, what: &str) -> Result<(), CliError> {
    if out.json {
        out.doc(&json!({ "applied": w.applied, "version": w.version, "reason": w.reason, "value": w.value }));
    } else if w.applied {
        say!("{what}: version {}", w.version);
    }
    if !w.applied {
        let reason = w.reason.as_deref().unwrap_or("refused");
        return Err(CliError::Refused(format!("{what}: not applied ({reason}), version {}", cell(&json!(w.version)))));
    }
    Ok(())
}

fn row_json(r: &Row) -> Value {
    json!({
        "key": r.key,
        "value": r.value,
        "version": r.version,
        "expiresAt": r.expires_at,
        "createdAt": r.created_at,
        "updatedAt": r.updated_at,
    })
}
