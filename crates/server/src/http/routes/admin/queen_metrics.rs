//! The series of Queen's monitoring page, under Queen's names, beside
//! Regina's own in `/metrics/prometheus`, so dashboards and alerts written
//! for Queen keep working: `queen_raft_storage_full`, `queen_raft_index`,
//! `queen_raft_term`, `queen_raft_inflight`, `queen_dlq_depth_by_queue`,
//! `queen_queue_pop_lag_milliseconds`, `queen_uptime_seconds` and
//! `queen_process_resident_memory_bytes`. With several Raft groups the log
//! series carry a `group` label, as Queen's do.

use regina_node::Replica;

use super::metrics::{label, metric};

/// What the Queen series need beyond Regina's figures, per group.
pub struct QueenGroup {
    pub group: u16,
    pub committed: Option<u64>,
    pub applied: Option<u64>,
    pub term: u64,
    pub inflight: u64,
}

pub async fn groups(node: &Replica) -> Vec<QueenGroup> {
    let mut out = Vec::new();
    for g in node.all_groups() {
        let m = g.raft().metrics().borrow().clone();
        let committed = g.raft().with_raft_state(|st| st.committed).await.ok().flatten().map(|l| l.index);
        out.push(QueenGroup {
            group: g.group(),
            committed,
            applied: m.last_applied.map(|l| l.index),
            term: m.current_term,
            inflight: g.log().unfinished_appends(),
        });
    }
    out
}

pub struct QueenFigures<'a> {
    pub groups: &'a [QueenGroup],
    pub storage_full: bool,
    pub dlq_by_queue: Vec<(String, u64)>,
    pub pop_lag: Vec<(String, u64, u64)>,
    pub uptime: u64,
    pub resident_bytes: Option<u64>,
}

pub fn render(out: &mut String, f: &QueenFigures<'_>) {
    let several = f.groups.len() > 1;
    let group_label = |g: &QueenGroup, more: &str| match (several, more.is_empty()) {
        (true, true) => format!("{{group=\"{}\"}}", g.group),
        (true, false) => format!("{{group=\"{}\",{more}}}", g.group),
        (false, true) => String::new(),
        (false, false) => format!("{{{more}}}"),
    };
    let one = |v: u64| vec![(String::new(), v.to_string())];
    metric(
        out,
        "queen_raft_storage_full",
        "gauge",
        "1 while the node refuses writes that grow storage (disk past its high watermark, or no space).",
        &one(u64::from(f.storage_full)),
    );
    let mut index = Vec::new();
    for g in f.groups {
        if let Some(c) = g.committed {
            index.push((group_label(g, "kind=\"committed\""), c.to_string()));
        }
        if let Some(a) = g.applied {
            index.push((group_label(g, "kind=\"applied\""), a.to_string()));
        }
    }
    metric(out, "queen_raft_index", "gauge", "Raft log indexes: committed and applied.", &index);
    let per_group = |get: fn(&QueenGroup) -> u64| -> Vec<(String, String)> {
        f.groups.iter().map(|g| (group_label(g, ""), get(g).to_string())).collect()
    };
    metric(out, "queen_raft_term", "gauge", "Current Raft term.", &per_group(|g| g.term));
    metric(
        out,
        "queen_raft_inflight",
        "gauge",
        "Log appends handed to the WAL and not yet durable.",
        &per_group(|g| g.inflight),
    );
    let dlq: Vec<(String, String)> =
        f.dlq_by_queue.iter().map(|(q, n)| (format!("{{queue=\"{}\"}}", label(q)), n.to_string())).collect();
    metric(out, "queen_dlq_depth_by_queue", "gauge", "Dead-letter rows, per queue.", &dlq);
    let mut lag = Vec::new();
    for (q, max, avg) in &f.pop_lag {
        lag.push((format!("{{queue=\"{}\",stat=\"max\"}}", label(q)), max.to_string()));
        lag.push((format!("{{queue=\"{}\",stat=\"avg\"}}", label(q)), avg.to_string()));
    }
    metric(
        out,
        "queen_queue_pop_lag_milliseconds",
        "gauge",
        "Delivery time minus creation time of the messages this node's pops delivered in the last minute.",
        &lag,
    );
    metric(out, "queen_uptime_seconds", "gauge", "Seconds since this process started serving.", &one(f.uptime));
    if let Some(rss) = f.resident_bytes {
        metric(out, "queen_process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", &one(rss));
    }
}
