//! Leadership balancing: each node leads about `groups / voters` of the
//! node's Raft groups, so that N nodes share the write load.
//!
//! Every group has a preferred leader: the voter an operator pinned it to
//! (see [`PIN_TENANT`]), else the voter at position `group % voters` in id
//! order. Each node runs one balancer ([`spawn`]) over its groups. For a
//! group it leads whose preferred leader is another, live, caught-up voter,
//! it hands the leadership over when the group is pinned there, or when this
//! node leads more groups than that voter and more than its fair share
//! (`ceil(groups / voters)`). Moves go only toward preferred leaders, so
//! they end: at formation, after a node joins, and after a failed node
//! returns, leadership settles at the preferred leaders or at a spread where
//! no node leads more than its share. While a node is down, its groups stay
//! with whoever Raft elected.
//!
//! A move is a targeted election, the means openraft 0.9 offers
//! ([`move_leader`]): the leader stops taking requests into the group
//! (new ones wait at the route layer, [`Handoff`]), waits for the requests
//! it is serving and the entries in flight, waits until the target holds its
//! whole log, then asks the target to campaign (`/internal/raft/campaign`).
//! The old leader's own leader lease has expired (it has led for longer
//! than the lease, [`LEAD_SETTLE`]), so it grants the vote of a candidate
//! whose log is as long as its own and steps down; with it the candidate
//! has a majority of three. Nothing committed can be lost (Raft's election
//! rule), and an entry in flight is answered once: by its apply, or, cut
//! from the log, as never written. The requests that waited are then
//! forwarded to the new leader.
//!
//! Moves are paced: a node moves one group at a time, [`MOVE_GAP`] apart,
//! and only groups it has led for [`LEAD_SETTLE`]; a target that did not
//! answer is left alone for a doubling [`BACKOFF_MIN`].

use regina_types::limits::{CATCH_UP_LAG_ENTRIES_MAX, HANDOFF_WAIT_MS_MAX, LEAD_SETTLE_MS};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::membership::Leader;
use crate::replica::Replica;
use regina_consensus::network::group_path;

/// How often the balancer looks at the groups and samples their load.
const TICK: Duration = Duration::from_millis(250);
/// A group is moved only after this node has led it this long: longer than
/// openraft's leader lease (`election_timeout_max`), so the old leader
/// grants the target's vote.
pub const LEAD_SETTLE: Duration = Duration::from_millis(LEAD_SETTLE_MS);
/// Pause between two moves of one node.
const MOVE_GAP: Duration = Duration::from_millis(400);
/// How long a move waits for the requests being served to finish before it
/// holds new entries anyway (a long poll may be parked for seconds).
const DRAIN_MAX: Duration = Duration::from_millis(800);
/// How long a move waits for the entries in flight to be answered.
const HOLD_MAX: Duration = Duration::from_secs(2);
/// How long a move waits for the target to hold the whole log.
const CATCH_UP_MAX: Duration = Duration::from_secs(2);
/// How long the target campaigns before the move is given up.
const CAMPAIGN_MAX: Duration = Duration::from_secs(3);
/// How long a request waits at the route layer while its group is handed
/// over.
pub const HANDOFF_WAIT_MAX: Duration = Duration::from_millis(HANDOFF_WAIT_MS_MAX);
/// First pause before trying a target again that did not take a group.
const BACKOFF_MIN: Duration = Duration::from_secs(2);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// A target is caught up enough to try when it is at most this many
/// entries behind; the move then waits for the rest.
const CATCH_UP_LAG: u64 = CATCH_UP_LAG_ENTRIES_MAX;
/// The window load rates are measured over.
const LOAD_WINDOW: Duration = Duration::from_secs(2);

/// The reserved tenant of group 0 that keeps the operator's preferred
/// leaders, as KV rows `leaders/{group}` holding a node id. A tenant name
/// cannot contain `@`, so no client can read or write it; the rows travel
/// through the log like any write.
pub const PIN_TENANT: &str = "@regina";
/// The KV namespace of the pins inside [`PIN_TENANT`].
pub const PIN_NAMESPACE: &str = "leaders";

