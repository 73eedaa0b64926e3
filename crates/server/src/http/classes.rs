//! The role class of every route: the one table authorization reads
//! (`auth::authorize`) and that a test walks against the router, so that a
//! route without a class cannot go unnoticed (and is refused with 500
//! `unclassified_route` if it ever is served).
//!
//! - `Read`: views and reads that change nothing (`read-only` and up).
//! - `Write`: everything that changes data or takes leases (`read-write`).
//! - `Produce`: the three producing routes, also open to `write-only`.
//! - `Admin`: deleting queues and consumer groups, cluster membership,
//!   resets (`admin` only).
//! - `Internal`: the routes between nodes, served only on the Raft address
//!   to callers with the cluster token; no token role opens them.

use std::collections::HashMap;
use std::sync::OnceLock;

use axum::http::Method;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Read,
    Write,
    Produce,
    Admin,
    Internal,
}

use Class::*;

/// (method, route path as registered, class).
pub const ROUTE_CLASSES: &[(&str, &str, Class)] = &[
    ("GET", "/health", Read),
    ("GET", "/metrics", Read),
    ("GET", "/metrics/prometheus", Read),
    ("GET", "/api/v1/openapi.json", Read),
    // Messages.
    ("POST", "/api/v1/push", Produce),
    ("GET", "/api/v1/pop", Write),
    ("GET", "/api/v1/pop/queue/{queue}", Write),
    ("GET", "/api/v1/pop/queue/{queue}/partition/{partition}", Write),
    ("POST", "/api/v1/ack", Write),
    ("POST", "/api/v1/ack/batch", Write),
    ("POST", "/api/v1/lease/{lease_id}/extend", Write),
    ("POST", "/api/v1/transaction", Write),
    ("POST", "/api/v1/configure", Write),
    ("GET", "/api/v1/dlq", Read),
    ("DELETE", "/api/v1/dlq", Write),
    ("POST", "/api/v1/dlq/{id}/replay", Write),
    ("DELETE", "/api/v1/messages/{partition_id}/{transaction_id}", Write),
    ("POST", "/api/v1/messages/{partition_id}/{transaction_id}/retry", Write),
    ("POST", "/api/v1/fetch", Read),
    ("POST", "/api/v1/fetch/offsets", Read),
    ("POST", "/api/v1/partitions/changed", Read),
    // KV, locks, jobs, timers.
    ("POST", "/api/v1/kv", Write),
    ("GET", "/api/v1/kv/{ns}/{*key}", Read),
    ("PUT", "/api/v1/kv/{ns}/{*key}", Write),
    ("DELETE", "/api/v1/kv/{ns}/{*key}", Write),
    ("POST", "/api/v1/locks", Write),
    ("POST", "/api/v1/jobs", Write),
    ("GET", "/api/v1/jobs/{queue}", Read),
    ("GET", "/api/v1/jobs/{queue}/stats", Read),
    ("POST", "/api/v1/timers", Produce),
    ("GET", "/api/v1/timers/{queue}", Read),
    ("GET", "/api/v1/timers/{queue}/{*timer_key}", Read),
    ("DELETE", "/api/v1/timers/{queue}/{*timer_key}", Write),
    // Ephemeral queues.
    ("POST", "/api/v1/ephemeral/push", Produce),
    ("GET", "/api/v1/ephemeral/pop", Write),
    ("POST", "/api/v1/ephemeral/ack", Write),
    ("POST", "/api/v1/ephemeral/configure", Write),
    ("GET", "/api/v1/ephemeral/queues", Read),
    ("GET", "/api/v1/ephemeral/queues/{queue}/depth", Read),
    ("POST", "/api/v1/ephemeral/reset", Admin),
    ("DELETE", "/api/v1/ephemeral/queue/{queue}", Admin),
    // Traces.
    ("POST", "/api/v1/traces", Write),
    ("GET", "/api/v1/traces/names", Read),
    ("GET", "/api/v1/traces/by-name/{name}", Read),
    ("GET", "/api/v1/traces/{partition_id}/{transaction_id}", Read),
    // Views.
    ("GET", "/api/v1/resources/overview", Read),
    ("GET", "/api/v1/resources/namespaces", Read),
    ("GET", "/api/v1/resources/tasks", Read),
    ("GET", "/api/v1/resources/queues", Read),
    ("GET", "/api/v1/resources/queues/{queue}", Read),
    ("GET", "/api/v1/resources/queues/{queue}/depth", Read),
    ("GET", "/api/v1/resources/partitions", Read),
    ("GET", "/api/v1/messages", Read),
    ("GET", "/api/v1/messages/{partition_id}/{transaction_id}", Read),
    ("GET", "/api/v1/consumer-groups", Read),
    ("GET", "/api/v1/consumer-groups/lagging", Read),
    ("GET", "/api/v1/consumer-groups/{group}", Read),
    ("GET", "/api/v1/status", Read),
    ("GET", "/api/v1/status/queues", Read),
    ("GET", "/api/v1/status/queues/{queue}", Read),
    ("GET", "/api/v1/status/analytics", Read),
    ("POST", "/api/v1/stats/refresh", Read),
    ("GET", "/api/v1/analytics/system-metrics", Read),
    ("GET", "/api/v1/analytics/worker-metrics", Read),
    // The dashboard: its page and files, its history, and the listings
    // it needs.
    ("GET", "/", Read),
    ("GET", "/dashboard/{*file}", Read),
    ("GET", "/api/v1/dashboard/history", Read),
    ("GET", "/api/v1/resources/kv/namespaces", Read),
    ("GET", "/api/v1/resources/kv/list", Read),
    ("GET", "/api/v1/resources/locks", Read),
    ("GET", "/api/v1/resources/timers", Read),
    ("GET", "/api/v1/resources/jobs", Read),
    // Consumer-group maintenance.
    ("POST", "/api/v1/consumer-groups/{group}/queues/{queue}/seek", Write),
    ("POST", "/api/v1/consumer-groups/{group}/queues/{queue}/partitions/{partition}/seek", Write),
    ("POST", "/api/v1/consumer-groups/{group}/subscription", Write),
    ("DELETE", "/api/v1/consumer-groups/{group}", Admin),
    ("DELETE", "/api/v1/consumer-groups/{group}/queues/{queue}", Admin),
    ("DELETE", "/api/v1/resources/queues/{queue}", Admin),
    // The cluster.
    ("GET", "/api/v1/cluster", Admin),
    ("POST", "/api/v1/cluster/members", Admin),
    ("DELETE", "/api/v1/cluster/members/{id}", Admin),
    ("POST", "/api/v1/cluster/snapshot", Admin),
    ("GET", "/api/v1/cluster/groups", Admin),
    ("PUT", "/api/v1/cluster/groups/{group}/leader", Admin),
    ("DELETE", "/api/v1/cluster/groups/{group}/leader", Admin),
    ("GET", "/api/v1/system/raft/membership", Admin),
    ("POST", "/api/v1/system/raft/membership/learners", Admin),
    ("POST", "/api/v1/system/raft/membership/promote", Admin),
    ("PUT", "/api/v1/system/raft/membership/voters", Admin),
    ("DELETE", "/api/v1/system/raft/membership/members/{id}", Admin),
    ("GET", "/api/v1/system/backup/{group}", Admin),
    ("GET", "/api/v1/system/backup/{group}/segments/{segment}", Admin),
    // Stream queries (the stream SDKs): registering and cycling write,
    // reading state reads.
    ("POST", "/streams/v1/queries", Write),
    ("POST", "/streams/v1/cycle", Write),
    ("POST", "/streams/v1/claim", Write),
    ("POST", "/streams/v1/state/get", Read),
    ("POST", "/streams/v1/state/partitions", Read),
    // Between nodes.
    ("POST", "/internal/raft/append", Internal),
    ("POST", "/internal/raft/vote", Internal),
    ("POST", "/internal/raft/snapshot", Internal),
    ("POST", "/internal/raft/snapshot/{snapshot_id}/segment/{segment}", Internal),
    ("POST", "/internal/raft/members", Internal),
    ("POST", "/internal/raft/campaign", Internal),
    ("GET", "/internal/state", Internal),
];

