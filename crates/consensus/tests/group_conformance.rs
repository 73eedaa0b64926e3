//! openraft's storage conformance suite against one group of a log whose
//! WAL is shared by three groups, the others holding entries of their own.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;

use openraft::testing::Suite;
use support::{TempGroupStores, SEGMENT_BYTES};

/// Small enough that the neighbours' entries and the group's own spread over
/// many segment files, so reads and purges cross segments.
const TINY_SEGMENT_BYTES: u64 = 128;

fn suite_on_group(group: u16, segment_bytes: u64) {
    let builder = TempGroupStores { groups: 3, group, segment_bytes };
    if let Err(e) = Suite::test_all(builder) {
        panic!("openraft's storage suite failed on group {group} of 3: {e}");
    }
}

#[test]
fn group_0_of_three_passes_openraft_storage_suite() {
    suite_on_group(0, SEGMENT_BYTES);
}

#[test]
fn group_2_of_three_passes_openraft_storage_suite() {
    suite_on_group(2, TINY_SEGMENT_BYTES);
}