/// A group's hand-over in progress: requests wait at the route layer while
/// it lasts, and the move waits for the requests already being served.
#[derive(Default)]
pub struct Handoff {
    moving: tokio::sync::watch::Sender<bool>,
    serving: AtomicUsize,
    idle: tokio::sync::Notify,
}

/// A request served by the group's leader; counted until dropped.
pub struct Serving<'a>(&'a Handoff);

impl Drop for Serving<'_> {
    fn drop(&mut self) {
        if self.0.serving.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

/// The hand-over lasts until this is dropped.
struct Moving<'a>(&'a Handoff);

impl Drop for Moving<'_> {
    fn drop(&mut self) {
        self.0.moving.send_replace(false);
    }
}

impl Handoff {
    pub fn moving(&self) -> bool {
        *self.moving.borrow()
    }

    /// Counts a request about to be served here; `None` (and nothing
    /// counted) while the group is being handed over.
    pub fn serve(&self) -> Option<Serving<'_>> {
        self.serving.fetch_add(1, Ordering::SeqCst);
        let guard = Serving(self);
        if self.moving() {
            return None;
        }
        Some(guard)
    }

    /// Waits (bounded) until no hand-over is in progress; answers whether
    /// it waited.
    pub async fn wait(&self) -> bool {
        if !self.moving() {
            return false;
        }
        let mut rx = self.moving.subscribe();
        let _ = tokio::time::timeout(HANDOFF_WAIT_MAX, rx.wait_for(|m| !*m)).await;
        true
    }

    fn begin(&self) -> Moving<'_> {
        self.moving.send_replace(true);
        Moving(self)
    }

    /// Waits until no request is being served here, up to `within`.
    async fn drained(&self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            let idle = self.idle.notified();
            if self.serving.load(Ordering::SeqCst) == 0 {
                return true;
            }
            if tokio::time::timeout_at(deadline, idle).await.is_err() {
                return self.serving.load(Ordering::SeqCst) == 0;
            }
        }
    }
}

/// A group's write load, per second.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Load {
    /// Log entries appended (a batch of requests is one), as every replica
    /// sees them.
    pub entries_per_sec: f64,
    /// Requests this node proposed (zero unless it leads the group).
    pub requests_per_sec: f64,
    /// Log record bytes appended.
    pub bytes_per_sec: f64,
}

/// Turns the proposer's counters into rates over [`LOAD_WINDOW`].
#[derive(Default)]
pub struct LoadMeter {
    inner: parking_lot::Mutex<MeterState>,
}

#[derive(Default)]
struct MeterState {
    since: Option<(Instant, [u64; 3])>,
    rates: Load,
}

impl LoadMeter {
    fn sample(&self, counters: [u64; 3]) {
        let now = Instant::now();
        let mut st = self.inner.lock();
        match st.since {
            Some((at, before)) if now - at >= LOAD_WINDOW => {
                let secs = (now - at).as_secs_f64();
                let rate = |i: usize| (counters[i].saturating_sub(before[i])) as f64 / secs;
                st.rates = Load { entries_per_sec: rate(0), requests_per_sec: rate(1), bytes_per_sec: rate(2) };
                st.since = Some((now, counters));
            }
            Some(_) => {}
            None => st.since = Some((now, counters)),
        }
    }

    pub fn rates(&self) -> Load {
        self.inner.lock().rates
    }
}

/// The preferred leader of `group` among `voters` (sorted): the pinned
/// voter, else the one at position `group % voters`.
pub fn preferred(group: u16, voters: &[u64], pin: Option<u64>) -> Option<u64> {
    if let Some(p) = pin.filter(|p| voters.contains(p)) {
        return Some(p);
    }
    if voters.is_empty() {
        return None;
    }
    Some(voters[group as usize % voters.len()])
}

