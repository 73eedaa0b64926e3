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
//! Tests that kill, restart or cluster nodes stay process-based
//! (`support::Broker`, `support::cluster`): a SIGKILL must be real.
#![allow(dead_code)]

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use regina_node::clock::TokioClock;
use regina_node::{NodeOptions, Replica};
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
    stop: Option<oneshot::Sender<()>>,
    served: Option<tokio::task::JoinHandle<Result<(), String>>>,
    dir: tempfile::TempDir,
}

impl PausedNode {
    /// Starts a single node with default options.
    pub async fn start() -> PausedNode {
        PausedNode::start_with(NodeOptions::default()).await
    }

    /// Starts a node with `options`; its clock is always a [`TokioClock`].
    pub async fn start_with(mut options: NodeOptions) -> PausedNode {
        let dir = tempfile::Builder::new().prefix("regina-paused-").tempdir().expect("create a temporary directory");
        options.clock = Arc::new(TokioClock::new());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local address");
        let nodes =
            regina_node::raft_groups::open(&dir.path().join("data"), addr.to_string(), &options).await.expect("open");
        let (stop, stopped) = oneshot::channel::<()>();
        let serving = nodes.clone();
        let served = tokio::spawn(async move {
            regina_server::serve_nodes(
                listener,
                None,
                serving,
                &options,
                regina_server::DoorOptions::default(),
                async move {
                    let _ = stopped.await;
                },
            )
            .await
        });
        PausedNode { base: format!("http://{addr}"), nodes, stop: Some(stop), served: Some(served), dir }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
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
