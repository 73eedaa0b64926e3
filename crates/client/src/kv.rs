//! Key/value rows: JSON values under (namespace, key), each with a version
//! that only rises (across deletes and holders too) and an expiry.
//!
//! Every write states its lifetime: [`Lifetime`] is a required argument, so
//! a row meant to expire cannot be stored forever by forgetting a field.
//! [`Lifetime::NAMESPACE_DEFAULT`] says so explicitly: the write takes the
//! default its namespace was configured with ([`Kv::configure`]), and the
//! broker refuses it when there is none.
//! A write with `expect` applies only at that version (`expect(0)`: only
//! when absent); a `required` operation that loses makes the whole call (or
//! step) write nothing.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::client::{bool_of, opt_str, results, str_of, u64_of, Client, Result};

/// How long a written row lives. The broker computes a relative lifetime's
/// deadline from the time it applies the write, never from this machine's
/// clock; only [`Lifetime::at`] names an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lifetime(Kind);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Forever,
    Seconds(u64),
    AtMs(u64),
    AfterCreationMs(u64),
    AfterUpdateMs(u64),
    NamespaceDefault,
}

impl Lifetime {
    /// Never expires.
    pub const FOREVER: Lifetime = Lifetime(Kind::Forever);

    /// Names no lifetime: the write takes its namespace's default
    /// expiration, and is refused (`kv_expiry_not_specified`) without one.
    pub const NAMESPACE_DEFAULT: Lifetime = Lifetime(Kind::NamespaceDefault);

    /// Expires after `d`, in whole seconds rounded up (at least one).
    pub fn ttl(d: Duration) -> Lifetime {
        Lifetime(Kind::Seconds(crate::queue::whole_seconds(d)))
    }

    pub fn seconds(n: u64) -> Lifetime {
        Lifetime(Kind::Seconds(n.max(1)))
    }

    pub fn days(n: u64) -> Lifetime {
        Lifetime::seconds(n.saturating_mul(86_400))
    }

    /// Expires at `t` (ms precision). An instant already past stores a
    /// row that is expired at once.
    pub fn at(t: SystemTime) -> Lifetime {
        Lifetime::at_ms(t.duration_since(UNIX_EPOCH).map_or(1, |d| d.as_millis() as u64))
    }

    /// Expires at this many ms since the Unix epoch.
    pub fn at_ms(ms: u64) -> Lifetime {
        Lifetime(Kind::AtMs(ms))
    }

    /// Expires `d` after the row was created (ms, rounded up, at least
    /// one); later writes to the live row keep its creation, so they keep
    /// the deadline.
    pub fn after_creation(d: Duration) -> Lifetime {
        Lifetime(Kind::AfterCreationMs(whole_ms(d)))
    }

    /// Expires `d` after the latest write (ms, rounded up, at least one):
    /// every write renews it, so only an idle row expires.
    pub fn after_update(d: Duration) -> Lifetime {
        Lifetime(Kind::AfterUpdateMs(whole_ms(d)))
    }

    fn apply(self, op: &mut Value) {
        match self.0 {
            Kind::Forever => op["forever"] = json!(true),
            Kind::Seconds(s) => op["ttlSeconds"] = json!(s),
            Kind::AtMs(ms) => op["expiresAt"] = json!(ms),
            Kind::AfterCreationMs(ms) => op["afterCreationMs"] = json!(ms),
            Kind::AfterUpdateMs(ms) => op["afterUpdateMs"] = json!(ms),
            Kind::NamespaceDefault => {}
        }
    }

    /// The lifetime as a configure's `expiration` object.
    fn as_object(self) -> Value {
        let mut v = json!({});
        self.apply(&mut v);
        v
    }
}

fn whole_ms(d: Duration) -> u64 {
    (d.as_nanos().div_ceil(1_000_000) as u64).max(1)
}

/// One KV operation in its wire form, for [`Kv::batch`] and for steps.
#[derive(Debug, Clone, PartialEq)]
pub struct KvOp(pub(crate) Value);

