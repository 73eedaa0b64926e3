//! The KV store, the timers and the messages they push, checked against a
//! reference model written from the protocol's rules (queen-protocol.md
//! §6-9) rather than from the implementation's structure: the model judges a
//! call on a plain copy of its rows instead of a staged overlay, keeps every
//! message in a list, and finds due timers by scanning them all.
//!
//! Random sequences of KV calls, timer calls, timer fires, sweeps and
//! transactions are applied to the real `State` and to the model; after
//! every entry the outcome and every observable must agree (each key read at
//! the state's time and a little later, the held rows and the version
//! counter, the pending timers, the messages of every partition read back
//! from the body writes), and the state's invariants must hold. A refused
//! call must leave the state as it was. A snapshot and restore may happen
//! between any two entries; the model must keep agreeing afterwards.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use proptest::strategy::Union;
use regina_state::command::{AckItem, AckStatus, KvCmd, KvOp, Lifetime, PushItem, TxnCmd, TxnOp};
use regina_state::outcome::{KvOutcome, KvReason, KvRefusal, KvResult, KvRowView, PushStatus, TxnOutcome, TxnResult};
use regina_state::timers::{ScheduleOp, TimerOp, TimerOutcome, TIMERS_PER_FIRE_MAX};
use regina_state::{BodyRecord, Command, Entry, Outcome, State};

const NAMESPACES: [&str; 2] = ["ns-a", "ns-b"];
/// "a" and "ab" share a prefix, so prefix scans and `after` cursors see
/// more than one row.
const KEYS: [&str; 4] = ["a", "ab", "b", "c"];
const PREFIXES: [&str; 3] = ["a", "ab", "b"];
/// What a put stores. For an incr, "2.0" is the integer 2, "2.5", strings,
/// booleans, null and objects are not integers, and the last one overflows
/// after a few increments.
const VALUES: [&str; 10] = ["0", "7", "-2", "2.0", "2.5", "\"x\"", "true", "null", "{\"a\":1}", "9223372036854775806"];
const TIMER_QUEUES: [&str; 2] = ["tq1", "tq2"];
const TIMER_KEYS: [&str; 3] = ["k1", "k2", "k3"];
/// "tq1" is also where timers fire, so fired and pushed messages share it.
const PUSH_QUEUES: [&str; 2] = ["q1", "tq1"];
const PARTITIONS: [&str; 2] = ["P", "Q"];
const START_MS: u64 = 1_000_000;
/// A read without an entry is judged at the node's clock, which may run
/// ahead of the last entry (rows must expire at that time too) or, on a new
/// leader, behind it.
const READ_AHEAD_MS: u64 = 1_500;

// ---------------------------------------------------------------------------
// The reference model.

#[derive(Debug, Clone, PartialEq)]
struct Row {
    value: Vec<u8>,
    version: u64,
    expires: Option<u64>,
    updated: u64,
    /// The first write of the row's current life.
    created: u64,
}

impl Row {
    /// Live strictly before its expiry instant.
    fn live(&self, at: u64) -> bool {
        self.expires.is_none_or(|e| at < e)
    }

    fn view(&self, key: &str, with_value: bool) -> KvRowView {
        KvRowView {
            key: key.to_string(),
            value: with_value.then(|| self.value.clone()),
            version: self.version,
            expires_ms: self.expires,
            updated_ms: self.updated,
            created_ms: self.created,
        }
    }
}

type Rows = BTreeMap<(String, String), Row>;

#[derive(Debug, Clone, PartialEq)]
struct Timer {
    partition: String,
    txn: String,
    message_id: [u8; 16],
    payload: Vec<u8>,
    deliver_at: u64,
    created: u64,
}

#[derive(Debug, Clone, PartialEq)]
struct Msg {
    id: [u8; 16],
    created: u64,
    txn: String,
    payload: Vec<u8>,
}

#[derive(Debug, Clone)]
struct Part {
    name: String,
    id: u64,
    msgs: Vec<Msg>,
}

/// What one pushed item must answer: `body` is the id of the message whose
/// body the answer points at (the original's, for a duplicate).
#[derive(Debug, Clone, PartialEq)]
struct Pushed {
    status: PushStatus,
    partition_id: u64,
    offset: u64,
    message_id: Option<[u8; 16]>,
    body: [u8; 16],
}

#[derive(Debug)]
enum TxnItem {
    Push(Pushed),
    Kv(KvResult),
    Timer(TimerOutcome),
}

#[derive(Debug)]
enum Expected {
    Done,
    Kv(KvOutcome),
    Timers(Vec<TimerOutcome>),
    /// Committed results, or (reason, flat failed index, KV refusal).
    Txn(Result<Vec<TxnItem>, (&'static str, usize, Option<KvRefusal>)>),
}

#[derive(Debug, Clone)]
struct Model {
    now: u64,
    /// Held rows; an expired row stays until a sweep, invisible.
    rows: Rows,
    /// One counter for every key: versions only rise.
    last_version: u64,
    /// The lifetime a write of a namespace takes when it names none.
    defaults: BTreeMap<String, Lifetime>,
    timers: BTreeMap<(String, String), Timer>,
    /// Partitions of each queue in creation order.
    queues: BTreeMap<String, Vec<Part>>,
    next_partition_id: u64,
}

/// When a row written at `now`, first written at `created`, expires.
fn deadline(lifetime: Lifetime, now: u64, created: u64) -> Option<u64> {
    match lifetime {
        Lifetime::Forever => None,
        Lifetime::Seconds(s) => Some(now + s * 1000),
        Lifetime::At(at) => Some(at),
        Lifetime::AfterCreation(ms) => Some(created + ms),
        Lifetime::AfterUpdate(ms) => Some(now + ms),
    }
}

/// The lifetime an old-style operation names: seconds, or forever.
fn of_ttl(ttl_seconds: Option<u64>) -> Option<Lifetime> {
    Some(ttl_seconds.map_or(Lifetime::Forever, Lifetime::Seconds))
}

/// The integer an incr counts from: a JSON number without a fraction.
fn integer(value: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(value).ok()?;
    if let Ok(n) = s.parse::<i64>() {
        return Some(n);
    }
    let f: f64 = s.parse().ok()?;
    (f.fract() == 0.0).then_some(f as i64)
}

fn not_applied(reason: KvReason, key: &str, current: Option<&Row>) -> KvResult {
    KvResult::NotApplied { reason, current: current.map(|r| r.view(key, true)) }
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
        _ => false,
    }
}

/// A KV call judged on a private copy of the rows; the copy becomes the
/// store only if no required operation loses.
struct Copy {
    rows: Rows,
    last_version: u64,
    defaults: BTreeMap<String, Lifetime>,
    now: u64,
}

impl Copy {
    fn live(&self, ns: &str, key: &str) -> Option<Row> {
        self.rows.get(&(ns.to_string(), key.to_string())).filter(|r| r.live(self.now)).cloned()
    }

