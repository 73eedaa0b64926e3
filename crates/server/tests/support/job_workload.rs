//! A job workload for the race and failover tests: workers claim, renew,
//! complete, fail, release and let leases run out, concurrently, through
//! any of the given nodes, retrying what went unanswered. Every answer is
//! written to a ledger, and [`audit`] checks the rules of leases and tokens
//! against it and against the jobs' final states.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
// Virtual on the paused harness, the real clock on an ordinary runtime.
use tokio::time::Instant;

pub const QUEUE: &str = "work";
pub const SCOPES: [&str; 2] = ["", "tenant-b"];
pub const LEASE_MS: u64 = 400;
pub const MAX_ATTEMPTS: u64 = 4;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(8);
/// How long one operation may be retried before the workload gives up.
const RETRY_BUDGET: Duration = Duration::from_secs(30);

/// A lease a claim answered, and what became of it as far as answers tell.
#[derive(Debug, Clone)]
pub struct Leased {
    pub scope: String,
    pub id: String,
    pub token: u64,
    pub granted_ms: u64,
    /// The latest expiry an answer named (claim or renew).
    pub expires_ms: u64,
    /// When a fail or release was answered as applied (server time).
    pub settled_ms: Option<u64>,
    /// A settle whose answer was lost: it may or may not have applied.
    pub settle_unknown: bool,
}

#[derive(Debug, Default)]
pub struct Ledger {
    pub leases: Vec<Leased>,
    /// (scope, id, token) of completes answered applied.
    pub completed: Vec<(String, String, u64)>,
    /// Completes sent after their lease ran out, and what they answered.
    pub stale_answers: Vec<String>,
    pub ops: u64,
}

pub type SharedLedger = Arc<Mutex<Ledger>>;

pub fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().timeout(REQUEST_TIMEOUT).build().unwrap()
}

fn ms(v: &Value) -> u64 {
    regina_types::time::parse_iso(v.as_str().unwrap_or_default()).unwrap_or_else(|| panic!("not a time: {v}"))
}

/// What a sent op came to.
enum Sent {
    Answered(Value),
    /// Sent, but no answer says whether it applied.
    Unknown,
}

