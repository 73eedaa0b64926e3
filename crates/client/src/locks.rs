//! Locks and semaphores: permits with a lifetime, an owner and a fencing
//! token.
//!
//! A permit is a KV row (`queen-locks/<name>#<slot>`) and its token is the
//! row's version, so the token rises at every renew and for every new
//! holder. A permit expires without telling its holder; what keeps a
//! stalled holder's work out is the guard: a step carrying
//! [`Step::guard`](crate::Step::guard) commits only while the permit is
//! still the one it names.
//!
//! These are the raw calls: the caller keeps the [`Permit`] and renews it.
//! [`LockSpec::hold`] answers a [`LockHandle`] that renews by itself.

use std::time::Duration;

use serde_json::{json, Value};

use crate::client::{bool_of, opt_str, results, str_of, u64_of, Client, Error, Result};
use crate::handle::LockHandle;
use crate::queue::whole_seconds;

/// The KV namespace of every permit.
pub const LOCK_NAMESPACE: &str = "queen-locks";

/// A permit this caller holds, as the broker granted it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Permit {
    pub name: String,
    pub slot: u32,
    /// The fencing token; a renew replaces it.
    pub token: u64,
    pub owner: String,
    pub ttl_seconds: u64,
    /// The owner already held this permit: the acquire answered it again.
    pub already: bool,
}

impl Permit {
    /// The KV check that holds while this permit is unchanged.
    pub(crate) fn guard_op(name: &str, slot: u32, token: u64) -> Value {
        json!({
            "op": "check", "ns": LOCK_NAMESPACE, "key": format!("{name}#{slot}"),
            "expect": token, "required": true,
        })
    }
}

/// A live permit of somebody.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub slot: u32,
    pub owner: Option<String>,
    /// Given by [`Locks::get`] only.
    pub token: Option<u64>,
    pub expires_at: Option<String>,
}

impl Holder {
    fn list(v: &Value) -> Vec<Holder> {
        let Some(hs) = v.get("holders").and_then(Value::as_array) else { return Vec::new() };
        hs.iter()
            .map(|h| Holder {
                slot: u64_of(h, "slot") as u32,
                owner: opt_str(h, "owner"),
                token: h.get("token").and_then(Value::as_u64),
                expires_at: opt_str(h, "expiresAt"),
            })
            .collect()
    }
}

/// The answer to an acquire: a held lock is a verdict, not an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquire {
    Granted(Permit),
    /// Every permit is taken; these hold them.
    Held(Vec<Holder>),
}

impl Acquire {
    pub fn permit(self) -> Option<Permit> {
        match self {
            Acquire::Granted(p) => Some(p),
            Acquire::Held(_) => None,
        }
    }
}

/// The answer to a renew.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Renewal {
    /// The same permit with its new token and a fresh lifetime.
    Renewed(Permit),
    /// The permit lapsed or is somebody else's now.
    Lost(Vec<Holder>),
}

/// The locks of one broker.
#[derive(Debug, Clone)]
pub struct Locks {
    pub(crate) client: Client,
}

impl Client {
    pub fn locks(&self) -> Locks {
        Locks { client: self.clone() }
    }
}

/// An owner id unique to this process and call: `<pid>:<12 hex>`.
fn mint_owner() -> String {
    let hex = uuid::Uuid::new_v4().simple().to_string();
    format!("{}:{}", std::process::id(), &hex[..12])
}

impl Locks {
    /// A lock (or, with [`LockSpec::permits`], a semaphore) to acquire.
    /// `ttl` is kept in whole seconds, rounded up.
    pub fn lock(&self, name: impl Into<String>, ttl: Duration) -> LockSpec {
        LockSpec {
            locks: self.clone(),
            name: name.into(),
            ttl_seconds: whole_seconds(ttl),
            owner: mint_owner(),
            permits: 1,
        }
    }

    pub(crate) async fn call(&self, op: Value) -> Result<Value> {
        let answer = self.client.post("/api/v1/locks", &json!({ "operations": [op] })).await?;
        Ok(results(&answer, 1)?.remove(0))
    }