    fn write(&mut self, ns: &str, key: &str, value: Vec<u8>, expires: Option<u64>, created: u64) -> KvResult {
        self.last_version += 1;
        let row = Row { value, version: self.last_version, expires, updated: self.now, created };
        let view = row.view(key, true);
        self.rows.insert((ns.to_string(), key.to_string()), row);
        KvResult::Written { row: Some(view) }
    }

    fn eval(&mut self, op: &KvOp) -> KvResult {
        match op {
            KvOp::Get { ns, key } => KvResult::Got(self.live(ns, key).map(|r| r.view(key, true))),
            KvOp::GetMany { ns, keys } => {
                let distinct: BTreeSet<&String> = keys.iter().collect();
                let rows = distinct.iter().filter_map(|k| self.live(ns, k).map(|r| r.view(k, true))).collect();
                let mut missing: Vec<String> = Vec::new();
                for k in keys {
                    if self.live(ns, k).is_none() && !missing.contains(k) {
                        missing.push(k.clone());
                    }
                }
                KvResult::Many { rows, missing, truncated: false }
            }
            KvOp::Scan { ns, after, limit, keys_only } => self.eval(&KvOp::GetPrefix {
                ns: ns.clone(),
                prefix: String::new(),
                after: after.clone(),
                limit: *limit,
                keys_only: *keys_only,
            }),
            KvOp::Configure { ns, expiration } => {
                match expiration {
                    Some(l) => self.defaults.insert(ns.clone(), *l),
                    None => self.defaults.remove(ns),
                };
                KvResult::Configured { expiration: *expiration }
            }
            KvOp::GetPrefix { ns, prefix, after, limit, keys_only } => {
                let all: Vec<KvRowView> = self
                    .rows
                    .iter()
                    .filter(|((n, k), r)| {
                        n == ns
                            && k.starts_with(prefix.as_str())
                            && after.as_ref().is_none_or(|a| k > a)
                            && r.live(self.now)
                    })
                    .map(|((_, k), r)| r.view(k, !keys_only))
                    .collect();
                let truncated = all.len() > *limit as usize;
                let rows: Vec<KvRowView> = all.into_iter().take(*limit as usize).collect();
                let next_after = if truncated { rows.last().map(|r| r.key.clone()) } else { None };
                KvResult::Prefix { rows, truncated, next_after }
            }
            KvOp::Put { ns, key, value, ttl_seconds, expect, .. } => {
                self.put(ns, key, value, of_ttl(*ttl_seconds), *expect)
            }
            KvOp::PutWith { ns, key, value, lifetime, expect, .. } => self.put(ns, key, value, *lifetime, *expect),
            KvOp::Delete { ns, key, expect, .. } => {
                let Some(cur) = self.live(ns, key) else {
                    return not_applied(KvReason::Absent, key, None);
                };
                match expect {
                    Some(0) => not_applied(KvReason::Exists, key, Some(&cur)),
                    Some(n) if *n != cur.version => not_applied(KvReason::Version, key, Some(&cur)),
                    _ => {
                        self.rows.remove(&(ns.to_string(), key.to_string()));
                        KvResult::Written { row: None }
                    }
                }
            }
            KvOp::Check { ns, key, expect, .. } => match (self.live(ns, key), *expect) {
                (None, 0) => KvResult::Checked { version: 0 },
                (None, _) => not_applied(KvReason::Absent, key, None),
                (Some(c), 0) => not_applied(KvReason::Exists, key, Some(&c)),
                (Some(c), n) if c.version != n => not_applied(KvReason::Version, key, Some(&c)),
                (Some(_), n) => KvResult::Checked { version: n },
            },
            KvOp::Incr { ns, key, delta, min, max, ttl_seconds, .. } => {
                self.incr(ns, key, *delta, (*min, *max), of_ttl(*ttl_seconds))
            }
            KvOp::IncrWith { ns, key, delta, min, max, lifetime, .. } => {
                self.incr(ns, key, *delta, (*min, *max), *lifetime)
            }
            KvOp::Touch { ns, key, lifetime, expect, .. } => {
                let Some(lifetime) = self.resolve(ns, *lifetime) else {
                    return not_applied(KvReason::NoLifetime, key, None);
                };
                // A touch rewrites a live row as it is, under a new deadline.
                match self.live(ns, key) {
                    None => not_applied(KvReason::Absent, key, None),
                    Some(c) if expect.is_some_and(|n| n != c.version) => not_applied(KvReason::Version, key, Some(&c)),
                    Some(c) => self.write(ns, key, c.value.clone(), deadline(lifetime, self.now, c.created), c.created),
                }
            }
        }
    }

    /// The write's own lifetime, else its namespace's default.
    fn resolve(&self, ns: &str, given: Option<Lifetime>) -> Option<Lifetime> {
        given.or_else(|| self.defaults.get(ns).copied())
    }

    fn put(&mut self, ns: &str, key: &str, value: &[u8], given: Option<Lifetime>, expect: Option<u64>) -> KvResult {
        let Some(lifetime) = self.resolve(ns, given) else {
            return not_applied(KvReason::NoLifetime, key, None);
        };
        let cur = self.live(ns, key);
        let verdict = match (expect, &cur) {
            (None, _) => None,
            (Some(0), None) => None,
            (Some(0), Some(_)) => Some(KvReason::Exists),
            (Some(_), None) => Some(KvReason::Absent),
            (Some(n), Some(c)) => (c.version != n).then_some(KvReason::Version),
        };
        if let Some(reason) = verdict {
            return not_applied(reason, key, cur.as_ref());
        }
        // Overwriting a live row keeps its creation; an expired or absent
        // one starts a new life now.
        let created = cur.as_ref().map_or(self.now, |c| c.created);
        self.write(ns, key, value.to_vec(), deadline(lifetime, self.now, created), created)
    }