/// Which group to hand to whom, if any: the lowest group this node (`me`)
/// leads, has led long enough (`settled`), whose preferred leader `p` is
/// another voter that `eligible` accepts and that is pinned there or
/// leads fewer groups than `me`, while `me` leads more than its share.
pub fn next_move(
    me: u64,
    leaders: &[Option<u64>],
    voters: &[u64],
    pins: &BTreeMap<u16, u64>,
    settled: impl Fn(u16) -> bool,
    eligible: impl Fn(u64) -> bool,
) -> Option<(u16, u64)> {
    if voters.len() < 2 || !voters.contains(&me) {
        return None;
    }
    let mut counts: BTreeMap<u64, usize> = voters.iter().map(|v| (*v, 0)).collect();
    for l in leaders.iter().flatten() {
        if let Some(c) = counts.get_mut(l) {
            *c += 1;
        }
    }
    let share = leaders.len().div_ceil(voters.len());
    let mine = counts[&me];
    for (g, leader) in leaders.iter().enumerate() {
        let g = g as u16;
        if *leader != Some(me) || !settled(g) {
            continue;
        }
        let pin = pins.get(&g).copied();
        let Some(p) = preferred(g, voters, pin) else { continue };
        if p == me || !eligible(p) {
            continue;
        }
        let pinned = pin == Some(p);
        if pinned || (mine > counts[&p] && mine > share) {
            return Some((g, p));
        }
    }
    None
}

/// The operator's preferred-leader pins, as group 0 holds them.
pub fn pins(node0: &Replica) -> BTreeMap<u16, u64> {
    let machine = node0.shared.machine.read();
    let Some(state) = machine.state.tenant(PIN_TENANT) else { return BTreeMap::new() };
    let now = machine.state.now_ms;
    let mut out = BTreeMap::new();
    for (key, row) in state.kv.scan(PIN_NAMESPACE, "", None) {
        if row.expires_ms.is_some_and(|e| e <= now) {
            continue;
        }
        let (Ok(g), Ok(id)) = (key.parse::<u16>(), std::str::from_utf8(&row.value).unwrap_or("").parse::<u64>()) else {
            continue;
        };
        out.insert(g, id);
    }
    out
}

/// Starts the node's balancer over all its groups.
pub fn spawn(nodes: Vec<Arc<Replica>>) {
    tokio::spawn(async move {
        let mut led_since: HashMap<u16, (u64, Instant)> = HashMap::new();
        let mut backoff: HashMap<u64, (Instant, Duration)> = HashMap::new();
        let mut last_move = Instant::now();
        let node0 = nodes[0].clone();
        loop {
            tokio::select! {
                _ = tokio::time::sleep(TICK) => {}
                _ = node0.stopped() => return,
            }
            let now = Instant::now();
            let mut leaders = Vec::with_capacity(nodes.len());
            for n in &nodes {
                n.load.sample(n.written());
                let m = n.raft.metrics().borrow().clone();
                leaders.push(m.current_leader);
                if m.current_leader == Some(n.id) {
                    let e = led_since.entry(n.group).or_insert((m.current_term, now));
                    if e.0 != m.current_term {
                        *e = (m.current_term, now);
                    }
                } else {
                    led_since.remove(&n.group);
                }
            }
            // A node of one group still moves it when an operator pins it
            // elsewhere (`next_move` moves a lone group only for a pin).
            if now - last_move < MOVE_GAP {
                continue;
            }
            let voters: Vec<u64> = node0.raft.metrics().borrow().membership_config.membership().voter_ids().collect();
            let pins = pins(&node0);
            let settled = |g: u16| led_since.get(&g).is_some_and(|(_, at)| now - *at >= LEAD_SETTLE);
            let eligible = |p: u64| backoff.get(&p).is_none_or(|(until, _)| now >= *until);
            let Some((g, target)) = next_move(node0.id, &leaders, &voters, &pins, settled, eligible) else {
                continue;
            };
            let node = &nodes[g as usize];
            if !caught_up_enough(node, target) {
                continue;
            }
            let result = move_leader(node, target).await;
            last_move = Instant::now();
            match result {
                Ok(()) => {
                    tracing::info!("group {g}: leadership handed to node {target}");
                    backoff.remove(&target);
                }
                Err(why) => {
                    let next = backoff.get(&target).map_or(BACKOFF_MIN, |(_, d)| (*d * 2).min(BACKOFF_MAX));
                    tracing::info!("group {g}: leadership not handed to node {target}: {why}; next try in {next:?}");
                    backoff.insert(target, (Instant::now() + next, next));
                }
            }
        }
    });
}

