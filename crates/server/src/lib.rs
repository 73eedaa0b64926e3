//! The Regina node: configuration, the Raft-backed node, and the HTTP routes.
//!
//! A write flows: HTTP handler validates and builds a `Command` → [`node`]
//! stamps the leader's time and proposes it to openraft → the log store
//! group-commits it to the WAL (fdatasync) → openraft commits and applies it
//! to the pure state machine → the outcome comes back to the handler, which
//! renders it (reading message bodies from the body files).
//!
//! [`serve`] takes a bound listener and a shutdown signal, so tests start a
//! node on port 0.

pub mod auth;
pub mod balance;
pub mod cli;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod edge;
pub mod ephemeral;
pub mod groups;
pub mod http;
pub mod ids;
pub mod node;
pub mod producer;
pub mod proposer;
pub mod sealing;
pub mod tenant;
pub mod throttle;
pub mod tls;

use std::future::Future;
use std::path::Path;
use std::sync::Arc;

use tokio::net::TcpListener;

use crate::node::NodeOptions;

/// Opens the node on `data_dir` and serves HTTP on `listener` until
/// `shutdown` resolves, then stops the Raft group cleanly.
pub async fn serve(
    listener: TcpListener,
    data_dir: &Path,
    options: NodeOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    serve_with_raft(listener, None, data_dir, options, shutdown).await
}

/// [`serve`], with a second listener on the node's Raft address when it
/// differs from the HTTP one. Peers send Raft messages and forwarded client
/// requests there, with the cluster token; the HTTP listener never serves
/// an internal route (see [`edge`]).
pub async fn serve_with_raft(
    listener: TcpListener,
    raft_listener: Option<TcpListener>,
    data_dir: &Path,
    options: NodeOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    if !options.fsync {
        tracing::warn!("fsync is off: answered writes may be lost if the machine crashes (for measurements only)");
    }
    let nodes = groups::open(data_dir, addr.to_string(), &options).await?;
    tracing::info!("regina data in {}", data_dir.display());
    serve_nodes(listener, raft_listener, nodes, options, shutdown).await
}

/// Serves the Raft groups `nodes` (as [`groups::open`] opened them) on
/// `listener` until `shutdown` resolves, then stops them cleanly. Tests
/// that need a handle on the groups open them first and serve them here.
pub async fn serve_nodes(
    listener: TcpListener,
    raft_listener: Option<TcpListener>,
    nodes: Vec<Arc<node::Node>>,
    options: NodeOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    for node in &nodes {
        node.spawn_background();
        node.spawn_timer_driver();
    }
    balance::spawn(nodes.clone());
    let node = nodes[0].clone();
    let scheme = if options.tls.is_some() { "https" } else { "http" };
    tracing::info!("regina serving on {scheme}://{addr} ({} Raft groups)", nodes.len());
    let auth = options.auth.clone();
    let routers = Arc::new(nodes.iter().map(|n| http::router(n.clone(), auth.is_some())).collect::<Vec<_>>());
    if auth.is_some() {
        tracing::info!("bearer tokens are required (JWT_ENABLED)");
    }
    let edge = Arc::new(edge::Edge {
        routers,
        tenancy: options.tenancy,
        cluster_token: options.cluster_token.clone(),
        auth,
        throttle: throttle::Throttle::new(options.rate_limit, options.rate_burst),
        placement: Arc::new(groups::Placement { groups: options.raft_groups, pins: options.tenant_groups.clone() }),
    });
    let client_edge = edge.clone();
    let client = tower::service_fn(move |req: axum::extract::Request| {
        let edge = client_edge.clone();
        async move { Ok::<_, std::convert::Infallible>(edge.client(req).await) }
    });
    let app = tower::ServiceBuilder::new().map_request(collapse_leading_slashes).service(client);
    if let Some(raft_listener) = raft_listener {
        serve_internal_door(raft_listener, edge, node.clone(), options.tls.clone());
    }
    let stopping = nodes.clone();
    let signal = async move {
        shutdown.await;
        // Parked long polls answer now, so the graceful stop does not wait
        // out their timeouts.
        stopping.iter().for_each(|n| n.begin_stop());
    };
    let served = match &options.tls {
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
    edge: Arc<edge::Edge>,
    node: Arc<node::Node>,
    tls: Option<Arc<tls::Tls>>,
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
