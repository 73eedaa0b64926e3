//! Any node answers every route: a follower forwards each client request
//! to the leader and relays the answer, so clients never follow redirects.
//! The leader makes reads linearizable before it serves them, and runs
//! each handler as work of the request's tenant (`regina_node::tenant`).
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

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{to_bytes, Body};
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use tower::ServiceExt;

use crate::http::error::ApiError;
use crate::http::tenant_header::RequestTenant;
use regina_node::membership::Leader;
use regina_node::{ProposeError, Replica};
use regina_types::limits::REQUEST_BODY_BYTES_MAX;

/// Set on a request one node forwards to another: the sender's node id.
pub const FORWARDED_HEADER: &str = "x-regina-forwarded-by";
/// Set on a forwarded request that reached a leader while it handed its
/// group over, and that it forwards once more to the new leader; such a
/// request is never forwarded again.
pub const HANDED_OVER_HEADER: &str = "x-regina-handed-over";
/// On an answer of a client route: the client address (`HOST:PORT`) of the
/// node leading the request's group, set by that leader itself and relayed
/// by a follower that forwarded the request (the Raft address is no client
/// door). Clients may send their next request there.
pub const LEADER_HEADER: &str = "x-regina-leader";
/// On every answer of a client route: the request's Raft group.
pub const GROUP_HEADER: &str = "x-regina-group";
/// The headers above as header names, checked once at compile time: a
/// name given as text is parsed and checked again at every lookup, which
/// cost a batch-1 push ~1,900 instructions across the door, the dispatch
/// and this layer (callgrind).
pub const FORWARDED_NAME: HeaderName = HeaderName::from_static(FORWARDED_HEADER);
const HANDED_OVER_NAME: HeaderName = HeaderName::from_static(HANDED_OVER_HEADER);
const LEADER_NAME: HeaderName = HeaderName::from_static(LEADER_HEADER);
pub const GROUP_NAME: HeaderName = HeaderName::from_static(GROUP_HEADER);
/// How long a request waits for a leader to be elected.
const LEADER_WAIT: Duration = Duration::from_secs(5);
/// Forwarding attempts when the leader cannot be reached (each waits for
/// the next election).
const CONNECT_ATTEMPTS: usize = 3;

/// Headers that describe one hop, not the request.
const HOP_HEADERS: [&str; 6] = ["host", "connection", "content-length", "transfer-encoding", "keep-alive", "upgrade"];

/// What [`ToLeader`] needs of its group: the node, and the header
/// values every answer carries, rendered once.
struct Door {
    node: Arc<Replica>,
    /// This node's client address, when it has one to name (a node
    /// listening on 0.0.0.0 has none).
    addr: Option<HeaderValue>,
    group: HeaderValue,
}

impl Door {
    fn new(node: Arc<Replica>) -> Arc<Door> {
        let addr = Some(node.client_addr())
            .filter(|a| a.parse::<std::net::SocketAddr>().is_ok_and(|s| !s.ip().is_unspecified()))
            .and_then(|a| HeaderValue::from_str(a).ok());
        let group = HeaderValue::from(node.group());
        Arc::new(Door { node, addr, group })
    }
}

/// The layer that sends every request of a group's router to its leader
/// ([`ToLeader`]). A service of its own rather than `from_fn`, which takes
/// every request apart and back together to read its state and boxes the
/// inner route once more per request.
#[derive(Clone)]
pub struct ToLeaderLayer(Arc<Door>);

impl ToLeaderLayer {
    pub fn new(node: Arc<Replica>) -> Self {
        ToLeaderLayer(Door::new(node))
    }
}

impl<S> tower::Layer<S> for ToLeaderLayer {
    type Service = ToLeader<S>;

    fn layer(&self, inner: S) -> ToLeader<S> {
        ToLeader { door: self.0.clone(), inner }
    }
}

/// Serves a request here when this node leads its group, forwards it to
/// the leader otherwise, and names the leader on the answer.
#[derive(Clone)]
pub struct ToLeader<S> {
    door: Arc<Door>,
    inner: S,
}

impl<S> tower::Service<Request> for ToLeader<S>
where
    S: tower::Service<Request, Response = Response, Error = Infallible> + Clone + Send + Sync + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // The route is polled for readiness when it is called (`oneshot`).
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let (door, inner) = (self.door.clone(), self.inner.clone());
        Box::pin(async move { Ok(route_to_leader(&door, req, inner).await) })
    }
}

