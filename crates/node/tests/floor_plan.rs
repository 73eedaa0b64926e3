//! The node core stays below HTTP: it depends on no web framework and on
//! no crate above it, so no request, header or HTTP error can reach it.

#![allow(clippy::unwrap_used, clippy::too_many_lines)]

/// Crates the node core must never depend on.
const ABOVE: [&str; 6] = ["axum", "tower", "hyper", "regina-server", "regina-client", "regina-bench"];

#[test]
fn the_node_core_depends_on_nothing_above_it() {
    let manifest = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml")).unwrap();
    let deps: Vec<&str> = manifest
        .lines()
        .filter_map(|l| l.split(['=', '.']).next())
        .map(str::trim)
        .filter(|name| !name.is_empty() && !name.starts_with(['#', '[']))
        .collect();
    for above in ABOVE {
        assert!(!deps.contains(&above), "crates/node depends on {above}, which sits above it");
    }
    assert!(deps.contains(&"regina-consensus"), "the manifest was not read as expected: {deps:?}");
}
