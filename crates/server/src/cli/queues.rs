//! `regina queues`, `regina queue describe QUEUE`, `regina groups`,
//! `regina status`: the broker's overview reads.

use regina_client::Client;
use serde_json::json;

use super::{cell, table, CliError, Out};

#[derive(Debug, clap::Subcommand)]
pub enum QueueCommand {
    /// A queue's configuration, partitions and consumer groups.
    Describe {
        /// The queue.
        queue: String,
    },
}

pub(crate) async fn list(client: &Client, out: &Out) -> Result<(), CliError> {
    let answer = client.queues().await?;
    if out.json {
        out.doc(&answer);
        return Ok(());
    }
    let rows: Vec<Vec<String>> = answer["queues"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|q| {
            let m = &q["messages"];
            vec![
                cell(&q["name"]),
                cell(&q["partitions"]),
                cell(&q["depth"]),
                cell(&m["pending"]),
                cell(&m["processing"]),
                cell(&m["completed"]),
                cell(&m["deadLetter"]),
                cell(&q["consumerGroups"]),
            ]
        })
        .collect();
    table(&["queue", "partitions", "depth", "pending", "processing", "completed", "dlq", "groups"], &rows);
    Ok(())
}

pub(crate) async fn queue(client: &Client, out: &Out, command: QueueCommand) -> Result<(), CliError> {
    let QueueCommand::Describe { queue } = command;
    let q = client.queue_detail(&queue).await?;
    if out.json {
        out.doc(&q);
        return Ok(());
    }
    let t = &q["totals"];
    say!("queue {} (id {}), created {}", cell(&q["name"]), cell(&q["id"]), cell(&q["createdAt"]));
    say!(
        "depth {}  pending {}  processing {}  completed {}  dlq {}",
        cell(&t["depth"]),
        cell(&t["pending"]),
        cell(&t["processing"]),
        cell(&t["completed"]),
        cell(&t["deadLetter"])
    );
    say!();
    let config: Vec<Vec<String>> =
        q["config"].as_object().into_iter().flatten().map(|(k, v)| vec![k.clone(), cell(v)]).collect();
    table(&["option", "value"], &config);
    say!();
    let parts: Vec<Vec<String>> = q["partitions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            vec![
                cell(&p["name"]),
                cell(&p["id"]),
                cell(&p["depth"]),
                cell(&p["offsets"]["logStart"]),
                cell(&p["offsets"]["highWatermark"]),
                cell(&p["lastWriteAt"]),
            ]
        })
        .collect();
    table(&["partition", "id", "depth", "logStart", "highWatermark", "lastWriteAt"], &parts);
    say!();
    let groups: Vec<Vec<String>> = q["consumerGroups"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|g| vec![cell(&g["name"]), cell(&g["registeredAt"])])
        .collect();
    table(&["group", "registeredAt"], &groups);
    Ok(())
}

pub(crate) async fn groups(client: &Client, out: &Out) -> Result<(), CliError> {
    let answer = client.consumer_groups().await?;
    if out.json {
        out.doc(&answer);
        return Ok(());
    }
    let rows: Vec<Vec<String>> = answer
        .as_array()
        .into_iter()
        .flatten()
        .map(|g| {
            vec![
                cell(&g["name"]),
                cell(&g["queueName"]),
                cell(&g["state"]),
                cell(&g["members"]),
                cell(&g["activeLeases"]),
                cell(&g["totalLag"]),
                cell(&g["partitionsWithLag"]),
                cell(&g["maxTimeLag"]),
            ]
        })
        .collect();
    table(&["group", "queue", "state", "members", "leases", "lag", "lagging", "maxTimeLag"], &rows);
    Ok(())
}

pub(crate) async fn status(client: &Client, out: &Out) -> Result<(), CliError> {
    let health = client.health().await?;
    let status = client.status().await?;
    if out.json {
        out.doc(&json!({ "health": health, "status": status }));
        return Ok(());
    }
    let h = &health;
    say!(
        "node {} ({}) {}: leader {} term {} commit {} applied {}",
        cell(&h["nodeId"]),
        cell(&h["version"]),
        cell(&h["status"]),
        cell(&h["leader"]),
        cell(&h["term"]),
        cell(&h["commitIndex"]),
        cell(&h["appliedIndex"])
    );
    let used = h["disk"]["usedPct"].as_f64().map_or("-".to_string(), |p| format!("{p:.1}%"));
    say!("disk used {used}, storage full {}", cell(&h["storageFull"]));
    let s = &status;
    let c = &s["messages"]["counts"];
    let rows = vec![
        vec!["queues".into(), cell(&s["queues"]["total"])],
        vec!["partitions".into(), cell(&s["queues"]["partitions"])],
        vec!["messages".into(), cell(&c["total"])],
        vec!["pending".into(), cell(&c["pending"])],
        vec!["processing".into(), cell(&c["processing"])],
        vec!["completed".into(), cell(&c["completed"])],
        vec!["dead letters".into(), cell(&s["deadLetterQueue"]["total"])],
        vec!["active leases".into(), cell(&s["leases"]["active"])],
    ];
    table(&["", "count"], &rows);
    Ok(())
}
