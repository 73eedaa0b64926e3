//! The connection to one broker and the errors every call can return.
//!
//! The broker answers refusals in two envelopes: the queue routes send
//! `{"error": "<prose>", "code": "<code>"}`, the KV, timers and locks routes
//! send `{"error": "<code>", "reason": "<stable id>", "detail": "<prose>"}`.
//! [`Error::Broker`] folds both into one shape so callers branch on `code`
//! and `reason` and show `message` to people.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::Value;

/// How long a call may take unless it says otherwise. Long polls add their
/// own wait on top of it.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Everything a call can fail with. A refusal the broker answers with
/// HTTP 200 (a held lock, a lost precondition, a refused ack) is a value,
/// not an error.
#[derive(Debug)]
pub enum Error {
    /// The broker answered a non-2xx status.
    Broker {
        status: u16,
        /// The stable code (`bad_request`, `kv_bad_request`, `locks_bad_request`, ...).
        code: String,
        /// The finer stable id when the route gives one (`kv_bad_namespace`, ...).
        reason: Option<String>,
        /// Prose for people.
        message: String,
    },
    /// The request did not complete: connection refused, timeout, reset.
    Transport(reqwest::Error),
    /// The answer was not the JSON this crate expects.
    Decode(String),
    /// Refused before anything was sent.
    Invalid(String),
}

impl Error {
    /// The broker's stable code, when the broker refused.
    pub fn code(&self) -> Option<&str> {
        match self {
            Error::Broker { code, .. } => Some(code),
            _ => None,
        }
    }

    /// The broker's finer reason, when it gave one.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Error::Broker { reason, .. } => reason.as_deref(),
            _ => None,
        }
    }

    /// The HTTP status of a broker refusal.
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Broker { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// Reads a non-2xx answer in either envelope.
    pub(crate) fn from_answer(status: StatusCode, body: &Value) -> Error {
        let text = |k: &str| body.get(k).and_then(Value::as_str).map(str::to_string);
        let (code, message) = match (text("code"), text("error"), text("detail")) {
            (Some(code), error, detail) => (code, detail.or(error)),
            (None, Some(error), detail) => (error, detail),
            (None, None, detail) => (status.as_str().to_string(), detail),
        };
        Error::Broker {
            status: status.as_u16(),
            message: message.unwrap_or_else(|| format!("HTTP {status}")),
            code,
            reason: text("reason"),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Broker { status, code, reason: Some(r), message } => {
                write!(f, "broker refused ({status} {code}/{r}): {message}")
            }
            Error::Broker { status, code, reason: None, message } => {
                write!(f, "broker refused ({status} {code}): {message}")
            }
            Error::Transport(e) => write!(f, "request failed: {e}"),
            Error::Decode(m) => write!(f, "unexpected answer: {m}"),
            Error::Invalid(m) => write!(f, "invalid call: {m}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Transport(e) => Some(e),
            _ => None,
        }
    }
}

impl From<reqwest::Error> for Error {
    fn from(e: reqwest::Error) -> Self {
        Error::Transport(e)
    }
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Self {
        Error::Invalid(format!("a value does not encode as JSON: {e}"))
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The header a node answers with naming the Raft address (`HOST:PORT`)
/// of the leader of the request's group; that address serves every route.
pub const LEADER_HEADER: &str = "x-regina-leader";
/// The header naming the tenant a request acts for.
pub const TENANT_HEADER: &str = "x-queen-tenant";

/// A handle on one broker. Cloning is cheap and clones share connections.
///
/// Calls are sent once: nothing is retried behind the caller's back, so a
/// caller that retries decides what is safe to send again (pushes carry a
/// transaction id the broker deduplicates; steps are refused when sent twice).
/// The one exception is a call sent to the leader the broker named
/// ([`LEADER_HEADER`]) that could not connect there: nothing was sent, and it
/// goes to the URL the client was made with instead.
///
/// In a cluster any node answers every call (a follower forwards it to the
/// leader of the call's group). Each answer names that leader, and an
/// `http://` client sends its next calls straight there, saving the
/// forwarding hop; [`Client::follow_leader`] turns that off.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    base: String,
    http: reqwest::Client,
    /// The tenant every call acts for (`None`: the default tenant).
    tenant: Option<String>,
    /// The bearer token every call carries (`None`: none).
    token: Option<String>,
    follow_leader: bool,
    /// `http://HOST:PORT` of the leader the last answer named.
    leader: std::sync::Mutex<Option<String>>,
    /// A named leader that refused the connection, and when: not followed
    /// again for [`REFUSED_FOR`].
    refused: std::sync::Mutex<Option<(String, std::time::Instant)>>,
}

/// How long a named leader that could not be reached is not followed.
const REFUSED_FOR: Duration = Duration::from_secs(30);

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client").field("url", &self.inner.base).finish()
    }
}

