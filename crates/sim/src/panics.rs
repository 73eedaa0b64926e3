//! Panics in the simulation's tasks become failures of the run.
//!
//! tokio catches a panicking task and carries on, and openraft asserts its
//! own invariants with `debug_assert!` inside its tasks: such a panic would
//! otherwise only stop one node quietly. A process-wide hook, installed
//! once, records the panics of a thread that is running a simulation (and
//! still prints them as usual); the simulator turns them into a failure.

use std::cell::RefCell;
use std::sync::Once;

thread_local! {
    static CAUGHT: RefCell<Option<Vec<String>>> = const { RefCell::new(None) };
}

static HOOK: Once = Once::new();

/// Records panics on this thread until the guard drops.
pub struct Recording(());

pub fn record() -> Recording {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let _ = CAUGHT.try_with(|c| {
                if let Some(v) = c.borrow_mut().as_mut() {
                    v.push(info.to_string());
                }
            });
            previous(info);
        }));
    });
    CAUGHT.with(|c| *c.borrow_mut() = Some(Vec::new()));
    Recording(())
}

impl Drop for Recording {
    fn drop(&mut self) {
        let _ = CAUGHT.try_with(|c| *c.borrow_mut() = None);
    }
}

/// The panics recorded on this thread since the last call.
pub fn take() -> Vec<String> {
    CAUGHT.with(|c| c.borrow_mut().as_mut().map(std::mem::take).unwrap_or_default())
}
