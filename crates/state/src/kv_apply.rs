//! A KV call judged as one: every operation runs in order against a staged
//! view of the store (reads see the call's own earlier writes), and nothing
//! reaches the store until the whole call is judged. A `required` operation
//! that loses its precondition therefore refuses the call with nothing
//! written, and a transaction can judge its KV riders before it writes its
//! pushes and acks.

use std::collections::BTreeMap;
use std::iter::Peekable;
use std::ops::Bound;

use regina_types::limits::{KV_READ_BYTES_MAX, KV_READ_EXPIRED_SKIP_MAX};

use crate::command::{KvCmd, KvOp, Lifetime};
use crate::kv::{KvRow, KvStore};
use crate::outcome::{KvOutcome, KvReason, KvRefusal, KvResult, KvRowView};
use crate::state::State;

/// What a KV call would do, computed without changing the store.
#[derive(Debug)]
pub struct KvPlan {
    pub results: Vec<KvResult>,
    /// Namespace, key, and the row after the call (`None`: deleted).
    changes: BTreeMap<String, BTreeMap<String, Option<KvRow>>>,
    /// Namespace defaults the call sets (`None`: clears).
    defaults: BTreeMap<String, Option<Lifetime>>,
    last_version: u64,
}

struct Stage<'a> {
    store: &'a KvStore,
    now: u64,
    changes: BTreeMap<String, BTreeMap<String, Option<KvRow>>>,
    defaults: BTreeMap<String, Option<Lifetime>>,
    last_version: u64,
    read_left: usize,
}

impl KvStore {
    /// Judges `ops` at `now_ms`. `Err` names the first required operation
    /// that lost its precondition.
    pub fn plan(&self, ops: &[KvOp], now_ms: u64) -> Result<KvPlan, KvRefusal> {
        let mut st = Stage {
            store: self,
            now: now_ms,
            changes: BTreeMap::new(),
            defaults: BTreeMap::new(),
            last_version: self.last_version(),
            read_left: KV_READ_BYTES_MAX,
        };
        let mut results = Vec::with_capacity(ops.len());
        for (index, op) in ops.iter().enumerate() {
            let r = st.eval(op);
            if let KvResult::NotApplied { reason, current } = &r {
                // A write with no lifetime to take is malformed, not a lost
                // precondition: it never applies quietly.
                if is_required(op) || *reason == KvReason::NoLifetime {
                    return Err(KvRefusal { index, reason: *reason, current: current.clone() });
                }
            }
            results.push(r);
        }
        Ok(KvPlan { results, changes: st.changes, defaults: st.defaults, last_version: st.last_version })
    }

    /// Writes a plan back.
    pub(crate) fn commit(&mut self, plan: KvPlan) -> Vec<KvResult> {
        self.advance_version(plan.last_version);
        for (ns, lifetime) in plan.defaults {
            self.set_default(&ns, lifetime);
        }
        for (ns, keys) in plan.changes {
            for (key, row) in keys {
                match row {
                    Some(row) => self.put(&ns, &key, row),
                    None => {
                        self.remove(&ns, &key);
                    }
                }
            }
        }
        plan.results
    }
}

impl State {
    pub(crate) fn kv_call(&mut self, cmd: &KvCmd) -> KvOutcome {
        match self.kv.plan(&cmd.ops, self.now_ms) {
            Ok(plan) => KvOutcome::Done(self.kv.commit(plan)),
            Err(refusal) => KvOutcome::Refused(refusal),
        }
    }

    /// Answers a call of reads and checks without a log entry, as of
    /// `now_ms` (which must not be behind the state's own time).
    pub fn kv_read(&self, ops: &[KvOp], now_ms: u64) -> KvOutcome {
        assert!(ops.iter().all(|o| !o.is_write()), "kv_read was handed a write");
        match self.kv.plan(ops, now_ms.max(self.now_ms)) {
            Ok(plan) => KvOutcome::Done(plan.results),
            Err(refusal) => KvOutcome::Refused(refusal),
        }
    }
}

