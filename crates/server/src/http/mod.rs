//! The HTTP layer: the only part of the server that knows requests,
//! headers and HTTP errors.
//!
//! - [`routes`]: one module per family of routes (push, pop, ack, KV, jobs,
//!   streams, the admin reads, the Raft routes between nodes, ...), each
//!   turning a request into a `Command` for its Raft group's replica and
//!   the outcome into an answer.
//! - Helpers the routes share: [`dispatch`] (which group's router a request
//!   goes to, by tenant or `/internal/g/{g}` prefix), [`tenant_header`],
//!   [`forward`] (a follower relays to its group's leader), [`input`]
//!   (bodies, queries, the requests no route can read), [`plain_json`]
//!   (the one-pass JSON reader) with the shapes it reads, [`plain_push`],
//!   [`plain_ack`] and [`plain_step`] (the usual push, ack and step bodies), [`render`],
//!   [`frames`] (the binary `QPB1`/`QTB1`/`QPF1` forms), [`producer`] (the
//!   caller's identity stamped into payloads), [`error`] (`ApiError`), the
//!   route class table ([`classes`]), the Raft group views
//!   ([`raft_views`]) and the fuzz targets of every decoder
//!   ([`fuzz_targets`]).

pub mod classes;
pub mod codes;
pub mod dispatch;
mod error;
pub mod forward;
mod frames;
pub mod fuzz_targets;
mod input;
mod json_out;
mod plain_ack;
mod plain_json;
mod plain_push;
mod plain_step;
pub(crate) mod pop_lag;
pub mod producer;
mod raft_views;
mod render;
pub(crate) mod routes;
pub mod tenant_header;

use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::http::{Method, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, MethodRouter};
use axum::Router;
use serde_json::json;

pub use error::ApiError;
use regina_types::limits::REQUEST_BODY_BYTES_MAX;
pub use routes::dashboard::is_asset as is_dashboard_asset;

use regina_node::Replica;
use routes::{
    ack, admin, backup, cluster, consumer_groups, dashboard, dlq, ephemeral, health, jobs, kv, locks, pop, push,
    queues, raft, raft_membership, streams, timers, traces, transaction,
};

/// A router under construction that remembers the path of every route it
/// is given, so that a test can walk them all against the class table
/// ([`route_paths`]).
pub struct Routes {
    router: Router<Arc<Replica>>,
    paths: Vec<String>,
}

impl Default for Routes {
    fn default() -> Self {
        Routes { router: Router::new(), paths: Vec::new() }
    }
}

impl Routes {
    pub fn route(mut self, path: &str, method_router: MethodRouter<Arc<Replica>>) -> Self {
        self.router = self.router.route(path, method_router);
        self.paths.push(path.to_string());
        self
    }

    pub fn merge(mut self, other: Routes) -> Self {
        self.router = self.router.merge(other.router);
        self.paths.extend(other.paths);
        self
    }

    /// Applies `f` (a layer) to every route added so far.
    pub fn map(mut self, f: impl FnOnce(Router<Arc<Replica>>) -> Router<Arc<Replica>>) -> Self {
        self.router = f(self.router);
        self
    }
}

/// Every route path the node's router serves, as registered.
pub fn route_paths() -> Vec<String> {
    let mut paths = all_routes(None).paths;
    paths.sort();
    paths.dedup();
    paths
}