/// Whether `target` is at most [`CATCH_UP_LAG`] entries behind as the
/// leader sees it.
fn caught_up_enough(node: &Replica, target: u64) -> bool {
    let m = node.raft.metrics().borrow().clone();
    let last = m.last_log_index.unwrap_or(0);
    let matched = m.replication.as_ref().and_then(|r| r.get(&target).cloned()).flatten().map_or(0, |l| l.index);
    last.saturating_sub(matched) <= CATCH_UP_LAG
}

/// Hands `node`'s group (which this node leads) to `target`. `Ok` once
/// `target` leads it.
pub async fn move_leader(node: &Replica, target: u64) -> Result<(), String> {
    let addr = {
        let m = node.raft.metrics().borrow().clone();
        if m.current_leader != Some(node.id) {
            return Err("this node does not lead the group".into());
        }
        let membership = m.membership_config.membership();
        if !membership.voter_ids().any(|v| v == target) {
            return Err(format!("node {target} is not a voter"));
        }
        membership.get_node(&target).map(|n| n.addr.clone()).ok_or("no address")?
    };
    // A target that does not answer its health check is not asked; nothing
    // has been paused yet.
    let probe = node
        .forwarder
        .get(format!("{}://{addr}/health", node.peer_scheme))
        .timeout(Duration::from_millis(800))
        .send()
        .await;
    if let Err(e) = probe {
        return Err(format!("node {target} at {addr} did not answer: {e}"));
    }
    let started = Instant::now();
    let moving = node.handoff.begin();
    node.handoff.drained(DRAIN_MAX).await;
    // An entry that cannot commit (no quorum) would keep the hold waiting:
    // the move is given up instead.
    let hold = match tokio::time::timeout(HOLD_MAX, node.hold_proposals()).await {
        Ok(Some(hold)) => hold,
        Ok(None) => return Err("the node is stopping".into()),
        Err(_) => return Err(format!("entries in flight were not answered within {HOLD_MAX:?}")),
    };
    let last = node.raft.metrics().borrow().last_log_index.unwrap_or(0);
    let caught_up = node
        .raft
        .wait(Some(CATCH_UP_MAX))
        .metrics(
            |m| m.replication.as_ref().and_then(|r| r.get(&target).cloned()).flatten().is_some_and(|l| l.index >= last),
            "the target holds the whole log",
        )
        .await;
    if caught_up.is_err() {
        return Err(format!("node {target} did not catch up within {CATCH_UP_MAX:?}"));
    }
    let url = format!("{}://{addr}{}", node.peer_scheme, group_path(node.group, CAMPAIGN_PATH));
    let body = serde_json::json!({ "lastLogIndex": last });
    let asked = node.forwarder.post(&url).json(&body).timeout(CAMPAIGN_MAX + Duration::from_secs(1)).send().await;
    let answered = match asked {
        Ok(resp) if resp.status().is_success() => Ok(()),
        Ok(resp) => Err(format!("node {target} refused: {} {}", resp.status(), resp.text().await.unwrap_or_default())),
        Err(e) => Err(format!("node {target}: {e}")),
    };
    // Whatever the target answered, wait until this node knows who leads.
    let _ = node
        .raft
        .wait(Some(CAMPAIGN_MAX))
        .metrics(|m| m.current_leader.is_some() && m.current_leader != Some(node.id), "a new leader")
        .await;
    drop(hold);
    drop(moving);
    answered?;
    match node.leader() {
        Leader::Other { id, .. } if id == target => {
            tracing::debug!("group {}: moved to node {target} in {:?}", node.group, started.elapsed());
            Ok(())
        }
        Leader::Me => Err("the election did not happen; this node still leads".into()),
        other => Err(format!("the group's leader is now {other:?}")),
    }
}

/// The group-local route a leader asks the target of a move to campaign
/// on (served in `http::raft`).
pub const CAMPAIGN_PATH: &str = "/internal/raft/campaign";

