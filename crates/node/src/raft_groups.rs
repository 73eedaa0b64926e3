//! A node's Raft groups and where each request goes.
//!
//! A node runs `--raft-groups` groups (1 to `RAFT_GROUPS_MAX`), each a
//! full replica ([`Replica`]) with its own state, body files and snapshots, and
//! all of them logging into one shared WAL so that their fdatasyncs
//! coalesce. Every group has the same members.
//!
//! A tenant lives in exactly one group: the default tenant in group 0, a
//! named tenant in the group the operator placed it in (`--tenant-groups`,
//! Queen's `QUEEN_TENANT_GROUPS`), else in `crc32c(name) % groups`. A
//! tenant does not move with its data, so a start whose placement would
//! hide a tenant's data in another group is refused. The count is fixed when the
//! data directory is created (it decides where every tenant's data is), so
//! a later start with another count is refused.
//!
//! Which group a request goes to is the HTTP layer's call
//! (`regina_server::http::dispatch`), by [`Placement`].

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use regina_consensus::{LogStore, StateMachineStore};
use regina_storage::{RealIo, WalOptions};
use regina_types::limits::RAFT_GROUPS_MAX;

use crate::options::NodeOptions;
use crate::replica::Replica;

/// Remembers the group count a data directory was created with.
const GROUPS_FILE: &str = "raft-groups";

/// Opens every group of the node on `data_dir`. Group 0 keeps its state at
/// the top of the directory (where a one-group node has it); group `g`
/// under `groups/{g}`.
pub async fn open(data_dir: &Path, http_addr: String, options: &NodeOptions) -> Result<Vec<Arc<Replica>>, String> {
    let groups = options.raft_groups;
    if groups == 0 || groups > RAFT_GROUPS_MAX {
        return Err(format!("--raft-groups must be 1 to {RAFT_GROUPS_MAX}, not {groups}"));
    }
    std::fs::create_dir_all(data_dir)
        .map_err(|e| format!("cannot create data directory {}: {e}", data_dir.display()))?;
    check_group_count(data_dir, groups)?;
    crate::ids::use_clock(options.clock.clone());
    let wal = WalOptions { fsync: options.fsync, ..WalOptions::default() };
    // The log and the state machines open side by side: one reads the WAL
    // from disk while the other decodes its snapshot, the two longest
    // waits of a restart. Neither needs the other until the Raft group
    // starts on both.
    let log_dir = data_dir.join("raft");
    let opening_logs = std::thread::Builder::new()
        .name("regina-open-log".into())
        .spawn(move || LogStore::open_groups(&log_dir, groups, wal, Arc::new(RealIo)))
        .map_err(|e| format!("cannot start opening the log: {e}"))?;
    let machines: Result<Vec<_>, String> = (0..groups)
        .map(|g| StateMachineStore::open_keeping_recent(&group_dir(data_dir, g), options.recent_body_bytes_per_group()))
        .collect();
    let logs = opening_logs.join().map_err(|_| "opening the log panicked".to_string())?;
    // A log that cannot open says why first: it is what a bad start most
    // often comes from (a group count that does not match, say).
    let (logs, machines) = (logs?, machines?);
    let key_path = options.encryption_key_file.clone().unwrap_or_else(|| data_dir.join("encryption.key"));
    let sealer = Arc::new(crate::sealing::Sealer::load_or_create(&key_path)?);
    let disk = crate::disk::DiskWatch::new(data_dir, options.disk_high_pct, options.disk_low_pct)?;
    disk.spawn();
    let mut nodes = Vec::with_capacity(groups as usize);
    for (g, (log, sm)) in logs.into_iter().zip(machines).enumerate() {
        nodes.push(
            Replica::open_group(sm, g as u16, log, (sealer.clone(), disk.clone()), http_addr.clone(), options).await?,
        );
    }
    check_placement(&nodes, &options.tenant_groups)?;
    let weak: Vec<_> = nodes.iter().map(Arc::downgrade).collect();
    for n in &nodes {
        let _ = n.groups.set(weak.clone());
    }
    Ok(nodes)
}

/// Where group `g` keeps its state: group 0 at the top of the data
/// directory (where a one-group node has it), group `g` under `groups/{g}`.
fn group_dir(data_dir: &Path, g: u16) -> std::path::PathBuf {
    if g == 0 {
        data_dir.to_path_buf()
    } else {
        data_dir.join("groups").join(g.to_string())
    }
}

/// A data directory serves the group count it was created with.
fn check_group_count(data_dir: &Path, groups: u16) -> Result<(), String> {
    let path = data_dir.join(GROUPS_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let had: u16 = text.trim().parse().map_err(|_| format!("{} is not a group count", path.display()))?;
            if had != groups {
                return Err(format!(
                    "{} was created with --raft-groups {had}; it cannot be opened with {groups} \
                     (the count decides which group holds each tenant)",
                    data_dir.display()
                ));
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // A directory from before groups existed has one.
            let existing = data_dir.join("raft").exists();
            if existing && groups != 1 {
                return Err(format!(
                    "{} holds a one-group node; it cannot be opened with --raft-groups {groups}",
                    data_dir.display()
                ));
            }
            std::fs::write(&path, format!("{groups}\n")).map_err(|e| format!("cannot write {}: {e}", path.display()))
        }
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// A pinned tenant must not have data in another group, which it would no
/// longer see.
fn check_placement(nodes: &[Arc<Replica>], pins: &BTreeMap<String, u16>) -> Result<(), String> {
    for (tenant, group) in pins {
        for n in nodes.iter().filter(|n| n.group != *group) {
            if n.shared.machine.read().state.tenant(tenant).is_some() {
                return Err(format!(
                    "--tenant-groups places {tenant} in group {group}, but its data is in group {}; \
                     a tenant does not move with its data",
                    n.group
                ));
            }
        }
    }
    Ok(())
}

/// The group holding `tenant` among `groups` by hash.
pub fn group_of(tenant: Option<&str>, groups: u16) -> u16 {
    match tenant {
        None => 0,
        Some(t) => (crc32c::crc32c(t.as_bytes()) % groups as u32) as u16,
    }
}

/// Where tenants live: the operator's placements, else the hash.
#[derive(Debug, Clone, Default)]
pub struct Placement {
    pub groups: u16,
    pub pins: BTreeMap<String, u16>,
}

impl Placement {
    pub fn group_of(&self, tenant: Option<&str>) -> u16 {
        match tenant.and_then(|t| self.pins.get(t)) {
            Some(g) => *g,
            None => group_of(tenant, self.groups),
        }
    }
}
