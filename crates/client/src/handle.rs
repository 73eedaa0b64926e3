//! A held lock that renews itself.
//!
//! The handle renews its permit every third of its lifetime, so two renewals
//! may fail in a row before the permit lapses. It reports loss (through
//! [`LockHandle::is_lost`] and a watch channel) when the broker refuses a
//! renewal, when a guarded step finds the permit in other hands, or when
//! renewals kept failing until the lifetime ran out. Loss is final: take a
//! new handle.
//!
//! Every renewal replaces the token, so a step reads the token when it is
//! sent, not when it is built (see [`Step::guard`](crate::Step::guard)).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::client::Result;
use crate::locks::{Locks, Permit, Renewal};

/// The shortest pause between two renew attempts after a failed one.
const RETRY_FLOOR: Duration = Duration::from_millis(50);

/// What the handle, its renew task and guarded steps share.
pub(crate) struct Shared {
    locks: Locks,
    /// The permit as last granted; its token changes at every renewal.
    permit: Mutex<Permit>,
    pub(crate) token: watch::Sender<u64>,
    lost: watch::Sender<bool>,
    paused: watch::Sender<bool>,
    released: AtomicBool,
    /// When the last successful renewal (or the acquire) was sent: the
    /// permit lives at least its lifetime from then.
    renewed_at: Mutex<Instant>,
    /// One renewal at a time: two in flight would race for the token.
    renewing: tokio::sync::Mutex<()>,
}

impl Shared {
    pub(crate) fn permit(&self) -> Permit {
        self.permit.lock().expect("permit lock").clone()
    }

    pub(crate) fn is_lost(&self) -> bool {
        *self.lost.borrow()
    }

    pub(crate) fn mark_lost(&self) {
        self.lost.send_replace(true);
    }

    fn lifetime(&self) -> Duration {
        Duration::from_secs(self.permit().ttl_seconds)
    }

    pub(crate) async fn renew(&self) -> Result<bool> {
        let _one = self.renewing.lock().await;
        if self.is_lost() || self.released.load(Ordering::Acquire) {
            return Ok(false);
        }
        let sent = Instant::now();
        match self.locks.renew(&self.permit()).await? {
            Renewal::Renewed(p) => {
                let token = p.token;
                *self.permit.lock().expect("permit lock") = p;
                *self.renewed_at.lock().expect("renewed_at lock") = sent;
                self.token.send_replace(token);
                Ok(true)
            }
            Renewal::Lost(_) => {
                self.mark_lost();
                Ok(false)
            }
        }
    }
}

/// A held permit renewed in the background. Dropping it stops the renewals
/// and releases the permit (in the background, when a tokio runtime is
/// running); [`LockHandle::release`] does it and waits for the answer.
pub struct LockHandle {
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for LockHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockHandle").field("permit", &self.shared.permit()).field("lost", &self.is_lost()).finish()
    }
}

impl LockHandle {
    /// `sent` is when the acquire that granted `permit` went out: the
    /// permit lives at least its lifetime from then.
    pub(crate) fn start(locks: Locks, permit: Permit, sent: Instant) -> LockHandle {
        let shared = Arc::new(Shared {
            locks,
            token: watch::Sender::new(permit.token),
            permit: Mutex::new(permit),
            lost: watch::Sender::new(false),
            paused: watch::Sender::new(false),
            released: AtomicBool::new(false),
            renewed_at: Mutex::new(sent),
            renewing: tokio::sync::Mutex::new(()),
        });
        let task = tokio::spawn(renew_loop(shared.clone()));
        LockHandle { shared, task }
    }

    pub(crate) fn shared(&self) -> Arc<Shared> {
        self.shared.clone()
    }

    pub fn name(&self) -> String {
        self.shared.permit().name
    }

    pub fn owner(&self) -> String {
        self.shared.permit().owner
    }

    pub fn slot(&self) -> u32 {
        self.shared.permit().slot
    }

    /// The current fencing token. It changes at every renewal: read it when
    /// using it rather than keeping a copy.
    pub fn token(&self) -> u64 {
        *self.shared.token.borrow()
    }

    /// True once the permit is known to be gone.
    pub fn is_lost(&self) -> bool {
        self.shared.is_lost()
    }

    /// A channel that turns `true` when the permit is lost.
    pub fn lost_signal(&self) -> watch::Receiver<bool> {
        self.shared.lost.subscribe()
    }

    /// Waits until the permit is lost.
    pub async fn lost(&self) {
        let mut rx = self.lost_signal();
        let _ = rx.wait_for(|lost| *lost).await;
    }

    /// Renews now, outside the schedule; false when the permit is lost.
    pub async fn renew(&self) -> Result<bool> {
        self.shared.renew().await
    }

    /// Holds back the background renewals; the permit lapses at the end of
    /// its lifetime unless they resume first. For a holder about to stall
    /// on purpose, and for exercising loss.
    pub fn pause_renewal(&self) {
        self.shared.paused.send_replace(true);
    }

    /// Resumes the background renewals; a renewal that fell due while they
    /// were paused is sent at once.
    pub fn resume_renewal(&self) {
        self.shared.paused.send_replace(false);
    }

    /// Stops renewing and frees the permit; false when it was already lost.
    pub async fn release(self) -> Result<bool> {
        self.task.abort();
        // Marks the permit released first, so the drop after it sends nothing.
        release(&self.shared).await
    }
}

async fn release(shared: &Shared) -> Result<bool> {
    let _one = shared.renewing.lock().await;
    if shared.released.swap(true, Ordering::AcqRel) || shared.is_lost() {
        return Ok(false);
    }
    shared.locks.release(&shared.permit()).await
}

impl Drop for LockHandle {
    fn drop(&mut self) {
        self.task.abort();
        if self.shared.is_lost() || self.shared.released.load(Ordering::Acquire) {
            return;
        }
        // Best effort: without a runtime the permit simply lapses.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let shared = self.shared.clone();
            rt.spawn(async move {
                let _ = release(&shared).await;
            });
        }
    }
}

/// Renews every third of the lifetime. After a failed attempt it retries
/// sooner, and gives up (reporting loss) once the lifetime measured from
/// the last successful send has run out.
async fn renew_loop(shared: Arc<Shared>) {
    let every = shared.lifetime() / 3;
    let mut paused = shared.paused.subscribe();
    let mut delay = every;
    loop {
        tokio::time::sleep(delay).await;
        if paused.wait_for(|p| !*p).await.is_err() {
            return;
        }
        match shared.renew().await {
            Ok(true) => delay = every,
            Ok(false) => return,
            Err(_) => {
                let since = *shared.renewed_at.lock().expect("renewed_at lock");
                let left = (since + shared.lifetime()).saturating_duration_since(Instant::now());
                if left.is_zero() {
                    shared.mark_lost();
                    return;
                }
                delay = (left / 4).clamp(RETRY_FLOOR, every.max(RETRY_FLOOR));
            }
        }
    }
}
