//! Starting, stopping and reaching a `regina` process for the integration
//! tests. The broker runs as a real child process so that a SIGKILL is a
//! real crash: nothing in the test process can flush or close anything on
//! its behalf.
#![allow(dead_code)]

pub mod paused;

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long a start may take before the test gives up: opening the log,
/// replaying it and electing itself, on a machine that may be busy compiling.
pub const START_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a graceful stop may take.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// Starts attempted before giving up, each on a fresh free port when the
/// previous one was taken by someone else in the meantime.
const START_ATTEMPTS: usize = 3;

/// A port nobody listens on right now. The listener is dropped before the
/// broker binds, so another process can take it in between; `Broker::start`
/// retries on a fresh port when that happens (a cluster cannot: its peers
/// already name the port).
///
/// The port is drawn at random below the kernel's ephemeral range: a port
/// the kernel hands out itself may be taken as the local end of any
/// outgoing connection of the tests running beside this one before the
/// node binds it (seen as `Address already in use` in a cluster start).
/// And each port drawn is reserved for this test process ([`reserve`]):
/// two tests running beside each other drew the same port, one of them
/// seconds before its node bound it.
pub fn free_port() -> u16 {
    use std::hash::{BuildHasher, Hasher};
    let ephemeral_from = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let (low, high) = (10_000_u16, ephemeral_from.max(10_001));
    for attempt in 0..1_000_u64 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(attempt);
        let port = low + (h.finish() % u64::from(high - low)) as u16;
        if reserve(port) && TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    let l = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    l.local_addr().expect("local address").port()
}

/// Reserves `port` until this process exits, against every other test
/// process drawing ports at the same time: an exclusive lock on a file named
/// after the port, kept open for the life of the process (the kernel drops
/// it at exit, a crash included). `false` when another process holds it.
pub fn reserve(port: u16) -> bool {
    static HELD: std::sync::Mutex<Vec<File>> = std::sync::Mutex::new(Vec::new());
    let dir = std::env::temp_dir().join("regina-test-ports");
    let opened = std::fs::create_dir_all(&dir)
        .and_then(|()| OpenOptions::new().create(true).truncate(false).write(true).open(dir.join(port.to_string())));
    let Ok(file) = opened else {
        // No place for reservations: the bind check alone, as before.
        return true;
    };
    if file.try_lock().is_err() {
        return false;
    }
    HELD.lock().unwrap_or_else(|e| e.into_inner()).push(file);
    true
}

/// A temporary directory holding `data/` (the broker's data directory) and
/// `regina.log` (its output across every restart).
pub struct Workspace {
    dir: tempfile::TempDir,
}

impl Workspace {
    pub fn new() -> Self {
        let dir = tempfile::Builder::new().prefix("regina-it-").tempdir().expect("create a temporary directory");
        Workspace { dir }
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("regina.log")
    }
}

impl Default for Workspace {
    fn default() -> Self {
        Self::new()
    }
}

/// The `regina` binary serving 127.0.0.1:`port` on `data_dir`, its output
/// appended to `log_path` after a `=== marker ===` line.
pub fn regina_command(port: u16, data_dir: &Path, log_path: &Path, marker: &str) -> Result<Command, String> {
    let log =
        OpenOptions::new().create(true).append(true).open(log_path).map_err(|e| format!("open the log file: {e}"))?;
    let mut marked = log.try_clone().map_err(|e| e.to_string())?;
    let _ = writeln!(marked, "=== {marker} ===");
    let err = log.try_clone().map_err(|e| e.to_string())?;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_regina"));
    cmd.args(["--bind", "127.0.0.1", "--port", &port.to_string()])
        .arg("--data-dir")
        .arg(data_dir)
        .env("REGINA_LOG", "info,openraft=warn")
        // The machine's own disk may be past the watermark; a test about it
        // sets its own (`full_disk.rs`, on a tmpfs).
        .env("REGINA_DISK_HIGH_PCT", "100")
        .env("REGINA_DISK_LOW_PCT", "99")
        // Plain text in the log file, for failure messages.
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(err));
    Ok(cmd)
}

