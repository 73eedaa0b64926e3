//! Tenants: two tenants (and the default one) using the same queue,
//! partition, group and lease names never see each other's messages, and
//! their message bodies never overlap in the shared body store.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;

use regina_state::command::*;
use regina_state::outcome::*;
use regina_state::{Command, Entry, State};
use support::{offsets, Harness, QM};

fn for_tenant(tenant: &str, command: Command) -> Command {
    Command::ForTenant { tenant: tenant.into(), command: Box::new(command) }
}

#[test]
fn tenants_share_names_but_nothing_else() {
    let mut h = Harness::new();
    let mut bodies: Vec<(u64, u64)> = Vec::new();
    for (tenant, n) in [("", 2), ("acme", 3), ("globex", 1)] {
        for i in 0..n {
            let item = h.item("orders", "o-1", &format!("{tenant}-{i}"));
            let cmd = Command::push(vec![item]);
            let cmd = if tenant.is_empty() { cmd } else { for_tenant(tenant, cmd) };
            let applied = h.state.apply(&Entry { now_ms: h.now, command: cmd });
            h.state.check_invariants().expect("invariants");
            let Outcome::Push(r) = applied.outcome else { panic!("{:?}", applied.outcome) };
            assert_eq!(r[0].offset, i, "{tenant}: offsets count per tenant");
            assert_eq!(r[0].status, PushStatus::Queued);
            for w in &applied.writes {
                bodies.push((w.pos, w.pos + w.bytes.len() as u64));
            }
        }
    }
    // One body store, no overlaps.
    bodies.sort_unstable();
    assert!(bodies.windows(2).all(|w| w[0].1 <= w[1].0), "bodies overlap: {bodies:?}");
    assert_eq!(h.state.next_body_pos, bodies.last().unwrap().1);

    // Each tenant pops only its own messages, under the same group name.
    let pop = |tenant: &str, h: &mut Harness| {
        let cmd = PopCmd {
            target: PopTarget::Queue { queue: "orders".into(), partition: None },
            group: QM.into(),
            batch: 10,
            max_partitions: 1,
            lease_id: format!("lease-{tenant}"),
            lease_ms: None,
            auto_ack: false,
            subscription: Subscription::All,
            conflation: false,
        };
        match h.apply(for_tenant(tenant, Command::Pop(cmd))) {
            Outcome::Pop(r) => r,
            o => panic!("{o:?}"),
        }
    };
    assert_eq!(offsets(&pop("acme", &mut h)), vec![0, 1, 2]);
    assert_eq!(offsets(&pop("globex", &mut h)), vec![0]);
    assert_eq!(offsets(&pop("initech", &mut h)), Vec::<u64>::new(), "a new tenant has nothing");
    assert_eq!(offsets(&h.pop("orders", QM, 10, Subscription::All)), vec![0, 1]);

    // A lease of one tenant is unknown to another.
    let ext = |h: &mut Harness, tenant: &str, lease: &str| {
        h.apply(for_tenant(tenant, Command::ExtendLease { lease_id: lease.into() }))
    };
    assert_ne!(ext(&mut h, "acme", "lease-acme"), ext(&mut h, "globex", "lease-acme"));

    // Snapshots keep every tenant.
    let restored = State::decode(&h.state.encode()).expect("decodes");
    assert!(restored == h.state);
    assert_eq!(restored.tenant("acme").map(State::message_count), Some(3));
}

#[test]
fn a_nested_tenant_wrapper_is_not_followed() {
    let mut h = Harness::new();
    let item = h.item("q", "p", "t");
    let inner = for_tenant("b", Command::push(vec![item]));
    assert_eq!(h.apply(for_tenant("a", inner)), Outcome::Done);
    assert!(h.state.tenant("a").is_none());
    assert!(h.state.tenant("b").is_none());
}
