//! Administration and observability reads: queues, partitions, namespaces,
//! tasks, messages, consumer groups, status and analytics, metrics.

use std::sync::Arc;

use axum::Router;

use crate::node::Node;

/// The read-only administration routes.
pub fn routes() -> Router<Arc<Node>> {
    Router::new()
}