impl Client {
    /// A client of the broker at `url`, e.g. `http://127.0.0.1:6632`.
    pub fn new(url: impl Into<String>) -> Result<Client> {
        let url = url.into();
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(Error::Invalid(format!("{url:?} is not an http:// or https:// URL")));
        }
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(|e| Error::Invalid(format!("cannot build the HTTP client: {e}")))?;
        // A trailing slash would double the one every path starts with.
        let base = url.trim_end_matches('/').to_string();
        let follow_leader = base.starts_with("http://");
        let inner = Inner {
            base,
            http,
            tenant: None,
            token: None,
            follow_leader,
            leader: Default::default(),
            refused: Default::default(),
        };
        Ok(Client { inner: Arc::new(inner) })
    }

    /// The broker's base URL, without a trailing slash.
    pub fn url(&self) -> &str {
        &self.inner.base
    }

    /// A client whose calls act for `tenant` (the `x-queen-tenant` header),
    /// sharing this one's connections. Tenants live in different Raft
    /// groups with their own leaders, so it keeps its own leader hint.
    pub fn with_tenant(&self, tenant: impl Into<String>) -> Client {
        let tenant = Some(tenant.into()).filter(|t| !t.is_empty());
        self.rebuilt(tenant, self.inner.token.clone(), self.inner.follow_leader)
    }

    /// A client whose calls carry `token` as `Authorization: Bearer`, for a
    /// broker with authentication on; shares this one's connections. An
    /// empty token sends none.
    pub fn with_token(&self, token: impl Into<String>) -> Client {
        let token = Some(token.into()).filter(|t| !t.is_empty());
        self.rebuilt(self.inner.tenant.clone(), token, self.inner.follow_leader)
    }

    /// Whether calls go straight to the leader the broker names (on by
    /// default for `http://` URLs; the leader's Raft address must then be
    /// reachable from the client). Off: every call goes to the URL given.
    pub fn follow_leader(&self, on: bool) -> Client {
        self.rebuilt(self.inner.tenant.clone(), self.inner.token.clone(), on && self.inner.base.starts_with("http://"))
    }

    /// Where the next call goes when it is not the given URL: the leader
    /// the last answer named.
    pub fn leader_hint(&self) -> Option<String> {
        self.inner.leader.lock().map(|l| l.clone()).unwrap_or(None)
    }

    fn rebuilt(&self, tenant: Option<String>, token: Option<String>, follow_leader: bool) -> Client {
        let inner = Inner {
            base: self.inner.base.clone(),
            http: self.inner.http.clone(),
            tenant,
            token,
            follow_leader,
            leader: Default::default(),
            refused: Default::default(),
        };
        Client { inner: Arc::new(inner) }
    }

    fn set_leader(&self, leader: Option<String>) {
        if let Ok(mut l) = self.inner.leader.lock() {
            *l = leader;
        }
    }

    /// `GET /health`: true when the node serves and has a leader.
    pub async fn healthy(&self) -> Result<bool> {
        let resp = self.inner.http.get(format!("{}/health", self.inner.base)).send().await?;
        Ok(resp.status().is_success())
    }

    /// Sends one request and reads its JSON answer (`Null` for an empty one).
    pub(crate) async fn call(&self, req: Request<'_>) -> Result<Value> {
        let (status, body) = self.exchange(req).await?;
        if status.is_success() {
            Ok(body)
        } else {
            Err(Error::from_answer(status, &body))
        }
    }

    /// Sends one request and answers its status with its JSON body, for the
    /// routes whose non-2xx answers carry facts beyond the error envelope
    /// (a refused jobs call names the operation that lost).
    pub(crate) async fn exchange(&self, req: Request<'_>) -> Result<(StatusCode, Value)> {
        let hinted = if self.inner.follow_leader { self.leader_hint() } else { None };
        let resp = match hinted {
            Some(leader) => match self.send_to(&leader, &req).await {
                Ok(resp) => resp,
                // Nothing reached the named leader: the given URL takes it.
                Err(e) if e.is_connect() => {
                    self.set_leader(None);
                    if let Ok(mut r) = self.inner.refused.lock() {
                        *r = Some((leader, std::time::Instant::now()));
                    }
                    self.send_to(&self.inner.base, &req).await?
                }
                Err(e) => {
                    self.set_leader(None);
                    return Err(e.into());
                }
            },
            None => self.send_to(&self.inner.base, &req).await?,
        };
        if self.inner.follow_leader {
            let named = resp.headers().get(LEADER_HEADER).and_then(|v| v.to_str().ok());
            let usable = |a: &&str| a.parse::<std::net::SocketAddr>().is_ok_and(|s| !s.ip().is_unspecified());
            if let Some(url) = named.filter(usable).map(|addr| format!("http://{addr}")) {
                let refused = self.inner.refused.lock().ok().and_then(|r| r.clone());
                if !refused.is_some_and(|(at, when)| at == url && when.elapsed() < REFUSED_FOR) {
                    self.set_leader(Some(url));
                }
            }
        }
        let status = resp.status();
        let bytes = resp.bytes().await?;
        let body: Value = if bytes.iter().all(u8::is_ascii_whitespace) {
            Value::Null
        } else {
            match serde_json::from_slice(&bytes) {
                Ok(v) => v,
                Err(_) if !status.is_success() => Value::Null,
                Err(e) => return Err(Error::Decode(format!("{} answered invalid JSON: {e}", req.path))),
            }
        };
        Ok((status, body))
    }

    async fn send_to(&self, base: &str, req: &Request<'_>) -> reqwest::Result<reqwest::Response> {
        let mut b = self.inner.http.request(req.method.clone(), format!("{base}{}", req.path));
        if let Some(t) = &self.inner.tenant {
            b = b.header(TENANT_HEADER, t);
        }
        if let Some(t) = &self.inner.token {
            b = b.bearer_auth(t);
        }
        if !req.query.is_empty() {
            b = b.query(&req.query);
        }
        if let Some(body) = req.body {
            b = b.json(body);
        }
        if let Some(t) = req.timeout {
            b = b.timeout(t);
        }
        b.send().await
    }

    pub(crate) async fn post(&self, path: &str, body: &Value) -> Result<Value> {
        self.call(Request::new(Method::POST, path).body(body)).await
    }

    pub(crate) async fn get(&self, path: &str) -> Result<Value> {
        self.call(Request::new(Method::GET, path)).await
    }
}

