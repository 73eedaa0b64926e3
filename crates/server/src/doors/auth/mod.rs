//! Who may call what: bearer tokens (JWT), roles, and the route classes
//! they open.
//!
//! Off by default. When on (`JWT_ENABLED` / `--jwt-enabled on`), every
//! request on the client port (and every client request a follower forwards
//! to the leader) must carry `Authorization: Bearer <token>`, except on the
//! skip paths (`JWT_SKIP_PATHS`). The door (`crate::doors`) authenticates the
//! request once, before it is routed, and attaches an [`Authn`]; the route
//! layer ([`authorize`]) looks the matched route up in the one class table
//! (`http::classes`) and lets the handler run only when one of the
//! principal's roles opens that class, with the token's `sub` in scope for
//! the handlers that stamp it ([`subject`]).
//!
//! With auth off neither step exists: the routers are built without the
//! layer and the door does not look at the headers.

pub mod jwt;
pub mod keys;
pub mod settings;

use crate::http::codes;
use std::future::Future;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::{MatchedPath, Request};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};

use crate::http::classes::{self, Class, Lookup};
pub use settings::AuthSettings;

/// A role a token (or key) grants. A principal may hold several.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Admin,
    ReadWrite,
    ReadOnly,
    WriteOnly,
}

impl Role {
    pub fn parse(name: &str) -> Option<Role> {
        Some(match name {
            "admin" => Role::Admin,
            "read-write" => Role::ReadWrite,
            "read-only" => Role::ReadOnly,
            "write-only" => Role::WriteOnly,
            _ => return None,
        })
    }

    /// Whether this role opens routes of `class`. `write-only` is not a
    /// step of a ladder: it opens the three producing routes and nothing
    /// else, not even reads.
    pub fn opens(self, class: Class) -> bool {
        match (self, class) {
            (_, Class::Internal) => false,
            (Role::Admin, _) => true,
            (Role::ReadWrite, Class::Read | Class::Write | Class::Produce) => true,
            (Role::ReadOnly, Class::Read) => true,
            (Role::WriteOnly, Class::Produce) => true,
            _ => false,
        }
    }
}

/// The caller a request was found to act for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The token's `sub`, stamped on the messages it pushes.
    pub subject: Option<String>,
    pub roles: Vec<Role>,
    /// The tenant the token names (its tenant claim), if any.
    pub tenant: Option<String>,
    /// The tenants the token may act for (its tenants claim); `None`: no
    /// list, only `tenant` (or the default tenant when there is none).
    pub tenants: Option<Vec<String>>,
}

impl Principal {
    pub fn opens(&self, class: Class) -> bool {
        self.roles.iter().any(|r| r.opens(class))
    }

    /// With tenancy on, the tenant a request acts for, given the one its
    /// `x-queen-tenant` header names (`None`: no header):
    ///
    /// - a token that names its tenant (the tenant claim) or lists them
    ///   (the tenants claim) acts only for those: a header naming another is
    ///   refused (403); without a header it acts for its tenant claim, and a
    ///   list without one must be chosen from (400);
    /// - a token with neither acts for the default tenant, unless it is an
    ///   `admin` token, which may name any tenant in the header.
    pub fn tenant_for(&self, header: Option<String>) -> Result<Option<String>, TenantRefusal> {
        let allowed = |t: &str| self.tenant.as_deref() == Some(t) || self.tenants.iter().flatten().any(|a| a == t);
        let bound = self.tenant.is_some() || self.tenants.is_some();
        match header {
            Some(t) if allowed(&t) => Ok(Some(t)),
            Some(_) if bound || !self.roles.contains(&Role::Admin) => Err(TenantRefusal::Forbidden),
            Some(t) => Ok(Some(t)),
            None if self.tenant.is_some() => Ok(self.tenant.clone()),
            None if self.tenants.as_ref().is_some_and(|l| !l.is_empty()) => Err(TenantRefusal::Choose),
            None => Ok(None),
        }
    }
}