impl KvOp {
    pub fn get(ns: &str, key: &str) -> KvOp {
        KvOp(json!({ "op": "get", "ns": ns, "key": key }))
    }

    pub fn get_many(ns: &str, keys: &[&str]) -> KvOp {
        KvOp(json!({ "op": "getMany", "ns": ns, "keys": keys }))
    }

    pub fn put(ns: &str, key: &str, value: Value, lifetime: Lifetime) -> KvOp {
        let mut v = json!({ "op": "put", "ns": ns, "key": key, "value": value });
        lifetime.apply(&mut v);
        KvOp(v)
    }

    /// A put that applies only when the key is absent (or expired).
    pub fn put_if_absent(ns: &str, key: &str, value: Value, lifetime: Lifetime) -> KvOp {
        let mut v = json!({ "op": "putIfAbsent", "ns": ns, "key": key, "value": value });
        lifetime.apply(&mut v);
        KvOp(v)
    }

    pub fn delete(ns: &str, key: &str) -> KvOp {
        KvOp(json!({ "op": "delete", "ns": ns, "key": key }))
    }

    /// Holds when the row is at `version` (0: absent). Writes nothing.
    pub fn check(ns: &str, key: &str, version: u64) -> KvOp {
        KvOp(json!({ "op": "check", "ns": ns, "key": key, "expect": version }))
    }

    /// Adds `delta` to a numeric row (an absent one counts from 0). A
    /// lifetime in seconds, forever or at an instant applies only when the
    /// row is created; after-creation and after-update lifetimes are
    /// recomputed at every incr, as on a put.
    pub fn incr(ns: &str, key: &str, delta: i64, lifetime: Lifetime) -> KvOp {
        let mut v = json!({ "op": "incr", "ns": ns, "key": key, "delta": delta });
        lifetime.apply(&mut v);
        KvOp(v)
    }

    /// Gives a live row a new deadline from `lifetime`, keeping its value
    /// (a new version, like every write); an absent row stays absent.
    pub fn touch(ns: &str, key: &str, lifetime: Lifetime) -> KvOp {
        let mut v = json!({ "op": "touch", "ns": ns, "key": key });
        lifetime.apply(&mut v);
        KvOp(v)
    }

    /// Sets (`Some`) or clears (`None`) the lifetime that writes of `ns`
    /// naming [`Lifetime::NAMESPACE_DEFAULT`] take. An absolute instant is
    /// refused as a default (`kv_bad_expiration`).
    pub fn configure(ns: &str, expiration: Option<Lifetime>) -> KvOp {
        KvOp(json!({ "op": "configure", "ns": ns, "expiration": expiration.map(Lifetime::as_object) }))
    }

    /// One page of every live row of `ns` in key order, after the key
    /// `after` (exclusive). Not allowed in a step.
    pub fn scan(ns: &str, after: Option<&str>, limit: u32) -> KvOp {
        let mut v = json!({ "op": "scan", "ns": ns, "limit": limit });
        if let Some(a) = after {
            v["after"] = json!(a);
        }
        KvOp(v)
    }

    /// Refuses (never saturates) an incr that would go above `max`.
    pub fn max(mut self, max: i64) -> KvOp {
        self.0["max"] = json!(max);
        self
    }

    /// Refuses an incr that would go below `min`.
    pub fn min(mut self, min: i64) -> KvOp {
        self.0["min"] = json!(min);
        self
    }

    /// Applies only at this version (0: only when absent).
    pub fn expect(mut self, version: u64) -> KvOp {
        self.0["expect"] = json!(version);
        self
    }

    /// When this operation does not apply, nothing in its call or step does.
    pub fn required(mut self) -> KvOp {
        self.0["required"] = json!(true);
        self
    }
}

/// A stored row.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub key: String,
    pub value: Value,
    pub version: u64,
    /// `None`: never expires.
    pub expires_at: Option<String>,
    pub updated_at: String,
    /// The write that created the row; kept by later writes while it lives.
    pub created_at: String,
}