/// Sends one op through the nodes in turn until one answers it. A 503
/// `no_leader` was not applied and is resent as it is; a lost answer or
/// `outcome_unknown` may have applied, so `resend_ok` decides whether the
/// op is sent again (a claim with a request id is) or reported unknown.
async fn send(c: &reqwest::Client, bases: &[String], start: usize, op: &Value, resend_ok: bool) -> Sent {
    let body = json!({ "operations": [op] });
    let began = Instant::now();
    let mut node = start;
    loop {
        assert!(began.elapsed() < RETRY_BUDGET, "{op} was not answered within {RETRY_BUDGET:?}");
        let base = &bases[node % bases.len()];
        node += 1;
        let resp = match c.post(format!("{base}/api/v1/jobs")).json(&body).send().await {
            Ok(r) => r,
            Err(e) => {
                if !resend_ok && !e.is_connect() {
                    return Sent::Unknown;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let status = resp.status().as_u16();
        let v: Value = resp.json().await.unwrap_or(Value::Null);
        if status == 503 {
            if v["code"] != "no_leader" && !resend_ok {
                return Sent::Unknown;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        }
        if v.is_null() && !resend_ok {
            return Sent::Unknown;
        }
        assert_eq!(status, 200, "{op} answered {status}: {v}");
        return Sent::Answered(v["results"][0].clone());
    }
}

/// Enqueues `per_scope` jobs in every scope, and configures the queue.
pub async fn prepare(c: &reqwest::Client, bases: &[String], per_scope: usize) {
    let retry = json!({ "maxAttempts": MAX_ATTEMPTS, "initialDelayMs": 20, "maxDelayMs": 80 });
    let cfg = json!({ "op": "configure", "queue": QUEUE, "retry": retry, "lease": { "defaultMs": LEASE_MS, "maxMs": 10_000 } });
    let Sent::Answered(_) = send(c, bases, 0, &cfg, true).await else { unreachable!() };
    for scope in SCOPES {
        for i in 0..per_scope {
            let op = json!({ "op": "enqueue", "queue": QUEUE, "scope": scope, "id": format!("job-{i:04}"), "payload": { "i": i } });
            let Sent::Answered(r) = send(c, bases, i, &op, true).await else { unreachable!() };
            assert!(r["applied"] == true || r["code"] == "JOB_EXISTS", "{r}");
        }
    }
}

/// A small seeded generator, so a worker's choices are reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// One worker: claims until `stop` is raised. Answers how many jobs it
/// claimed.
pub async fn worker(bases: Vec<String>, w: usize, seed: u64, stop: Arc<AtomicBool>, ledger: SharedLedger) -> u64 {
    let c = client();
    let mut rng = Rng(seed ^ (w as u64) << 32);
    let mut claimed = 0;
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let scope = SCOPES[(rng.next() % 2) as usize];
        let claim = json!({ "op": "claim", "queue": QUEUE, "scope": scope, "owner": format!("w{w}"),
            "requestId": format!("w{w}-{n}"), "waitMs": 100 });
        let Sent::Answered(r) = send(&c, &bases, w + n, &claim, true).await else { unreachable!() };
        let cl = r["claim"].clone();
        if cl.is_null() {
            continue;
        }
        claimed += 1;
        let token = cl["token"].as_u64().unwrap();
        let id = cl["id"].as_str().unwrap().to_string();
        let expires = ms(&cl["expiresAt"]);
        let index = {
            let mut l = ledger.lock().unwrap();
            l.ops += 1;
            l.leases.push(Leased {
                scope: scope.to_string(),
                id: id.clone(),
                token,
                granted_ms: expires - LEASE_MS,
                expires_ms: expires,
                settled_ms: None,
                settle_unknown: false,
            });
            l.leases.len() - 1
        };
        let proof = |op: &str| json!({ "op": op, "queue": QUEUE, "scope": scope, "id": id, "owner": format!("w{w}"), "token": token });
        let roll = rng.next() % 100;
        if roll < 10 {
            let mut renew = proof("renew");
            renew["leaseMs"] = json!(LEASE_MS);
            if let Sent::Answered(r) = send(&c, &bases, w, &renew, false).await {
                if r["applied"] == true {
                    ledger.lock().unwrap().leases[index].expires_ms = ms(&r["claim"]["expiresAt"]);
                }
            }
        }
        if (10..14).contains(&roll) {
            // Let the lease run out, then try to complete with it.
            tokio::time::sleep(Duration::from_millis(LEASE_MS + 150)).await;
            let mut late = proof("complete");
            late["result"] = json!({ "token": token, "stale": true });
            if let Sent::Answered(r) = send(&c, &bases, w, &late, false).await {
                ledger.lock().unwrap().stale_answers.push(r["code"].as_str().unwrap_or("applied").to_string());
            }
            continue;
        }
        let (op, extra) = match roll {
            14..=34 => ("fail", json!({ "error": { "token": token } })),
            35..=41 => ("release", json!({})),
            _ => ("complete", json!({ "result": { "token": token, "worker": w } })),
        };
        let mut body = proof(op);
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        let sent = send(&c, &bases, w, &body, false).await;
        let mut l = ledger.lock().unwrap();
        l.ops += 1;
        match sent {
            Sent::Answered(r) if r["applied"] == true => match op {
                "complete" => l.completed.push((scope.to_string(), id.clone(), token)),
                _ => l.leases[index].settled_ms = Some(ms(&r["job"]["updatedAt"])),
            },
            Sent::Answered(_) => {}
            Sent::Unknown => l.leases[index].settle_unknown = true,
        }
    }
    claimed
}

/// Runs `workers` workers through `bases` until every job has ended (read
/// through `bases[0]`), at most `within`; answers the ledger.
pub async fn run(bases: &[String], workers: usize, seed: u64, within: Duration) -> Ledger {
    let ledger: SharedLedger = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> =
        (0..workers).map(|w| tokio::spawn(worker(bases.to_vec(), w, seed, stop.clone(), ledger.clone()))).collect();
    let began = Instant::now();
    let c = client();
    while !all_ended(&c, &bases[0]).await {
        assert!(began.elapsed() < within, "the jobs did not all end within {within:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.expect("a worker panicked");
    }
    Arc::try_unwrap(ledger).expect("workers are done").into_inner().unwrap()
}

/// Whether every job of every scope has ended (completed or failed).
pub async fn all_ended(c: &reqwest::Client, base: &str) -> bool {
    for scope in SCOPES {
        let url = format!("{base}/api/v1/jobs/{QUEUE}/stats?scope={scope}");
        let Ok(r) = c.get(url).send().await else { return false };
        let Ok(s) = r.json::<Value>().await else { return false };
        if s["counts"]["pending"] != 0 || s["counts"]["leased"] != 0 {
            return false;
        }
    }
    true
}

/// Every job of every scope, by (scope, id), read through `base`.
pub async fn final_jobs(c: &reqwest::Client, base: &str) -> BTreeMap<(String, String), Value> {
    let mut out = BTreeMap::new();
    for scope in SCOPES {
        let mut after = String::new();
        loop {
            let url = format!("{base}/api/v1/jobs/{QUEUE}?scope={scope}&limit=1000&after={after}");
            let page: Value = c.get(url).send().await.unwrap().json().await.unwrap();
            for row in page["rows"].as_array().unwrap() {
                out.insert((scope.to_string(), row["id"].as_str().unwrap().to_string()), row.clone());
            }
            match page["nextAfter"].as_str() {
                Some(a) => after = a.to_string(),
                None => break,
            }
        }
    }
    out
}

/// The rules: tokens unique and rising per scope, never two live leases on
/// one job, every job ended completed (once, by its latest lease) or failed
/// after its attempts, and no stale lease completed anything.
pub fn audit(ledger: &Ledger, jobs: &BTreeMap<(String, String), Value>, per_scope: usize) {
    assert_eq!(jobs.len(), per_scope * SCOPES.len(), "every enqueued job is still there");
    let mut tokens: BTreeMap<&str, BTreeSet<u64>> = BTreeMap::new();
    for l in &ledger.leases {
        assert!(
            tokens.entry(&l.scope).or_default().insert(l.token),
            "token {} handed out twice in {:?}",
            l.token,
            l.scope
        );
    }
    // Tokens rise with the time they were granted.
    for scope in SCOPES {
        let mut by_token: Vec<&Leased> = ledger.leases.iter().filter(|l| l.scope == scope).collect();
        by_token.sort_by_key(|l| l.token);
        for pair in by_token.windows(2) {
            assert!(
                pair[0].granted_ms <= pair[1].granted_ms,
                "token {} granted after token {}",
                pair[0].token,
                pair[1].token
            );
        }
    }
    let mut per_job: BTreeMap<(&str, &str), Vec<&Leased>> = BTreeMap::new();
    for l in &ledger.leases {
        per_job.entry((&l.scope, &l.id)).or_default().push(l);
    }
    for ((scope, id), leases) in &mut per_job {
        leases.sort_by_key(|l| l.token);
        for pair in leases.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            if a.settle_unknown {
                continue;
            }
            let ended = a.settled_ms.unwrap_or(a.expires_ms).min(a.expires_ms);
            assert!(
                b.granted_ms >= ended,
                "{scope:?}/{id}: token {} granted at {} while token {} was live until {ended}",
                b.token,
                b.granted_ms,
                a.token
            );
        }
    }
    let mut completes: BTreeMap<(&str, &str), Vec<u64>> = BTreeMap::new();
    for (scope, id, token) in &ledger.completed {
        completes.entry((scope, id)).or_default().push(*token);
    }
    for ((scope, id), job) in jobs {
        let key = (scope.as_str(), id.as_str());
        let latest = per_job.get(&key).and_then(|l| l.last()).map(|l| l.token);
        match job["state"].as_str().unwrap() {
            "completed" => {
                let by = job["result"]["token"].as_u64().unwrap();
                assert!(job["result"]["stale"].is_null(), "{scope:?}/{id} was completed by a stale lease: {job}");
                assert_eq!(
                    Some(by),
                    latest.max(Some(by)),
                    "{scope:?}/{id} completed by token {by}, not its latest lease"
                );
                let answered = completes.get(&key).map_or(0, Vec::len);
                assert!(answered <= 1, "{scope:?}/{id} was completed {answered} times");
            }
            "failed" => {
                // A release keeps its attempt counted, so a released job may
                // be claimed past its last attempt; it fails then for good.
                let attempts = job["attempts"].as_u64().unwrap();
                let final_fail = job["error"]["code"] == "LEASE_EXPIRED" || attempts >= MAX_ATTEMPTS;
                assert!(final_fail, "{scope:?}/{id} failed before its attempts were spent: {job}");
            }
            other => panic!("{scope:?}/{id} did not end: {other} {job}"),
        }
        assert!(
            !completes.contains_key(&key) || job["state"] == "completed",
            "{scope:?}/{id}: a complete was answered but the job is {}",
            job["state"]
        );
    }
    assert!(
        ledger.stale_answers.iter().all(|a| a == "LEASE_LOST"),
        "stale completes answered {:?}",
        ledger.stale_answers
    );
}