    fn incr(
        &mut self,
        ns: &str,
        key: &str,
        delta: i64,
        bounds: (Option<i64>, Option<i64>),
        given: Option<Lifetime>,
    ) -> KvResult {
        let Some(lifetime) = self.resolve(ns, given) else {
            return not_applied(KvReason::NoLifetime, key, None);
        };
        let cur = self.live(ns, key);
        // An absent counter starts at zero with the call's lifetime; a live
        // one keeps its deadline unless the lifetime counts from creation or
        // from this write.
        let (base, expires, created) = match &cur {
            None => (0, deadline(lifetime, self.now, self.now), self.now),
            Some(c) => match integer(&c.value) {
                Some(v) => {
                    let expires = match lifetime {
                        Lifetime::AfterCreation(_) | Lifetime::AfterUpdate(_) => {
                            deadline(lifetime, self.now, c.created)
                        }
                        _ => c.expires,
                    };
                    (v, expires, c.created)
                }
                None => return not_applied(KvReason::Type, key, Some(c)),
            },
        };
        match base.checked_add(delta) {
            Some(n) if bounds.0.is_none_or(|m| n >= m) && bounds.1.is_none_or(|m| n <= m) => {
                self.write(ns, key, n.to_string().into_bytes(), expires, created)
            }
            _ => not_applied(KvReason::Limit, key, cur.as_ref()),
        }
    }
}

impl Model {
    fn new() -> Self {
        Model {
            now: 0,
            rows: Rows::new(),
            last_version: 0,
            defaults: BTreeMap::new(),
            timers: BTreeMap::new(),
            queues: BTreeMap::new(),
            next_partition_id: 1,
        }
    }

    fn live(&self, ns: &str, key: &str, at: u64) -> Option<&Row> {
        self.rows.get(&(ns.to_string(), key.to_string())).filter(|r| r.live(at))
    }

    /// Judges a KV call; `Err` is the first required operation that lost.
    fn kv_plan(&self, ops: &[KvOp]) -> Result<(Vec<KvResult>, Copy), KvRefusal> {
        let mut copy = Copy {
            rows: self.rows.clone(),
            last_version: self.last_version,
            defaults: self.defaults.clone(),
            now: self.now,
        };
        let mut results = Vec::new();
        for (index, op) in ops.iter().enumerate() {
            let r = copy.eval(op);
            if let KvResult::NotApplied { reason, current } = &r {
                // A write with no lifetime refuses its call, required or not.
                if is_required(op) || *reason == KvReason::NoLifetime {
                    return Err(KvRefusal { index, reason: *reason, current: current.clone() });
                }
            }
            results.push(r);
        }
        Ok((results, copy))
    }

    fn take(&mut self, copy: Copy) {
        self.rows = copy.rows;
        self.last_version = copy.last_version;
        self.defaults = copy.defaults;
    }

    /// Pushes items in order; a transaction id already in the partition is
    /// a duplicate (the dedup window is never passed in these runs).
    fn push(&mut self, items: &[PushItem]) -> Vec<Pushed> {
        let mut queued_here: Vec<(u64, u64)> = Vec::new();
        let mut out = Vec::new();
        for it in items {
            let parts = self.queues.entry(it.queue.clone()).or_default();
            let idx = match parts.iter().position(|p| p.name == it.partition) {
                Some(i) => i,
                None => {
                    parts.push(Part { name: it.partition.clone(), id: self.next_partition_id, msgs: Vec::new() });
                    self.next_partition_id += 1;
                    parts.len() - 1
                }
            };
            let p = &mut parts[idx];
            if let Some(off) = p.msgs.iter().position(|m| m.txn == it.transaction_id) {
                let original = p.msgs[off].id;
                let off = off as u64;
                // Only a repeat inside one request knows the original's id
                // without reading its body.
                let message_id = queued_here.contains(&(p.id, off)).then_some(original);
                out.push(Pushed {
                    status: PushStatus::Duplicate,
                    partition_id: p.id,
                    offset: off,
                    message_id,
                    body: original,
                });
                continue;
            }
            p.msgs.push(Msg {
                id: it.message_id,
                created: self.now,
                txn: it.transaction_id.clone(),
                payload: it.payload.clone(),
            });
            let off = p.msgs.len() as u64 - 1;
            queued_here.push((p.id, off));
            out.push(Pushed {
                status: PushStatus::Queued,
                partition_id: p.id,
                offset: off,
                message_id: Some(it.message_id),
                body: it.message_id,
            });
        }
        out
    }

    fn timer(&mut self, op: &TimerOp) -> TimerOutcome {
        match op {
            TimerOp::Schedule(s) => {
                let deliver_at = if s.delay_ms <= 0 { self.now } else { self.now + s.delay_ms as u64 };
                let t = Timer {
                    partition: s.partition.clone(),
                    txn: s.txn.clone(),
                    message_id: s.message_id,
                    payload: s.payload.clone(),
                    deliver_at,
                    created: self.now,
                };
                let replaced = self.timers.insert((s.queue.clone(), s.timer_key.clone()), t).is_some();
                TimerOutcome::Scheduled { replaced, deliver_at_ms: deliver_at }
            }
            TimerOp::Cancel { queue, timer_key } => match self.timers.remove(&(queue.clone(), timer_key.clone())) {
                Some(t) => TimerOutcome::Cancelled { txn: t.txn },
                None => TimerOutcome::Absent,
            },
            // Queues of the model have no maxSize, so no fire is refused and
            // nothing fails: absolute times and retries are tested in timers.rs.
            other => panic!("the model never generates {other:?}"),
        }
    }

    /// Every due timer becomes a push, earliest first (ties by queue and
    /// key), and is forgotten.
    fn fire(&mut self) {
        let mut due: Vec<(u64, (String, String))> = self
            .timers
            .iter()
            .filter(|(_, t)| t.deliver_at <= self.now)
            .map(|(k, t)| (t.deliver_at, k.clone()))
            .collect();
        due.sort();
        due.truncate(TIMERS_PER_FIRE_MAX);
        let items: Vec<PushItem> = due
            .into_iter()
            .map(|(_, k)| {
                let t = self.timers.remove(&k).expect("listed above");
                PushItem {
                    queue: k.0,
                    partition: t.partition,
                    transaction_id: t.txn,
                    trace_id: None,
                    message_id: t.message_id,
                    payload: t.payload,
                }
            })
            .collect();
        self.push(&items);
    }

