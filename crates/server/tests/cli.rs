#![allow(clippy::unwrap_used, clippy::too_many_lines)]
//! The operator CLI (`regina push`, `tail`, `dlq`, `kv`, `export`, ...) run
//! as the real binary against a real node: what it prints, what it moves
//! and the exit codes scripts rely on.

mod support;
#[path = "support/tokens.rs"]
mod tokens;

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use regina_client::{Ack, Client, PushItem};
use serde_json::{json, Value};
use support::{Broker, Workspace};

/// Longest any one CLI run may take before the test fails.
const CLI_TIMEOUT: Duration = Duration::from_secs(30);

/// What one run printed and how it ended.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.stdout))
    }

    fn ok(self) -> Run {
        assert_eq!(self.code, 0, "stdout: {}\nstderr: {}", self.stdout, self.stderr);
        self
    }
}

/// Starts `regina ARGS` with `REGINA_URL=url` (none: unset), feeding `stdin`.
fn spawn(url: Option<&str>, args: &[&str], stdin: &str) -> mpsc::Receiver<Run> {
    let env: Vec<(&str, &str)> = url.map(|u| ("REGINA_URL", u)).into_iter().collect();
    spawn_env(&env, args, stdin)
}

/// Starts `regina ARGS` with only `env` of the CLI's variables set.
fn spawn_env(env: &[(&str, &str)], args: &[&str], stdin: &str) -> mpsc::Receiver<Run> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_regina"));
    cmd.args(args).env_remove("REGINA_URL").env_remove("REGINA_TOKEN").env_remove("REGINA_TENANT");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child =
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("run regina");
    let mut input = child.stdin.take().unwrap();
    let stdin = stdin.to_string();
    std::thread::spawn(move || {
        let _ = input.write_all(stdin.as_bytes());
    });
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let out = child.wait_with_output().expect("wait for regina");
        let _ = tx.send(Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).to_string(),
        });
    });
    rx
}

fn finish(rx: &mpsc::Receiver<Run>, what: &str) -> Run {
    rx.recv_timeout(CLI_TIMEOUT).unwrap_or_else(|_| panic!("`regina {what}` did not finish in {CLI_TIMEOUT:?}"))
}

fn cli(url: &str, args: &[&str]) -> Run {
    finish(&spawn(Some(url), args, ""), &args.join(" "))
}

fn cli_in(url: &str, args: &[&str], stdin: &str) -> Run {
    finish(&spawn(Some(url), args, stdin), &args.join(" "))
}

/// Writes `text` to a file beside the workspace's data and answers its path.
fn ws_file(ws: &Workspace, name: &str, text: &str) -> String {
    let path = ws.log_path().with_file_name(name);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().to_string()
}

