//! Dropping large values off the path that let go of them.
//!
//! A snapshot lets the log purge every entry behind it, and the log's cache
//! held those entries whole (payloads included): freeing tens of megabytes
//! of them took ~20 ms under the log index's lock, inside the purge that
//! the Raft core waits for, and every append waited behind it (an e2e run
//! at 50,000 msg/s stalled deliveries for that long at each snapshot:
//! docs/benchmarks.md, item 22). Handed to one thread for the whole
//! process, the freeing costs the caller a channel send.

use std::any::Any;
use std::sync::mpsc::{self, Sender};
use std::sync::OnceLock;

/// What the background thread is handed.
type Dropped = Box<dyn Any + Send>;

/// Drops `value` on the background thread (on this one if that thread
/// could not be started).
pub fn drop_in_background<T: Send + 'static>(value: T) {
    static DROPPER: OnceLock<Option<Sender<Dropped>>> = OnceLock::new();
    let dropper = DROPPER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Dropped>();
        let spawned = std::thread::Builder::new().name("regina-drop".into()).spawn(move || {
            for value in rx {
                drop(value);
            }
        });
        spawned.ok().map(|_| tx)
    });
    let value: Dropped = Box::new(value);
    match dropper {
        Some(tx) => {
            // A send fails only once the thread is gone; the value then
            // comes back and is dropped here.
            let _ = tx.send(value);
        }
        None => drop(value),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    use super::*;

    struct Flag(Arc<AtomicBool>);

    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_value_handed_over_is_dropped_on_another_thread() {
        let dropped = Arc::new(AtomicBool::new(false));
        drop_in_background(Flag(dropped.clone()));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !dropped.load(Ordering::SeqCst) {
            assert!(std::time::Instant::now() < deadline, "never dropped");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}