    /// Renews a permit: a new token and a fresh lifetime, unless it lapsed
    /// or changed hands.
    pub async fn renew(&self, p: &Permit) -> Result<Renewal> {
        let r = self
            .call(json!({
                "op": "renew", "name": p.name, "token": p.token, "slot": p.slot,
                "ttlSeconds": p.ttl_seconds, "owner": p.owner,
            }))
            .await?;
        if !bool_of(&r, "renewed") {
            return Ok(Renewal::Lost(Holder::list(&r)));
        }
        let token =
            r.get("token").and_then(Value::as_u64).ok_or_else(|| Error::Decode(format!("renew answered {r}")))?;
        Ok(Renewal::Renewed(Permit { token, already: false, ..p.clone() }))
    }

    /// Frees a permit; false when it was no longer this one.
    pub async fn release(&self, p: &Permit) -> Result<bool> {
        let r = self.call(json!({ "op": "release", "name": p.name, "token": p.token, "slot": p.slot })).await?;
        Ok(bool_of(&r, "released"))
    }

    /// Who holds a lock now, by slot.
    pub async fn get(&self, name: &str) -> Result<Vec<Holder>> {
        let r = self.call(json!({ "op": "get", "name": name })).await?;
        Ok(Holder::list(&r))
    }
}

/// A lock about to be acquired.
#[derive(Debug, Clone)]
pub struct LockSpec {
    locks: Locks,
    name: String,
    ttl_seconds: u64,
    owner: String,
    permits: u32,
}

impl LockSpec {
    /// The holder's identity. Calls by one owner are one holder: an acquire
    /// sent again after a lost answer gets the permit the first one took.
    pub fn owner(mut self, owner: impl Into<String>) -> Self {
        self.owner = owner.into();
        self
    }

    /// A semaphore of `n` permits (slots `0..n`) instead of a lock.
    pub fn permits(mut self, n: u32) -> Self {
        self.permits = n.max(1);
        self
    }

    /// One acquire attempt; the caller keeps and renews the permit.
    pub async fn acquire(&self) -> Result<Acquire> {
        let mut op = json!({ "op": "acquire", "name": self.name, "ttlSeconds": self.ttl_seconds, "owner": self.owner });
        if self.permits > 1 {
            op["limit"] = json!(self.permits);
        }
        let r = self.locks.call(op).await?;
        if !bool_of(&r, "acquired") {
            return Ok(Acquire::Held(Holder::list(&r)));
        }
        let token =
            r.get("token").and_then(Value::as_u64).ok_or_else(|| Error::Decode(format!("acquire answered {r}")))?;
        Ok(Acquire::Granted(Permit {
            name: self.name.clone(),
            slot: u64_of(&r, "slot") as u32,
            token,
            owner: Some(str_of(&r, "owner")).filter(|o| !o.is_empty()).unwrap_or_else(|| self.owner.clone()),
            ttl_seconds: self.ttl_seconds,
            already: bool_of(&r, "already"),
        }))
    }

    /// One acquire attempt answering a handle that renews the permit in the
    /// background every third of its lifetime; `None` when it is held.
    pub async fn hold(&self) -> Result<Option<LockHandle>> {
        let sent = tokio::time::Instant::now();
        Ok(self.acquire().await?.permit().map(|p| LockHandle::start(self.locks.clone(), p, sent)))
    }

    /// Retries [`LockSpec::hold`] until it succeeds or `wait` has passed,
    /// backing off from 100 ms to 1 s between attempts.
    pub async fn hold_within(&self, wait: Duration) -> Result<Option<LockHandle>> {
        let deadline = tokio::time::Instant::now() + wait;
        let mut pause = Duration::from_millis(100);
        loop {
            if let Some(h) = self.hold().await? {
                return Ok(Some(h));
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            tokio::time::sleep(pause.min(deadline - now)).await;
            pause = (pause * 3 / 2).min(Duration::from_secs(1));
        }
    }
}
