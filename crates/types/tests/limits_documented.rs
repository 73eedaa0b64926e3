//! Every limit in `src/limits.rs` has a row in `docs/limits.md` that names
//! it and states its value, and every limit the table names exists: the
//! documentation cannot drift from the code without this test failing.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

use std::collections::BTreeMap;
use std::path::Path;

/// `NAME -> value` of every `pub const NAME: T = EXPR;` in the limits file.
/// An expression is a product or shift of integer literals and earlier
/// limits, which is all the file uses; anything else fails the test, so a
/// new form of limit gets a rule here before it can go unchecked.
fn limits(source: &str) -> BTreeMap<String, u128> {
    let mut out = BTreeMap::new();
    for line in source.lines().map(str::trim).filter(|l| l.starts_with("pub const ")) {
        let rest = &line["pub const ".len()..];
        let (name, rest) = rest.split_once(':').unwrap_or_else(|| panic!("no type in {line:?}"));
        let expr = rest.split_once('=').and_then(|(_, e)| e.trim().strip_suffix(';'));
        let expr = expr.unwrap_or_else(|| panic!("a limit must fit on one line: {line:?}"));
        let value = eval(expr, &out).unwrap_or_else(|| panic!("cannot evaluate {expr:?} in {line:?}"));
        out.insert(name.trim().to_string(), value);
    }
    out
}

fn eval(expr: &str, known: &BTreeMap<String, u128>) -> Option<u128> {
    if let Some((a, b)) = expr.split_once("<<") {
        return Some(eval(a.trim(), known)? << eval(b.trim(), known)?);
    }
    expr.split('*').map(str::trim).try_fold(1u128, |acc, term| {
        let v = match term.replace('_', "").parse::<u128>() {
            Ok(v) => v,
            Err(_) => *known.get(term)?,
        };
        acc.checked_mul(v)
    })
}

/// `1234567` as `1,234,567`.
fn grouped(v: u128) -> String {
    let digits = v.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The ways a row may state `value` of limit `name`: the number itself, or
/// the number in a larger unit the name's unit divides into evenly.
fn renderings(name: &str, value: u128) -> Vec<String> {
    let mut out = vec![grouped(value), value.to_string()];
    let units: &[(u128, &str)] = if name.contains("BYTES") {
        &[(1 << 10, "KiB"), (1 << 20, "MiB"), (1 << 30, "GiB")]
    } else if name.ends_with("_MS") || name.contains("_MS_") {
        &[(1_000, "s"), (60_000, "min"), (3_600_000, "h"), (86_400_000, "day"), (365 * 86_400_000, "year")]
    } else if name.contains("SECONDS") {
        &[(60, "min"), (3_600, "h"), (86_400, "day"), (365 * 86_400, "year")]
    } else {
        &[]
    };
    for (size, unit) in units {
        if value > 0 && value.is_multiple_of(*size) {
            out.push(format!("{} {unit}", grouped(value / size)));
        }
    }
    out
}

/// The limits as the code defines them, and the documentation's text.
fn sources() -> (BTreeMap<String, u128>, String) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let source = std::fs::read_to_string(root.join("crates/types/src/limits.rs")).expect("limits.rs");
    let doc = std::fs::read_to_string(root.join("docs/limits.md")).expect("docs/limits.md");
    (limits(&source), doc)
}

#[test]
fn every_limit_is_documented_with_its_value() {
    let (limits, doc) = sources();
    assert!(limits.len() > 50, "the limits file was not read: {limits:?}");
    let rows: Vec<&str> = doc.lines().filter(|l| l.starts_with('|')).collect();
    let mut problems = Vec::new();
    for (name, value) in &limits {
        let tag = format!("`{name}`");
        let Some(row) = rows.iter().find(|r| r.split('|').nth(1).is_some_and(|c| c.contains(&tag))) else {
            problems.push(format!("{name} has no row in docs/limits.md"));
            continue;
        };
        let shown = renderings(name, *value);
        if !shown.iter().any(|s| row.contains(s.as_str())) {
            problems.push(format!("{name} = {value}: its row states none of {shown:?}: {row}"));
        }
    }
    assert!(problems.is_empty(), "docs/limits.md disagrees with limits.rs:\n{}", problems.join("\n"));
}

#[test]
fn every_limit_the_table_names_exists() {
    let (limits, doc) = sources();
    let stale: Vec<String> = doc
        .lines()
        .filter(|l| l.starts_with('|'))
        .filter_map(|r| r.split('|').nth(1))
        .filter_map(|c| c.trim().strip_prefix('`').and_then(|c| c.strip_suffix('`')))
        .filter(|n| n.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
        .filter(|n| !limits.contains_key(*n))
        .map(str::to_string)
        .collect();
    assert!(stale.is_empty(), "docs/limits.md names limits that limits.rs does not define: {stale:?}");
}

#[test]
fn the_evaluator_reads_the_forms_the_file_uses() {
    let l = limits("pub const A: usize = 64 * 1024;\npub const B: u64 = A * 2;\npub const C: u64 = 8 << 20;");
    assert_eq!((l["A"], l["B"], l["C"]), (65_536, 131_072, 8 << 20));
    assert_eq!(grouped(1_234_567), "1,234,567");
    assert!(renderings("X_BYTES_MAX", 65_536).contains(&"64 KiB".to_string()));
}
