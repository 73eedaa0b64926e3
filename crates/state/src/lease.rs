//! The lease table: which partitions each lease id holds, when it lapses,
//! and extension. A lapsed lease hands its batch back without charging a
//! retry: lapsing is the consumer's silence, not the message's failure.

use crate::outcome::ExtendResult;
use crate::state::{LeaseEntry, State};

impl State {
    /// Records that `lease_id` now holds (queue, partition, group).
    pub(crate) fn lease_add_claim(&mut self, lease_id: &str, claim: (u32, u32, u32), expires_ms: u64) {
        let e =
            self.leases.entry(lease_id.to_string()).or_insert_with(|| LeaseEntry { claims: Vec::new(), expires_ms });
        e.claims.push(claim);
        if e.claims.len() == 1 {
            self.lease_expiry.insert((expires_ms, lease_id.to_string()));
        }
    }

    /// Clears the lease slot of one claim (settled, nacked or lapsed) and
    /// drops the lease from the table once it holds nothing.
    pub(crate) fn lease_release(&mut self, lease_id: &str, claim: (u32, u32, u32)) {
        let (qid, pidx, gid) = claim;
        if let Some(q) = self.queues.get_mut(&qid) {
            if let Some(c) = q.partition_mut(pidx).and_then(|p| p.cursor_mut(gid)) {
                if c.lease.as_ref().is_some_and(|l| l.id == lease_id) {
                    c.lease = None;
                }
            }
            q.mark_ready_for(gid, pidx);
        }
        let Some(e) = self.leases.get_mut(lease_id) else {
            return;
        };
        e.claims.retain(|x| *x != claim);
        if e.claims.is_empty() {
            let expires = e.expires_ms;
            self.leases.remove(lease_id);
            self.lease_expiry.remove(&(expires, lease_id.to_string()));
        }
    }

    /// Releases every lease whose expiry is at or before now.
    pub(crate) fn expire_leases(&mut self) {
        let now = self.now_ms;
        while let Some((expires, id)) = self.lease_expiry.first().cloned() {
            if expires > now {
                break;
            }
            self.lease_expiry.pop_first();
            if let Some(e) = self.leases.remove(&id) {
                for (qid, pidx, gid) in e.claims {
                    let Some(q) = self.queues.get_mut(&qid) else { continue };
                    if let Some(c) = q.partition_mut(pidx).and_then(|p| p.cursor_mut(gid)) {
                        if c.lease.as_ref().is_some_and(|l| l.id == id) {
                            c.lease = None;
                        }
                    }
                    q.mark_ready_for(gid, pidx);
                }
            }
        }
    }

    /// Renews every live claim of a lease from now, by `duration_ms` when the
    /// caller names one, else by the length the lease was taken for.
    pub(crate) fn extend_lease(&mut self, lease_id: &str, duration_ms: Option<u64>) -> ExtendResult {
        let now = self.now_ms;
        let Some(e) = self.leases.get(lease_id) else {
            return ExtendResult::default();
        };
        let (old_expiry, claims) = (e.expires_ms, e.claims.clone());
        let mut renewed = 0;
        let mut new_expiry = old_expiry;
        for (qid, pidx, gid) in claims {
            let slot = self
                .queues
                .get_mut(&qid)
                .and_then(|q| q.partition_mut(pidx))
                .and_then(|p| p.cursor_mut(gid))
                .and_then(|c| c.lease.as_mut())
                .filter(|l| l.id == lease_id && l.is_live(now));
            if let Some(l) = slot {
                l.expires_ms = now.saturating_add(duration_ms.unwrap_or(l.duration_ms));
                new_expiry = new_expiry.max(l.expires_ms);
                renewed += 1;
            }
        }
        if renewed == 0 {
            return ExtendResult::default();
        }
        self.lease_expiry.remove(&(old_expiry, lease_id.to_string()));
        self.lease_expiry.insert((new_expiry, lease_id.to_string()));
        if let Some(e) = self.leases.get_mut(lease_id) {
            e.expires_ms = new_expiry;
        }
        ExtendResult { renewed, expires_ms: Some(new_expiry) }
    }
}
