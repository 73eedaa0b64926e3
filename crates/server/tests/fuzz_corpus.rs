//! Replays the fuzzing corpora (`fuzz/corpus/<target>`) and every input a
//! campaign found that once broke a decoder (`fuzz/regressions/<target>`)
//! through the same target functions libFuzzer drives: none may panic.
//! Campaigns themselves run from `scripts/fuzz.sh`.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

use std::path::{Path, PathBuf};

use regina_server::http::fuzz_targets::TARGETS;

fn inputs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut files: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).filter(|p| p.is_file()).collect();
    files.sort();
    files
}

#[test]
fn every_kept_input_decodes_or_is_refused_without_a_panic() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut replayed = Vec::new();
    for (name, target) in TARGETS {
        let corpus = inputs(&fuzz.join("corpus").join(name));
        assert!(!corpus.is_empty(), "target {name} has no corpus in fuzz/corpus/{name}");
        let found = inputs(&fuzz.join("regressions").join(name));
        for file in corpus.iter().chain(&found) {
            let data = std::fs::read(file).unwrap();
            let outcome = std::panic::catch_unwind(|| target(&data));
            assert!(outcome.is_ok(), "{name} panicked on {}", file.display());
        }
        replayed.push(format!("{name}: {} corpus, {} found", corpus.len(), found.len()));
    }
    eprintln!("replayed {}", replayed.join("; "));
    // Every fuzz target file is in the table, and the reverse.
    let mut files: Vec<String> = inputs(&fuzz.join("fuzz_targets"))
        .iter()
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    files.sort();
    let mut names: Vec<String> = TARGETS.iter().map(|(n, _)| n.to_string()).collect();
    names.sort();
    assert_eq!(files, names, "fuzz/fuzz_targets and TARGETS name the same targets");
}
