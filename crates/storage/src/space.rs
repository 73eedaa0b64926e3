//! Waiting out a full disk.
//!
//! A write or fsync that fails for lack of space (ENOSPC, EDQUOT) did not
//! reach the disk, and nothing earlier was lost with it: unlike an EIO, the
//! same write is safe to try again, in full, once space is back. So the
//! writers that must not fail (the log's, the snapshot's) retry such a
//! failure with a growing pause instead of giving up, and say meanwhile
//! that they are waiting, so the node can refuse new writes (507
//! `storage_full`) and report it in `/health` while it keeps serving reads.
//! Every other error still fails at once (and poisons the log).

use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

/// The first pause before a write refused for lack of space is tried again.
pub const SPACE_RETRY_FIRST_MS: u64 = 10;
/// The longest pause between tries: how long writes may take to resume
/// after space comes back.
pub const SPACE_RETRY_MAX_MS: u64 = 500;

/// Whether `e` says the filesystem (or a quota) has no room for the write.
pub fn is_out_of_space(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded)
}

/// The writers of one store that are waiting for space, and why.
#[derive(Debug, Default)]
pub struct SpaceWait {
    waiting: AtomicUsize,
    reason: Mutex<Option<String>>,
    /// Set at shutdown: a waiting writer gives up and returns its error.
    closing: AtomicBool,
}

impl SpaceWait {
    /// Why a writer is waiting for space now, if one is.
    pub fn waiting(&self) -> Option<String> {
        if self.waiting.load(Ordering::Acquire) == 0 {
            return None;
        }
        self.reason.lock().clone()
    }

    /// Makes every waiting writer, and any later one, give up.
    pub fn close(&self) {
        self.closing.store(true, Ordering::Release);
    }

    /// Runs `op` until it succeeds or fails with anything but a lack of
    /// space, pausing between tries. `what` names the write for the log
    /// and for [`SpaceWait::waiting`]. Blocks the calling thread.
    pub fn retry<T>(&self, what: impl Fn() -> String, mut op: impl FnMut() -> io::Result<T>) -> io::Result<T> {
        let mut pause = SPACE_RETRY_FIRST_MS;
        let mut waited = false;
        let result = loop {
            match op() {
                Err(e) if is_out_of_space(&e) && !self.closing.load(Ordering::Acquire) => {
                    if !waited {
                        waited = true;
                        let reason = format!("{}: {e}", what());
                        tracing::warn!(%reason, "no space for a write; retrying it until space is back");
                        *self.reason.lock() = Some(reason);
                        self.waiting.fetch_add(1, Ordering::AcqRel);
                    }
                    std::thread::sleep(Duration::from_millis(pause));
                    pause = (pause * 2).min(SPACE_RETRY_MAX_MS);
                }
                other => break other,
            }
        };
        if waited {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
            if result.is_ok() {
                tracing::info!(what = %what(), "space is back; the write went through");
            }
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full() -> io::Error {
        io::Error::from(io::ErrorKind::StorageFull)
    }

    #[test]
    fn a_write_refused_for_space_is_retried_until_it_goes_through() {
        let wait = SpaceWait::default();
        let mut tries = 0;
        let got = wait.retry(
            || "a test write".into(),
            || {
                tries += 1;
                if tries < 3 {
                    Err(full())
                } else {
                    Ok(tries)
                }
            },
        );
        assert_eq!(got.unwrap(), 3);
        assert_eq!(wait.waiting(), None, "no writer waits once it went through");
    }

    #[test]
    fn other_errors_and_closing_end_the_wait() {
        let wait = SpaceWait::default();
        let mut tries = 0;
        let got: io::Result<()> = wait.retry(
            || "a test write".into(),
            || {
                tries += 1;
                Err(io::Error::other("EIO"))
            },
        );
        assert!(got.is_err());
        assert_eq!(tries, 1, "an EIO is never retried");
        wait.close();
        let got: io::Result<()> = wait.retry(|| "a test write".into(), || Err(full()));
        assert!(is_out_of_space(&got.unwrap_err()), "a closing store gives the error back");
    }

    #[test]
    fn a_waiting_writer_is_visible() {
        let wait = std::sync::Arc::new(SpaceWait::default());
        let seen = std::sync::Arc::new(AtomicBool::new(false));
        let (w, s) = (wait.clone(), seen.clone());
        let writer = std::thread::spawn(move || {
            w.retry(|| "segment 7".into(), || if s.load(Ordering::Acquire) { Ok(()) } else { Err(full()) })
        });
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while wait.waiting().is_none() {
            assert!(std::time::Instant::now() < deadline, "the waiting writer never showed");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(wait.waiting().unwrap().contains("segment 7"));
        seen.store(true, Ordering::Release);
        writer.join().unwrap().unwrap();
        assert_eq!(wait.waiting(), None);
    }
}