/// A Raft group's router. With `auth`, every route runs behind
/// [`crate::doors::auth::authorize`]. Starts the group's dashboard history
/// sampler (it ends when the node stops).
pub fn router(node: Arc<Replica>, auth: bool) -> Router {
    let history = dashboard::history::History::start(node.clone());
    let router = all_routes(Some(history))
        .router
        .fallback(no_such_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(forward::ToLeaderLayer::new(node.clone()));
    // Outermost, so that a refused request is not forwarded first. (A
    // request no route could read was refused before routing:
    // `input::unreadable`, called by `dispatch`.)
    let router = if auth { router.layer(axum::middleware::from_fn(crate::doors::auth::authorize)) } else { router };
    router.with_state(node)
}

/// Every route; `history` (the dashboard's sampler) reaches its one route
/// only, so no other request carries it.
fn all_routes(history: Option<Arc<dashboard::history::History>>) -> Routes {
    Routes::default()
        .route("/health", get(health::health))
        .route("/api/v1/openapi.json", get(openapi))
        .route("/api/v1/push", post(push::push))
        .route("/api/v1/pop", get(pop::pop_discovery))
        .route("/api/v1/pop/queue/{queue}", get(pop::pop_queue))
        .route("/api/v1/pop/queue/{queue}/partition/{partition}", get(pop::pop_partition))
        .route("/api/v1/ack", post(ack::ack_one))
        .route("/api/v1/ack/batch", post(ack::ack_batch))
        .route("/api/v1/lease/{lease_id}/extend", post(ack::extend_lease))
        .route("/api/v1/transaction", post(transaction::transaction))
        .route("/api/v1/kv", post(kv::batch))
        .route("/api/v1/kv/{ns}/{*key}", get(kv::get_one).put(kv::put_one).delete(kv::delete_one))
        .route("/api/v1/locks", post(locks::locks))
        .route("/api/v1/jobs", post(jobs::batch))
        .route("/api/v1/jobs/{queue}", get(jobs::scan))
        .route("/api/v1/jobs/{queue}/stats", get(jobs::stats))
        .route("/api/v1/timers", post(timers::post))
        .route("/api/v1/timers/{queue}", get(timers::list))
        .route("/api/v1/timers/{queue}/{*timer_key}", get(timers::peek).delete(timers::cancel))
        .route("/api/v1/dlq", get(dlq::read).delete(dlq::purge))
        .route("/api/v1/dlq/{id}/replay", post(dlq::replay))
        .route("/api/v1/configure", post(queues::configure))
        .route("/api/v1/resources/queues/{queue}", delete(queues::delete_queue))
        .route("/api/v1/consumer-groups/{group}", delete(consumer_groups::delete_group))
        .route("/api/v1/consumer-groups/{group}/queues/{queue}", delete(consumer_groups::delete_group_on_queue))
        .route("/api/v1/consumer-groups/{group}/queues/{queue}/seek", post(consumer_groups::seek))
        .route(
            "/api/v1/consumer-groups/{group}/queues/{queue}/partitions/{partition}/seek",
            post(consumer_groups::seek_partition),
        )
        .route("/api/v1/consumer-groups/{group}/subscription", post(consumer_groups::set_subscription))
        .route("/api/v1/messages/{partition_id}/{transaction_id}", delete(consumer_groups::delete_dead_letter))
        .route("/api/v1/messages/{partition_id}/{transaction_id}/retry", post(consumer_groups::retry_dead_letter))
        .route("/api/v1/ephemeral/configure", post(ephemeral::configure))
        .route("/api/v1/ephemeral/reset", post(ephemeral::reset))
        .route("/api/v1/ephemeral/queue/{queue}", delete(ephemeral::delete_queue))
        .route("/api/v1/ephemeral/push", post(ephemeral::push))
        .route("/api/v1/ephemeral/pop", get(ephemeral::pop))
        .route("/api/v1/ephemeral/ack", post(ephemeral::ack))
        .route("/api/v1/ephemeral/queues", get(ephemeral::queues))
        .route("/api/v1/ephemeral/queues/{queue}/depth", get(ephemeral::depth))
        .route("/api/v1/traces", post(traces::record))
        .route("/api/v1/traces/names", get(traces::names))
        .route("/api/v1/traces/by-name/{name}", get(traces::by_name))
        .route("/api/v1/traces/{partition_id}/{transaction_id}", get(traces::for_message))
        .merge(streams::routes())
        .merge(admin::routes())
        .merge(cluster::routes())
        .merge(backup::routes())
        .merge(raft_membership::routes())
        .merge(dashboard::routes(history))
        .map(|r| r.layer(DefaultBodyLimit::max(REQUEST_BODY_BYTES_MAX)))
        // Raft routes keep their own, larger body limit.
        .merge(raft::routes())
}

/// The OpenAPI 3.1 description of every client route, as checked in
/// (`crates/server/openapi.json`, written by `scripts/openapi-gen.py`; a
/// test holds it to the class table).
pub const OPENAPI_JSON: &str = include_str!("../../openapi.json");

async fn openapi() -> Response {
    ([(axum::http::header::CONTENT_TYPE, "application/json")], OPENAPI_JSON).into_response()
}

async fn no_such_route(uri: Uri) -> Response {
    let body = json!({ "code": codes::NO_SUCH_ROUTE.name, "error": "not found", "path": uri.path() });
    (codes::NO_SUCH_ROUTE.status, axum::Json(body)).into_response()
}

async fn method_not_allowed(method: Method, uri: Uri) -> Response {
    let body = json!({
        "code": codes::METHOD_NOT_ALLOWED.name,
        "error": format!("{method} is not allowed on {}", uri.path()),
    });
    (codes::METHOD_NOT_ALLOWED.status, axum::Json(body)).into_response()
}