/// The target's side of a move: once its log reaches `last_log_index`, it
/// calls an election and answers whether it won within [`CAMPAIGN_MAX`].
pub async fn campaign(node: &Replica, last_log_index: u64) -> Result<(), String> {
    {
        let m = node.raft.metrics().borrow().clone();
        if m.current_leader == Some(node.id) {
            return Ok(());
        }
        if !m.membership_config.membership().voter_ids().any(|v| v == node.id) {
            return Err("this node is not a voter".into());
        }
    }
    let logged = node
        .raft
        .wait(Some(CATCH_UP_MAX))
        .metrics(|m| m.last_log_index.unwrap_or(0) >= last_log_index, "the leader's log")
        .await;
    if logged.is_err() {
        return Err(format!("this node's log did not reach {last_log_index}"));
    }
    node.raft.trigger().elect().await.map_err(|e| e.to_string())?;
    let won = node.raft.wait(Some(CAMPAIGN_MAX)).metrics(|m| m.current_leader == Some(node.id), "elected").await;
    won.map(|_| ()).map_err(|_| format!("not elected within {CAMPAIGN_MAX:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_to_rest(mut leaders: Vec<Option<u64>>, voters: &[u64], pins: &BTreeMap<u16, u64>) -> Vec<Option<u64>> {
        for _ in 0..100 {
            let mut moved = false;
            for me in voters {
                if let Some((g, to)) = next_move(*me, &leaders, voters, pins, |_| true, |_| true) {
                    leaders[g as usize] = Some(to);
                    moved = true;
                }
            }
            if !moved {
                return leaders;
            }
        }
        panic!("moves did not end: {leaders:?}");
    }

    fn counts(leaders: &[Option<u64>]) -> BTreeMap<u64, usize> {
        let mut c = BTreeMap::new();
        for l in leaders.iter().flatten() {
            *c.entry(*l).or_default() += 1;
        }
        c
    }

    #[test]
    fn formation_spreads_six_groups_two_per_node() {
        let end = run_to_rest(vec![Some(1); 6], &[1, 2, 3], &BTreeMap::new());
        assert_eq!(end, [1, 2, 3, 1, 2, 3].map(Some));
    }

    #[test]
    fn one_group_stays_where_it_is_unless_pinned() {
        assert_eq!(next_move(2, &[Some(2)], &[1, 2, 3], &BTreeMap::new(), |_| true, |_| true), None);
        let pinned = BTreeMap::from([(0, 3)]);
        assert_eq!(next_move(2, &[Some(2)], &[1, 2, 3], &pinned, |_| true, |_| true), Some((0, 3)));
    }

    #[test]
    fn every_spread_after_a_return_ends_balanced() {
        // Every placement of 6 groups on 3 nodes, and of 9 on 5 nodes
        // with node 5 (just returned) leading nothing, ends with no node
        // above its share.
        for code in 0..3u32.pow(6) {
            let leaders: Vec<Option<u64>> = (0..6).map(|i| Some((code / 3u32.pow(i) % 3) as u64 + 1)).collect();
            let end = run_to_rest(leaders, &[1, 2, 3], &BTreeMap::new());
            assert!(counts(&end).values().all(|c| *c == 2), "{end:?}");
        }
        for code in 0..4u32.pow(7) {
            let leaders: Vec<Option<u64>> = (0..7).map(|i| Some((code / 4u32.pow(i) % 4) as u64 + 1)).collect();
            let end = run_to_rest(leaders, &[1, 2, 3, 4, 5], &BTreeMap::new());
            assert!(counts(&end).values().all(|c| *c <= 2), "{end:?}");
        }
    }

    #[test]
    fn a_pin_wins_over_the_share() {
        let pins = BTreeMap::from([(0, 3), (1, 3), (2, 3)]);
        let end = run_to_rest(vec![Some(1); 6], &[1, 2, 3], &pins);
        assert_eq!(&end[..3], &[Some(3); 3]);
        assert!(counts(&end)[&3] >= 3);
        // A pin to a node that is not a voter is ignored.
        assert_eq!(preferred(0, &[1, 2, 3], Some(9)), Some(1));
    }

    #[test]
    fn moves_wait_for_settled_groups_and_eligible_targets() {
        let leaders = vec![Some(1); 6];
        assert_eq!(next_move(1, &leaders, &[1, 2, 3], &BTreeMap::new(), |_| false, |_| true), None);
        assert_eq!(next_move(1, &leaders, &[1, 2, 3], &BTreeMap::new(), |_| true, |p| p != 2), Some((2, 3)));
        // Only the leader moves its group.
        assert_eq!(next_move(2, &leaders, &[1, 2, 3], &BTreeMap::new(), |_| true, |_| true), None);
    }
}
