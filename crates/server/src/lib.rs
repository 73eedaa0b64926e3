//! The Regina server: the doors, the HTTP layer and the `regina` binary,
//! around the node core (`regina_node`).
//!
//! Floor plan, from the outside in:
//! - `main.rs`, [`cli`], [`config`]: the binary; flags and environment
//!   become [`NodeOptions`] (the node core) and [`DoorOptions`] (who may
//!   come in).
//! - [`doors`]: the two listeners (client port, Raft address behind the
//!   cluster token), bearer tokens and roles ([`doors::auth`]), per-caller
//!   rates ([`doors::throttle`]), TLS ([`doors::tls`]).
//! - [`http`]: the only layer that knows requests, headers and HTTP
//!   errors: dispatch to a Raft group, forwarding to its leader, the routes
//!   ([`http`]'s `routes/`) and the helpers they share.
//! - `regina_node` (its own crate, below all of this): the Raft groups'
//!   replicas, the proposer, the clock and ids, the time-driven entries,
//!   membership, leadership balancing, tenants, sealing and the ephemeral
//!   store. It never imports anything from here.
//!
//! A write flows: a door admits the request → [`http::dispatch`] picks the
//! tenant's Raft group → `http::forward` relays it to the group's leader
//! if this node is not → the route validates the input and builds a
//! `Command` → `Replica::propose` → the proposer batches and stamps it →
//! openraft appends it to the WAL (group commit, fdatasync) and commits it
//! on a majority → the state machine applies it → the outcome comes back to
//! the route, which renders it (reading message bodies from the body files).
//!
//! [`serve`] takes a bound listener and a shutdown signal, so tests start a
//! node on port 0.

pub mod cli;
pub mod config;
pub mod doors;
pub mod http;

use std::future::Future;
use std::path::Path;
use std::sync::Arc;

use tokio::net::TcpListener;

pub use regina_node::NodeOptions;
use regina_node::{raft_groups, Replica};

/// Who may come in, and how: what the doors need beside the node.
#[derive(Debug, Clone, Default)]
pub struct DoorOptions {
    /// Whether `x-queen-tenant` selects a tenant (off: every request acts
    /// for the default tenant).
    pub tenancy: bool,
    /// Bearer-token checks; `None`: authentication is off.
    pub auth: Option<Arc<doors::auth::Auth>>,
    /// TLS on both doors.
    pub tls: Option<Arc<doors::tls::Tls>>,
    /// Requests per second each caller may send (0: no limit); see
    /// [`doors::throttle`].
    pub rate_limit: u32,
    /// Requests a caller may send at once beyond its rate (default: one
    /// second's worth).
    pub rate_burst: Option<u32>,
}

/// Opens the node on `data_dir` and serves HTTP on `listener` until
/// `shutdown` resolves, then stops the Raft group cleanly.
pub async fn serve(
    listener: TcpListener,
    data_dir: &Path,
    options: NodeOptions,
    doors: DoorOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    serve_with_raft(listener, None, data_dir, options, doors, shutdown).await
}

/// [`serve`], with a second listener on the node's Raft address when it
/// differs from the HTTP one. Peers send Raft messages and forwarded client
/// requests there, with the cluster token; the HTTP listener never serves
/// an internal route (see [`doors`]).
pub async fn serve_with_raft(
    listener: TcpListener,
    raft_listener: Option<TcpListener>,
    data_dir: &Path,
    options: NodeOptions,
    doors: DoorOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    if !options.fsync {
        tracing::warn!("fsync is off: answered writes may be lost if the machine crashes (for measurements only)");
    }
    let nodes = raft_groups::open(data_dir, addr.to_string(), &options).await?;
    serve_in_small_pages();
    tracing::info!("regina data in {}", data_dir.display());
    serve_nodes(listener, raft_listener, nodes, &options, doors, shutdown).await
}

/// From here on the heap grows in 4 KiB pages, not 2 MiB transparent huge
/// pages: the first touch of a huge page zeroes all 2 MiB inside whichever
/// request touched it, and under load those faults bunched into stalls of
/// tens of milliseconds (e2e p99 at 50,000 msg/s: 57 -> 17-22 ms,
/// docs/benchmarks.md, item 22). Not before: recovery, which answers no
/// request, decodes a snapshot into gigabytes of fresh memory, and in
/// 4 KiB pages a quarter of that decoding was the kernel's page faults
/// (item 29). Pages already huge stay so.
fn serve_in_small_pages() {
    if let Err(e) = rustix::thread::disable_transparent_huge_pages(true) {
        tracing::warn!(error = %e, "transparent huge pages stay on for this process");
    }
}