/// Why a token may not act for a request's tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TenantRefusal {
    /// The header names a tenant the token does not hold (403).
    Forbidden,
    /// The token holds several tenants and the request names none (400).
    Choose,
}

impl IntoResponse for TenantRefusal {
    fn into_response(self) -> Response {
        match self {
            TenantRefusal::Forbidden => Refusal::forbidden().into_response(),
            TenantRefusal::Choose => {
                let body = json!({
                    "error": "this token may act for several tenants: name one in x-queen-tenant",
                    "code": codes::BAD_REQUEST.name,
                });
                (codes::BAD_REQUEST.status, axum::Json(body)).into_response()
            }
        }
    }
}

/// What the door found out about a request, for the route layer.
#[derive(Debug, Clone)]
pub enum Authn {
    /// A skip path: served without a token.
    Skipped,
    /// A peer on the Raft address, with the cluster token: internal routes.
    Peer,
    Principal(Arc<Principal>),
}

/// A refusal, as the clients expect it: `{"error": "<message>"}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: StatusCode,
    pub message: &'static str,
}

impl Refusal {
    pub fn unauthenticated(message: &'static str) -> Refusal {
        Refusal { status: StatusCode::UNAUTHORIZED, message }
    }

    pub fn forbidden() -> Refusal {
        Refusal { status: StatusCode::FORBIDDEN, message: "Insufficient permissions" }
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let code = if self.status == StatusCode::UNAUTHORIZED { codes::UNAUTHORIZED } else { codes::FORBIDDEN };
        let body = axum::Json(json!({ "error": self.message, "code": code.name }));
        if self.status == StatusCode::UNAUTHORIZED {
            (self.status, [(header::WWW_AUTHENTICATE, "Bearer")], body).into_response()
        } else {
            (self.status, body).into_response()
        }
    }
}

/// A node's authentication: how tokens are verified and read.
pub struct Auth {
    /// `None`: JWT is off and only API keys are accepted.
    verifier: Option<jwt::Verifier>,
    /// The API key file, when one is given.
    keys: Option<keys::KeyFileSource>,
    skip_paths: Vec<String>,
    roles_claim: String,
    roles_array_claim: String,
    tenant_claim: String,
    tenants_claim: String,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth").field("skip_paths", &self.skip_paths).finish_non_exhaustive()
    }
}

impl Auth {
    /// The node's authentication from its settings; `None` when it is off.
    pub fn from_settings(s: &AuthSettings) -> Result<Option<Arc<Auth>>, String> {
        if !s.enabled()? {
            return Ok(None);
        }
        let keys = s.get("REGINA_API_KEYS_FILE").map(|p| keys::KeyFileSource::open(p.as_ref())).transpose()?;
        Ok(Some(Arc::new(Auth {
            verifier: s.verifier()?,
            keys,
            skip_paths: s.skip_paths(),
            roles_claim: s.get("REGINA_JWT_ROLES_CLAIM").unwrap_or("role").to_string(),
            roles_array_claim: s.get("REGINA_JWT_ROLES_ARRAY_CLAIM").unwrap_or("roles").to_string(),
            tenant_claim: s.get("REGINA_JWT_TENANT_CLAIM").unwrap_or("tenant").to_string(),
            tenants_claim: s.get("REGINA_JWT_TENANTS_CLAIM").unwrap_or("tenants").to_string(),
        })))
    }

    /// Queen's rule: a path is skipped when it equals an entry, or when an
    /// entry longer than `/` ends with `/` and the path starts with it (so
    /// `/` alone skips only the root).
    pub fn skips(&self, path: &str) -> bool {
        self.skip_paths
            .iter()
            .any(|skip| path == skip || (skip.len() > 1 && skip.ends_with('/') && path.starts_with(skip.as_str())))
    }

