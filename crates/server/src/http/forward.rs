//! Any node answers every route: a follower forwards each client request
//! to the leader and relays the answer, so clients never follow redirects.
//! The leader makes reads linearizable before it serves them, and runs
//! each handler as work of the request's tenant (`crate::tenant`).
//!
//! - `/health`, the Raft routes and the ephemeral routes are this node's
//!   own (ephemeral queues live in one node's memory, outside the log:
//!   they are forwarded too, so every node sees the leader's).
//! - A request a follower forwards carries [`FORWARDED_HEADER`]; a node
//!   that receives one and does not lead answers 503 instead of forwarding
//!   again, so a request never travels in circles during an election.
//! - If the leader cannot be reached at all, the follower waits for the
//!   next election and tries again; if the request may have reached it and
//!   no answer came back, the outcome is unknown and the client hears so
//!   (503 `outcome_unknown`).

use std::sync::Arc;
use std::time::Duration;

use axum::body::{to_bytes, Body};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use crate::cluster::Leader;
use crate::node::{Node, ProposeError};
use crate::tenant::RequestTenant;
use regina_types::limits::REQUEST_BODY_BYTES_MAX;

/// Set on a request one node forwards to another: the sender's node id.
pub const FORWARDED_HEADER: &str = "x-regina-forwarded-by";
/// How long a request waits for a leader to be elected.
const LEADER_WAIT: Duration = Duration::from_secs(5);
/// Forwarding attempts when the leader cannot be reached (each waits for
/// the next election).
const CONNECT_ATTEMPTS: usize = 3;

/// Headers that describe one hop, not the request.
const HOP_HEADERS: [&str; 6] = ["host", "connection", "content-length", "transfer-encoding", "keep-alive", "upgrade"];

pub async fn route_to_leader(State(node): State<Arc<Node>>, req: Request, next: Next) -> Response {
    let path = req.uri().path();
    if path == "/health" || path.starts_with("/internal/") {
        return next.run(req).await;
    }
    match node.wait_for_leader(LEADER_WAIT).await {
        Leader::Me => serve_here(&node, req, next).await,
        Leader::Other { .. } if req.headers().contains_key(FORWARDED_HEADER) => {
            ApiError::from(ProposeError::NoLeader).into_response()
        }
        Leader::Other { .. } => match forward(&node, req).await {
            Forwarded::Answer(resp) => resp,
            // The election that ended while the request waited made this
            // node the leader.
            Forwarded::Elected(req) => serve_here(&node, req, next).await,
        },
        Leader::Unknown => ApiError::from(ProposeError::NoLeader).into_response(),
    }
}

/// Serves a request on the leader: read index first where needed, then the
/// handler as work of the request's tenant.
async fn serve_here(node: &Node, req: Request, next: Next) -> Response {
    let tenant = req.extensions().get::<RequestTenant>().and_then(|t| t.0.clone());
    if needs_read_barrier(req.method(), req.uri().path()) {
        if let Err(e) = node.read_barrier().await {
            return ApiError::from(e).into_response();
        }
    }
    crate::tenant::scope(tenant, next.run(req)).await
}

enum Forwarded {
    Answer(Response),
    Elected(Request),
}

/// Writes that always go through the log are linearizable by themselves;
/// everything else may answer from the state and needs the read index.
fn needs_read_barrier(method: &Method, path: &str) -> bool {
    let always_logged = *method == Method::POST
        && (matches!(path, "/api/v1/push" | "/api/v1/ack" | "/api/v1/ack/batch" | "/api/v1/transaction")
            || (path.starts_with("/api/v1/lease/") && path.ends_with("/extend")));
    !always_logged && !path.starts_with("/api/v1/ephemeral/")
}

async fn forward(node: &Node, req: Request) -> Forwarded {
    let (parts, body) = req.into_parts();
    let body = match to_bytes(body, REQUEST_BODY_BYTES_MAX).await {
        Ok(b) => b,
        Err(e) => return Forwarded::Answer(ApiError::too_large(format!("request body: {e}")).into_response()),
    };
    let path_and_query = parts.uri.path_and_query().map(|p| p.as_str()).unwrap_or("/").to_string();
    for _ in 0..CONNECT_ATTEMPTS {
        let addr = match node.wait_for_leader(LEADER_WAIT).await {
            Leader::Other { addr, .. } => addr,
            Leader::Me => return Forwarded::Elected(Request::from_parts(parts, Body::from(body))),
            Leader::Unknown => return Forwarded::Answer(ApiError::from(ProposeError::NoLeader).into_response()),
        };
        let mut out =
            node.forwarder.request(parts.method.clone(), format!("{}://{addr}{path_and_query}", node.peer_scheme));
        for (name, value) in &parts.headers {
            if !is_hop_header(name) {
                out = out.header(name, value);
            }
        }
        out = out.header(FORWARDED_HEADER, node.id.to_string()).body(body.clone());
        match out.send().await {
            Ok(resp) => return Forwarded::Answer(relay(resp).await),
            Err(e) if e.is_connect() => {
                // Nothing reached the leader: safe to try the next one.
                tracing::debug!("forwarding to {addr}: {e}");
                wait_for_other_leader(node, &addr).await;
            }
            Err(e) => return Forwarded::Answer(unknown(format!("the leader at {addr} did not answer: {e}"))),
        }
    }
    Forwarded::Answer(ApiError::from(ProposeError::NoLeader).into_response())
}

/// Waits (bounded) until the node believes someone other than `addr` leads.
async fn wait_for_other_leader(node: &Node, addr: &str) {
    let deadline = tokio::time::Instant::now() + LEADER_WAIT;
    let mut metrics = node.raft.metrics();
    while tokio::time::Instant::now() < deadline {
        match node.leader() {
            Leader::Other { addr: a, .. } if a == addr => {}
            _ => return,
        }
        if tokio::time::timeout_at(deadline, metrics.changed()).await.is_err() {
            return;
        }
    }
}

async fn relay(resp: reqwest::Response) -> Response {
    let status = StatusCode::from_u16(resp.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let mut headers = HeaderMap::new();
    for (name, value) in resp.headers() {
        if !is_hop_header(name) {
            headers.append(name.clone(), value.clone());
        }
    }
    match resp.bytes().await {
        Ok(bytes) => {
            let mut out = Response::new(Body::from(bytes));
            *out.status_mut() = status;
            *out.headers_mut() = headers;
            out
        }
        Err(e) => unknown(format!("the leader's answer was cut off: {e}")),
    }
}

fn unknown(why: String) -> Response {
    ApiError::from(ProposeError::Unknown(format!("{why}; the request may or may not have been applied")))
        .into_response()
}

fn is_hop_header(name: &HeaderName) -> bool {
    HOP_HEADERS.iter().any(|h| name.as_str().eq_ignore_ascii_case(h))
}
