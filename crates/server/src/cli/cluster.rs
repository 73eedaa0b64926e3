//! `regina cluster ...`: the operator's commands against a running node.
//!
//! - `status`: the members as the leader sees them (voter or learner,
//!   matched index, lag), then each member's own `/health` (role, term,
//!   commit and applied indexes), asked at its Raft address with the
//!   cluster token (`REGINA_CLUSTER_TOKEN` or `REGINA_CLUSTER_TOKEN_FILE`),
//!   over TLS when `REGINA_TLS_CA_FILE` names the cluster's CA.
//! - `add --id N --addr HOST:PORT`: adds a running node as a voter.
//! - `remove --id N`: removes a member.
//! - `leader --group G --id N`: pins group G's preferred leader to node N
//!   (the balancer hands the group there); `leader --group G --unpin`
//!   drops the pin.
//!
//! Any node's URL will do: the request is forwarded to the leader.

use std::time::Duration;

use serde_json::{json, Value};

pub const DEFAULT_URL: &str = "http://127.0.0.1:6632";

/// Runs a `cluster` subcommand; `Err` carries the message for the user.
pub fn run(args: &[String], env: impl Fn(&str) -> Option<String>) -> Result<(), String> {
    let mut url = env("REGINA_URL").unwrap_or_else(|| DEFAULT_URL.to_string());
    let (mut id, mut addr, mut group, mut unpin) = (None::<u64>, None::<String>, None::<u16>, false);
    let command = args.first().ok_or("regina cluster: say status, add, remove or leader")?;
    let mut rest = args[1..].iter();
    while let Some(a) = rest.next() {
        let mut value = || rest.next().cloned().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--url" => url = value()?,
            "--id" => id = Some(value()?.parse().map_err(|_| "--id: not a node id".to_string())?),
            "--addr" => addr = Some(value()?),
            "--group" => group = Some(value()?.parse().map_err(|_| "--group: not a group number".to_string())?),
            "--unpin" => unpin = true,
            other => return Err(format!("regina cluster: unknown argument {other}")),
        }
    }
    let url = url.trim_end_matches('/').to_string();
    let cluster_token = cluster_token(&env)?;
    let bearer = env("REGINA_TOKEN");
    let ca = match env("REGINA_TLS_CA_FILE") {
        Some(path) => Some(std::fs::read(&path).map_err(|e| format!("cannot read {path}: {e}"))?),
        None => None,
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    runtime.block_on(async move {
        let client = http_client(bearer.as_deref(), ca.as_deref())?;
        match command.as_str() {
            "status" => {
                let peers = regina_consensus::network::peer_client(cluster_token.as_deref(), ca.as_deref())?;
                let scheme = if ca.is_some() { "https" } else { "http" };
                status(&client, &peers, scheme, &url).await
            }
            "add" => {
                let (id, addr) = (id.ok_or("add needs --id")?, addr.ok_or("add needs --addr")?);
                let body = json!({ "id": id, "addr": addr });
                let answer = send(client.post(format!("{url}/api/v1/cluster/members")).json(&body)).await?;
                println!("node {id} at {addr} is a voter");
                print_members(&answer["cluster"]);
                Ok(())
            }
            "remove" => {
                let id = id.ok_or("remove needs --id")?;
                let answer = send(client.delete(format!("{url}/api/v1/cluster/members/{id}"))).await?;
                println!("node {id} is no longer a member");
                print_members(&answer["cluster"]);
                Ok(())
            }
            "leader" => {
                let group = group.ok_or("leader needs --group")?;
                let path = format!("{url}/api/v1/cluster/groups/{group}/leader");
                let answer = match (unpin, id) {
                    (true, None) => send(client.delete(path)).await?,
                    (false, Some(id)) => send(client.put(path).json(&json!({ "node": id }))).await?,
                    _ => return Err("leader needs either --id N or --unpin".into()),
                };
                let g = &answer["group"];
                println!(
                    "group {group}: preferred leader node {}, pinned {}, led by node {}",
                    text(&g["preferredLeader"]),
                    text(&g["pinnedLeader"]),
                    text(&g["leader"])
                );
                Ok(())
            }
            other => Err(format!("regina cluster: unknown command {other}; say status, add, remove or leader")),
        }
    })
}

/// The cluster token `status` asks members with: the first line of
/// `REGINA_CLUSTER_TOKEN_FILE`, else `REGINA_CLUSTER_TOKEN`.
fn cluster_token(env: &impl Fn(&str) -> Option<String>) -> Result<Option<String>, String> {
    Ok(match (env("REGINA_CLUSTER_TOKEN_FILE"), env("REGINA_CLUSTER_TOKEN")) {
        (Some(path), _) => Some(
            std::fs::read_to_string(&path)
                .map_err(|e| format!("cannot read {path}: {e}"))?
                .lines()
                .next()
                .unwrap_or("")
                .trim()
                .to_string(),
        ),
        (None, token) => token,
    })
}