    /// The caller of a request with these headers: a JWT's claims, or the
    /// API key the bearer token is.
    pub fn authenticate(&self, headers: &HeaderMap) -> Result<Arc<Principal>, Refusal> {
        let token = bearer(headers).ok_or(Refusal::unauthenticated("Authentication required"))?;
        match (&self.verifier, &self.keys) {
            (Some(v), _) if jwt::looks_like_jwt(token) => {
                let claims = v.verify(token, unix_now_s()).map_err(|e| Refusal::unauthenticated(e.message()))?;
                Ok(Arc::new(self.principal(&claims)?))
            }
            (_, Some(keys)) => keys.current().find(token).ok_or(Refusal::unauthenticated("Invalid API key")),
            _ => Err(Refusal::unauthenticated("Invalid token")),
        }
    }

    /// Reads the API key file again (SIGHUP): answers how many keys are now
    /// in force; on an error the previous keys stay.
    pub fn reload_keys(&self) -> Option<Result<usize, String>> {
        self.keys.as_ref().map(|k| k.reload())
    }

    fn principal(&self, claims: &Map<String, Value>) -> Result<Principal, Refusal> {
        let subject = match claims.get("sub") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if s.len() <= regina_types::limits::AUTH_SUBJECT_BYTES_MAX => Some(s.clone()),
            Some(_) => return Err(Refusal::unauthenticated("Invalid token subject")),
        };
        let mut roles = Vec::new();
        let mut add = |v: &Value| {
            if let Some(r) = v.as_str().and_then(Role::parse) {
                roles.push(r);
            }
        };
        match claims.get(&self.roles_claim) {
            Some(Value::Array(list)) => list.iter().for_each(&mut add),
            Some(v) => add(v),
            None => {}
        }
        if let Some(Value::Array(list)) = claims.get(&self.roles_array_claim) {
            list.iter().for_each(&mut add);
        }
        // Tenant names follow the header's rules.
        let name = |v: &Value| match v.as_str().map(|t| crate::http::tenant_header::parse(Some(t.as_bytes()))) {
            Some(Ok(Some(t))) => Some(t),
            _ => None,
        };
        let tenant = match claims.get(&self.tenant_claim) {
            None | Some(Value::Null) => None,
            Some(v) => Some(name(v).ok_or(Refusal::unauthenticated("Invalid token tenant"))?),
        };
        let tenants = match claims.get(&self.tenants_claim) {
            None | Some(Value::Null) => None,
            Some(Value::Array(list)) => Some(
                list.iter()
                    .map(name)
                    .collect::<Option<Vec<_>>>()
                    .ok_or(Refusal::unauthenticated("Invalid token tenants"))?,
            ),
            Some(_) => return Err(Refusal::unauthenticated("Invalid token tenants")),
        };
        Ok(Principal { subject, roles, tenant, tenants })
    }
}

/// The token of an `Authorization: Bearer <token>` header.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim()).filter(|t| !t.is_empty())
}

fn unix_now_s() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

tokio::task_local! {
    static SUBJECT: Option<String>;
}

/// The validated `sub` of the request being handled on this task; `None`
/// without auth, on a skip path, or for a token without one.
pub fn subject() -> Option<String> {
    SUBJECT.try_with(Clone::clone).ok().flatten()
}

/// Runs `fut` as work of the token whose subject is `subject`.
pub async fn scope<F: Future>(subject: Option<String>, fut: F) -> F::Output {
    SUBJECT.scope(subject, fut).await
}

