//! Locks and semaphores. A lock is a semaphore of one permit; a permit is a
//! lease with an owner, an expiry and a fencing token.
//!
//! A permit is a KV row: namespace [`LOCK_NAMESPACE`], key `<name>#<slot>`,
//! value `{"owner": .., "since": ..}`, the lock's lifetime as its expiry, and
//! the row's version as the token. So the token rises at every renew and for
//! every new holder (versions only rise), a transaction's `check` guard on
//! the row verifies the permit is still the caller's, and an expired permit
//! is free the moment its expiry passes, like any KV row.
//!
//! The semaphore's limit is the caller's and stored nowhere: an acquire
//! looks for a free slot in `0..limit`.

use serde::{Deserialize, Serialize};

use regina_types::time::{format_iso, parse_iso};

use crate::command::{LockOp, LocksCmd};
use crate::kv::{expiry_after, KvRow, KvStore};
use crate::outcome::{LockHolder, LockResult};
use crate::state::State;

/// The KV namespace that holds every permit.
pub const LOCK_NAMESPACE: &str = "queen-locks";

/// The KV key of one permit.
pub fn permit_key(name: &str, slot: u32) -> String {
    format!("{name}#{slot}")
}

/// What a permit row's value holds. Rows written by hand through the KV
/// routes may hold anything; what cannot be read counts as no owner.
#[derive(Debug, Default, Serialize, Deserialize)]
struct PermitValue {
    #[serde(default)]
    owner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    since: Option<String>,
}

impl PermitValue {
    fn read(value: &[u8]) -> PermitValue {
        serde_json::from_slice(value).unwrap_or_default()
    }
}

fn holder(slot: u32, row: &KvRow) -> LockHolder {
    let v = PermitValue::read(&row.value);
    LockHolder {
        slot,
        owner: v.owner,
        token: row.version,
        since_ms: v.since.as_deref().and_then(parse_iso),
        expires_ms: row.expires_ms,
        renewed_ms: row.updated_ms,
    }
}

impl KvStore {
    /// The live permits of a lock, by slot.
    pub fn permits(&self, name: &str, now_ms: u64) -> Vec<LockHolder> {
        let prefix = format!("{name}#");
        let mut out: Vec<LockHolder> = self
            .scan(LOCK_NAMESPACE, &prefix, None)
            .filter(|(_, row)| row.is_live(now_ms))
            .filter_map(|(key, row)| {
                let suffix = &key[prefix.len()..];
                let slot: u32 = suffix.parse().ok().filter(|s: &u32| s.to_string() == suffix)?;
                Some(holder(slot, row))
            })
            .collect();
        out.sort_by_key(|h| h.slot);
        out
    }

    fn permit(&self, name: &str, slot: u32, now_ms: u64) -> Option<&KvRow> {
        self.live(LOCK_NAMESPACE, &permit_key(name, slot), now_ms)
    }

    fn write_permit(&mut self, name: &str, slot: u32, value: Vec<u8>, ttl_seconds: u64, now_ms: u64) -> u64 {
        // A renew keeps the permit row's creation, as any write to a live row.
        let created_ms = self.permit(name, slot, now_ms).map_or(now_ms, |r| r.created_ms);
        let version = self.mint_version();
        let expires_ms = expiry_after(now_ms, Some(ttl_seconds));
        let row = KvRow { value, version, expires_ms, updated_ms: now_ms, created_ms };
        self.put(LOCK_NAMESPACE, &permit_key(name, slot), row);
        version
    }

    fn lost(&self, name: &str, slot: u32, now_ms: u64) -> LockResult {
        let holders = self.permit(name, slot, now_ms).map(|r| holder(slot, r)).into_iter().collect();
        LockResult::Lost { slot, holders }
    }

    fn acquire(&mut self, name: &str, ttl_seconds: u64, owner: Option<&str>, limit: u32, now: u64) -> LockResult {
        let holders = self.permits(name, now);
        // The owner's retry of an acquire that won answers the same permit.
        if let Some(h) = owner.and_then(|o| holders.iter().find(|h| h.owner.as_deref() == Some(o))) {
            return LockResult::Acquired { slot: h.slot, token: h.token, owner: h.owner.clone(), already: true };
        }
        let Some(slot) = (0..limit).find(|s| !holders.iter().any(|h| h.slot == *s)) else {
            return LockResult::Held { holders };
        };
        let value = PermitValue { owner: owner.map(str::to_string), since: Some(format_iso(now)) };
        let bytes = serde_json::to_vec(&value).expect("a permit value always encodes");
        let token = self.write_permit(name, slot, bytes, ttl_seconds, now);
        LockResult::Acquired { slot, token, owner: value.owner, already: false }
    }

    /// A renew with the current token, or with a stale one by the row's
    /// own owner (its earlier renew landed but the answer was lost), moves
    /// the permit to a new, higher token and a fresh lifetime.
    fn renew(
        &mut self,
        name: &str,
        token: u64,
        ttl_seconds: u64,
        slot: u32,
        owner: Option<&str>,
        now: u64,
    ) -> LockResult {
        let Some(row) = self.permit(name, slot, now) else {
            return self.lost(name, slot, now);
        };
        // A renew naming an owner is the holder's only if the owner matches
        // (then a stale token is its own lost earlier answer); one naming no
        // owner must carry the current token.
        let holder = PermitValue::read(&row.value).owner;
        let mine = match owner {
            Some(o) => holder.as_deref() == Some(o),
            None => row.version == token,
        };
        if !mine {
            return self.lost(name, slot, now);
        }
        let value = row.value.clone();
        let token = self.write_permit(name, slot, value, ttl_seconds, now);
        LockResult::Renewed { slot, token }
    }

    fn release(&mut self, name: &str, token: u64, slot: u32, now: u64) -> LockResult {
        match self.permit(name, slot, now) {
            Some(row) if row.version == token => {
                self.remove(LOCK_NAMESPACE, &permit_key(name, slot));
                LockResult::Released { slot }
            }
            _ => self.lost(name, slot, now),
        }
    }
}

impl State {
    pub(crate) fn locks_call(&mut self, cmd: &LocksCmd) -> Vec<LockResult> {
        let now = self.now_ms;
        cmd.ops
            .iter()
            .map(|op| match op {
                LockOp::Acquire { name, ttl_seconds, owner, limit } => {
                    self.kv.acquire(name, *ttl_seconds, owner.as_deref(), *limit, now)
                }
                LockOp::Renew { name, token, ttl_seconds, slot, owner } => {
                    self.kv.renew(name, *token, *ttl_seconds, *slot, owner.as_deref(), now)
                }
                LockOp::Release { name, token, slot } => self.kv.release(name, *token, *slot, now),
                LockOp::Get { name } => LockResult::Holders(self.kv.permits(name, now)),
            })
            .collect()
    }

    /// Answers `get` operations without a log entry, as of `now_ms`.
    pub fn locks_read(&self, names: &[&str], now_ms: u64) -> Vec<LockResult> {
        let now = now_ms.max(self.now_ms);
        names.iter().map(|n| LockResult::Holders(self.kv.permits(n, now))).collect()
    }
}