    fn apply(&mut self, entry: &Entry) -> Expected {
        self.now = self.now.max(entry.now_ms);
        match &entry.command {
            Command::Noop => Expected::Done,
            Command::Sweep => {
                let now = self.now;
                self.rows.retain(|_, r| r.live(now));
                Expected::Done
            }
            Command::FireTimers => {
                self.fire();
                Expected::Done
            }
            Command::Kv(cmd) => Expected::Kv(match self.kv_plan(&cmd.ops) {
                Ok((results, copy)) => {
                    self.take(copy);
                    KvOutcome::Done(results)
                }
                Err(refusal) => KvOutcome::Refused(refusal),
            }),
            Command::Timers(ops) => Expected::Timers(ops.iter().map(|op| self.timer(op)).collect()),
            Command::Transaction(t) => Expected::Txn(self.transaction(t)),
            other => panic!("the model does not know {other:?}"),
        }
    }

    /// Acks first (every ack these runs send names nothing, so it refuses
    /// the step), then stored duplicate pushes, then the KV riders, and only
    /// then any write.
    #[allow(clippy::type_complexity)]
    fn transaction(&mut self, t: &TxnCmd) -> Result<Vec<TxnItem>, (&'static str, usize, Option<KvRefusal>)> {
        if let Some(i) = t.ops.iter().position(|op| matches!(op, TxnOp::Ack { .. })) {
            return Err(("rejected_ack", i, None));
        }
        // Then pushes: one whose id is already stored refuses the step;
        // a repeat inside the step itself collapses onto its first.
        if let Some(i) = t.ops.iter().position(|op| match op {
            TxnOp::Push(p) => self.queues.get(&p.queue).is_some_and(|parts| {
                parts.iter().any(|part| part.name == p.partition && part.msgs.iter().any(|m| m.txn == p.transaction_id))
            }),
            TxnOp::Ack { .. } => false,
        }) {
            return Err(("duplicate", i, None));
        }
        let (kv_results, copy) = match self.kv_plan(&t.kv) {
            Ok(plan) => plan,
            Err(r) => return Err(("kv_precondition", t.ops.len() + r.index, Some(r))),
        };
        let items: Vec<PushItem> = t
            .ops
            .iter()
            .map(|op| match op {
                TxnOp::Push(p) => p.clone(),
                TxnOp::Ack { .. } => unreachable!("refused above"),
            })
            .collect();
        let mut out: Vec<TxnItem> = self.push(&items).into_iter().map(TxnItem::Push).collect();
        self.take(copy);
        out.extend(kv_results.into_iter().map(TxnItem::Kv));
        for op in &t.timers {
            out.push(TxnItem::Timer(self.timer(op)));
        }
        Ok(out)
    }
}

// ---------------------------------------------------------------------------
// Generated steps. Versions named by `expect` are chosen when the step runs,
// against the model, so that matching versions actually occur.

#[derive(Debug, Clone, Copy)]
enum Expect {
    /// Must not exist.
    Zero,
    /// The live version (or one never handed out when absent).
    Current,
    /// A version that is not the live one.
    Stale,
}

#[derive(Debug, Clone)]
enum KvSpec {
    Get(usize, usize),
    GetMany(usize, Vec<usize>),
    GetPrefix {
        ns: usize,
        prefix: usize,
        after: Option<usize>,
        limit: u32,
        keys_only: bool,
    },
    Put {
        ns: usize,
        key: usize,
        value: usize,
        ttl: Option<u64>,
        expect: Option<Expect>,
        required: bool,
    },
    Delete {
        ns: usize,
        key: usize,
        expect: Option<Expect>,
        required: bool,
    },
    Incr {
        ns: usize,
        key: usize,
        delta: i64,
        bounds: (Option<i64>, Option<i64>),
        ttl: Option<u64>,
        required: bool,
    },
    Check {
        ns: usize,
        key: usize,
        expect: Expect,
        required: bool,
    },
    /// `life: None` takes the namespace default.
    PutWith {
        ns: usize,
        key: usize,
        value: usize,
        life: Option<LifeSpec>,
        expect: Option<Expect>,
        required: bool,
    },
    IncrWith {
        ns: usize,
        key: usize,
        delta: i64,
        life: Option<LifeSpec>,
        required: bool,
    },
    Configure {
        ns: usize,
        life: Option<LifeSpec>,
    },
    Touch {
        ns: usize,
        key: usize,
        life: Option<LifeSpec>,
        expect: Option<Expect>,
        required: bool,
    },
    Scan {
        ns: usize,
        after: Option<usize>,
        limit: u32,
        keys_only: bool,
    },
}

/// A lifetime of a few seconds at most, so rows expire within a run;
/// `At` is relative to the entry's time (possibly already past).
#[derive(Debug, Clone, Copy)]
enum LifeSpec {
    Forever,
    Seconds(u64),
    At(i64),
    AfterCreation(u64),
    AfterUpdate(u64),
}

impl LifeSpec {
    fn at(self, now: u64) -> Lifetime {
        match self {
            LifeSpec::Forever => Lifetime::Forever,
            LifeSpec::Seconds(s) => Lifetime::Seconds(s),
            LifeSpec::At(off) => Lifetime::At((now as i64 + off).max(1) as u64),
            LifeSpec::AfterCreation(ms) => Lifetime::AfterCreation(ms),
            LifeSpec::AfterUpdate(ms) => Lifetime::AfterUpdate(ms),
        }
    }
}

fn life_s() -> impl Strategy<Value = LifeSpec> {
    // Whole half seconds often, so deadlines land exactly on entry times.
    let ms = prop_oneof![1u64..4_000, (1u64..8).prop_map(|k| k * 500)];
    prop_oneof![
        1 => Just(LifeSpec::Forever),
        1 => (1u64..4).prop_map(LifeSpec::Seconds),
        1 => prop_oneof![-1_000i64..4_000, (-2i64..8).prop_map(|k| k * 500)].prop_map(LifeSpec::At),
        2 => ms.clone().prop_map(LifeSpec::AfterCreation),
        2 => ms.prop_map(LifeSpec::AfterUpdate),
    ]
}

#[derive(Debug, Clone)]
enum TimerSpec {
    Schedule { queue: usize, key: usize, partition: usize, txn: u8, delay_ms: i64 },
    Cancel { queue: usize, key: usize },
}

#[derive(Debug, Clone)]
struct PushSpec {
    queue: usize,
    partition: usize,
    txn: u8,
}

#[derive(Debug, Clone)]
enum Step {
    Noop,
    Kv(Vec<KvSpec>),
    Timers(Vec<TimerSpec>),
    Fire,
    Sweep,
    /// `ack`: where a bogus ack goes among the pushes, and whether it names
    /// a partition that does not exist or a group that does not.
    Txn {
        pushes: Vec<PushSpec>,
        ack: Option<(usize, bool)>,
        kv: Vec<KvSpec>,
        timers: Vec<TimerSpec>,
    },
    /// Replace the state by its snapshot.
    Restore,
}

fn expect_s() -> impl Strategy<Value = Expect> {
    prop_oneof![Just(Expect::Zero), Just(Expect::Current), Just(Expect::Stale)]
}

fn ttl_s() -> impl Strategy<Value = Option<u64>> {
    prop_oneof![1 => Just(None), 1 => (1u64..6).prop_map(Some)]
}

fn kv_spec(in_txn: bool) -> BoxedStrategy<KvSpec> {
    let ns = 0..NAMESPACES.len();
    let key = 0..KEYS.len();
    let required = || prop::bool::weighted(0.3);
    let mut choices: Vec<(u32, BoxedStrategy<KvSpec>)> = vec![
        (2, (ns.clone(), key.clone()).prop_map(|(n, k)| KvSpec::Get(n, k)).boxed()),
        (1, (ns.clone(), prop::collection::vec(key.clone(), 1..4)).prop_map(|(n, ks)| KvSpec::GetMany(n, ks)).boxed()),
        (
            5,
            (ns.clone(), key.clone(), 0..VALUES.len(), ttl_s(), prop::option::weighted(0.6, expect_s()), required())
                .prop_map(|(ns, key, value, ttl, expect, required)| KvSpec::Put {
                    ns,
                    key,
                    value,
                    ttl,
                    expect,
                    required,
                })
                .boxed(),
        ),
        (
            1,
            (ns.clone(), key.clone(), prop::option::weighted(0.5, expect_s()), required())
                .prop_map(|(ns, key, expect, required)| KvSpec::Delete { ns, key, expect, required })
                .boxed(),
        ),
        (
            3,
            (
                ns.clone(),
                key.clone(),
                -3i64..6,
                (prop::option::weighted(0.3, -3i64..2), prop::option::weighted(0.4, 0i64..8)),
                ttl_s(),
                required(),
            )
                .prop_map(|(ns, key, delta, bounds, ttl, required)| KvSpec::Incr {
                    ns,
                    key,
                    delta,
                    bounds,
                    ttl,
                    required,
                })
                .boxed(),
        ),
        (
            2,
            (ns.clone(), key.clone(), expect_s(), required())
                .prop_map(|(ns, key, expect, required)| KvSpec::Check { ns, key, expect, required })
                .boxed(),
        ),
    ];
    choices.push((
        4,
        (
            ns.clone(),
            key.clone(),
            0..VALUES.len(),
            prop::option::weighted(0.8, life_s()),
            prop::option::weighted(0.4, expect_s()),
            required(),
        )
            .prop_map(|(ns, key, value, life, expect, required)| KvSpec::PutWith {
                ns,
                key,
                value,
                life,
                expect,
                required,
            })
            .boxed(),
    ));
    choices.push((
        2,
        (ns.clone(), key.clone(), -3i64..6, prop::option::weighted(0.8, life_s()), required())
            .prop_map(|(ns, key, delta, life, required)| KvSpec::IncrWith { ns, key, delta, life, required })
            .boxed(),
    ));
    choices.push((
        1,
        (ns.clone(), prop::option::weighted(0.7, life_s()))
            .prop_map(|(ns, life)| KvSpec::Configure { ns, life })
            .boxed(),
    ));
    choices.push((
        2,
        (
            ns.clone(),
            key.clone(),
            prop::option::weighted(0.8, life_s()),
            prop::option::weighted(0.3, expect_s()),
            required(),
        )
            .prop_map(|(ns, key, life, expect, required)| KvSpec::Touch { ns, key, life, expect, required })
            .boxed(),
    ));
    if !in_txn {
        choices.push((
            1,
            (ns.clone(), prop::option::of(key.clone()), 1u32..4, any::<bool>())
                .prop_map(|(ns, after, limit, keys_only)| KvSpec::Scan { ns, after, limit, keys_only })
                .boxed(),
        ));
        choices.push((
            2,
            (ns, 0..PREFIXES.len(), prop::option::of(key), 0u32..3, any::<bool>())
                .prop_map(|(ns, prefix, after, limit, keys_only)| KvSpec::GetPrefix {
                    ns,
                    prefix,
                    after,
                    limit,
                    keys_only,
                })
                .boxed(),
        ));
    }
    Union::new_weighted(choices).boxed()
}

fn timer_spec() -> impl Strategy<Value = TimerSpec> {
    let (queue, key) = (0..TIMER_QUEUES.len(), 0..TIMER_KEYS.len());
    prop_oneof![
        3 => (queue.clone(), key.clone(), 0..PARTITIONS.len(), 0u8..4, prop_oneof![-200i64..5_000, (-1i64..8).prop_map(|k| k * 500)]).prop_map(
            |(queue, key, partition, txn, delay_ms)| TimerSpec::Schedule { queue, key, partition, txn, delay_ms }
        ),
        1 => (queue, key).prop_map(|(queue, key)| TimerSpec::Cancel { queue, key }),
    ]
}

fn push_spec() -> impl Strategy<Value = PushSpec> {
    (0..PUSH_QUEUES.len(), 0..PARTITIONS.len(), 0u8..5).prop_map(|(queue, partition, txn)| PushSpec {
        queue,
        partition,
        txn,
    })
}

fn step() -> impl Strategy<Value = (i64, Step)> {
    // Mostly forward, across TTLs of a few seconds, often in whole half
    // seconds so that entries land exactly on expiry and due instants;
    // sometimes an entry stamped behind the state's time (a new leader with
    // a slower clock).
    let dt = prop_oneof![
        4 => 0i64..1_500,
        3 => (0i64..6).prop_map(|k| k * 500),
        2 => 1_500i64..4_000,
        1 => -2_000i64..0,
    ];
    let txn = (
        prop::collection::vec(push_spec(), 0..3),
        prop::option::weighted(0.15, (0usize..3, any::<bool>())),
        prop::collection::vec(kv_spec(true), 0..3),
        prop::collection::vec(timer_spec(), 0..2),
    )
        .prop_map(|(pushes, ack, kv, timers)| Step::Txn { pushes, ack, kv, timers });
    let step = prop_oneof![
        6 => prop::collection::vec(kv_spec(false), 1..4).prop_map(Step::Kv),
        2 => prop::collection::vec(timer_spec(), 1..3).prop_map(Step::Timers),
        2 => Just(Step::Fire),
        1 => Just(Step::Sweep),
        1 => Just(Step::Noop),
        4 => txn,
        1 => Just(Step::Restore),
    ];
    (dt, step)
}

/// Turns generated steps into log commands.
struct Resolver {
    minted: u64,
}

impl Resolver {
    fn id(&mut self) -> [u8; 16] {
        self.minted += 1;
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.minted.to_le_bytes());
        b
    }