/// SIGKILL (what `Child::kill` sends on Unix) to a running child, then
/// reap it; nothing when it is not running.
pub fn sigkill(child: &mut Option<Child>) {
    if let Some(mut c) = child.take() {
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// A running (or stopped) `regina` child process.
pub struct Broker {
    child: Option<Child>,
    port: u16,
    data_dir: PathBuf,
    log_path: PathBuf,
    /// Extra environment for the process (e.g. `JWT_ENABLED`).
    env: Vec<(String, String)>,
}

impl Broker {
    /// Starts a broker on the workspace's data directory and waits until
    /// `/health` answers 200.
    pub fn start(ws: &Workspace) -> Broker {
        Broker::start_with(ws, &[])
    }

    /// [`Broker::start`] with extra environment for the process.
    pub fn start_with(ws: &Workspace, env: &[(&str, &str)]) -> Broker {
        let env = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let mut b = Broker { child: None, port: 0, data_dir: ws.data_dir(), log_path: ws.log_path(), env };
        b.launch(None);
        b
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:<port>`, without a trailing slash.
    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base())
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// SIGKILL, then reap the process.
    pub fn kill(&mut self) {
        sigkill(&mut self.child);
    }

    /// SIGTERM, then wait up to `within` for the process to exit. Answers
    /// its exit status, or `None` when it did not exit in time (it is then
    /// killed so that it does not outlive the test).
    pub fn terminate(&mut self, within: Duration) -> Option<ExitStatus> {
        let mut c = self.child.take().expect("the broker is running");
        let sent = Command::new("kill").args(["-TERM", &c.id().to_string()]).status().expect("run kill");
        assert!(sent.success(), "kill -TERM {} failed", c.id());
        let status = wait_with_timeout(&mut c, within);
        if status.is_none() {
            let _ = c.kill();
            let _ = c.wait();
        }
        status
    }

    /// Starts the broker again on the same data directory, on the same port
    /// when it is still free, so clients can keep their address.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "stop the broker before restarting it");
        let port = self.port;
        self.launch(Some(port));
    }

    /// The last `max` bytes of the broker's output, for failure messages.
    pub fn log_tail(&self, max: usize) -> String {
        file_tail(&self.log_path, max)
    }

    fn launch(&mut self, preferred_port: Option<u16>) {
        let mut why = String::new();
        for attempt in 0..START_ATTEMPTS {
            let port = match (attempt, preferred_port) {
                // A port just released by a killed broker can linger for a
                // moment; try it twice before moving on.
                (0 | 1, Some(p)) => p,
                _ => free_port(),
            };
            match self.try_launch(port) {
                Ok(child) => {
                    self.child = Some(child);
                    self.port = port;
                    return;
                }
                Err(e) => {
                    why = e;
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
        }
        panic!("regina did not start after {START_ATTEMPTS} attempts: {why}\n--- log ---\n{}", self.log_tail(4000));
    }

    fn try_launch(&self, port: u16) -> Result<Child, String> {
        let marker = format!("starting regina on port {port}");
        let mut child = regina_command(port, &self.data_dir, &self.log_path, &marker)?
            .envs(self.env.iter().cloned())
            .spawn()
            .map_err(|e| format!("spawn regina: {e}"))?;
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!("regina exited during start with {status}"));
            }
            if health_status(port) == Some(200) {
                return Ok(child);
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("/health did not answer 200 within {START_TIMEOUT:?}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        // A failing test must not leave a broker behind.
        self.kill();
    }
}

/// The last `max` bytes of a text file ("" when unreadable).
pub fn file_tail(path: &Path, max: usize) -> String {
    let mut s = String::new();
    if let Ok(mut f) = File::open(path) {
        let _ = f.read_to_string(&mut s);
    }
    let mut start = s.len().saturating_sub(max);
    while !s.is_char_boundary(start) {
        start += 1;
    }
    s[start..].to_string()
}

/// Polls a child until it exits or `within` elapses.
pub fn wait_with_timeout(child: &mut Child, within: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + within;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) => {}
            Err(_) => return None,
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The status code of `GET /health`, over a plain socket so that the
/// start and stop functions need no async runtime.
pub fn health_status(port: u16) -> Option<u16> {
    health(port).map(|(status, _)| status)
}

/// `GET /health` as its status and JSON body (`Null` when the body is not
/// JSON); `None` when nothing answers.
pub fn health(port: u16) -> Option<(u16, Value)> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(300)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.set_write_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").ok()?;
    let mut resp = Vec::new();
    s.read_to_end(&mut resp).ok()?;
    let text = String::from_utf8_lossy(&resp);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, serde_json::from_str(body).unwrap_or(Value::Null)))
}

/// An HTTP client for one test: no proxy, bounded requests.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(20))
        .connect_timeout(Duration::from_secs(2))
        .build()
        .expect("build an HTTP client")
}

/// Reads a response as JSON, failing with the status and body text when it
/// is not JSON.
pub async fn json_of(resp: reqwest::Response) -> (u16, Value) {
    let status = resp.status().as_u16();
    let text = resp.text().await.expect("read the response body");
    let v =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("status {status}: body is not JSON ({e}): {text:.300}"));
    (status, v)
}

pub async fn post_json(c: &reqwest::Client, url: &str, body: &Value) -> (u16, Value) {
    let resp = c.post(url).json(body).send().await.unwrap_or_else(|e| panic!("POST {url}: {e}"));
    json_of(resp).await
}

pub async fn get_json(c: &reqwest::Client, url: &str) -> (u16, Value) {
    let resp = c.get(url).send().await.unwrap_or_else(|e| panic!("GET {url}: {e}"));
    json_of(resp).await
}

/// Pushes items and answers the per-item results, asserting a 201 array
/// aligned with the items.
pub async fn push(c: &reqwest::Client, base: &str, items: Vec<Value>) -> Vec<Value> {
    let n = items.len();
    let (status, v) = post_json(c, &format!("{base}/api/v1/push"), &serde_json::json!({ "items": items })).await;
    assert_eq!(status, 201, "push answered {status}: {v}");
    let arr = v.as_array().unwrap_or_else(|| panic!("push answer is not an array: {v}"));
    assert_eq!(arr.len(), n, "push answer is not aligned with the items: {v}");
    arr.clone()
}

/// One pop; answers the whole body (status 200 asserted).
pub async fn pop(c: &reqwest::Client, base: &str, path_and_query: &str) -> Value {
    let (status, v) = get_json(c, &format!("{base}{path_and_query}")).await;
    assert_eq!(status, 200, "pop {path_and_query} answered {status}: {v}");
    assert!(v["messages"].is_array(), "pop answer without messages: {v}");
    v
}

/// The messages of a pop answer.
pub fn messages(pop_answer: &Value) -> Vec<Value> {
    pop_answer["messages"].as_array().cloned().unwrap_or_default()
}

/// One ack; answers its single result element.
pub async fn ack(c: &reqwest::Client, base: &str, body: Value) -> Value {
    let (status, v) = post_json(c, &format!("{base}/api/v1/ack"), &body).await;
    assert_eq!(status, 200, "ack answered {status}: {v}");
    let arr = v.as_array().unwrap_or_else(|| panic!("ack answer is not an array: {v}"));
    assert_eq!(arr.len(), 1, "one ack, one result: {v}");
    arr[0].clone()
}

/// Configures a queue; answers the body (status 200 asserted).
pub async fn configure(c: &reqwest::Client, base: &str, queue: &str, options: Value) -> Value {
    let (status, v) =
        post_json(c, &format!("{base}/api/v1/configure"), &serde_json::json!({ "queue": queue, "options": options }))
            .await;
    assert_eq!(status, 200, "configure answered {status}: {v}");
    v
}

/// The message offsets of a pop answer, in delivery order.
pub fn offsets(msgs: &[Value]) -> Vec<u64> {
    msgs.iter().map(|m| m["offset"].as_u64().unwrap_or_else(|| panic!("message without offset: {m}"))).collect()
}

/// Reads a whole partition from the beginning with a fresh consumer group,
/// committing each batch; bounded to `max_pops` pops.
pub async fn drain(
    c: &reqwest::Client,
    base: &str,
    queue: &str,
    partition: &str,
    group: &str,
    max_pops: usize,
) -> Vec<Value> {
    let mut all = Vec::new();
    for _ in 0..max_pops {
        let v = pop(
            c,
            base,
            &format!(
                "/api/v1/pop/queue/{queue}/partition/{partition}\
                 ?batch=10000&wait=false&consumerGroup={group}&subscriptionMode=all"
            ),
        )
        .await;
        let msgs = messages(&v);
        let Some(last) = msgs.last() else {
            return all;
        };
        let r = ack(
            c,
            base,
            serde_json::json!({
                "transactionId": last["transactionId"],
                "partitionId": last["partitionId"],
                "leaseId": v["leaseId"],
                "consumerGroup": group,
                "status": "completed",
            }),
        )
        .await;
        assert_eq!(r["success"], Value::Bool(true), "drain ack refused: {r}");
        all.extend(msgs);
    }
    panic!("{queue}/{partition} not drained within {max_pops} pops");
}

/// Sends `method path` with an optional JSON body over a plain socket,
/// exactly as written (no client-side path normalisation), and answers the
/// status code and body text.
pub fn raw_request(port: u16, method: &str, path: &str, body: &str) -> (u16, String) {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).expect("read timeout");
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).expect("send the request");
    let mut resp = Vec::new();
    s.read_to_end(&mut resp).expect("read the response");
    let text = String::from_utf8_lossy(&resp).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {text:.200}"));
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

/// [`raw_request`] on a blocking thread, for tests on an async runtime:
/// the call blocks, and on the paused harness the node it talks to runs
/// on the test's own thread.
pub async fn raw_request_async(port: u16, method: &str, path: &str, body: &str) -> (u16, String) {
    let (method, path, body) = (method.to_string(), path.to_string(), body.to_string());
    tokio::task::spawn_blocking(move || raw_request(port, &method, &path, &body)).await.expect("a raw request")
}

/// [`health_status`] on a blocking thread (see [`raw_request_async`]).
pub async fn health_status_async(port: u16) -> Option<u16> {
    tokio::task::spawn_blocking(move || health_status(port)).await.expect("a health check")
}

/// The files under `dir` (recursively) whose bytes contain `needle`: what
/// the at-rest encryption tests look for plaintext with.
pub fn files_containing(dir: &std::path::Path, needle: &[u8]) -> Vec<String> {
    let mut hits = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            hits.extend(files_containing(&path, needle));
        } else if std::fs::read(&path).unwrap().windows(needle.len()).any(|w| w == needle) {
            hits.push(path.display().to_string());
        }
    }
    hits
}