/// Serves the Raft groups `nodes` (as `raft_groups::open` opened them) on
/// `listener` until `shutdown` resolves, then stops them cleanly. Tests
/// that need a handle on the groups open them first and serve them here.
pub async fn serve_nodes(
    listener: TcpListener,
    raft_listener: Option<TcpListener>,
    nodes: Vec<Arc<Replica>>,
    options: &NodeOptions,
    doors: DoorOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    for node in &nodes {
        node.spawn_background();
        node.spawn_timer_driver();
    }
    regina_node::balance::spawn(nodes.clone());
    let node = nodes[0].clone();
    let scheme = if doors.tls.is_some() { "https" } else { "http" };
    tracing::info!("regina serving on {scheme}://{addr} ({} Raft groups)", nodes.len());
    let auth = doors.auth.clone();
    let routers = Arc::new(nodes.iter().map(|n| http::router(n.clone(), auth.is_some())).collect::<Vec<_>>());
    if auth.is_some() {
        tracing::info!("bearer tokens are required (JWT_ENABLED)");
    }
    let edge = Arc::new(doors::Edge {
        routers,
        tenancy: doors.tenancy,
        cluster_token: options.cluster_token.clone(),
        auth,
        throttle: doors::throttle::Throttle::new(doors.rate_limit, doors.rate_burst),
        placement: Arc::new(raft_groups::Placement {
            groups: options.raft_groups,
            pins: options.tenant_groups.clone(),
        }),
    });
    let client_edge = edge.clone();
    let client = tower::service_fn(move |req: axum::extract::Request| {
        let edge = client_edge.clone();
        async move { Ok::<_, std::convert::Infallible>(edge.client(req).await) }
    });
    let app = tower::ServiceBuilder::new().map_request(collapse_leading_slashes).service(client);
    if let Some(raft_listener) = raft_listener {
        serve_internal_door(raft_listener, edge, node.clone(), doors.tls.clone());
    }
    let stopping = nodes.clone();
    let signal = async move {
        shutdown.await;
        // Parked long polls answer now, so the graceful stop does not wait
        // out their timeouts.
        stopping.iter().for_each(|n| n.begin_stop());
    };
    let served = match &doors.tls {
        Some(tls) => {
            axum::serve(tls.listener(listener), tower::make::Shared::new(app)).with_graceful_shutdown(signal).await
        }
        None => axum::serve(listener, tower::make::Shared::new(app)).with_graceful_shutdown(signal).await,
    }
    .map_err(|e| e.to_string());
    for n in &nodes {
        n.begin_stop();
        n.shutdown().await;
    }
    served
}

/// Serves the Raft address (the door between nodes) until the node stops.
fn serve_internal_door(
    raft_listener: TcpListener,
    edge: Arc<doors::Edge>,
    node: Arc<Replica>,
    tls: Option<Arc<doors::tls::Tls>>,
) {
    if edge.cluster_token.is_none() {
        tracing::warn!(
            "INSECURE: the Raft address {} serves without a cluster token (--insecure-cluster): \
             anyone who reaches it can read the whole state and vote",
            raft_listener.local_addr().map(|a| a.to_string()).unwrap_or_default()
        );
    }
    let internal = tower::service_fn(move |req: axum::extract::Request| {
        let edge = edge.clone();
        async move { Ok::<_, std::convert::Infallible>(edge.internal(req).await) }
    });
    let raft_app = tower::ServiceBuilder::new().map_request(collapse_leading_slashes).service(internal);
    let stop = node;
    tokio::spawn(async move {
        let stopped = async move { stop.stopped().await };
        let served = match tls {
            Some(tls) => {
                axum::serve(tls.listener(raft_listener), tower::make::Shared::new(raft_app))
                    .with_graceful_shutdown(stopped)
                    .await
            }
            None => {
                axum::serve(raft_listener, tower::make::Shared::new(raft_app)).with_graceful_shutdown(stopped).await
            }
        };
        if let Err(e) = served {
            tracing::error!("the Raft listener stopped: {e}");
        }
    });
}

/// A client given a base URL with a trailing slash sends `//api/v1/...`.
fn collapse_leading_slashes(mut req: axum::extract::Request) -> axum::extract::Request {
    let path = req.uri().path();
    if path.starts_with("//") {
        let trimmed = format!("/{}", path.trim_start_matches('/'));
        let pq = match req.uri().query() {
            Some(q) => format!("{trimmed}?{q}"),
            None => trimmed,
        };
        if let Ok(uri) = pq.parse() {
            *req.uri_mut() = uri;
        }
    }
    req
}
