//! Locks and semaphores: permits as KV rows with rising tokens.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;

use regina_state::command::*;
use regina_state::locks::LOCK_NAMESPACE;
use regina_state::outcome::*;
use regina_state::{Command, Outcome};
use support::*;

fn locks(h: &mut Harness, op: LockOp) -> LockResult {
    match h.apply(Command::Locks(LocksCmd { ops: vec![op] })) {
        Outcome::Locks(mut r) => r.remove(0),
        o => panic!("locks answered {o:?}"),
    }
}

fn acquire(name: &str, owner: &str, limit: u32, ttl: u64) -> LockOp {
    LockOp::Acquire { name: name.into(), ttl_seconds: ttl, owner: Some(owner.into()), limit }
}

fn renew(name: &str, token: u64, slot: u32, owner: &str) -> LockOp {
    LockOp::Renew { name: name.into(), token, ttl_seconds: 30, slot, owner: Some(owner.into()) }
}

/// (slot, token) of a granted acquire.
fn granted(r: &LockResult) -> (u32, u64) {
    match r {
        LockResult::Acquired { slot, token, already: false, .. } => (*slot, *token),
        r => panic!("not granted: {r:?}"),
    }
}

#[test]
fn a_lock_has_one_holder_and_the_same_owner_gets_the_same_permit() {
    let mut h = Harness::new();
    let (slot, token) = granted(&locks(&mut h, acquire("job", "a", 1, 30)));
    assert_eq!(slot, 0);
    let again = locks(&mut h, acquire("job", "a", 1, 30));
    assert_eq!(again, LockResult::Acquired { slot: 0, token, owner: Some("a".into()), already: true });
    let LockResult::Held { holders } = locks(&mut h, acquire("job", "b", 1, 30)) else { panic!("held") };
    assert_eq!((holders[0].owner.as_deref(), holders[0].token), (Some("a"), token));
    // The permit is a KV row whose version is the token.
    let row = h.state.kv.live(LOCK_NAMESPACE, "job#0", h.now).expect("a KV row");
    assert_eq!(row.version, token);
    assert!(std::str::from_utf8(&row.value).unwrap().contains(r#""owner":"a""#));
}

#[test]
fn the_token_rises_at_every_renew_and_for_every_new_holder() {
    let mut h = Harness::new();
    let (_, t1) = granted(&locks(&mut h, acquire("job", "a", 1, 30)));
    let LockResult::Renewed { token: t2, .. } = locks(&mut h, renew("job", t1, 0, "a")) else { panic!() };
    assert!(t2 > t1);
    // The owner's resend of the same renew (its answer was lost) is carried through.
    let LockResult::Renewed { token: t3, .. } = locks(&mut h, renew("job", t1, 0, "a")) else { panic!() };
    assert!(t3 > t2);
    let LockResult::Lost { holders, .. } = locks(&mut h, renew("job", t1, 0, "stranger")) else { panic!() };
    assert_eq!(holders[0].owner.as_deref(), Some("a"));
    let stale = LockOp::Release { name: "job".into(), token: t2, slot: 0 };
    assert!(matches!(locks(&mut h, stale), LockResult::Lost { .. }), "a stale token releases nothing");
    let release = LockOp::Release { name: "job".into(), token: t3, slot: 0 };
    assert_eq!(locks(&mut h, release), LockResult::Released { slot: 0 });
    let (_, t4) = granted(&locks(&mut h, acquire("job", "b", 1, 30)));
    assert!(t4 > t3, "a later holder has a higher token");
}

#[test]
fn an_expired_permit_is_free_at_once_and_its_next_token_is_higher() {
    let mut h = Harness::new();
    let (_, old) = granted(&locks(&mut h, acquire("job", "a", 1, 1)));
    h.now += 1_000;
    let (_, new) = granted(&locks(&mut h, acquire("job", "b", 1, 30)));
    assert!(new > old);
    assert!(matches!(locks(&mut h, renew("job", old, 0, "x")), LockResult::Lost { .. }));
    // The old holder's guard no longer holds: its transaction writes nothing.
    let guard = KvOp::Check { ns: LOCK_NAMESPACE.into(), key: "job#0".into(), expect: old, required: true };
    let item = h.item("q", "P", "late");
    let out =
        h.apply(Command::Transaction(TxnCmd { ops: vec![TxnOp::Push(item)], kv: vec![guard], timers: Vec::new() }));
    let Outcome::Txn(TxnOutcome::Refused { failed_index, kv: Some(lost), .. }) = out else { panic!("{out:?}") };
    assert_eq!((failed_index, lost.reason), (1, KvReason::Version));
    assert_eq!(lost.current.unwrap().version, new);
    assert_eq!(h.state.message_count(), 0);
}

#[test]
fn a_semaphore_grants_n_permits_by_slot_and_a_freed_slot_is_reused() {
    let mut h = Harness::new();
    let mut tokens = Vec::new();
    for (i, owner) in ["a", "b", "c"].iter().enumerate() {
        let (slot, token) = granted(&locks(&mut h, acquire("gpu", owner, 3, 30)));
        assert_eq!(slot, i as u32);
        tokens.push(token);
    }
    let LockResult::Held { holders } = locks(&mut h, acquire("gpu", "d", 3, 30)) else { panic!("full") };
    assert_eq!(holders.iter().map(|x| x.slot).collect::<Vec<_>>(), vec![0, 1, 2]);
    let release = LockOp::Release { name: "gpu".into(), token: tokens[1], slot: 1 };
    assert_eq!(locks(&mut h, release), LockResult::Released { slot: 1 });
    let (slot, token) = granted(&locks(&mut h, acquire("gpu", "d", 3, 30)));
    assert_eq!(slot, 1);
    assert!(token > tokens[2]);
    let LockResult::Holders(all) = locks(&mut h, LockOp::Get { name: "gpu".into() }) else { panic!() };
    assert_eq!(all.len(), 3);
    assert_eq!(h.state.locks_read(&["gpu"], h.now), vec![LockResult::Holders(all)]);
}

#[test]
fn a_lapsed_permit_is_swept_and_a_get_shows_its_times() {
    let mut h = Harness::new();
    let since = h.now;
    let (_, t) = granted(&locks(&mut h, acquire("job", "a", 1, 2)));
    h.now += 1_000;
    locks(&mut h, renew("job", t, 0, "a"));
    let LockResult::Holders(hs) = locks(&mut h, LockOp::Get { name: "job".into() }) else { panic!() };
    assert_eq!((hs[0].since_ms, hs[0].renewed_ms), (Some(since), h.now), "a renew keeps since");
    assert_eq!(hs[0].expires_ms, Some(h.now + 30_000), "the renew's lifetime");
    h.now += 30_000;
    h.apply(Command::Sweep);
    assert!(h.state.kv.is_empty(), "the sweep drops the lapsed permit");
}

#[test]
fn a_stranger_with_the_current_token_does_not_renew() {
    let mut h = Harness::new();
    let (slot, token) = granted(&locks(&mut h, acquire("report", "alice", 1, 10)));
    let stranger = locks(&mut h, renew("report", token, slot, "mallory"));
    assert!(matches!(stranger, LockResult::Lost { .. }), "{stranger:?}");
    let own = locks(&mut h, renew("report", token, slot, "alice"));
    assert!(matches!(own, LockResult::Renewed { .. }), "{own:?}");
}
