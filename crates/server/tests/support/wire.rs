//! Plain-HTTP building blocks for the tests that check what the Queen MQ
//! clients rely on. Every call here is what a client puts on the wire.
//! Helpers assert only the framing (a status, an array aligned with its
//! request); what a route promises is asserted in the tests.
#![allow(dead_code)]

use std::time::Duration;

use base64::Engine;
use regina_node::NodeOptions;
use serde_json::{json, Value};
// Virtual on the paused harness, the real clock on an ordinary runtime.
use tokio::time::Instant;

use crate::support::paused::PausedNode;
use crate::support::{Broker, Workspace};

/// One broker on its own data directory, and a client for it. Dropping it
/// stops the broker and removes the directory.
pub struct Env {
    pub c: reqwest::Client,
    pub base: String,
    pub port: u16,
    _server: Server,
}

/// What serves an [`Env`]: a `regina` process, or a node in this process
/// on the paused clock (`support::paused`).
enum Server {
    Process(Broker, Workspace),
    Paused(PausedNode),
}

impl Env {
    /// A `regina` process, for tests that need one (a kill, a signal, the
    /// process's log).
    pub fn start() -> Env {
        let ws = Workspace::new();
        let broker = Broker::start(&ws);
        Env { c: wire_client(), base: broker.base(), port: broker.port(), _server: Server::Process(broker, ws) }
    }

    /// A node in this process; run the test with `paused::run`.
    pub async fn paused() -> Env {
        Env::paused_with(crate::support::paused::test_options()).await
    }

    /// [`Env::paused`] with node options (the clock is always virtual).
    pub async fn paused_with(options: NodeOptions) -> Env {
        let node = PausedNode::start_with(options).await;
        Env { c: wire_client(), base: node.base(), port: node.port(), _server: Server::Paused(node) }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

/// The Python client follows no redirect, so neither does this one: a 3xx
/// anywhere shows up as the status it is.
fn wire_client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(20))
        .connect_timeout(Duration::from_secs(2))
        .build()
        .expect("build an HTTP client")
}

/// A response as the clients read it: status, `Content-Type`, and the body
/// parsed as JSON (`None` when empty or not JSON).
pub struct Answer {
    pub status: u16,
    pub content_type: String,
    pub text: String,
    pub json: Option<Value>,
}

impl Answer {
    /// The JSON body, failing with what came instead.
    pub fn body(&self) -> &Value {
        self.json.as_ref().unwrap_or_else(|| panic!("status {}: body is not JSON: {:.300}", self.status, self.text))
    }

    pub fn is_json(&self) -> bool {
        self.content_type.contains("application/json")
    }
}

