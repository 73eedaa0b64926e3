//! TLS on the client port and between nodes: a client that trusts the CA
//! connects, plain HTTP and clients that do not trust it are refused, a
//! SIGHUP takes up a new certificate, and a cluster whose nodes speak TLS to
//! each other elects a leader and forwards requests.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use support::free_port;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

fn tls_client(ca: &str) -> reqwest::Client {
    let pem = std::fs::read(fixture(ca)).unwrap();
    let mut b = reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(10)).tls_info(true);
    b = b.tls_built_in_root_certs(false);
    for root in reqwest::Certificate::from_pem_bundle(&pem).unwrap() {
        b = b.add_root_certificate(root);
    }
    b.build().unwrap()
}

struct Node {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(dir: &std::path::Path, name: &str, port: u16, args: &[String], env: &[(&str, &str)]) -> Node {
    let log = dir.join(format!("{name}.log"));
    let out = std::fs::File::create(&log).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_regina"))
        .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
        .arg("--data-dir")
        .arg(dir.join(name))
        .args(args)
        .env("REGINA_LOG", "info,openraft=warn")
        .envs(env.iter().copied())
        .stdout(Stdio::from(out.try_clone().unwrap()))
        .stderr(Stdio::from(out))
        .spawn()
        .unwrap();
    Node { child, port, log }
}

/// Polls `https://127.0.0.1:port/health` until `accept` takes its body.
async fn wait_health(c: &reqwest::Client, node: &Node, accept: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(resp) = c.get(format!("https://127.0.0.1:{}/health", node.port)).send().await {
            if let Ok(v) = resp.json::<Value>().await {
                if accept(&v) {
                    return v;
                }
            }
        }
        let log = std::fs::read_to_string(&node.log).unwrap_or_default();
        assert!(Instant::now() < deadline, "node on {} not ready\n{log}", node.port);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn tls_args(cert: &std::path::Path, key: &std::path::Path) -> Vec<String> {
    vec![
        "--tls-cert-file".into(),
        cert.display().to_string(),
        "--tls-key-file".into(),
        key.display().to_string(),
        "--tls-ca-file".into(),
        fixture("tls-ca.pem").display().to_string(),
    ]
}

fn peer_cert(resp: &reqwest::Response) -> Vec<u8> {
    let info = resp.extensions().get::<reqwest::tls::TlsInfo>().expect("TLS info");
    info.peer_certificate().expect("a peer certificate").to_vec()
}

fn pem_der(path: &std::path::Path) -> Vec<u8> {
    use base64::Engine;
    let text = std::fs::read_to_string(path).unwrap();
    let body: String = text.lines().filter(|l| !l.starts_with("-----")).collect();
    base64::engine::general_purpose::STANDARD.decode(body).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_port_speaks_tls_and_takes_a_new_certificate_on_sighup() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("node.pem"), dir.path().join("node.key.pem"));
    std::fs::copy(fixture("tls-node-a.pem"), &cert).unwrap();
    std::fs::copy(fixture("tls-node-a.key.pem"), &key).unwrap();
    let node = start(dir.path(), "one", free_port(), &tls_args(&cert, &key)[..4], &[]);
    let c = tls_client("tls-ca.pem");
    wait_health(&c, &node, |v| v["status"] == "healthy").await;
    let base = format!("https://127.0.0.1:{}", node.port);
    let body = json!({ "items": [{ "queue": "q", "payload": { "n": 1 } }] });
    let resp = c.post(format!("{base}/api/v1/push")).json(&body).send().await.unwrap();
    assert_eq!(resp.status(), 201);
    assert_eq!(peer_cert(&resp), pem_der(&fixture("tls-node-a.pem")));
    // Plain HTTP gets no answer, and a client that trusts another CA none either.
    let plain = support::client().get(format!("http://127.0.0.1:{}/health", node.port)).send().await;
    assert!(plain.is_err() || plain.unwrap().status() == 400, "plain HTTP must not be served");
    assert!(support::health_status(node.port).is_none(), "no HTTP answer on a plain socket");
    assert!(tls_client("tls-other-ca.pem").get(format!("{base}/health")).send().await.is_err());
    // A new certificate, taken up on SIGHUP by new connections.
    std::fs::copy(fixture("tls-node-b.pem"), &cert).unwrap();
    std::fs::copy(fixture("tls-node-b.key.pem"), &key).unwrap();
    let hup = Command::new("kill").args(["-HUP", &node.child.id().to_string()]).status().unwrap();
    assert!(hup.success());
    let want = pem_der(&fixture("tls-node-b.pem"));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let resp = tls_client("tls-ca.pem").get(format!("{base}/health")).send().await.unwrap();
        if peer_cert(&resp) == want {
            break;
        }
        assert!(Instant::now() < deadline, "the new certificate was not taken up");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A key file that does not load keeps the certificate in force.
    std::fs::write(&key, "not a key").unwrap();
    let _ = Command::new("kill").args(["-HUP", &node.child.id().to_string()]).status();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let resp = tls_client("tls-ca.pem").get(format!("{base}/health")).send().await.unwrap();
    assert_eq!(peer_cert(&resp), want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_speak_tls_to_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
    let peers =
        ports.iter().enumerate().map(|(i, (_, r))| format!("{}=127.0.0.1:{r}", i + 1)).collect::<Vec<_>>().join(",");
    let nodes: Vec<Node> = ports
        .iter()
        .enumerate()
        .map(|(i, (http, raft))| {
            let mut args = tls_args(&fixture("tls-node-a.pem"), &fixture("tls-node-a.key.pem"));
            args.extend([
                "--node-id".into(),
                (i + 1).to_string(),
                "--raft-addr".into(),
                format!("127.0.0.1:{raft}"),
                "--peers".into(),
                peers.clone(),
            ]);
            let token = [("REGINA_CLUSTER_TOKEN", "tls-cluster-token-0123456789")];
            start(dir.path(), &format!("n{}", i + 1), *http, &args, &token)
        })
        .collect();
    let c = tls_client("tls-ca.pem");
    let mut leaders = Vec::new();
    for n in &nodes {
        let h = wait_health(&c, n, |v| v["leader"].as_u64().is_some()).await;
        leaders.push(h["leader"].as_u64().unwrap());
    }
    let leader = leaders[0];
    let follower = nodes.iter().enumerate().find(|(i, _)| *i as u64 + 1 != leader).map(|(_, n)| n).unwrap();
    let body = json!({ "items": [{ "queue": "tls", "payload": { "n": 1 } }] });
    let resp = c.post(format!("https://127.0.0.1:{}/api/v1/push", follower.port)).json(&body).send().await.unwrap();
    assert_eq!(resp.status(), 201, "forwarded over TLS: {}", resp.text().await.unwrap());
    // The Raft address refuses plain HTTP too.
    let raft_port = ports[0].1;
    assert!(support::health_status(raft_port).is_none());
}