/// What the table says about a matched route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    Class(Class),
    /// The path is classified but not for this method: the router answers
    /// 405 for it.
    NoSuchMethod,
    /// The router serves a path the table does not know.
    Unclassified,
}

fn table() -> &'static HashMap<&'static str, Vec<(&'static str, Class)>> {
    static TABLE: OnceLock<HashMap<&'static str, Vec<(&'static str, Class)>>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t: HashMap<&str, Vec<(&str, Class)>> = HashMap::new();
        for (method, path, class) in ROUTE_CLASSES {
            t.entry(path).or_default().push((method, *class));
        }
        t
    })
}

/// The class of `method` on the route registered as `path`.
pub fn lookup(method: &Method, path: &str) -> Lookup {
    let Some(methods) = table().get(path) else { return Lookup::Unclassified };
    // axum answers HEAD with the GET handler.
    let method = if *method == Method::HEAD { "GET" } else { method.as_str() };
    match methods.iter().find(|(m, _)| *m == method) {
        Some((_, class)) => Lookup::Class(*class),
        None => Lookup::NoSuchMethod,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_method_and_path_once() {
        let mut seen = std::collections::HashSet::new();
        for (method, path, _) in ROUTE_CLASSES {
            assert!(seen.insert((method, path)), "{method} {path} is listed twice");
            assert!(
                path.starts_with("/internal/") == (lookup(&method.parse().unwrap(), path) == Lookup::Class(Internal))
            );
        }
        assert_eq!(lookup(&Method::HEAD, "/api/v1/dlq"), Lookup::Class(Read));
        assert_eq!(lookup(&Method::PATCH, "/api/v1/dlq"), Lookup::NoSuchMethod);
        assert_eq!(lookup(&Method::GET, "/nowhere"), Lookup::Unclassified);
    }
}
