//! A real node in the test's own process, on tokio's paused clock.
//!
//! [`run`] drives a test on a current-thread runtime whose clock is paused:
//! time moves only when every task waits, and then jumps straight to the
//! next timer. The node runs on that runtime with a [`TokioClock`], so its
//! leader stamps follow virtual time: a test that sleeps 31 s to let a
//! lease lapse takes no real time at all, and nothing it checks depends on
//! how busy the machine is.
//!
//! Everything else is the real thing: the node's HTTP server on
//! 127.0.0.1, the WAL with its fdatasync, openraft, the state machine. The
//! one part outside the runtime is the WAL's writer thread; while an append
//! is unfinished, the runtime's park hook waits for it instead of letting
//! time jump, so a write takes no virtual time (otherwise the clock would
//! race ahead through every timer while the disk works).
//!
//! Most single-node tests run here: `wire::Env::paused()` for the wire
//! tests, [`PausedNode::start`] (with [`PausedNode::start_env`] for the
//! settings a process takes from its environment) where a test used a
//! `support::Broker`. What runs on this clock must measure time with
//! `tokio::time::Instant` and wait with `tokio::time::sleep` (both are the
//! real clock on an ordinary runtime): a `std::time::Instant` does not see
//! virtual time pass, and a blocking call (`std::thread::sleep`, a plain
//! socket) stalls the node too, since it shares the test's one thread; run
//! those through `spawn_blocking`, which also holds the clock still.
//!
//! Tests that kill, restart, signal or cluster nodes, or read a node's log,
//! stay process-based (`support::Broker`, `support::cluster`): a SIGKILL
//! must be real.
#![allow(dead_code)]

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use regina_node::clock::TokioClock;
use regina_node::{NodeOptions, Replica};
use regina_server::config::Config;
use regina_server::DoorOptions;
use regina_storage::Wal;
use tokio::sync::oneshot;

/// How long the park hook waits for the WAL writer (real time) before it
/// calls the handshake broken.
const WRITER_STALL: Duration = Duration::from_secs(60);

/// Runs `test` to completion on a paused current-thread runtime.
pub fn run<F: Future<Output = ()>>(test: F) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .on_thread_park(wait_for_writes)
        .build()
        .expect("build the paused runtime");
    rt.block_on(test);
}

/// Runs before the runtime parks (and so before time may jump): waits until
/// every append handed to a WAL of this process has completed. Its
/// completion wakes the Raft core from the writer thread, so the park that
/// follows returns at once instead of advancing the clock.
fn wait_for_writes() {
    let started = Instant::now();
    while Wal::unfinished_appends_in_process() > 0 {
        assert!(started.elapsed() < WRITER_STALL, "the WAL writer did not finish within {WRITER_STALL:?}");
        std::thread::sleep(Duration::from_micros(20));
    }
}

/// A node serving HTTP on 127.0.0.1 inside the paused runtime. Dropping it
/// stops the server; its data directory goes with it.
pub struct PausedNode {
    pub base: String,
    pub nodes: Vec<Arc<Replica>>,
    /// The node's clock: the wall time at its start, moved on by virtual
    /// time.
    pub clock: Arc<TokioClock>,
    stop: Option<oneshot::Sender<()>>,
    served: Option<tokio::task::JoinHandle<Result<(), String>>>,
    dir: tempfile::TempDir,
}

/// A node's default options, but blind to how full the machine's disk is:
/// these tests are not about it (`full_disk.rs` is, on a tmpfs).
pub fn test_options() -> NodeOptions {
    NodeOptions { disk_high_pct: 100, disk_low_pct: 99, ..NodeOptions::default() }
}

impl PausedNode {
    /// Starts a single node with default options.
    pub async fn start() -> PausedNode {
        PausedNode::start_with(test_options()).await
    }