fn lines(text: &str) -> Vec<Value> {
    text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn tail_prints_a_message_pushed_after_it_started() {
    let ws = Workspace::new();
    let broker = Broker::start(&ws);
    let url = broker.base();
    let tail =
        spawn(Some(&url), &["--json", "tail", "events", "--count", "1", "--from", "all", "--timeout-ms", "20000"], "");
    std::thread::sleep(Duration::from_millis(300));
    let pushed = cli(&url, &["--json", "push", "events", "--partition", "p1", r#"{"hello":"tail"}"#]).ok().json();
    let txn = pushed[0]["transactionId"].as_str().unwrap().to_string();
    let run = finish(&tail, "tail").ok();
    let got = lines(&run.stdout);
    assert_eq!(got.len(), 1, "{}", run.stdout);
    assert_eq!(got[0]["data"], json!({ "hello": "tail" }));
    assert_eq!(got[0]["transactionId"], json!(txn));
    assert_eq!(got[0]["partition"], json!("p1"));

    // `--ack` as a named group acks what it printed: the group has nothing
    // left, and a second tail times out (exit 4) with nothing printed.
    cli(&url, &["push", "events", r#"{"n":2}"#]).ok();
    let run = cli(&url, &["--json", "tail", "events", "--group", "g", "--from", "all", "--ack", "--count", "2"]).ok();
    assert_eq!(lines(&run.stdout).len(), 2, "{}", run.stdout);
    let run = cli(&url, &["--json", "tail", "events", "--group", "g", "--count", "1", "--timeout-ms", "300"]);
    assert_eq!(run.code, 4, "{}", run.stderr);
    assert!(run.stdout.trim().is_empty(), "{}", run.stdout);
}

#[test]
fn push_from_stdin_then_export_and_import_keep_the_payloads() {
    let ws = Workspace::new();
    let broker = Broker::start(&ws);
    let url = broker.base();
    let input = "{\"i\":1}\n\n{\"i\":2}\n{\"i\":3,\"s\":\"x\"}\n";
    let pushed = cli_in(&url, &["--json", "push", "src", "--ndjson"], input).ok().json();
    assert_eq!(pushed.as_array().unwrap().len(), 3);
    assert_eq!(pushed[2]["offset"], json!(2));
    // A file holds one document.
    let file = ws_file(&ws, "one.json", r#"{"from":"file"}"#);
    let from_file = cli(&url, &["--json", "push", "files", "--file", &file]).ok().json();
    assert_eq!(from_file[0]["offset"], json!(0));
    // One document from stdin (`-`) to another partition.
    cli_in(&url, &["push", "src", "--partition", "other", "-"], "{\"i\":4}").ok();

    let exported = cli(&url, &["export", "src"]).ok();
    assert!(exported.stderr.contains("4 messages written"), "{}", exported.stderr);
    let rows = lines(&exported.stdout);
    assert_eq!(rows.len(), 4, "{}", exported.stdout);
    let imported = cli_in(&url, &["--json", "import", "dst"], &exported.stdout).ok().json();
    assert_eq!(imported["pushed"], json!(4));
    // The transaction ids came along: a second import is deduplicated.
    let again = cli_in(&url, &["--json", "import", "dst"], &exported.stdout).ok().json();
    assert_eq!((again["pushed"].clone(), again["duplicates"].clone()), (json!(0), json!(4)));

    let copy = lines(&cli(&url, &["export", "dst"]).ok().stdout);
    let view = |rows: &[Value]| {
        rows.iter()
            .map(|r| (r["partition"].clone(), r["transactionId"].clone(), r["payload"].clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(view(&copy), view(&rows));
    let payloads: Vec<Value> = copy.iter().map(|r| r["payload"].clone()).collect();
    assert_eq!(payloads, vec![json!({"i":1}), json!({"i":2}), json!({"i":3,"s":"x"}), json!({"i":4})]);
    // One partition alone.
    assert_eq!(lines(&cli(&url, &["export", "dst", "--partition", "other"]).ok().stdout).len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dlq_replay_moves_dead_letters_back_and_purge_empties_the_dlq() {
    let ws = Workspace::new();
    let broker = Broker::start(&ws);
    let url = broker.base();
    let sdk = Client::new(url.clone()).unwrap();
    let c = support::client();
    let r = c
        .post(broker.url("/api/v1/configure"))
        .json(&json!({ "queue": "work", "options": { "retryLimit": 0 } }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let items: Vec<PushItem> = (0..5).map(|i| PushItem::new("work", json!({ "job": i }))).collect();
    sdk.push(&items).await.unwrap();
    assert_eq!(file_to_dlq(&sdk, 5).await, 5);

    let (listed, rest) = tokio::task::spawn_blocking({
        let url = url.clone();
        move || {
            let listed = cli(&url, &["--json", "dlq", "list", "work"]).ok().json();
            // One by partition id and transaction id.
            let first = &listed["messages"][0];
            let (pid, txn) = (first["partitionId"].as_str().unwrap(), first["transactionId"].as_str().unwrap());
            cli(&url, &["dlq", "replay", pid, txn]).ok();
            let rest = cli(&url, &["--json", "dlq", "list", "work"]).ok().json();
            (listed, rest)
        }
    })
    .await
    .unwrap();
    assert_eq!(listed["total"], json!(5), "{listed}");
    assert!(listed["messages"][0]["errorMessage"].as_str().is_some());
    assert_eq!(rest["total"], json!(4));
    let replayed_txn = listed["messages"][0]["transactionId"].clone();
    let back = sdk.pop("work").batch(10).send().await.unwrap();
    assert_eq!(back.len(), 1, "the replayed message is poppable again");
    assert_eq!(json!(back[0].transaction_id), replayed_txn);
    sdk.settle(Ack::dlq(&back[0], "again")).await.unwrap();

    let url2 = url.clone();
    let (all, after_all) = tokio::task::spawn_blocking(move || {
        (cli(&url2, &["dlq", "replay", "--all", "work"]), cli(&url2, &["--json", "dlq", "list", "work"]).ok().json())
    })
    .await
    .unwrap();
    assert_eq!(all.code, 0, "{}", all.stderr);
    assert!(all.stderr.contains("replayed 5 of 5"), "{}", all.stderr);
    assert_eq!(after_all["total"], json!(0));
    assert_eq!(file_to_dlq(&sdk, 10).await, 5, "every dead letter was replayed");

    let url3 = url.clone();
    let (purge, after) = tokio::task::spawn_blocking(move || {
        (cli(&url3, &["dlq", "purge", "work"]), cli(&url3, &["--json", "dlq", "list", "work"]).ok().json())
    })
    .await
    .unwrap();
    assert_eq!(purge.code, 0, "{}", purge.stderr);
    assert!(purge.stdout.contains("purged 5 dead letter(s) of work"), "{}", purge.stdout);
    assert_eq!(after["total"], json!(0));
    assert!(sdk.pop("work").batch(10).send().await.unwrap().is_empty(), "purge does not replay");
}

/// Pops `work` one message at a time and files each to the DLQ (a failed
/// ack past retryLimit 0, or a `dlq` ack, by turns) until none is ready or
/// `max` were filed; answers how many.
async fn file_to_dlq(sdk: &Client, max: usize) -> usize {
    let mut filed = 0;
    while filed < max {
        let Some(m) = sdk.pop("work").send().await.unwrap().pop() else { break };
        let ack = if filed % 2 == 0 { Ack::failed(&m, "boom") } else { Ack::dlq(&m, "bad") };
        let r = sdk.settle(ack).await.unwrap();
        assert!(r.success && r.dlq, "{r:?}");
        filed += 1;
    }
    filed
}

#[test]
fn json_output_parses_and_kv_round_trips() {
    let ws = Workspace::new();
    let broker = Broker::start(&ws);
    let url = broker.base();
    cli(&url, &["push", "orders", r#"{"id":1}"#]).ok();
    cli(&url, &["tail", "orders", "--group", "billing", "--from", "all", "--count", "1"]).ok();

    let queues = cli(&url, &["--json", "queues"]).ok().json();
    assert_eq!(queues["queues"][0]["name"], json!("orders"), "{queues}");
    let groups = cli(&url, &["--json", "groups"]).ok().json();
    assert!(groups.as_array().unwrap().iter().any(|g| g["name"] == json!("billing")), "{groups}");
    let status = cli(&url, &["--json", "status"]).ok().json();
    assert_eq!(status["health"]["status"], json!("healthy"), "{status}");
    assert_eq!(status["status"]["messages"]["total"], json!(1), "{status}");
    let describe = cli(&url, &["--json", "queue", "describe", "orders"]).ok().json();
    assert_eq!(describe["name"], json!("orders"));
    // The tables name what they show.
    assert!(cli(&url, &["queues"]).ok().stdout.contains("orders"));
    assert!(cli(&url, &["groups"]).ok().stdout.contains("billing"));

    cli(&url, &["kv", "put", "config", "limits/max", r#"{"n":10}"#]).ok();
    cli(&url, &["kv", "put", "config", "greeting", "hello", "--ttl", "3600"]).ok();
    let got = cli(&url, &["--json", "kv", "get", "config", "limits/max"]).ok().json();
    assert_eq!((got["value"].clone(), got["version"].as_u64().is_some()), (json!({"n":10}), true));
    let plain = cli(&url, &["kv", "get", "config", "greeting"]).ok();
    assert_eq!(plain.stdout.trim(), "\"hello\"");
    let scan = cli(&url, &["--json", "kv", "scan", "config"]).ok().json();
    let keys: Vec<&str> = scan.as_array().unwrap().iter().map(|r| r["key"].as_str().unwrap()).collect();
    assert_eq!(keys, vec!["greeting", "limits/max"]);
    let prefixed = cli(&url, &["--json", "kv", "scan", "config", "--prefix", "lim"]).ok().json();
    assert_eq!(prefixed.as_array().unwrap().len(), 1);
    let refused = cli(&url, &["kv", "put", "config", "greeting", "again", "--if-absent"]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    cli(&url, &["kv", "delete", "config", "greeting"]).ok();
    assert_eq!(cli(&url, &["kv", "get", "config", "greeting"]).code, 1);
}

#[test]
fn exit_codes_and_completions() {
    let ws = Workspace::new();
    let broker = Broker::start(&ws);
    let url = broker.base();

    // 1: the server refused, or the thing named is not there; the refusal's
    // code and text go to stderr.
    let run = cli(&url, &["queue", "describe", "nope"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("queue_not_found"), "{}", run.stderr);
    assert_eq!(cli(&url, &["dlq", "list", "nope"]).code, 1);
    assert_eq!(cli(&url, &["export", "nope"]).code, 1);
    let run = cli(&url, &["dlq", "replay", "999", "no-such-txn"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("not_found") || run.stderr.contains("404"), "{}", run.stderr);

    // 2: bad usage, before anything is sent.
    for args in [
        &["queues", "--bogus"][..],
        &["push"][..],
        &["push", "q", "not json"][..],
        &["dlq", "replay"][..],
        &["tail", "q", "--batch", "0"][..],
        &["completions", "tcsh"][..],
    ] {
        let run = cli(&url, args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(!run.stderr.is_empty(), "{args:?} says why");
    }
    assert_eq!(cli(&url, &["--url", "ftp://x", "queues"]).code, 2);

    // 3: nothing answers at that URL (global options before the command too).
    let dead = format!("http://127.0.0.1:{}", support::free_port());
    let run = cli(&url, &["--url", &dead, "queues"]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(run.stderr.contains("cannot reach"), "{}", run.stderr);
    assert_eq!(finish(&spawn(Some(&dead), &["status"], ""), "status").code, 3);

    // The default URL comes from REGINA_URL; `--url` overrides it.
    assert_eq!(finish(&spawn(Some(&dead), &["--url", &url, "queues"], ""), "queues").code, 0);

    // Completions for each shell.
    let bash = finish(&spawn(None, &["completions", "bash"], ""), "completions").ok();
    assert!(bash.stdout.contains("complete -F _regina") && bash.stdout.contains("dlq"), "{}", bash.stdout);
    for shell in ["zsh", "fish"] {
        assert!(!finish(&spawn(None, &["completions", shell], ""), "completions").ok().stdout.is_empty());
    }

    // The server's own flags still start the server's argument reading.
    let run = finish(&spawn(None, &["--help"], ""), "--help").ok();
    assert!(run.stdout.contains("--data-dir"), "{}", run.stdout);
    // `cluster` keeps its own arguments.
    let run = cli(&url, &["cluster", "status", "--url", &url]).ok();
    assert!(run.stdout.contains("leader: node 1"), "{}", run.stdout);
    // Global options first reach it too.
    let run = finish(&spawn(Some(&dead), &["--url", &url, "cluster", "status"], ""), "cluster status").ok();
    assert!(run.stdout.contains("leader: node 1"), "{}", run.stdout);
    let run = cli(&url, &["cluster", "leader", "--id", "1"]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("--group"), "{}", run.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timers_and_jobs_are_listed_cancelled_and_retried() {
    let ws = Workspace::new();
    let broker = Broker::start(&ws);
    let url = broker.base();
    let sdk = Client::new(url.clone()).unwrap();
    let timer = regina_client::Timer::new("reminders", "order-1", Duration::from_secs(600)).payload(json!({"o":1}));
    sdk.timers().schedule(&timer).await.unwrap();
    let emails = sdk.jobs().queue("emails");
    emails.configure(&regina_client::JobConfig::new().no_retry()).await.unwrap();
    emails.enqueue("welcome-1", json!({ "to": "a" })).await.unwrap();
    emails.enqueue("welcome-2", json!({ "to": "b" })).await.unwrap();
    let claim = emails.claim("worker").await.unwrap().unwrap();
    let failed_id = claim.id.clone();
    assert!(emails.fail(&claim, "smtp down").await.unwrap().applied);

    let url2 = url.clone();
    let failed = failed_id.clone();
    tokio::task::spawn_blocking(move || {
        let url = url2;
        let timers = cli(&url, &["--json", "timers", "list", "reminders"]).ok().json();
        assert_eq!(timers[0]["timerKey"], json!("order-1"), "{timers}");
        assert_eq!(timers[0]["payload"], json!({"o":1}));
        // Not failed: retry is refused with exit 1.
        assert_eq!(cli(&url, &["timers", "retry", "reminders", "order-1"]).code, 1);
        cli(&url, &["timers", "cancel", "reminders", "order-1"]).ok();
        assert_eq!(cli(&url, &["timers", "cancel", "reminders", "order-1"]).code, 1);
        assert_eq!(cli(&url, &["--json", "timers", "list", "reminders"]).ok().json(), json!([]));

        let listed = cli(&url, &["--json", "jobs", "list", "emails", "--state", "failed"]).ok().json();
        assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
        assert_eq!(listed[0]["id"], json!(failed));
        let stats = cli(&url, &["--json", "jobs", "stats", "emails"]).ok().json();
        assert_eq!(stats["counts"]["failed"], json!(1), "{stats}");
        cli(&url, &["jobs", "retry", "emails", &failed]).ok();
        // Pending again: a second retry is refused.
        assert_eq!(cli(&url, &["jobs", "retry", "emails", &failed]).code, 1);
        let stats = cli(&url, &["--json", "jobs", "stats", "emails"]).ok().json();
        assert_eq!((stats["counts"]["failed"].clone(), stats["counts"]["pending"].clone()), (json!(0), json!(2)));
        assert_eq!(cli(&url, &["jobs", "get", "emails", "nope"]).code, 1);
    })
    .await
    .unwrap();
}

#[test]
fn token_and_tenant_are_sent_with_every_command() {
    let ws = Workspace::new();
    let env = [("JWT_ENABLED", "true"), ("JWT_SECRET", tokens::SECRET), ("REGINA_TENANCY", "on")];
    let broker = Broker::start_with(&ws, &env);
    let url = broker.base();
    // No token: the server refuses (exit 1) and says why.
    let run = cli(&url, &["queues"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("401"), "{}", run.stderr);
    let admin = tokens::token("ops", "admin");
    let with = |tenant: &str, args: &[&str]| {
        let mut all = vec!["--token", admin.as_str(), "--tenant", tenant];
        all.extend_from_slice(args);
        cli(&url, &all)
    };
    with("acme", &["push", "orders", r#"{"t":"acme"}"#]).ok();
    let names = |v: &Value| v["queues"].as_array().unwrap().iter().map(|q| q["name"].clone()).collect::<Vec<_>>();
    assert_eq!(names(&with("acme", &["--json", "queues"]).ok().json()), vec![json!("orders")]);
    assert!(names(&with("globex", &["--json", "queues"]).ok().json()).is_empty(), "tenants do not see each other");
    // The environment gives the same defaults.
    let env = [("REGINA_URL", url.as_str()), ("REGINA_TOKEN", admin.as_str()), ("REGINA_TENANT", "acme")];
    let v = finish(&spawn_env(&env, &["--json", "queues"], ""), "queues").ok().json();
    assert_eq!(names(&v), vec![json!("orders")]);
    assert_eq!(finish(&spawn(Some(&url), &["status"], ""), "status").code, 1, "status needs the token too");
}