/// The route layer: the matched route's class against the caller's roles.
/// A matched route missing from the class table is refused (500), so a
/// route nobody classified can never be served unchecked.
pub async fn authorize(req: Request, next: Next) -> Response {
    let Some(path) = req.extensions().get::<MatchedPath>().map(|p| p.as_str().to_string()) else {
        // The fallback: no route, nothing to protect.
        return next.run(req).await;
    };
    let class = match classes::lookup(req.method(), &path) {
        Lookup::Class(c) => c,
        Lookup::NoSuchMethod => return next.run(req).await,
        Lookup::Unclassified => {
            let body =
                json!({ "error": format!("route {path} has no role class"), "code": codes::UNCLASSIFIED_ROUTE.name });
            return (codes::UNCLASSIFIED_ROUTE.status, axum::Json(body)).into_response();
        }
    };
    match req.extensions().get::<Authn>().cloned() {
        Some(Authn::Skipped) if class != Class::Internal => next.run(req).await,
        Some(Authn::Peer) if class == Class::Internal => next.run(req).await,
        Some(Authn::Principal(p)) if p.opens(class) => scope(p.subject.clone(), next.run(req)).await,
        Some(_) => Refusal::forbidden().into_response(),
        None => Refusal::unauthenticated("Authentication required").into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth(skip: &str) -> Auth {
        Auth {
            verifier: None,
            keys: None,
            skip_paths: skip.split(',').map(str::to_string).collect(),
            roles_claim: "role".into(),
            roles_array_claim: "roles".into(),
            tenant_claim: "tenant".into(),
            tenants_claim: "tenants".into(),
        }
    }

    #[test]
    fn queens_skip_rule() {
        let a = auth("/health,/metrics/prometheus,/metrics,/");
        assert!(a.skips("/") && a.skips("/health") && a.skips("/metrics") && a.skips("/metrics/prometheus"));
        assert!(!a.skips("/api/v1/push") && !a.skips("/healthz") && !a.skips("/health/x"));
        let a = auth("/docs/,/");
        assert!(a.skips("/docs/") && a.skips("/docs/a/b") && !a.skips("/docs") && !a.skips("/x"));
    }

    #[test]
    fn roles_open_classes() {
        use Class::*;
        let table = [
            (Role::Admin, [true, true, true, true, false]),
            (Role::ReadWrite, [true, true, true, false, false]),
            (Role::ReadOnly, [true, false, false, false, false]),
            (Role::WriteOnly, [false, false, true, false, false]),
        ];
        for (role, opens) in table {
            for (class, want) in [Read, Write, Produce, Admin, Internal].into_iter().zip(opens) {
                assert_eq!(role.opens(class), want, "{role:?} on {class:?}");
            }
        }
    }

    #[test]
    fn claims_become_a_principal() {
        let a = auth("/");
        let claims = json!({ "sub": "alice", "role": "read-only", "roles": ["write-only", "bogus"], "tenant": "t1" });
        let p = a.principal(claims.as_object().unwrap()).unwrap();
        assert_eq!(p.subject.as_deref(), Some("alice"));
        assert_eq!(p.roles, vec![Role::ReadOnly, Role::WriteOnly]);
        assert_eq!(p.tenant.as_deref(), Some("t1"));
        let p = a.principal(json!({ "role": ["admin"] }).as_object().unwrap()).unwrap();
        assert_eq!((p.subject, p.roles), (None, vec![Role::Admin]));
        assert!(a.principal(json!({ "sub": 5 }).as_object().unwrap()).is_err());
        let acme =
            Principal { subject: None, roles: vec![Role::ReadWrite], tenant: Some("acme".into()), tenants: None };
        assert_eq!(acme.tenant_for(None), Ok(Some("acme".into())));
        assert_eq!(acme.tenant_for(Some("acme".into())), Ok(Some("acme".into())));
        assert_eq!(acme.tenant_for(Some("globex".into())), Err(TenantRefusal::Forbidden));
        let two = Principal { tenant: None, tenants: Some(vec!["a".into(), "b".into()]), ..acme.clone() };
        assert_eq!(two.tenant_for(Some("b".into())), Ok(Some("b".into())));
        assert_eq!(two.tenant_for(None), Err(TenantRefusal::Choose));
        assert_eq!(two.tenant_for(Some("c".into())), Err(TenantRefusal::Forbidden));
        let plain = Principal { tenant: None, tenants: None, ..acme.clone() };
        assert_eq!(plain.tenant_for(None), Ok(None));
        assert_eq!(plain.tenant_for(Some("acme".into())), Err(TenantRefusal::Forbidden));
        let admin = Principal { roles: vec![Role::Admin], ..plain };
        assert_eq!(admin.tenant_for(Some("acme".into())), Ok(Some("acme".into())));
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, "bearer abc".parse().unwrap());
        assert_eq!(bearer(&h), Some("abc"));
        h.insert(header::AUTHORIZATION, "Basic abc".parse().unwrap());
        assert_eq!(bearer(&h), None);
    }
}
