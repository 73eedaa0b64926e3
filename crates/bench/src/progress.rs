//! A once-a-second progress line on stderr, so a long run shows it is alive
//! and how fast it goes without disturbing the JSON report on stdout.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Counters a scenario bumps; the reporter prints their totals and rates.
#[derive(Clone)]
pub struct Progress {
    names: Arc<Vec<&'static str>>,
    counts: Arc<Vec<AtomicU64>>,
    stop: Arc<AtomicBool>,
}

impl Progress {
    /// Starts printing `scenario: name=total (rate/s) ...` every second until
    /// [`Progress::finish`] is called.
    pub fn start(scenario: &'static str, names: &[&'static str]) -> Progress {
        let p = Progress {
            names: Arc::new(names.to_vec()),
            counts: Arc::new(names.iter().map(|_| AtomicU64::new(0)).collect()),
            stop: Arc::new(AtomicBool::new(false)),
        };
        let q = p.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let mut last: Vec<u64> = vec![0; q.names.len()];
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            tick.tick().await;
            loop {
                tick.tick().await;
                // Stop when told, or when every scenario handle is gone (a
                // scenario that returned early with an error).
                if q.stop.load(Ordering::Relaxed) || Arc::strong_count(&q.stop) == 1 {
                    break;
                }
                let mut line = format!("{scenario} {:>5.1}s:", started.elapsed().as_secs_f64());
                for (i, name) in q.names.iter().enumerate() {
                    let now = q.counts[i].load(Ordering::Relaxed);
                    line.push_str(&format!(" {name}={now} ({}/s)", now - last[i]));
                    last[i] = now;
                }
                eprintln!("{line}");
            }
        });
        p
    }

    pub fn add(&self, counter: usize, n: u64) {
        self.counts[counter].fetch_add(n, Ordering::Relaxed);
    }

    pub fn get(&self, counter: usize) -> u64 {
        self.counts[counter].load(Ordering::Relaxed)
    }

    pub fn finish(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A counter read once a second: a run's rate second by second, so a long
/// run shows whether it holds its rate or falls as data grows.
pub struct PerSecond {
    rates: Arc<std::sync::Mutex<Vec<u64>>>,
    stop: Arc<AtomicBool>,
}

impl PerSecond {
    pub fn start(counter: Arc<AtomicU64>) -> PerSecond {
        let rates = Arc::new(std::sync::Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (r, s) = (rates.clone(), stop.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            tick.tick().await;
            let mut last = counter.load(Ordering::Relaxed);
            loop {
                tick.tick().await;
                if s.load(Ordering::Relaxed) {
                    break;
                }
                let now = counter.load(Ordering::Relaxed);
                r.lock().expect("rates lock").push(now - last);
                last = now;
            }
        });
        PerSecond { rates, stop }
    }

    /// The whole seconds counted so far (a last partial second is left out).
    pub fn finish(self) -> Vec<u64> {
        self.stop.store(true, Ordering::Relaxed);
        std::mem::take(&mut *self.rates.lock().expect("rates lock"))
    }
}