fn is_required(op: &KvOp) -> bool {
    match op {
        KvOp::Put { required, .. }
        | KvOp::PutWith { required, .. }
        | KvOp::Delete { required, .. }
        | KvOp::Incr { required, .. }
        | KvOp::IncrWith { required, .. }
        | KvOp::Touch { required, .. }
        | KvOp::Check { required, .. } => *required,
        KvOp::Get { .. }
        | KvOp::GetMany { .. }
        | KvOp::GetPrefix { .. }
        | KvOp::Scan { .. }
        | KvOp::Configure { .. } => false,
    }
}

fn not_applied(reason: KvReason, key: &str, current: Option<&KvRow>) -> KvResult {
    KvResult::NotApplied { reason, current: current.map(|r| r.view(key, true)) }
}

impl Stage<'_> {
    fn live(&self, ns: &str, key: &str) -> Option<&KvRow> {
        match self.changes.get(ns).and_then(|m| m.get(key)) {
            Some(staged) => staged.as_ref(),
            None => self.store.row(ns, key),
        }
        .filter(|r| r.is_live(self.now))
    }

    fn set(&mut self, ns: &str, key: &str, row: Option<KvRow>) {
        self.changes.entry(ns.to_string()).or_default().insert(key.to_string(), row);
    }

    /// The lifetime a write takes: its own, else its namespace's default
    /// as the call has left it so far.
    fn lifetime(&self, ns: &str, given: Option<Lifetime>) -> Option<Lifetime> {
        given.or_else(|| match self.defaults.get(ns) {
            Some(staged) => *staged,
            None => self.store.default_lifetime(ns),
        })
    }

    /// Stores a row. `created_ms` is the live row's creation, or now.
    fn write(&mut self, ns: &str, key: &str, value: Vec<u8>, expires_ms: Option<u64>, created_ms: u64) -> KvResult {
        self.last_version += 1;
        let row = KvRow { value, version: self.last_version, expires_ms, updated_ms: self.now, created_ms };
        let view = row.view(key, true);
        self.set(ns, key, Some(row));
        KvResult::Written { row: Some(view) }
    }

    /// Takes `len` bytes from the call's read budget, or says it ran out.
    fn spend(&mut self, len: usize) -> bool {
        if len > self.read_left {
            return false;
        }
        self.read_left -= len;
        true
    }

    fn eval(&mut self, op: &KvOp) -> KvResult {
        match op {
            KvOp::Get { ns, key } => {
                let view = self.live(ns, key).map(|r| r.view(key, true));
                if let Some(v) = &view {
                    self.read_left = self.read_left.saturating_sub(v.value.as_ref().map_or(0, Vec::len));
                }
                KvResult::Got(view)
            }
            KvOp::GetMany { ns, keys } => self.get_many(ns, keys),
            KvOp::GetPrefix { ns, prefix, after, limit, keys_only } => {
                self.get_prefix(ns, prefix, after.as_deref(), *limit as usize, *keys_only)
            }
            KvOp::Put { ns, key, value, ttl_seconds, expect, .. } => {
                let lifetime = ttl_seconds.map_or(Lifetime::Forever, Lifetime::Seconds);
                self.put(ns, key, value, lifetime, *expect)
            }
            KvOp::PutWith { ns, key, value, lifetime, expect, .. } => match self.lifetime(ns, *lifetime) {
                Some(l) => self.put(ns, key, value, l, *expect),
                None => not_applied(KvReason::NoLifetime, key, None),
            },
            KvOp::Delete { ns, key, expect, .. } => match (expect, self.live(ns, key)) {
                (_, None) => not_applied(KvReason::Absent, key, None),
                (Some(0), Some(c)) => not_applied(KvReason::Exists, key, Some(c)),
                (Some(n), Some(c)) if *n != c.version => not_applied(KvReason::Version, key, Some(c)),
                _ => {
                    self.set(ns, key, None);
                    KvResult::Written { row: None }
                }
            },
            KvOp::Check { ns, key, expect, .. } => match (*expect, self.live(ns, key)) {
                (0, None) => KvResult::Checked { version: 0 },
                (0, Some(c)) => not_applied(KvReason::Exists, key, Some(c)),
                (_, None) => not_applied(KvReason::Absent, key, None),
                (n, Some(c)) if n != c.version => not_applied(KvReason::Version, key, Some(c)),
                (n, Some(_)) => KvResult::Checked { version: n },
            },
            KvOp::Incr { ns, key, delta, min, max, ttl_seconds, .. } => {
                let lifetime = ttl_seconds.map_or(Lifetime::Forever, Lifetime::Seconds);
                self.incr(ns, key, *delta, (*min, *max), lifetime)
            }
            KvOp::IncrWith { ns, key, delta, min, max, lifetime, .. } => match self.lifetime(ns, *lifetime) {
                Some(l) => self.incr(ns, key, *delta, (*min, *max), l),
                None => not_applied(KvReason::NoLifetime, key, None),
            },
            KvOp::Configure { ns, expiration } => {
                self.defaults.insert(ns.clone(), *expiration);
                KvResult::Configured { expiration: *expiration }
            }
            KvOp::Scan { ns, after, limit, keys_only } => {
                self.get_prefix(ns, "", after.as_deref(), *limit as usize, *keys_only)
            }
            KvOp::Touch { ns, key, lifetime, expect, .. } => match self.lifetime(ns, *lifetime) {
                Some(l) => self.touch(ns, key, l, *expect),
                None => not_applied(KvReason::NoLifetime, key, None),
            },
        }
    }

    /// A live row gets the deadline its lifetime gives at this write, its
    /// value and creation kept. Like every write it takes a new version, so
    /// `updatedAt` and the version always move together.
    fn touch(&mut self, ns: &str, key: &str, lifetime: Lifetime, expect: Option<u64>) -> KvResult {
        match (expect, self.live(ns, key)) {
            (_, None) => not_applied(KvReason::Absent, key, None),
            (Some(n), Some(c)) if n != c.version => not_applied(KvReason::Version, key, Some(c)),
            (_, Some(c)) => {
                let (value, created) = (c.value.clone(), c.created_ms);
                self.write(ns, key, value, lifetime.deadline(self.now, created), created)
            }
        }
    }

    /// A put at `expect` (if any). The row keeps its creation while live,
    /// which is what an after-creation lifetime counts from.
    fn put(&mut self, ns: &str, key: &str, value: &[u8], lifetime: Lifetime, expect: Option<u64>) -> KvResult {
        let cur = self.live(ns, key);
        match (expect, cur) {
            (Some(0), Some(c)) => not_applied(KvReason::Exists, key, Some(c)),
            (Some(n), None) if n > 0 => not_applied(KvReason::Absent, key, None),
            (Some(n), Some(c)) if n != c.version => not_applied(KvReason::Version, key, Some(c)),
            _ => {
                let created = cur.map_or(self.now, |c| c.created_ms);
                let expires = lifetime.deadline(self.now, created);
                self.write(ns, key, value.to_vec(), expires, created)
            }
        }
    }

    /// A counter: an absent or expired row counts from zero and takes the
    /// operation's lifetime. A live one keeps its own deadline for
    /// `ttlSeconds`, `forever` and `expiresAt` (create-only, so a window
    /// counter is not stretched by its own hits); an after-creation or
    /// after-update lifetime is recomputed, as on a put. A step past a bound
    /// applies nothing.
    fn incr(
        &mut self,
        ns: &str,
        key: &str,
        delta: i64,
        bounds: (Option<i64>, Option<i64>),
        lifetime: Lifetime,
    ) -> KvResult {
        let cur = self.live(ns, key);
        let (base, expires_ms, created) = match cur {
            None => (0, lifetime.deadline(self.now, self.now), self.now),
            Some(c) => match integer_of(&c.value) {
                Some(v) => {
                    let expires = match lifetime {
                        Lifetime::AfterCreation(_) | Lifetime::AfterUpdate(_) => {
                            lifetime.deadline(self.now, c.created_ms)
                        }
                        Lifetime::Forever | Lifetime::Seconds(_) | Lifetime::At(_) => c.expires_ms,
                    };
                    (v, expires, c.created_ms)
                }
                None => return not_applied(KvReason::Type, key, Some(c)),
            },
        };
        let next = base.checked_add(delta);
        let within = next.is_some_and(|n| bounds.0.is_none_or(|m| n >= m) && bounds.1.is_none_or(|m| n <= m));
        match next.filter(|_| within) {
            None => not_applied(KvReason::Limit, key, cur),
            Some(n) => self.write(ns, key, n.to_string().into_bytes(), expires_ms, created),
        }
    }

    fn get_many(&mut self, ns: &str, keys: &[String]) -> KvResult {
        let mut sorted: Vec<&String> = keys.iter().collect();
        sorted.sort();
        sorted.dedup();
        let mut rows = Vec::new();
        let mut truncated = false;
        for key in sorted {
            let Some(view) = self.live(ns, key).map(|r| r.view(key, true)) else { continue };
            if !self.spend(view.value.as_ref().map_or(0, Vec::len)) {
                truncated = true;
                break;
            }
            rows.push(view);
        }
        let mut missing: Vec<String> = Vec::new();
        for key in keys {
            if self.live(ns, key).is_none() && !missing.contains(key) {
                missing.push(key.clone());
            }
        }
        KvResult::Many { rows, missing, truncated }
    }

    fn get_prefix(&mut self, ns: &str, prefix: &str, after: Option<&str>, limit: usize, keys_only: bool) -> KvResult {
        let lower = match after {
            Some(a) if a >= prefix => Bound::Excluded(a),
            _ => Bound::Included(prefix),
        };
        let staged = self.changes.get(ns);
        let stored = self
            .store
            .scan(ns, prefix, after)
            .filter(|(k, _)| !staged.is_some_and(|m| m.contains_key(k.as_str())))
            .map(|(k, r)| (k, Some(r)));
        let overlay = staged
            .into_iter()
            .flat_map(move |m| m.range::<str, _>((lower, Bound::Unbounded)))
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, r)| (k, r.as_ref()));
        let now = self.now;
        let mut picked: Vec<KvRowView> = Vec::new();
        let mut truncated = false;
        let mut budget = self.read_left;
        // Where the next page starts: after the last row answered, or after
        // the expired rows a page stopped stepping over.
        let mut resume: Option<&String> = None;
        let mut skipped = 0;
        for (key, row) in merge(stored, overlay) {
            let Some(row) = row.filter(|r| r.is_live(now)) else {
                // Expired rows wait for the sweep; a page stops after
                // stepping over a bounded number of them.
                skipped += 1;
                if skipped >= KV_READ_EXPIRED_SKIP_MAX {
                    truncated = true;
                    resume = Some(key);
                    break;
                }
                continue;
            };
            let len = if keys_only { 0 } else { row.value.len() };
            if picked.len() >= limit || len > budget {
                truncated = true;
                break;
            }
            budget -= len;
            resume = Some(key);
            picked.push(row.view(key, !keys_only));
        }
        self.read_left = budget;
        let next_after = if truncated { resume.cloned() } else { None };
        KvResult::Prefix { rows: picked, truncated, next_after }
    }
}

/// Two key-ordered streams as one; the keys never coincide.
fn merge<'a, A, B>(a: A, b: B) -> impl Iterator<Item = (&'a String, Option<&'a KvRow>)>
where
    A: Iterator<Item = (&'a String, Option<&'a KvRow>)>,
    B: Iterator<Item = (&'a String, Option<&'a KvRow>)>,
{
    let (mut a, mut b): (Peekable<A>, Peekable<B>) = (a.peekable(), b.peekable());
    std::iter::from_fn(move || match (a.peek(), b.peek()) {
        (Some(x), Some(y)) => {
            if x.0 <= y.0 {
                a.next()
            } else {
                b.next()
            }
        }
        (Some(_), None) => a.next(),
        (None, _) => b.next(),
    })
}

/// The integer a stored JSON value holds, if it is one.
fn integer_of(value: &[u8]) -> Option<i64> {
    match serde_json::from_slice::<serde_json::Value>(value).ok()? {
        serde_json::Value::Number(n) => {
            n.as_i64().or_else(|| n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15).map(|f| f as i64))
        }
        _ => None,
    }
}