impl Row {
    fn from_wire(v: &Value) -> Row {
        Row {
            key: str_of(v, "key"),
            value: v.get("value").cloned().unwrap_or(Value::Null),
            version: u64_of(v, "version"),
            expires_at: opt_str(v, "expiresAt"),
            updated_at: str_of(v, "updatedAt"),
            created_at: str_of(v, "createdAt"),
        }
    }
}

/// The verdict on a write, an incr or a check.
#[derive(Debug, Clone, PartialEq)]
pub struct Write {
    pub applied: bool,
    /// The row's version after the write; when refused, its current one (0: absent).
    pub version: u64,
    /// When refused, the current value; for an incr, the counter.
    pub value: Value,
    /// Why it did not apply: `exists`, `version`, `absent`, `limit` or `type`.
    pub reason: Option<String>,
}

/// The broker's answer to a call (or step) that a `required` operation lost.
#[derive(Debug, Clone, PartialEq)]
pub struct Precondition {
    /// The losing operation's index in the call.
    pub failed_index: usize,
    pub kv_reason: String,
    pub version: u64,
    pub value: Value,
}

impl Precondition {
    pub(crate) fn from_wire(v: &Value) -> Precondition {
        Precondition {
            failed_index: u64_of(v, "failedIndex") as usize,
            kv_reason: str_of(v, "kvReason"),
            version: u64_of(v, "version"),
            value: v.get("value").cloned().unwrap_or(Value::Null),
        }
    }
}

/// The answer to [`Kv::batch`].
#[derive(Debug, Clone, PartialEq)]
pub enum KvBatch {
    /// One raw result element per operation, in order.
    Done(Vec<Value>),
    /// A `required` operation lost; nothing was written.
    Refused(Precondition),
}

/// One page of a prefix scan, in key order.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    pub rows: Vec<Row>,
    /// Where the next page starts; `None` on the last page.
    pub next_after: Option<String>,
}

/// The KV store of one broker.
#[derive(Debug, Clone)]
pub struct Kv {
    client: Client,
}

impl Client {
    pub fn kv(&self) -> Kv {
        Kv { client: self.clone() }
    }
}

impl Kv {
    /// Runs operations in order as one call: with a write, one durable entry.
    pub async fn batch(&self, ops: &[KvOp]) -> Result<KvBatch> {
        let body = json!({ "operations": ops.iter().map(|o| &o.0).collect::<Vec<_>>() });
        let answer = self.client.post("/api/v1/kv", &body).await?;
        if answer.get("reason").and_then(Value::as_str) == Some("kv_precondition") {
            return Ok(KvBatch::Refused(Precondition::from_wire(&answer)));
        }
        Ok(KvBatch::Done(results(&answer, ops.len())?))
    }

    async fn one(&self, op: KvOp) -> Result<Value> {
        match self.batch(std::slice::from_ref(&op)).await? {
            KvBatch::Done(mut r) => Ok(r.remove(0)),
            // A lone required op that lost: the same facts as a plain refusal.
            KvBatch::Refused(p) => Ok(json!({
                "applied": false, "reason": p.kv_reason, "version": p.version, "value": p.value,
            })),
        }
    }

    pub async fn get(&self, ns: &str, key: &str) -> Result<Option<Row>> {
        let r = self.one(KvOp::get(ns, key)).await?;
        Ok(bool_of(&r, "found").then(|| Row { key: key.to_string(), ..Row::from_wire(&r) }))
    }

    /// The live rows among `keys` (in the broker's order) and the keys missing.
    pub async fn get_many(&self, ns: &str, keys: &[&str]) -> Result<(Vec<Row>, Vec<String>)> {
        let r = self.one(KvOp::get_many(ns, keys)).await?;
        let rows = rows_of(&r);
        let missing = r
            .get("missing")
            .and_then(Value::as_array)
            .map_or_else(Vec::new, |m| m.iter().filter_map(Value::as_str).map(str::to_string).collect());
        Ok((rows, missing))
    }