pub async fn answer(resp: reqwest::Response) -> Answer {
    let status = resp.status().as_u16();
    let content_type =
        resp.headers().get(reqwest::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let text = resp.text().await.expect("read the response body");
    let json = serde_json::from_str(&text).ok();
    Answer { status, content_type, text, json }
}

pub async fn get(c: &reqwest::Client, url: &str) -> Answer {
    answer(c.get(url).send().await.unwrap_or_else(|e| panic!("GET {url}: {e}"))).await
}

pub async fn delete(c: &reqwest::Client, url: &str) -> Answer {
    answer(c.delete(url).send().await.unwrap_or_else(|e| panic!("DELETE {url}: {e}"))).await
}

pub async fn post(c: &reqwest::Client, url: &str, body: &Value) -> Answer {
    answer(c.post(url).json(body).send().await.unwrap_or_else(|e| panic!("POST {url}: {e}"))).await
}

/// A POST with no body and no `Content-Type`: what the Python client sends
/// for an empty dict (`elif body:` treats `{}` as nothing).
pub async fn post_empty(c: &reqwest::Client, url: &str) -> Answer {
    answer(c.post(url).send().await.unwrap_or_else(|e| panic!("POST {url}: {e}"))).await
}

/// A pop that may legitimately be empty: 204, or 200 with `messages`.
/// Answers the messages and the body (`Null` for a 204).
pub async fn pop_any(env: &Env, path_and_query: &str) -> (Vec<Value>, Value) {
    let a = get(&env.c, &env.url(path_and_query)).await;
    if a.status == 204 {
        return (Vec::new(), Value::Null);
    }
    assert_eq!(a.status, 200, "pop {path_and_query} answered {}: {}", a.status, a.text);
    let body = a.body().clone();
    let msgs = body["messages"].as_array().unwrap_or_else(|| panic!("pop answer without messages: {body}")).clone();
    (msgs, body)
}

/// Pops until something comes back or `within` elapses (each try a short
/// long poll, so the loop is bounded in time and in count).
pub async fn pop_within(env: &Env, path: &str, within: Duration) -> (Vec<Value>, Value) {
    let deadline = Instant::now() + within;
    let sep = if path.contains('?') { '&' } else { '?' };
    for _ in 0..1_000 {
        let left = deadline.saturating_duration_since(Instant::now());
        let wait_ms = left.as_millis().clamp(1, 500);
        let (msgs, body) = pop_any(env, &format!("{path}{sep}wait=true&timeout={wait_ms}")).await;
        if !msgs.is_empty() || Instant::now() >= deadline {
            return (msgs, body);
        }
    }
    (Vec::new(), Value::Null)
}

pub async fn push(env: &Env, items: Vec<Value>) -> Vec<Value> {
    let a = post(&env.c, &env.url("/api/v1/push"), &json!({ "items": items.clone() })).await;
    assert!((200..300).contains(&a.status), "push answered {}: {}", a.status, a.text);
    let arr = a.body().as_array().unwrap_or_else(|| panic!("push answer is not an array: {}", a.text)).clone();
    assert_eq!(arr.len(), items.len(), "push answer is not aligned with its items: {}", a.text);
    arr
}

/// Pushes one message with a chosen transaction id.
pub async fn push_one(env: &Env, queue: &str, partition: &str, txn: &str, payload: Value) -> Value {
    let r =
        push(env, vec![json!({ "queue": queue, "partition": partition, "transactionId": txn, "payload": payload })])
            .await;
    assert_eq!(r[0]["status"], json!("queued"), "push of {txn}: {r:?}");
    r[0].clone()
}

/// The ack a client sends for one popped message.
pub fn ack_of(msg: &Value, status: &str, group: Option<&str>, error: Option<&str>) -> Value {
    let mut a = json!({
        "transactionId": msg["transactionId"],
        "partitionId": msg["partitionId"],
        "status": status,
        "error": error,
        "consumerGroup": group,
    });
    if let Some(l) = msg["leaseId"].as_str().filter(|l| !l.is_empty()) {
        a["leaseId"] = json!(l);
    }
    a
}

/// `POST /api/v1/ack` with one ack; answers the whole array.
pub async fn ack_one(env: &Env, body: Value) -> Vec<Value> {
    let a = post(&env.c, &env.url("/api/v1/ack"), &body).await;
    assert_eq!(a.status, 200, "ack answered {}: {}", a.status, a.text);
    let arr = a.body().as_array().unwrap_or_else(|| panic!("ack answer is not an array: {}", a.text)).clone();
    assert_eq!(arr.len(), 1, "one ack, one result: {}", a.text);
    arr
}

/// `POST /api/v1/ack/batch`; answers the array, asserted aligned.
pub async fn ack_batch(env: &Env, acks: Vec<Value>, group: Option<&str>) -> Vec<Value> {
    let n = acks.len();
    let a =
        post(&env.c, &env.url("/api/v1/ack/batch"), &json!({ "acknowledgments": acks, "consumerGroup": group })).await;
    assert_eq!(a.status, 200, "batch ack answered {}: {}", a.status, a.text);
    let arr = a.body().as_array().unwrap_or_else(|| panic!("batch ack answer is not an array: {}", a.text)).clone();
    assert_eq!(arr.len(), n, "batch ack answer is not aligned: {}", a.text);
    arr
}

/// Completes every message of a pop with one batch ack.
pub async fn complete_all(env: &Env, msgs: &[Value], group: Option<&str>) {
    let acks = msgs.iter().map(|m| ack_of(m, "completed", group, None)).collect();
    for r in ack_batch(env, acks, group).await {
        assert_eq!(r["success"], json!(true), "completing a batch: {r}");
    }
}

pub async fn kv(env: &Env, ops: Value) -> Answer {
    post(&env.c, &env.url("/api/v1/kv"), &json!({ "operations": ops })).await
}

/// A KV call expected to answer 200 with one result per operation.
pub async fn kv_results(env: &Env, ops: Value) -> Vec<Value> {
    let n = ops.as_array().map_or(0, Vec::len);
    let a = kv(env, ops).await;
    assert_eq!(a.status, 200, "kv answered {}: {}", a.status, a.text);
    let rs = a.body()["results"].as_array().unwrap_or_else(|| panic!("kv answer without results: {}", a.text)).clone();
    assert_eq!(rs.len(), n, "kv answer is not aligned: {}", a.text);
    rs
}

pub async fn kv_get(env: &Env, ns: &str, key: &str) -> Value {
    kv_results(env, json!([{ "op": "get", "ns": ns, "key": key }])).await.remove(0)
}

pub async fn locks(env: &Env, ops: Value) -> Vec<Value> {
    let n = ops.as_array().map_or(0, Vec::len);
    let a = post(&env.c, &env.url("/api/v1/locks"), &json!({ "operations": ops })).await;
    assert_eq!(a.status, 200, "locks answered {}: {}", a.status, a.text);
    let rs =
        a.body()["results"].as_array().unwrap_or_else(|| panic!("locks answer without results: {}", a.text)).clone();
    assert_eq!(rs.len(), n, "exactly one result per lock operation: {}", a.text);
    rs
}

pub async fn timers(env: &Env, ops: Value) -> Answer {
    post(&env.c, &env.url("/api/v1/timers"), &json!({ "operations": ops })).await
}

pub async fn transaction(env: &Env, body: &Value) -> Answer {
    post(&env.c, &env.url("/api/v1/transaction"), body).await
}

/// A timer payload as the client encodes it: base64 of the JSON text.
pub fn b64_json(v: &Value) -> String {
    base64::engine::general_purpose::STANDARD.encode(v.to_string())
}

/// Percent-encodes a path segment, keeping `/` when `keep_slash` (as the
/// client does for timer keys).
pub fn enc(s: &str, keep_slash: bool) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        let plain = b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') || (keep_slash && b == b'/');
        if plain {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The shape of an ISO-8601 UTC time with a fraction, e.g.
/// `2024-05-01T12:00:00.123456Z`: answers the number of fraction digits,
/// or `None` when the text has another shape. Times of one shape compare
/// correctly as strings, which is how the clients compare them.
pub fn iso_fraction_digits(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| b.get(r).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    let fixed = b.len() > 21
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
        && b[19] == b'.'
        && b[b.len() - 1] == b'Z'
        && digits(20..b.len() - 1);
    fixed.then(|| b.len() - 21)
}

/// Asserts that every time is ISO-8601 UTC with the same fraction width.
pub fn assert_fixed_width(what: &str, times: &[&str]) {
    let mut width = None;
    for t in times {
        let w = iso_fraction_digits(t).unwrap_or_else(|| panic!("{what}: {t:?} is not YYYY-MM-DDTHH:MM:SS.fZ"));
        assert!(w > 0, "{what}: {t:?} has no fraction digits");
        match width {
            None => width = Some(w),
            Some(prev) => assert_eq!(prev, w, "{what}: {t:?} does not have the width of the others"),
        }
    }
}

/// The `data` of each message, in order.
pub fn datas(msgs: &[Value]) -> Vec<Value> {
    msgs.iter().map(|m| m["data"].clone()).collect()
}

/// The transaction ids of messages, in order.
pub fn txns(msgs: &[Value]) -> Vec<String> {
    msgs.iter().map(|m| m["transactionId"].as_str().unwrap_or_default().to_string()).collect()
}

pub fn err_text(v: &Value) -> String {
    v["error"].as_str().unwrap_or_default().to_string()
}

/// Pops (and completes) a queue until `count` messages came or `within`
/// elapsed; answers them in delivery order.
pub async fn collect(env: &Env, path: &str, count: usize, within: Duration) -> Vec<Value> {
    let deadline = Instant::now() + within;
    let mut got = Vec::new();
    for _ in 0..1_000 {
        if got.len() >= count || Instant::now() >= deadline {
            break;
        }
        let left = deadline.saturating_duration_since(Instant::now()).min(Duration::from_millis(500));
        let (msgs, _) = pop_within(env, path, left).await;
        complete_all(env, &msgs, None).await;
        got.extend(msgs);
    }
    got
}

pub fn lock_acquire(name: &str, owner: &str, ttl: u64, limit: u32) -> Value {
    json!({ "op": "acquire", "name": name, "ttlSeconds": ttl, "owner": owner, "limit": limit })
}

pub fn lock_renew(name: &str, owner: &str, token: u64, ttl: u64) -> Value {
    json!({ "op": "renew", "name": name, "token": token, "ttlSeconds": ttl, "owner": owner })
}

/// One lock operation; answers its result.
pub async fn lock1(env: &Env, op: Value) -> Value {
    locks(env, json!([op])).await.remove(0)
}

/// A lock's background renewal, as the client's handle runs it: renews
/// every `every` with the latest token until stopped (at most 200 times).
/// The join handle answers every renewal result.
pub struct Renewer {
    pub token: std::sync::Arc<std::sync::atomic::AtomicU64>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    task: tokio::task::JoinHandle<Vec<Value>>,
}

impl Renewer {
    pub fn spawn(env: std::sync::Arc<Env>, name: &str, owner: &str, token: u64, ttl: u64, every: Duration) -> Renewer {
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        let tok = std::sync::Arc::new(AtomicU64::new(token));
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let (t, s, name, owner) = (tok.clone(), stop.clone(), name.to_string(), owner.to_string());
        let task = tokio::spawn(async move {
            let mut out = Vec::new();
            while !s.load(Ordering::SeqCst) && out.len() < 200 {
                tokio::time::sleep(every).await;
                let r = lock1(&env, lock_renew(&name, &owner, t.load(Ordering::SeqCst), ttl)).await;
                if let Some(next) = r["token"].as_u64().filter(|_| r["renewed"] == json!(true)) {
                    t.store(next, Ordering::SeqCst);
                }
                out.push(r);
            }
            out
        });
        Renewer { token: tok, stop, task }
    }

    pub fn current(&self) -> u64 {
        self.token.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Waits (up to 2 s) for the token to move past `seen`.
    pub async fn moved_past(&self, seen: u64) -> u64 {
        for _ in 0..200 {
            if self.current() != seen {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.current()
    }

    pub async fn stop(self) -> Vec<Value> {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        self.task.await.expect("the renewal task")
    }
}

pub fn timer_op(op: &str, queue: &str, key: &str, delay_ms: i64, payload: &Value, txn: &str) -> Value {
    json!({ "op": op, "queue": queue, "timerKey": key, "payload": b64_json(payload), "delayMs": delay_ms, "txn": txn })
}

/// Walks a keyset-paged listing: `page(after)` answers one page body with
/// `rows`, `truncated` and `nextAfter`. Answers every page, at most 50.
pub async fn walk_pages<F, Fut>(mut page: F) -> Vec<Value>
where
    F: FnMut(Value) -> Fut,
    Fut: std::future::Future<Output = Value>,
{
    let mut pages = Vec::new();
    let mut after = Value::Null;
    for _ in 0..50 {
        let p = page(after).await;
        let more = p["truncated"] == json!(true);
        after = p["nextAfter"].clone();
        pages.push(p);
        if !more {
            break;
        }
    }
    pages
}

/// Pushes one message to each of `n` partitions `<prefix><i>` in requests
/// of `per_request` items; item i has transaction id `<prefix>t<i>` and
/// payload `{"i": i}`.
pub async fn push_spread(env: &Env, queue: &str, prefix: &str, n: usize, per_request: usize) {
    let items: Vec<Value> = (0..n)
        .map(|i| {
            json!({ "queue": queue, "partition": format!("{prefix}{i}"),
                    "transactionId": format!("{prefix}t{i}"), "payload": { "i": i } })
        })
        .collect();
    for chunk in items.chunks(per_request) {
        for r in push(env, chunk.to_vec()).await {
            assert_eq!(r["status"], json!("queued"), "{r}");
        }
    }
}

/// `POST /api/v1/fetch` in calls of at most 1000 entries (the client's
/// chunk); answers the entries, each call asserted aligned with its ask.
pub async fn fetch(env: &Env, entries: &[Value]) -> Vec<Value> {
    let mut out = Vec::new();
    for chunk in entries.chunks(1_000) {
        let a = post(&env.c, &env.url("/api/v1/fetch"), &json!({ "entries": chunk, "maxBytes": 8 << 20 })).await;
        assert_eq!(a.status, 200, "fetch: {:.300}", a.text);
        assert!(a.is_json(), "fetch Content-Type {}", a.content_type);
        let got = a.body()["entries"].as_array().unwrap_or_else(|| panic!("fetch without entries")).clone();
        assert_eq!(got.len(), chunk.len(), "one fetch answer per entry");
        out.extend(got);
    }
    out
}

/// `POST /api/v1/partitions/changed` for one queue, following `next` as
/// the client does (at most 20 pages). Answers the pages.
pub async fn changed(env: &Env, queue: &str, since: Option<&str>) -> Vec<Value> {
    let mut pages = Vec::new();
    let mut after = Value::Null;
    for _ in 0..20 {
        let mut entry = json!({ "queue": queue, "limit": 1000, "after": after });
        if let Some(s) = since {
            entry["since"] = json!(s);
        }
        let a = post(&env.c, &env.url("/api/v1/partitions/changed"), &json!({ "entries": [entry] })).await;
        assert_eq!(a.status, 200, "partitions/changed: {:.300}", a.text);
        assert!(a.is_json(), "partitions/changed Content-Type {}", a.content_type);
        let page = a.body().clone();
        after = page["entries"][0]["next"].clone();
        pages.push(page);
        if after.is_null() {
            break;
        }
    }
    pages
}

/// Asserts that `v` has every field of the object `want` with that value
/// (`null` in `want` also accepts a missing field).
#[track_caller]
pub fn has(v: &Value, want: Value) {
    let Value::Object(fields) = want else { panic!("`want` must be an object") };
    for (k, w) in &fields {
        let got = v.get(k).unwrap_or(&Value::Null);
        assert_eq!(got, w, "field {k:?} of {:.600}", v.to_string());
    }
}

/// A GET expected to answer 200 JSON; answers the body.
#[track_caller]
pub fn ok_body(a: &Answer) -> Value {
    assert_eq!(a.status, 200, "{:.600}", a.text);
    a.body().clone()
}

pub async fn get_body(env: &Env, path: &str) -> Value {
    ok_body(&get(&env.c, &env.url(path)).await)
}

/// Runs `n` calls at once (`f(i)` for each i) and answers their results
/// in index order.
pub async fn race<F, Fut>(n: usize, f: F) -> Vec<Value>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = Value> + Send + 'static,
{
    let tasks: Vec<_> = (0..n).map(|i| tokio::spawn(f(i))).collect();
    let mut out = Vec::with_capacity(n);
    for t in tasks {
        out.push(t.await.expect("a concurrent call failed"));
    }
    out
}

/// `field` of every element of every page's `list` array, in order.
pub fn column(pages: &[Value], list: &str, field: &str) -> Vec<Value> {
    pages.iter().flat_map(|p| p[list].as_array().cloned().unwrap_or_default()).map(|r| r[field].clone()).collect()
}

/// `support::raw_request` off the async runtime's threads.
pub async fn raw(env: &Env, method: &str, path: &str, body: &str) -> (u16, String) {
    crate::support::raw_request_async(env.port, method, path, body).await
}

/// A transaction's ack of a popped message under `lease`.
pub fn ack_op(m: &Value, lease: &Value) -> Value {
    json!({ "type": "ack", "transactionId": m["transactionId"], "partitionId": m["partitionId"],
            "status": "completed", "leaseId": lease })
}

/// A transaction bundle: one pushed item, the given acks, a KV put
/// `txn/<key>` and a timer `later/<key>`.
pub fn bundle(push_to: &str, txn: &str, acks: Vec<Value>, leases: Value, key: &str) -> Value {
    let mut ops =
        vec![json!({ "type": "push", "items": [{ "queue": push_to, "payload": txn, "transactionId": txn }] })];
    ops.extend(acks);
    json!({
        "operations": ops, "requiredLeases": leases,
        "kv": [{ "op": "put", "ns": "txn", "key": key, "value": { "v": key }, "forever": true }],
        "timers": [timer_op("schedule", "later", key, 600_000, &json!(1), key)],
    })
}

/// A bundle of one pushed item and a KV put, both behind `guard`.
pub fn guarded(guard: &Value, txn: &str, queue: &str) -> Value {
    json!({
        "operations": [{ "type": "push", "items": [{ "queue": queue, "payload": txn, "transactionId": txn }] }],
        "requiredLeases": [],
        "kv": [guard, { "op": "put", "ns": "guarded", "key": txn, "value": 1, "forever": true }],
    })
}

/// The partitions listed by `partitions/changed` pages (first entry).
pub fn partitions_of(pages: &[Value]) -> Vec<Value> {
    pages.iter().flat_map(|p| p["entries"][0]["partitions"].as_array().cloned().unwrap_or_default()).collect()
}

/// Any method, no body.
pub async fn send(env: &Env, method: &str, path: &str) -> Answer {
    let req = env.c.request(method.parse().expect("an HTTP method"), env.url(path));
    answer(req.send().await.unwrap_or_else(|e| panic!("{method} {path}: {e}"))).await
}

/// Asserts that no answer is a redirect and every one is JSON by its
/// `Content-Type` (the client parses a body as JSON only then).
#[track_caller]
pub fn assert_json_answers(seen: &[(String, Answer)]) {
    for (what, a) in seen {
        assert!(!(300..400).contains(&a.status), "{what}: a redirect ({})", a.status);
        assert!(a.is_json(), "{what}: Content-Type {:?} ({} {:.200})", a.content_type, a.status, a.text);
    }
}