async fn route_to_leader<S>(door: &Door, req: Request, next: S) -> Response
where
    S: tower::Service<Request, Response = Response, Error = Infallible> + Clone,
{
    let node = &door.node;
    let path = req.uri().path();
    // The dashboard's page and files are the same on every node: served
    // here, even without a leader.
    if path == "/health" || path.starts_with("/internal/") || path == "/" || path.starts_with("/dashboard/") {
        return run(next, req).await;
    }
    let mut resp = route(node, req, next).await;
    hint_leader(door, resp.headers_mut());
    resp
}

/// The inner route's answer to `req`.
async fn run<S>(next: S, req: Request) -> Response
where
    S: tower::Service<Request, Response = Response, Error = Infallible>,
{
    match next.oneshot(req).await {
        Ok(resp) => resp,
        Err(never) => match never {},
    }
}

async fn route<S>(node: &Replica, mut req: Request, mut next: S) -> Response
where
    S: tower::Service<Request, Response = Response, Error = Infallible> + Clone,
{
    let mut waited = false;
    // A hand-over that starts between the leader check and the handler
    // sends the request round again (at most a few times).
    for _ in 0..3 {
        // While the group's leadership is handed over, requests wait for
        // the new leader instead of reaching the old one's handlers.
        waited |= node.handoff().wait().await;
        let forwarded = req.headers().contains_key(FORWARDED_NAME);
        let last_hop = forwarded && (!waited || req.headers().contains_key(HANDED_OVER_NAME));
        match node.wait_for_leader(LEADER_WAIT).await {
            Leader::Me => match serve_here(node, req, next).await {
                Ok(resp) => return resp,
                Err((r, n)) => (req, next) = (r, n),
            },
            Leader::Other { .. } if last_hop => return ApiError::from(ProposeError::NoLeader).into_response(),
            Leader::Other { .. } => match forward(node, req, forwarded).await {
                Forwarded::Answer(resp) => return resp,
                // The election that ended while the request waited made this
                // node the leader.
                Forwarded::Elected(r) => req = r,
            },
            Leader::Unknown => return ApiError::from(ProposeError::NoLeader).into_response(),
        }
    }
    ApiError::from(ProposeError::NoLeader).into_response()
}

/// Names the group's leader on an answer (see [`LEADER_HEADER`]): the
/// leader names itself; a follower keeps the name its leader's answer
/// carried.
fn hint_leader(door: &Door, headers: &mut HeaderMap) {
    if let Some(addr) = door.addr.as_ref().filter(|_| door.node.is_leader()) {
        headers.insert(LEADER_NAME, addr.clone());
    }
    headers.insert(GROUP_NAME, door.group.clone());
}

/// Serves a request on the leader: read index first where needed, then the
/// handler as work of the request's tenant. Hands the request back when a
/// leadership hand-over has just begun.
async fn serve_here<S>(node: &Replica, req: Request, next: S) -> Result<Response, (Request, S)>
where
    S: tower::Service<Request, Response = Response, Error = Infallible>,
{
    let Some(_serving) = node.handoff().serve() else { return Err((req, next)) };
    let tenant = req.extensions().get::<RequestTenant>().and_then(|t| t.0.clone());
    if needs_read_barrier(req.method(), req.uri().path()) {
        if let Err(e) = node.read_barrier().await {
            return Ok(ApiError::from(e).into_response());
        }
    }
    Ok(regina_node::tenant::scope(tenant, run(next, req)).await)
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
            || (path.starts_with("/api/v1/lease/") && path.ends_with("/extend"))
            || crate::http::routes::streams::is_logged(path));
    !always_logged && !path.starts_with("/api/v1/ephemeral/")
}

async fn forward(node: &Replica, req: Request, again: bool) -> Forwarded {
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
            node.forwarder().request(parts.method.clone(), format!("{}://{addr}{path_and_query}", node.peer_scheme()));
        for (name, value) in &parts.headers {
            // This node sets its own forwarding headers.
            let ours = [FORWARDED_HEADER, HANDED_OVER_HEADER, GROUP_HEADER].contains(&name.as_str());
            if !is_hop_header(name) && !ours {
                out = out.header(name, value);
            }
        }
        if again {
            out = out.header(HANDED_OVER_HEADER, "1");
        }
        out = out.header(GROUP_HEADER, node.group().to_string());
        out = out.header(FORWARDED_HEADER, node.id().to_string()).body(body.clone());
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
async fn wait_for_other_leader(node: &Replica, addr: &str) {
    let deadline = tokio::time::Instant::now() + LEADER_WAIT;
    let mut metrics = node.raft().metrics();
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