    /// One page of the rows whose key starts with `prefix`, after the key
    /// `after` (exclusive). The broker clamps `limit`.
    pub async fn get_prefix(&self, ns: &str, prefix: &str, after: Option<&str>, limit: u32) -> Result<Page> {
        let mut op = json!({ "op": "getPrefix", "ns": ns, "prefix": prefix, "limit": limit });
        if let Some(a) = after {
            op["after"] = json!(a);
        }
        let r = self.one(KvOp(op)).await?;
        let next_after = if bool_of(&r, "truncated") { opt_str(&r, "nextAfter") } else { None };
        Ok(Page { rows: rows_of(&r), next_after })
    }

    /// Every row under `prefix`, page by page.
    pub async fn get_prefix_all(&self, ns: &str, prefix: &str) -> Result<Vec<Row>> {
        let mut all = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let page = self.get_prefix(ns, prefix, after.as_deref(), 1000).await?;
            all.extend(page.rows);
            // Keys strictly rise from page to page, so this ends.
            match page.next_after {
                Some(next) if after.as_ref() != Some(&next) => after = Some(next),
                _ => return Ok(all),
            }
        }
    }

    /// One page of every live row of `ns`, after the key `after`
    /// (exclusive); `limit` is 1 to 1,000.
    pub async fn scan(&self, ns: &str, after: Option<&str>, limit: u32) -> Result<Page> {
        let r = self.one(KvOp::scan(ns, after, limit)).await?;
        let next_after = if bool_of(&r, "truncated") { opt_str(&r, "nextAfter") } else { None };
        Ok(Page { rows: rows_of(&r), next_after })
    }

    /// Every live row of `ns`, page by page.
    pub async fn scan_all(&self, ns: &str) -> Result<Vec<Row>> {
        let mut all = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let page = self.scan(ns, after.as_deref(), 1000).await?;
            all.extend(page.rows);
            match page.next_after {
                Some(next) if after.as_ref() != Some(&next) => after = Some(next),
                _ => return Ok(all),
            }
        }
    }

    /// Sets (`Some`) or clears (`None`) the namespace's default lifetime.
    pub async fn configure(&self, ns: &str, expiration: Option<Lifetime>) -> Result<()> {
        self.one(KvOp::configure(ns, expiration)).await.map(|_| ())
    }

    pub async fn put(&self, ns: &str, key: &str, value: Value, lifetime: Lifetime) -> Result<Write> {
        self.write(KvOp::put(ns, key, value, lifetime)).await
    }

    pub async fn put_if_absent(&self, ns: &str, key: &str, value: Value, lifetime: Lifetime) -> Result<Write> {
        self.write(KvOp::put_if_absent(ns, key, value, lifetime)).await
    }

    pub async fn delete(&self, ns: &str, key: &str) -> Result<Write> {
        self.write(KvOp::delete(ns, key)).await
    }

    pub async fn incr(&self, ns: &str, key: &str, delta: i64, lifetime: Lifetime) -> Result<Write> {
        self.write(KvOp::incr(ns, key, delta, lifetime)).await
    }

    pub async fn touch(&self, ns: &str, key: &str, lifetime: Lifetime) -> Result<Write> {
        self.write(KvOp::touch(ns, key, lifetime)).await
    }

    pub async fn check(&self, ns: &str, key: &str, version: u64) -> Result<Write> {
        self.write(KvOp::check(ns, key, version)).await
    }

    /// Sends one write, incr or check (with its `expect`, bounds or
    /// `required` as built) and reads its verdict.
    pub async fn write(&self, op: KvOp) -> Result<Write> {
        let r = self.one(op).await?;
        Ok(Write {
            applied: bool_of(&r, "applied"),
            version: u64_of(&r, "version"),
            value: r.get("value").cloned().unwrap_or(Value::Null),
            reason: opt_str(&r, "reason"),
        })
    }
}

fn rows_of(r: &Value) -> Vec<Row> {
    r.get("rows").and_then(Value::as_array).map_or_else(Vec::new, |rows| rows.iter().map(Row::from_wire).collect())
}
