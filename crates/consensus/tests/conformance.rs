//! openraft's own storage conformance suite, run against the log store over
//! the WAL and the state machine over `regina_state::State`.
//!
//! The suite builds a fresh pair of stores for every case, each pair in its
//! own temporary directory laid out as the node lays out its data directory;
//! the directory is removed only once the case has dropped both stores.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;

use openraft::testing::Suite;

#[test]
fn openraft_storage_suite() {
    if let Err(e) = Suite::test_all(support::TempStores::default()) {
        panic!("openraft's storage suite failed: {e}");
    }
}