    fn expect(e: Expect, model: &Model, ns: &str, key: &str, at: u64) -> u64 {
        match (e, model.live(ns, key, at).map(|r| r.version)) {
            (Expect::Zero, _) => 0,
            (Expect::Current, Some(v)) => v,
            (Expect::Current, None) => model.last_version + 1,
            (Expect::Stale, Some(v)) if v > 1 => v - 1,
            (Expect::Stale, Some(v)) => v + 1,
            (Expect::Stale, None) => 1,
        }
    }

    fn kv(spec: &KvSpec, model: &Model, at: u64) -> KvOp {
        let s = |v: &str| v.to_string();
        let e = |e: Expect, ns: usize, key: usize| Self::expect(e, model, NAMESPACES[ns], KEYS[key], at);
        match spec {
            KvSpec::Get(ns, key) => KvOp::Get { ns: s(NAMESPACES[*ns]), key: s(KEYS[*key]) },
            KvSpec::GetMany(ns, keys) => {
                KvOp::GetMany { ns: s(NAMESPACES[*ns]), keys: keys.iter().map(|k| s(KEYS[*k])).collect() }
            }
            KvSpec::GetPrefix { ns, prefix, after, limit, keys_only } => KvOp::GetPrefix {
                ns: s(NAMESPACES[*ns]),
                prefix: s(PREFIXES[*prefix]),
                after: after.map(|k| s(KEYS[k])),
                limit: *limit,
                keys_only: *keys_only,
            },
            KvSpec::Put { ns, key, value, ttl, expect, required } => KvOp::Put {
                ns: s(NAMESPACES[*ns]),
                key: s(KEYS[*key]),
                value: VALUES[*value].as_bytes().to_vec(),
                ttl_seconds: *ttl,
                expect: expect.map(|x| e(x, *ns, *key)),
                required: *required,
            },
            KvSpec::Delete { ns, key, expect, required } => KvOp::Delete {
                ns: s(NAMESPACES[*ns]),
                key: s(KEYS[*key]),
                expect: expect.map(|x| e(x, *ns, *key)),
                required: *required,
            },
            KvSpec::Incr { ns, key, delta, bounds, ttl, required } => KvOp::Incr {
                ns: s(NAMESPACES[*ns]),
                key: s(KEYS[*key]),
                delta: *delta,
                min: bounds.0,
                max: bounds.1,
                ttl_seconds: *ttl,
                required: *required,
            },
            KvSpec::Check { ns, key, expect, required } => KvOp::Check {
                ns: s(NAMESPACES[*ns]),
                key: s(KEYS[*key]),
                expect: e(*expect, *ns, *key),
                required: *required,
            },
            KvSpec::PutWith { ns, key, value, life, expect, required } => KvOp::PutWith {
                ns: s(NAMESPACES[*ns]),
                key: s(KEYS[*key]),
                value: VALUES[*value].as_bytes().to_vec(),
                lifetime: life.map(|l| l.at(at)),
                expect: expect.map(|x| e(x, *ns, *key)),
                required: *required,
            },
            KvSpec::IncrWith { ns, key, delta, life, required } => KvOp::IncrWith {
                ns: s(NAMESPACES[*ns]),
                key: s(KEYS[*key]),
                delta: *delta,
                min: None,
                max: Some(8),
                lifetime: life.map(|l| l.at(at)),
                required: *required,
            },
            KvSpec::Touch { ns, key, life, expect, required } => KvOp::Touch {
                ns: s(NAMESPACES[*ns]),
                key: s(KEYS[*key]),
                lifetime: life.map(|l| l.at(at)),
                expect: expect.map(|x| e(x, *ns, *key)).filter(|v| *v > 0),
                required: *required,
            },
            KvSpec::Configure { ns, life } => {
                KvOp::Configure { ns: s(NAMESPACES[*ns]), expiration: life.map(|l| l.at(at)) }
            }
            KvSpec::Scan { ns, after, limit, keys_only } => KvOp::Scan {
                ns: s(NAMESPACES[*ns]),
                after: after.map(|k| s(KEYS[k])),
                limit: *limit,
                keys_only: *keys_only,
            },
        }
    }

