//! A real `regina` broker for the client's tests: built once per test
//! binary, started on a free port with its own data directory, killed when
//! the test drops it.
#![allow(dead_code)]

use std::fs::File;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use regina_client::{Client, Message, PushItem, Subscription};

/// How long a start may take on a machine that may be busy compiling.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Starts attempted, each on a fresh port, before giving up: a free port
/// can be taken by someone else between finding it and the broker binding it.
const START_ATTEMPTS: usize = 3;

fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The `regina` binary, built (or found up to date) once per test binary.
fn binary() -> &'static PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let target =
            std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| workspace_root().join("target"), PathBuf::from);
        let bin = target.join("debug").join("regina");
        let out = Command::new(env!("CARGO"))
            .args(["build", "--quiet", "-p", "regina-server", "--bin", "regina"])
            .current_dir(workspace_root())
            .stdin(Stdio::null())
            .output()
            .expect("run cargo build");
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            // The server crate may be mid-edit; a binary built earlier still
            // serves the same API.
            assert!(bin.exists(), "building regina failed and no earlier build exists:\n{err}");
            eprintln!("building regina failed; testing against the earlier build at {}:\n{err}", bin.display());
        }
        bin
    })
}

/// A running broker. Dropping it kills the process.
pub struct Broker {
    child: Child,
    url: String,
    dir: tempfile::TempDir,
}

impl Broker {
    pub async fn start() -> Broker {
        let bin = binary();
        let dir = tempfile::Builder::new().prefix("regina-client-").tempdir().expect("a temporary directory");
        let mut why = String::new();
        for _ in 0..START_ATTEMPTS {
            match launch(bin, &dir).await {
                Ok((child, url)) => return Broker { child, url, dir },
                Err(e) => why = e,
            }
        }
        let log = std::fs::read_to_string(dir.path().join("regina.log")).unwrap_or_default();
        let tail = &log[log.len().saturating_sub(4000)..];
        panic!("regina did not start: {why}\n--- log ---\n{tail}");
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn client(&self) -> Client {
        Client::new(&self.url).expect("a client")
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn launch(bin: &PathBuf, dir: &tempfile::TempDir) -> Result<(Child, String), String> {
    let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map_err(|e| e.to_string())?.port();
    let log =
        File::options().create(true).append(true).open(dir.path().join("regina.log")).map_err(|e| e.to_string())?;
    let err = log.try_clone().map_err(|e| e.to_string())?;
    let mut child = Command::new(bin)
        .args(["--bind", "127.0.0.1", "--port", &port.to_string(), "--data-dir"])
        .arg(dir.path().join("data"))
        .env("REGINA_LOG", "warn")
        .env("NO_COLOR", "1")
        // The machine's own disk may be past the watermark: these tests are
        // not about it.
        .env("REGINA_DISK_HIGH_PCT", "100")
        .env("REGINA_DISK_LOW_PCT", "99")
        .stdin(Stdio::null())
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(err))
        .spawn()
        .map_err(|e| format!("spawn {}: {e}", bin.display()))?;
    let url = format!("http://127.0.0.1:{port}");
    let client = Client::new(&url).expect("a client");
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("regina exited during start with {status}"));
        }
        if client.healthy().await.unwrap_or(false) {
            return Ok((child, url));
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("/health did not answer 200 within {START_TIMEOUT:?}"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every message of `queue` as a fresh consumer group sees it (reads from
/// the beginning and commits nothing), so a count can be taken any time.
pub async fn all_messages(client: &Client, queue: &str) -> Vec<Message> {
    let group = format!("count-{}", unique());
    client
        .pop(queue)
        .group(group)
        .subscription(Subscription::All)
        .batch(1000)
        .partitions(64)
        .send()
        .await
        .expect("pop for a count")
}

/// A suffix unique within this process, for names that must not repeat.
pub fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Pushes one item and answers nothing; panics when the broker refuses.
pub async fn push(client: &Client, item: PushItem) {
    client.push(&[item]).await.expect("push");
}
