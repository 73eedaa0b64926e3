//! The key/value store: per (namespace, key) a JSON value, a version and an
//! expiry.
//!
//! Versions come from one counter shared by every key and only ever rise, so
//! on one key a later write always carries a higher version than every
//! earlier one, across a delete and re-create too. Lock tokens are row
//! versions, which is what makes a later holder's token higher.
//!
//! An expired row is invisible at once: every read and every precondition
//! compares its expiry with the time it is judged at. Rows leave memory only
//! through the sweep entry ([`KvStore::sweep`]), never through a clock.
//!
//! A row stores its lifetime only as the absolute deadline that resulted
//! (`expires_ms`), whatever kind the write named, so the expiry index and
//! the sweep treat every kind alike. A namespace may hold a default
//! [`Lifetime`] for writes that name none.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use serde::{Deserialize, Serialize};

use crate::command::Lifetime;
use crate::outcome::KvRowView;

/// Named with the other limits; re-exported where the sweep always found it.
pub use regina_types::limits::KV_SWEEP_ROWS_MAX;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvRow {
    /// Compact JSON text, as received.
    #[serde(with = "serde_bytes")]
    pub value: Vec<u8>,
    pub version: u64,
    /// `None`: forever.
    pub expires_ms: Option<u64>,
    pub updated_ms: u64,
    /// The write that created the row; later writes keep it while the row
    /// is live, and a write after its expiry starts a new row.
    pub created_ms: u64,
}

impl KvRow {
    /// Live strictly before its expiry instant.
    pub fn is_live(&self, now_ms: u64) -> bool {
        self.expires_ms.is_none_or(|e| e > now_ms)
    }

    pub fn view(&self, key: &str, with_value: bool) -> KvRowView {
        KvRowView {
            key: key.to_string(),
            value: with_value.then(|| self.value.clone()),
            version: self.version,
            expires_ms: self.expires_ms,
            updated_ms: self.updated_ms,
            created_ms: self.created_ms,
        }
    }
}

/// The instant `ttl_seconds` after `now_ms`; `None` (forever) stays `None`.
pub fn expiry_after(now_ms: u64, ttl_seconds: Option<u64>) -> Option<u64> {
    ttl_seconds.map(|s| now_ms.saturating_add(s.saturating_mul(1000)))
}