    fn timer(&mut self, spec: &TimerSpec) -> TimerOp {
        match spec {
            TimerSpec::Schedule { queue, key, partition, txn, delay_ms } => {
                let message_id = self.id();
                TimerOp::Schedule(ScheduleOp {
                    queue: TIMER_QUEUES[*queue].into(),
                    timer_key: TIMER_KEYS[*key].into(),
                    partition: PARTITIONS[*partition].into(),
                    txn: format!("timer-{txn}"),
                    message_id,
                    payload: format!("{{\"timer\":{}}}", self.minted).into_bytes(),
                    delay_ms: *delay_ms,
                })
            }
            TimerSpec::Cancel { queue, key } => {
                TimerOp::Cancel { queue: TIMER_QUEUES[*queue].into(), timer_key: TIMER_KEYS[*key].into() }
            }
        }
    }

    fn command(&mut self, step: &Step, model: &Model, at: u64) -> Command {
        match step {
            Step::Noop => Command::Noop,
            Step::Fire => Command::FireTimers,
            Step::Sweep => Command::Sweep,
            Step::Kv(specs) => Command::Kv(KvCmd { ops: specs.iter().map(|k| Self::kv(k, model, at)).collect() }),
            Step::Timers(specs) => Command::Timers(specs.iter().map(|t| self.timer(t)).collect()),
            Step::Txn { pushes, ack, kv, timers } => {
                let mut ops: Vec<TxnOp> = pushes
                    .iter()
                    .map(|p| {
                        let message_id = self.id();
                        TxnOp::Push(PushItem {
                            queue: PUSH_QUEUES[p.queue].into(),
                            partition: PARTITIONS[p.partition].into(),
                            transaction_id: format!("push-{}", p.txn),
                            trace_id: None,
                            message_id,
                            payload: format!("{{\"push\":{}}}", self.minted).into_bytes(),
                        })
                    })
                    .collect();
                if let Some((at_index, no_partition)) = ack {
                    let item = AckItem {
                        partition_id: if *no_partition { 999_999 } else { 1 },
                        transaction_id: "push-0".into(),
                        status: AckStatus::Completed,
                        error: None,
                        lease_id: None,
                    };
                    ops.insert((*at_index).min(ops.len()), TxnOp::Ack { group: "nobody".into(), item });
                }
                Command::Transaction(TxnCmd {
                    ops,
                    kv: kv.iter().map(|k| Self::kv(k, model, at)).collect(),
                    timers: timers.iter().map(|t| self.timer(t)).collect(),
                })
            }
            Step::Restore => unreachable!("handled by the runner"),
        }
    }
}

