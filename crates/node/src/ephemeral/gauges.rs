//! The gauges of the two status reads, out of the store's own memory. Their
//! columns are this node's to choose and may grow; clients read them as
//! untyped documents.

use serde_json::{json, Value};

use super::queue::Queue;

impl Queue {
    /// The gauges of `GET /api/v1/ephemeral/queues`.
    pub fn summary(&self, name: &str) -> Value {
        json!({
            "queue": name,
            "declared": self.declared,
            "depth": self.messages,
            "bytes": self.bytes,
            "partitions": self.partitions.len(),
            "groups": self.groups.len(),
            "leased": self.groups.keys().map(|g| self.ready_and_leased(g).1).sum::<usize>(),
        })
    }

    fn ready_and_leased(&self, group: &str) -> (usize, usize) {
        self.partitions.values().fold((0, 0), |(r, l), p| (r + p.ready(group), l + p.leased(group)))
    }

    /// The gauges of `GET /api/v1/ephemeral/queues/{queue}/depth`.
    pub fn depth(&self, name: &str) -> Value {
        let partitions: Vec<Value> = self
            .partitions
            .iter()
            .map(|(pn, p)| json!({ "partition": pn, "depth": p.len(), "bytes": p.bytes() }))
            .collect();
        let groups: Vec<Value> = self
            .groups
            .keys()
            .map(|g| {
                let (ready, leased) = self.ready_and_leased(g);
                json!({ "group": g, "pending": ready, "leased": leased })
            })
            .collect();
        let mut v = self.summary(name);
        v["options"] = self.options.to_json();
        v["partitions"] = Value::Array(partitions);
        v["groups"] = Value::Array(groups);
        v["dropped"] = json!({ "bounds": self.dropped.bounds, "ttl": self.dropped.ttl, "retry": self.dropped.retry });
        v
    }
}