    /// Starts a node with `options`; its clock is always a [`TokioClock`].
    pub async fn start_with(options: NodeOptions) -> PausedNode {
        PausedNode::start_with_doors(options, DoorOptions::default()).await
    }

    /// [`PausedNode::start_with`], with the doors' settings (tokens,
    /// tenancy, rates).
    pub async fn start_with_doors(mut options: NodeOptions, doors: DoorOptions) -> PausedNode {
        let dir = tempfile::Builder::new().prefix("regina-paused-").tempdir().expect("create a temporary directory");
        let clock = Arc::new(TokioClock::new());
        options.clock = clock.clone();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local address");
        let nodes =
            regina_node::raft_groups::open(&dir.path().join("data"), addr.to_string(), &options).await.expect("open");
        let (stop, stopped) = oneshot::channel::<()>();
        let serving = nodes.clone();
        let served = tokio::spawn(async move {
            regina_server::serve_nodes(listener, None, serving, &options, doors, async move {
                let _ = stopped.await;
            })
            .await
        });
        PausedNode { base: format!("http://{addr}"), nodes, clock, stop: Some(stop), served: Some(served), dir }
    }

    /// Starts a node with the settings a `regina` process would read from
    /// `env` (as `support::Broker::start_with` passes them), the way the
    /// binary turns them into options. TLS and SIGHUP reloads are the
    /// process's own and are not offered here.
    pub async fn start_env(env: &[(&str, &str)]) -> PausedNode {
        let vars: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let lookup = |k: &str| vars.iter().find(|(name, _)| name == k).map(|(_, v)| v.clone());
        let config = Config::from_args_and_env(Vec::new(), lookup).expect("valid settings").expect("not --help");
        assert!(config.tls_cert_file.is_none(), "TLS needs a process-based broker");
        assert!(config.internal_addr().is_none(), "a Raft address needs a process-based broker");
        let options = NodeOptions {
            encryption_key_file: config.encryption_key_file.clone(),
            fsync: config.fsync,
            node_id: config.node_id,
            peers: config.peers.clone(),
            raft_groups: config.raft_groups,
            tenant_groups: config.tenant_groups.clone(),
            cluster_token: config.cluster_token.as_ref().map(|t| t.0.clone()),
            max_queued_proposals: config.max_queued_proposals,
            max_long_polls: config.max_long_polls,
            recent_body_bytes: config.recent_body_bytes,
            // The machine's own disk may be past the watermark: these
            // tests are not about it.
            disk_high_pct: 100,
            disk_low_pct: 99,
            ..NodeOptions::default()
        };
        let doors = DoorOptions {
            tenancy: config.tenancy,
            auth: regina_server::doors::auth::Auth::from_settings(&config.auth).expect("valid auth settings"),
            tls: None,
            rate_limit: config.rate_limit,
            rate_burst: config.rate_burst,
        };
        PausedNode::start_with_doors(options, doors).await
    }

    /// `http://127.0.0.1:<port>`, without a trailing slash.
    pub fn base(&self) -> String {
        self.base.clone()
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn port(&self) -> u16 {
        self.base.rsplit(':').next().and_then(|p| p.parse().ok()).expect("a port in the base URL")
    }

    /// The node's time in Unix milliseconds (what a process-based test
    /// reads from the wall clock).
    pub fn now_ms(&self) -> u64 {
        use regina_node::clock::Clock;
        self.clock.now_ms()
    }

    /// The node's data directory.
    pub fn data_dir(&self) -> std::path::PathBuf {
        self.dir.path().join("data")
    }

    /// What a failure message shows in place of a process's log: the node
    /// logs nowhere but the test's own output.
    pub fn log_tail(&self, _max: usize) -> String {
        "(an in-process node: no log of its own)".to_string()
    }

    /// Stops the server and waits until its Raft groups have shut down.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(served) = self.served.take() {
            served.await.expect("the server task").expect("the server stopped cleanly");
        }
    }
}

impl Drop for PausedNode {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}