impl Lifetime {
    /// The deadline of a row written at `now_ms` whose creation is
    /// `created_ms` (`now_ms` for a new row). `None`: never.
    pub fn deadline(self, now_ms: u64, created_ms: u64) -> Option<u64> {
        match self {
            Lifetime::Forever => None,
            Lifetime::Seconds(s) => expiry_after(now_ms, Some(s)),
            Lifetime::At(at) => Some(at),
            Lifetime::AfterCreation(ms) => Some(created_ms.saturating_add(ms)),
            Lifetime::AfterUpdate(ms) => Some(now_ms.saturating_add(ms)),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct KvStore {
    /// Namespace, then key. BTreeMaps: prefix scans walk them in key order.
    spaces: BTreeMap<String, BTreeMap<String, KvRow>>,
    /// (expiry, namespace, key) of every row that expires.
    expiry: BTreeSet<(u64, String, String)>,
    /// The highest version ever handed out.
    last_version: u64,
    /// Namespace defaults: the lifetime a write naming none takes. Kept
    /// apart from `spaces`, so a namespace keeps its default while empty.
    defaults: BTreeMap<String, Lifetime>,
}

impl KvStore {
    /// The row, whether live or not.
    pub fn row(&self, ns: &str, key: &str) -> Option<&KvRow> {
        self.spaces.get(ns)?.get(key)
    }

    /// The row if it is live at `now_ms`.
    pub fn live(&self, ns: &str, key: &str, now_ms: u64) -> Option<&KvRow> {
        self.row(ns, key).filter(|r| r.is_live(now_ms))
    }

    /// Rows of `ns` whose key starts with `prefix` and sorts after `after`,
    /// in key order, live or not.
    pub fn scan<'a>(
        &'a self,
        ns: &str,
        prefix: &'a str,
        after: Option<&'a str>,
    ) -> impl Iterator<Item = (&'a String, &'a KvRow)> + 'a {
        let lower = match after {
            Some(a) if a >= prefix => Bound::Excluded(a),
            _ => Bound::Included(prefix),
        };
        self.spaces
            .get(ns)
            .into_iter()
            .flat_map(move |m| m.range::<str, _>((lower, Bound::Unbounded)))
            .take_while(move |(k, _)| k.starts_with(prefix))
    }

    /// Every namespace holding a row, in name order, with its rows (live
    /// or not), for listings.
    pub fn namespaces(&self) -> impl Iterator<Item = (&str, usize)> {
        self.spaces.iter().map(|(ns, rows)| (ns.as_str(), rows.len()))
    }

    /// The default expiration of `ns`, if it has one.
    pub fn default_lifetime(&self, ns: &str) -> Option<Lifetime> {
        self.defaults.get(ns).copied()
    }

    pub(crate) fn set_default(&mut self, ns: &str, lifetime: Option<Lifetime>) {
        match lifetime {
            Some(l) => self.defaults.insert(ns.to_string(), l),
            None => self.defaults.remove(ns),
        };
    }

    pub fn last_version(&self) -> u64 {
        self.last_version
    }

    /// Hands out the next version.
    pub(crate) fn mint_version(&mut self) -> u64 {
        self.last_version += 1;
        self.last_version
    }

    /// Moves the counter up to `v` (a staged call minted up to there).
    pub(crate) fn advance_version(&mut self, v: u64) {
        self.last_version = self.last_version.max(v);
    }

    /// Stores a row, replacing any row of the same key.
    pub(crate) fn put(&mut self, ns: &str, key: &str, row: KvRow) {
        assert!(row.version <= self.last_version, "a version that was never minted");
        self.remove(ns, key);
        if let Some(e) = row.expires_ms {
            self.expiry.insert((e, ns.to_string(), key.to_string()));
        }
        self.spaces.entry(ns.to_string()).or_default().insert(key.to_string(), row);
    }

    pub(crate) fn remove(&mut self, ns: &str, key: &str) -> Option<KvRow> {
        let space = self.spaces.get_mut(ns)?;
        let row = space.remove(key)?;
        if space.is_empty() {
            self.spaces.remove(ns);
        }
        if let Some(e) = row.expires_ms {
            self.expiry.remove(&(e, ns.to_string(), key.to_string()));
        }
        Some(row)
    }

    /// The earliest expiry of any row, for deciding whether to sweep.
    pub fn first_expiry(&self) -> Option<u64> {
        self.expiry.first().map(|(e, _, _)| *e)
    }

    /// Drops up to `max_rows` rows that expired at or before `now_ms`.
    pub(crate) fn sweep(&mut self, now_ms: u64, max_rows: usize) -> usize {
        let mut dropped = 0;
        while dropped < max_rows {
            let Some((e, ns, key)) = self.expiry.first().cloned() else { break };
            if e > now_ms {
                break;
            }
            self.remove(&ns, &key);
            dropped += 1;
        }
        dropped
    }

    /// Rows held, live or not.
    pub fn len(&self) -> usize {
        self.spaces.values().map(|m| m.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.spaces.is_empty()
    }

    /// The expiry index matches the rows; no version was handed out twice
    /// or exceeds the counter.
    pub fn check(&self) -> Result<(), String> {
        let mut expiring = 0;
        for (ns, space) in &self.spaces {
            if space.is_empty() {
                return Err(format!("empty namespace {ns} kept"));
            }
            for (key, row) in space {
                if row.version == 0 || row.version > self.last_version {
                    return Err(format!("kv {ns}/{key} has version {} past the counter", row.version));
                }
                if let Some(e) = row.expires_ms {
                    expiring += 1;
                    if !self.expiry.contains(&(e, ns.clone(), key.clone())) {
                        return Err(format!("kv {ns}/{key} missing from the expiry index"));
                    }
                }
            }
        }
        if expiring != self.expiry.len() {
            return Err("kv expiry index holds rows that do not exist".into());
        }
        Ok(())
    }
}
