//! What an online backup reads from a group: a snapshot taken for it after
//! a read barrier, and the body segments (see `regina_consensus::backup`).

use std::time::Duration;

use crate::replica::Replica;

/// How long a backup waits for its snapshot to be built.
const SNAPSHOT_WAIT: Duration = Duration::from_secs(120);

impl Replica {
    /// Builds a snapshot holding every write answered before the call and
    /// answers its file's bytes. On the group's leader (or its sole voter).
    pub async fn backup_snapshot(&self) -> Result<Vec<u8>, String> {
        self.read_barrier().await.map_err(|e| e.to_string())?;
        let applied = self.raft().metrics().borrow().last_applied.map(|l| l.index);
        let Some(applied) = applied else {
            return Err("the group has applied nothing yet".into());
        };
        self.raft().trigger().snapshot().await.map_err(|e| e.to_string())?;
        self.raft()
            .wait(Some(SNAPSHOT_WAIT))
            .metrics(|m| m.snapshot.is_some_and(|s| s.index >= applied), "snapshot for a backup")
            .await
            .map_err(|e| format!("the backup's snapshot was not built: {e}"))?;
        let shared = self.shared.clone();
        let file = tokio::task::spawn_blocking(move || shared.latest_snapshot_file())
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("reading the snapshot: {e}"))?;
        file.ok_or_else(|| "no snapshot on disk after building one".to_string())
    }

    /// The body segment numbers on disk, ascending.
    pub fn body_segments(&self) -> std::io::Result<Vec<u64>> {
        self.shared.bodies.segments()
    }

    /// One body segment file's bytes. Blocks.
    pub fn body_segment(&self, segment: u64) -> std::io::Result<Vec<u8>> {
        self.shared.bodies.read_segment(segment)
    }
}
