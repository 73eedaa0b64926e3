//! The node's two doors and what each lets through.
//!
//! - The **client port** (`--port`) serves the Queen API. It never serves an
//!   internal route: `/internal/...` answers 404 there, whoever asks, and the
//!   headers nodes use between themselves are dropped from every request it
//!   receives.
//! - The **Raft address** (`--raft-addr`, a port of its own) serves Raft
//!   messages, snapshot transfer, state dumps and membership changes between
//!   nodes, and the client requests a follower forwards to its leader. Every
//!   request there must carry the cluster token
//!   ([`CLUSTER_TOKEN_HEADER`]), compared in constant time; anything else is
//!   refused with 401 before it is read. A node started with
//!   `--insecure-cluster` skips that check (and says so at start).
//!
//! With authentication on (`crate::doors::auth`), both doors authenticate every
//! client request before routing it (a skip path needs no token) and attach
//! what they found as an `auth::Authn`; internal routes on the Raft address
//! are authorized by the cluster token alone. Both doors then hand the
//! request to `http::dispatch`.

pub mod auth;
pub mod throttle;
pub mod tls;

use crate::http::codes;
use std::sync::Arc;

use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde_json::json;
use subtle::ConstantTimeEq;

pub use regina_consensus::network::CLUSTER_TOKEN_HEADER;

use crate::doors::auth::{Auth, Authn};
use crate::http::forward::FORWARDED_NAME;

/// [`CLUSTER_TOKEN_HEADER`] as a header name (dropped from every client
/// request).
const CLUSTER_TOKEN_NAME: axum::http::HeaderName = axum::http::HeaderName::from_static(CLUSTER_TOKEN_HEADER);

/// What both doors share: the groups' routers and the node's settings.
pub struct Edge {
    pub routers: Arc<Vec<Router>>,
    pub tenancy: bool,
    /// `None` only with `--insecure-cluster` (or on a node without a Raft
    /// address, which never calls [`Edge::internal`]).
    pub cluster_token: Option<String>,
    /// Token checks; `None` when authentication is off.
    pub auth: Option<Arc<Auth>>,
    /// Per-caller request rates; `None` without `--rate-limit`.
    pub throttle: Option<crate::doors::throttle::Throttle>,
    /// Which group holds each tenant (hashed, or pinned by the operator).
    pub placement: Arc<regina_node::raft_groups::Placement>,
}

/// Whether `path` is one of the routes nodes use between themselves.
pub fn is_internal(path: &str) -> bool {
    path.starts_with("/internal/") || path == "/internal"
}

impl Edge {
    /// A request on the client port.
    pub async fn client(self: Arc<Self>, mut req: Request) -> Response {
        if is_internal(req.uri().path()) {
            let body = json!({ "code": codes::NO_SUCH_ROUTE.name, "error": "not found", "path": req.uri().path() });
            return (codes::NO_SUCH_ROUTE.status, axum::Json(body)).into_response();
        }
        // Only a peer may say a request was forwarded or carry the token on.
        let headers = req.headers_mut();
        headers.remove(FORWARDED_NAME);
        headers.remove(CLUSTER_TOKEN_NAME);
        if let Err(refused) = self.authenticate(&mut req) {
            return refused;
        }
        if let Some(throttle) = &self.throttle {
            if let Some(Err(wait)) = caller(&req).map(|c| throttle.admit(&c)) {
                return rate_limited(wait);
            }
        }
        crate::http::dispatch::dispatch(self.routers.clone(), self.tenancy, &self.placement, req).await
    }

    /// Attaches what the request's token says (nothing when auth is off).
    fn authenticate(&self, req: &mut Request) -> Result<(), Response> {
        let Some(auth) = &self.auth else { return Ok(()) };
        // The dashboard's static files hold no data: the page asks for a
        // token before it calls the API.
        let path = req.uri().path();
        let authn = if auth.skips(path) || crate::http::is_dashboard_asset(path) {
            Authn::Skipped
        } else {
            Authn::Principal(auth.authenticate(req.headers()).map_err(IntoResponse::into_response)?)
        };
        req.extensions_mut().insert(authn);
        Ok(())
    }

    /// A request on the Raft address: nothing without the cluster token.
    /// A forwarded client request is then authenticated like on the client
    /// port (its headers travel with it).
    pub async fn internal(self: Arc<Self>, mut req: Request) -> Response {
        if let Some(expected) = &self.cluster_token {
            let given = req.headers().get(CLUSTER_TOKEN_HEADER).map(|v| v.as_bytes());
            if !token_matches(expected.as_bytes(), given) {
                let code = codes::CLUSTER_TOKEN_REQUIRED;
                let body = json!({ "code": code.name, "error": "cluster token required" });
                return (code.status, axum::Json(body)).into_response();
            }
        }
        if is_internal(req.uri().path()) {
            req.extensions_mut().insert(Authn::Peer);
        } else if let Err(refused) = self.authenticate(&mut req) {
            return refused;
        }
        crate::http::dispatch::dispatch(self.routers.clone(), self.tenancy, &self.placement, req).await
    }
}

/// Who a request counts against for rate limits: its token's subject, else
/// its tenant. Skip paths count against nobody.
fn caller(req: &Request) -> Option<String> {
    match req.extensions().get::<Authn>() {
        Some(Authn::Principal(p)) => Some(match (&p.subject, &p.tenant) {
            (Some(sub), _) => format!("sub:{sub}"),
            (None, Some(t)) => format!("tenant:{t}"),
            (None, None) => "tenant:".to_string(),
        }),
        Some(_) => None,
        None => {
            let tenant =
                req.headers().get(crate::http::tenant_header::TENANT_NAME).and_then(|v| v.to_str().ok()).unwrap_or("");
            Some(format!("tenant:{tenant}"))
        }
    }
}

fn rate_limited(wait: std::time::Duration) -> Response {
    let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
    let body = json!({ "error": format!("rate limited: retry in {secs} s"), "code": codes::RATE_LIMITED.name });
    (codes::RATE_LIMITED.status, [("retry-after", secs.to_string())], axum::Json(body)).into_response()
}

/// Constant-time comparison (only the length can be told apart).
pub fn token_matches(expected: &[u8], given: Option<&[u8]>) -> bool {
    match given {
        Some(given) => bool::from(expected.ct_eq(given)),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_match_only_exactly() {
        assert!(token_matches(b"0123456789abcdef", Some(b"0123456789abcdef")));
        assert!(!token_matches(b"0123456789abcdef", Some(b"0123456789abcdeF")));
        assert!(!token_matches(b"0123456789abcdef", Some(b"0123456789abcde")));
        assert!(!token_matches(b"0123456789abcdef", Some(b"")));
        assert!(!token_matches(b"0123456789abcdef", None));
        assert!(is_internal("/internal/state") && is_internal("/internal/g/0/raft/vote"));
        assert!(!is_internal("/internals") && !is_internal("/api/v1/internal/x"));
    }
}
