//! A compact, line-per-event account of a run, and its digest.
//!
//! Printed (its tail) when a seed fails, so the failure can be read without
//! rerunning; hashed into the run's digest, so two runs of one seed can be
//! compared line for line in effect.

use std::fmt::Write;

use crate::canon::fnv;

#[derive(Default)]
pub struct Trace {
    lines: Vec<String>,
    digest: u64,
}

impl Trace {
    pub fn push(&mut self, step: u32, at_ms: u64, text: impl Into<String>) {
        let line = format!("s{step:<4} {at_ms:>6}ms {}", text.into());
        self.digest = fnv(format!("{:016x}{line}", self.digest).as_bytes());
        self.lines.push(line);
    }

    pub fn digest(&self) -> u64 {
        self.digest
    }

    pub fn len(&self) -> usize {
        self.lines.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    pub fn lines(&self) -> &[String] {
        &self.lines
    }

    /// The last `n` lines.
    pub fn tail(&self, n: usize) -> Vec<String> {
        self.lines[self.lines.len().saturating_sub(n)..].to_vec()
    }

    pub fn render_tail(&self, n: usize) -> String {
        let mut out = String::new();
        for l in self.tail(n) {
            let _ = writeln!(out, "  {l}");
        }
        out
    }
}