// ---------------------------------------------------------------------------
// Comparing the state with the model.

type Bodies = BTreeMap<u64, Vec<u8>>;

fn body_at(bodies: &Bodies, pos: u64, len: u32) -> Result<BodyRecord, String> {
    let bytes = bodies.get(&pos).ok_or(format!("no body was written at {pos}"))?;
    if bytes.len() != len as usize {
        return Err(format!("the body at {pos} is {} bytes, not {len}", bytes.len()));
    }
    BodyRecord::decode(bytes).ok_or(format!("the body at {pos} does not decode"))
}

fn check_outcome(expected: &Expected, got: &Outcome, bodies: &Bodies) -> Result<(), String> {
    let mismatch = || format!("outcome {got:?}, the model expects {expected:?}");
    match (expected, got) {
        (Expected::Done, Outcome::Done) => Ok(()),
        (Expected::Kv(want), Outcome::Kv(o)) if want == o => Ok(()),
        (Expected::Timers(want), Outcome::Timers(o)) if want == o => Ok(()),
        (
            Expected::Txn(Err((reason, index, kv))),
            Outcome::Txn(TxnOutcome::Refused { reason: r, failed_index, error, kv: k, .. }),
        ) if r == reason && failed_index == index && k == kv => {
            if error.contains("rolled back") {
                Ok(())
            } else {
                Err(format!("a refused transaction must say it rolled back: {error}"))
            }
        }
        (Expected::Txn(Ok(want)), Outcome::Txn(TxnOutcome::Committed(results))) if want.len() == results.len() => {
            for (w, r) in want.iter().zip(results) {
                match (w, r) {
                    (TxnItem::Push(w), TxnResult::Push(r)) => {
                        let seen = (r.status, r.partition_id, r.offset, r.message_id);
                        if seen != (w.status, w.partition_id, w.offset, w.message_id) {
                            return Err(mismatch());
                        }
                        let body = body_at(bodies, r.pos, r.len)?;
                        if body.id != w.body {
                            return Err(format!("push answer {r:?} points at the body of {:?}", body.id));
                        }
                    }
                    (TxnItem::Kv(w), TxnResult::Kv(r)) if w == r => {}
                    (TxnItem::Timer(w), TxnResult::Timer(r)) if w == r => {}
                    _ => return Err(mismatch()),
                }
            }
            Ok(())
        }
        _ => Err(mismatch()),
    }
}

fn refused(got: &Outcome) -> bool {
    matches!(got, Outcome::Kv(KvOutcome::Refused(_)) | Outcome::Txn(TxnOutcome::Refused { .. }))
}

/// Everything a client or the node can observe, compared field by field.
fn compare(state: &State, model: &Model, bodies: &Bodies) -> Result<(), String> {
    if state.now_ms != model.now {
        return Err(format!("time is {} in the state, {} in the model", state.now_ms, model.now));
    }
    for ns in NAMESPACES {
        for key in KEYS {
            // A clock behind the state's reads as the state's time.
            for at in [model.now.saturating_sub(READ_AHEAD_MS), model.now, model.now + READ_AHEAD_MS] {
                let got = state.kv_read(&[KvOp::Get { ns: ns.into(), key: key.into() }], at);
                let judged = at.max(model.now);
                let want = KvOutcome::Done(vec![KvResult::Got(model.live(ns, key, judged).map(|r| r.view(key, true)))]);
                if got != want {
                    return Err(format!("get {ns}/{key} at {at}: {got:?}, the model has {want:?}"));
                }
            }
            let held = model.rows.contains_key(&(ns.to_string(), key.to_string()));
            if state.kv.default_lifetime(ns) != model.defaults.get(ns).copied() {
                return Err(format!(
                    "default of {ns}: {:?}, the model's {:?}",
                    state.kv.default_lifetime(ns),
                    model.defaults.get(ns)
                ));
            }
            if state.kv.row(ns, key).is_some() != held {
                return Err(format!("{ns}/{key} held by the state: {}, by the model: {held}", !held));
            }
        }
    }
    if state.kv.len() != model.rows.len() {
        return Err(format!("{} rows held, the model holds {}", state.kv.len(), model.rows.len()));
    }
    if state.kv.last_version() != model.last_version {
        return Err(format!("version counter at {}, the model's at {}", state.kv.last_version(), model.last_version));
    }
    let first_expiry = model.rows.values().filter_map(|r| r.expires).min();
    if state.kv.first_expiry() != first_expiry {
        return Err(format!("first expiry {:?}, the model's {first_expiry:?}", state.kv.first_expiry()));
    }

    for queue in TIMER_QUEUES {
        let got: Vec<(String, Timer)> = state
            .timers
            .list(queue, None)
            .map(|(k, r)| {
                let t = Timer {
                    partition: r.partition.clone(),
                    txn: r.txn.clone(),
                    message_id: r.message_id,
                    payload: r.payload.clone(),
                    deliver_at: r.deliver_at_ms,
                    created: r.created_ms,
                };
                (k.to_string(), t)
            })
            .collect();
        let want: Vec<(String, Timer)> =
            model.timers.iter().filter(|((q, _), _)| q == queue).map(|((_, k), t)| (k.clone(), t.clone())).collect();
        if got != want {
            return Err(format!("timers of {queue}: {got:?}, the model has {want:?}"));
        }
        for key in TIMER_KEYS {
            let peek = state.timers.get(queue, key).map(|r| r.deliver_at_ms);
            let want = model.timers.get(&(queue.to_string(), key.to_string())).map(|t| t.deliver_at);
            if peek != want {
                return Err(format!("peek {queue}/{key}: {peek:?}, the model has {want:?}"));
            }
        }
    }
    let next_due = model.timers.values().map(|t| t.deliver_at).min();
    if state.timers.next_due_ms() != next_due || state.timers.len() != model.timers.len() {
        return Err(format!("next timer due {:?}, the model's {next_due:?}", state.timers.next_due_ms()));
    }

    let names: Vec<&String> = state.queue_names.keys().collect();
    let want_names: Vec<&String> = model.queues.keys().collect();
    if names != want_names {
        return Err(format!("queues {names:?}, the model has {want_names:?}"));
    }
    for (name, parts) in &model.queues {
        let q = state.queue(name).ok_or(format!("queue {name} is missing"))?;
        let got: Vec<(&str, u64)> = q.partitions.iter().map(|p| (&*p.name, p.id)).collect();
        let want: Vec<(&str, u64)> = parts.iter().map(|p| (p.name.as_str(), p.id)).collect();
        if got != want {
            return Err(format!("partitions of {name}: {got:?}, the model has {want:?}"));
        }
        for (p, mp) in q.partitions.iter().zip(parts) {
            if p.base != 0 || p.msgs.len() != mp.msgs.len() {
                return Err(format!(
                    "{name}/{}: {} messages from {}, the model has {}",
                    p.name,
                    p.msgs.len(),
                    p.base,
                    mp.msgs.len()
                ));
            }
            for (offset, (meta, m)) in p.msgs.iter().zip(&mp.msgs).enumerate() {
                let b = body_at(bodies, meta.pos, meta.len)?;
                let got = Msg { id: b.id, created: b.created_ms, txn: b.transaction_id, payload: b.payload };
                if got != *m || meta.created_ms != m.created || b.trace_id.is_some() {
                    return Err(format!("{name}/{} offset {offset}: {got:?}, the model has {m:?}", p.name));
                }
            }
        }
    }
    Ok(())
}