/// One request as the call sites describe it.
pub(crate) struct Request<'a> {
    method: Method,
    path: String,
    query: Vec<(&'static str, String)>,
    body: Option<&'a Value>,
    timeout: Option<Duration>,
}

impl<'a> Request<'a> {
    pub(crate) fn new(method: Method, path: impl Into<String>) -> Self {
        Request { method, path: path.into(), query: Vec::new(), body: None, timeout: None }
    }

    pub(crate) fn query(mut self, key: &'static str, value: impl ToString) -> Self {
        self.query.push((key, value.to_string()));
        self
    }

    pub(crate) fn body(mut self, body: &'a Value) -> Self {
        self.body = Some(body);
        self
    }

    pub(crate) fn timeout(mut self, t: Duration) -> Self {
        self.timeout = Some(t);
        self
    }
}

/// Percent-encodes a name for one path segment. Names may hold `/`, `#` or
/// spaces; the broker decodes every segment. `keep_slash` leaves `/` as is
/// for the catch-all segments (timer keys).
pub(crate) fn segment(name: &str, keep_slash: bool) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        let plain = b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') || (keep_slash && b == b'/');
        if plain {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A field of an answer that must be there.
pub(crate) fn field<'v>(v: &'v Value, name: &str) -> Result<&'v Value> {
    v.get(name).ok_or_else(|| Error::Decode(format!("the answer has no {name:?}: {v}")))
}

pub(crate) fn str_of(v: &Value, name: &str) -> String {
    v.get(name).and_then(Value::as_str).unwrap_or_default().to_string()
}

pub(crate) fn u64_of(v: &Value, name: &str) -> u64 {
    v.get(name).and_then(Value::as_u64).unwrap_or(0)
}

pub(crate) fn bool_of(v: &Value, name: &str) -> bool {
    v.get(name).and_then(Value::as_bool).unwrap_or(false)
}

pub(crate) fn opt_str(v: &Value, name: &str) -> Option<String> {
    v.get(name).and_then(Value::as_str).map(str::to_string)
}

/// The `results` array of a KV, timers or locks answer, checked to hold
/// one element per operation sent.
pub(crate) fn results(v: &Value, expected: usize) -> Result<Vec<Value>> {
    match v.get("results").and_then(Value::as_array) {
        Some(r) if r.len() == expected => Ok(r.clone()),
        Some(r) => Err(Error::Decode(format!("{} results for {expected} operations", r.len()))),
        None => Err(Error::Decode(format!("the answer has no results: {v}"))),
    }
}
