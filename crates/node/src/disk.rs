//! The disk watermark: past `high_pct` of the data directory's filesystem
//! in use, the node refuses writes that would grow storage (507
//! `storage_full`, see `Command::grows_storage`) until use falls back under
//! `low_pct`. Reads, acks, deletes and sweeps go on, and nothing already
//! answered is touched: the refusal happens before a command reaches the
//! log, so the disk keeps room for the entries already in flight.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use regina_types::limits::DISK_CHECK_MS;

/// One per node (its data directory), shared by its Raft groups.
#[derive(Debug)]
pub struct DiskWatch {
    dir: PathBuf,
    high_pct: u8,
    low_pct: u8,
    full: AtomicBool,
    /// Percent in use at the last reading, times 100.
    used_centi_pct: AtomicU64,
}

/// What `/health` and the metrics show.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DiskState {
    pub full: bool,
    pub used_pct: f64,
    pub high_pct: u8,
    pub low_pct: u8,
}

impl DiskWatch {
    /// Watches the filesystem holding `dir`, reading it once now. A high
    /// watermark of 100 never refuses.
    pub fn new(dir: &Path, high_pct: u8, low_pct: u8) -> Result<Arc<DiskWatch>, String> {
        if !(1..=100).contains(&high_pct) || low_pct >= high_pct {
            return Err(format!(
                "the disk watermarks must satisfy 0 <= low < high <= 100, not low {low_pct} and high {high_pct}"
            ));
        }
        let watch = Arc::new(DiskWatch {
            dir: dir.to_path_buf(),
            high_pct,
            low_pct,
            full: AtomicBool::new(false),
            used_centi_pct: AtomicU64::new(0),
        });
        watch.check().map_err(|e| format!("cannot measure the disk of {}: {e}", dir.display()))?;
        Ok(watch)
    }

    /// Whether writes that grow storage are refused now.
    pub fn is_full(&self) -> bool {
        self.full.load(Ordering::Acquire)
    }

    pub fn state(&self) -> DiskState {
        DiskState {
            full: self.is_full(),
            used_pct: self.used_centi_pct.load(Ordering::Relaxed) as f64 / 100.0,
            high_pct: self.high_pct,
            low_pct: self.low_pct,
        }
    }

    /// Reads the disk use and moves the watermark state.
    pub fn check(&self) -> std::io::Result<()> {
        let used = used_pct(&self.dir)?;
        self.used_centi_pct.store((used * 100.0).round() as u64, Ordering::Relaxed);
        let was = self.is_full();
        let now =
            if was { used >= f64::from(self.low_pct) } else { self.high_pct < 100 && used >= f64::from(self.high_pct) };
        if now != was {
            self.full.store(now, Ordering::Release);
            match now {
                true => tracing::warn!(
                    "disk {used:.1}% used (high watermark {}%): writes that grow storage are refused with 507 \
                     storage_full until it is under {}%",
                    self.high_pct,
                    self.low_pct
                ),
                false => tracing::info!("disk {used:.1}% used (under {}%): writes are taken again", self.low_pct),
            }
        }
        Ok(())
    }

    /// Reads the disk every [`DISK_CHECK_MS`] until the watch is dropped.
    pub fn spawn(self: &Arc<Self>) {
        let weak: Weak<DiskWatch> = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(DISK_CHECK_MS)).await;
                let Some(watch) = weak.upgrade() else { return };
                if let Err(e) = watch.check() {
                    tracing::warn!("cannot measure the disk of {}: {e}", watch.dir.display());
                }
            }
        });
    }
}

/// Percent of the filesystem holding `dir` in use, as `df` counts it
/// (blocks reserved for root count as unavailable).
fn used_pct(dir: &Path) -> std::io::Result<f64> {
    let s = rustix::fs::statvfs(dir)?;
    let used = s.f_blocks.saturating_sub(s.f_bfree);
    let total = used + s.f_bavail;
    Ok(if total == 0 { 0.0 } else { used as f64 * 100.0 / total as f64 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watermarks_are_checked_and_a_real_disk_reads() {
        let dir = tempfile::tempdir().unwrap();
        assert!(DiskWatch::new(dir.path(), 80, 85).is_err());
        assert!(DiskWatch::new(dir.path(), 0, 0).is_err());
        let w = DiskWatch::new(dir.path(), 100, 99).unwrap();
        let s = w.state();
        assert!(s.used_pct > 0.0 && s.used_pct <= 100.0, "{s:?}");
        assert!(!s.full, "a high watermark of 100 never refuses");
    }
}