/// Runs the steps against a fresh state and a fresh model.
fn run(steps: &[(i64, Step)]) -> Result<(), String> {
    let mut state = State::new();
    let mut model = Model::new();
    let mut bodies = Bodies::new();
    let mut resolver = Resolver { minted: 0 };
    let mut clock = START_MS;
    for (i, (dt, step)) in steps.iter().enumerate() {
        clock = clock.saturating_add_signed(*dt);
        if let Step::Restore = step {
            let restored = State::decode(&state.encode())?;
            if restored != state {
                return Err(format!("step {i}: the restored state differs from the one encoded"));
            }
            state = restored;
            state.check_invariants().map_err(|e| format!("step {i}, after a restore: {e}"))?;
            compare(&state, &model, &bodies).map_err(|e| format!("step {i}, after a restore: {e}"))?;
            continue;
        }
        let at = model.now.max(clock);
        let entry = Entry { now_ms: clock, command: resolver.command(step, &model, at) };
        let before = state.clone();
        let applied = state.apply(&entry);
        let ctx = |e: String| format!("step {i} ({entry:?}): {e}");
        state.check_invariants().map_err(ctx)?;
        if refused(&applied.outcome) {
            let mut was = before;
            was.now_ms = state.now_ms;
            was.applied_entries = state.applied_entries;
            if was != state || !applied.writes.is_empty() {
                return Err(ctx("a refused call changed the state".into()));
            }
        }
        for w in applied.writes {
            if bodies.insert(w.pos, w.bytes).is_some() {
                return Err(ctx(format!("a body was written over at {}", w.pos)));
            }
        }
        let expected = model.apply(&entry);
        check_outcome(&expected, &applied.outcome, &bodies).map_err(ctx)?;
        compare(&state, &model, &bodies).map_err(ctx)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn the_state_agrees_with_the_model(steps in prop::collection::vec(step(), 1..100)) {
        run(&steps).map_err(TestCaseError::fail)?;
    }
}

/// The model is only as good as what it is fed: a fixed run that walks
/// through expiry, sweep, a refused transaction and a restore, so a change
/// that made the generator stop reaching them would still be caught here.
#[test]
fn a_fixed_run_reaches_expiry_refusals_fires_and_a_restore() {
    use KvSpec::*;
    let put = |key, value, ttl, expect, required| Put { ns: 0, key, value, ttl, expect, required };
    let steps = vec![
        (0, Step::Kv(vec![put(0, 1, Some(1), None, false), put(1, 0, None, Some(Expect::Zero), true)])),
        (0, Step::Kv(vec![Incr { ns: 0, key: 1, delta: 5, bounds: (None, Some(4)), ttl: None, required: false }])),
        (0, Step::Timers(vec![TimerSpec::Schedule { queue: 0, key: 0, partition: 0, txn: 0, delay_ms: 500 }])),
        (
            0,
            Step::Txn {
                pushes: vec![PushSpec { queue: 1, partition: 0, txn: 1 }],
                ack: None,
                kv: vec![Check { ns: 0, key: 1, expect: Expect::Stale, required: true }],
                timers: vec![],
            },
        ),
        (0, Step::Restore),
        (1_000, Step::Kv(vec![Get(0, 0), GetPrefix { ns: 0, prefix: 0, after: None, limit: 1, keys_only: false }])),
        (0, Step::Fire),
        (0, Step::Sweep),
        (
            0,
            Step::Txn {
                pushes: vec![PushSpec { queue: 1, partition: 0, txn: 1 }, PushSpec { queue: 1, partition: 0, txn: 1 }],
                ack: Some((1, true)),
                kv: vec![],
                timers: vec![],
            },
        ),
        (
            0,
            Step::Txn {
                pushes: vec![PushSpec { queue: 1, partition: 0, txn: 1 }, PushSpec { queue: 1, partition: 0, txn: 1 }],
                ack: None,
                kv: vec![put(0, 2, None, Some(Expect::Zero), true)],
                timers: vec![TimerSpec::Cancel { queue: 0, key: 0 }],
            },
        ),
        (0, Step::Restore),
        (0, Step::Kv(vec![Delete { ns: 0, key: 1, expect: Some(Expect::Current), required: true }])),
    ];
    run(&steps).unwrap();
}
