//! Tenants: isolated states inside one state.
//!
//! A command wrapped in `Command::ForTenant` applies to that tenant's own
//! [`State`] (created on first use), never to another's: queues, partitions,
//! consumer groups, leases, KV rows, locks and timers of two tenants share
//! nothing, not even names. The top-level state is the default tenant's.
//!
//! Message bodies of every tenant share one body store, so body positions
//! are allocated from the top-level cursor: a tenant's state borrows it for
//! the length of one command and hands it back.
//!
//! Leader chores (firing timers, sweeping) apply to every tenant.

use crate::body::BodyWrite;
use crate::command::Command;
use crate::outcome::Outcome;
use crate::state::State;

impl State {
    /// Applies `command` to `tenant`'s state at the top-level state's time.
    pub(crate) fn apply_for_tenant(&mut self, tenant: &str, command: &Command, writes: &mut Vec<BodyWrite>) -> Outcome {
        // A nested tenant wrapper would escape isolation; the edge never
        // builds one, and the core refuses to follow it.
        if matches!(command, Command::ForTenant { .. }) {
            return Outcome::Done;
        }
        let (now, body_pos) = (self.now_ms, self.next_body_pos);
        let t = self.tenants.entry(tenant.to_string()).or_default();
        t.now_ms = t.now_ms.max(now);
        t.applied_entries += 1;
        t.next_body_pos = body_pos;
        t.expire_leases();
        let outcome = t.apply_command(command, writes);
        let after = t.next_body_pos;
        assert!(after >= body_pos, "a tenant's body cursor went back");
        self.next_body_pos = after;
        outcome
    }

    /// Runs a leader chore on every tenant's state as well.
    pub(crate) fn for_each_tenant(
        &mut self,
        writes: &mut Vec<BodyWrite>,
        chore: impl Fn(&mut State, &mut Vec<BodyWrite>),
    ) {
        let (now, mut body_pos) = (self.now_ms, self.next_body_pos);
        for t in self.tenants.values_mut() {
            t.now_ms = t.now_ms.max(now);
            t.next_body_pos = body_pos;
            t.expire_leases();
            chore(t, writes);
            body_pos = t.next_body_pos;
        }
        self.next_body_pos = body_pos;
    }

    /// The state of `tenant`, if it ever had a command applied.
    pub fn tenant(&self, tenant: &str) -> Option<&State> {
        self.tenants.get(tenant)
    }

    /// The earliest due time of any timer, across tenants.
    pub fn next_timer_due_ms(&self) -> Option<u64> {
        let own = self.timers.next_due_ms();
        self.tenants.values().filter_map(State::next_timer_due_ms).chain(own).min()
    }

    /// Whether a sweep would free anything, across tenants: expired KV rows
    /// or queues with retention.
    pub fn wants_sweep(&self, now_ms: u64) -> bool {
        self.kv.first_expiry().is_some_and(|e| e <= now_ms)
            || self.jobs.wants_sweep(now_ms)
            || self.queues.values().any(|q| q.options.retention() != (0, 0))
            || self.tenants.values().any(|t| t.wants_sweep(now_ms))
    }
}