/// The client for the client routes: the bearer token on every request,
/// and the cluster's CA when TLS is on.
fn http_client(bearer: Option<&str>, ca: Option<&[u8]>) -> Result<reqwest::Client, String> {
    let mut headers = reqwest::header::HeaderMap::new();
    if let Some(token) = bearer {
        let value = format!("Bearer {token}").parse().map_err(|_| "REGINA_TOKEN is not a header value")?;
        headers.insert(reqwest::header::AUTHORIZATION, value);
    }
    let mut builder = reqwest::Client::builder().timeout(Duration::from_secs(30)).default_headers(headers);
    if let Some(pem) = ca {
        for root in reqwest::Certificate::from_pem_bundle(pem).map_err(|e| e.to_string())? {
            builder = builder.add_root_certificate(root);
        }
    }
    builder.build().map_err(|e| e.to_string())
}

async fn send(req: reqwest::RequestBuilder) -> Result<Value, String> {
    let resp = req.send().await.map_err(|e| format!("no answer: {e}"))?;
    let status = resp.status();
    let body: Value = resp.json().await.map_err(|e| format!("{status}: unreadable answer: {e}"))?;
    if !status.is_success() {
        return Err(format!("{status}: {}", body["error"].as_str().unwrap_or("refused")));
    }
    Ok(body)
}

async fn status(client: &reqwest::Client, peers: &reqwest::Client, scheme: &str, url: &str) -> Result<(), String> {
    let view = send(client.get(format!("{url}/api/v1/cluster"))).await?;
    print_members(&view);
    println!();
    println!(
        "{:>4}  {:<22} {:<10} {:>6} {:>10} {:>10} {:>6}",
        "id", "addr", "role", "term", "commit", "applied", "lag"
    );
    for member in view["members"].as_array().into_iter().flatten() {
        let addr = member["addr"].as_str().unwrap_or("?");
        let health = peers.get(format!("{scheme}://{addr}/health")).timeout(Duration::from_secs(2)).send().await;
        let h = match health {
            Ok(r) => r.json::<Value>().await.unwrap_or(Value::Null),
            Err(_) => Value::Null,
        };
        if h.is_null() {
            println!("{:>4}  {:<22} {:<10}", text(&member["id"]), addr, "unreachable");
            continue;
        }
        println!(
            "{:>4}  {:<22} {:<10} {:>6} {:>10} {:>10} {:>6}",
            text(&member["id"]),
            addr,
            h["role"].as_str().unwrap_or("?"),
            text(&h["term"]),
            text(&h["commitIndex"]),
            text(&h["appliedIndex"]),
            text(&h["lag"])
        );
    }
    Ok(())
}

fn print_members(view: &Value) {
    println!("leader: node {} (term {})", text(&view["leader"]), text(&view["term"]));
    if let Some(groups) = view["groups"].as_array() {
        println!(
            "{:>5}  {:>6} {:>9} {:<10} {:>6} {:>10} {:>10} {:>9} {:>11} {:>7}",
            "group", "leader", "preferred", "role", "term", "commit", "applied", "entries/s", "bytes/s", "tenants"
        );
        for g in groups {
            let pinned = if g["pinnedLeader"].is_null() { "" } else { "*" };
            println!(
                "{:>5}  {:>6} {:>9} {:<10} {:>6} {:>10} {:>10} {:>9.0} {:>11.0} {:>7}",
                text(&g["group"]),
                text(&g["leader"]),
                format!("{}{pinned}", text(&g["preferredLeader"])),
                g["role"].as_str().unwrap_or("?"),
                text(&g["term"]),
                text(&g["commitIndex"]),
                text(&g["appliedIndex"]),
                g["load"]["entriesPerSec"].as_f64().unwrap_or(0.0),
                g["load"]["bytesPerSec"].as_f64().unwrap_or(0.0),
                text(&g["tenantCount"])
            );
        }
        if let Some(per) = view["leadersPerNode"].as_object() {
            let spread: Vec<String> = per.iter().map(|(id, n)| format!("node {id}: {n}")).collect();
            println!("groups led: {} (* = pinned preferred leader)", spread.join(", "));
        }
    }
    println!("{:>4}  {:<22} {:<8} {:>10} {:>6}", "id", "addr", "kind", "matched", "lag");
    for m in view["members"].as_array().into_iter().flatten() {
        let kind = if m["voter"].as_bool() == Some(true) { "voter" } else { "learner" };
        println!(
            "{:>4}  {:<22} {:<8} {:>10} {:>6}",
            text(&m["id"]),
            m["addr"].as_str().unwrap_or("?"),
            kind,
            text(&m["matchedIndex"]),
            text(&m["lag"])
        );
    }
}

/// A JSON scalar as plain text (`Value`'s Display ignores column widths).
fn text(v: &Value) -> String {
    match v {
        Value::Null => "-".to_string(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
