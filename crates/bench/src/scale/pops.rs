//! The pop measurements of a `scale` step: a few consumers of one group
//! each pop one message (`batch=1`, no long poll, so the figure is the
//! broker's work and not a wait) and ack it at once with the single ack,
//! the shortest round trip a consumer can make. Every popped partition is
//! reported so later steps can steer clear of drained ones.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Value};

use crate::progress::Progress;
use crate::scenarios::join_all;
use crate::stats::Samples;

/// The consumer group every `scale` pop reads with. A named group (rather
/// than queue mode) is what a real deployment with many partitions uses.
pub const GROUP: &str = "scale";

/// URL of a wildcard pop on `queue`: the broker picks the partition.
pub fn wildcard_url(url: &str, queue: &str) -> String {
    format!("{url}/api/v1/pop/queue/{queue}?{}", query())
}

/// URL of a pop on one named partition of `queue`.
pub fn named_url(url: &str, queue: &str, partition: &str) -> String {
    format!("{url}/api/v1/pop/queue/{queue}/partition/{partition}?{}", query())
}

/// `subscriptionMode=all` because a named group otherwise starts at the
/// end of every existing partition and would find nothing to pop.
fn query() -> String {
    format!("batch=1&wait=false&consumerGroup={GROUP}&subscriptionMode=all")
}

/// What a batch of pops measured.
#[derive(Default)]
pub struct Measured {
    /// From sending the pop to its whole answer.
    pub pop: Samples,
    /// From sending the pop to the whole answer of its ack.
    pub pop_ack: Samples,
    /// Names of the partitions the pops drained.
    pub drained: Vec<String>,
    /// Pops answered without a message.
    pub empty: u64,
    /// Acks the broker refused (`success: false`).
    pub refused: u64,
}

impl Measured {
    fn merge(&mut self, o: Measured) {
        self.pop.merge(o.pop);
        self.pop_ack.merge(o.pop_ack);
        self.drained.extend(o.drained);
        self.empty += o.empty;
        self.refused += o.refused;
    }
}

/// Sends the pops `urls` from `consumers` concurrent consumers, each
/// followed by the ack of what it popped; counts each pop on `progress`
/// counter `counter`.
pub async fn measure(
    http: &reqwest::Client,
    url: &str,
    urls: Vec<String>,
    consumers: usize,
    progress: &Progress,
    counter: usize,
) -> Result<Measured, String> {
    let urls = Arc::new(urls);
    let next = Arc::new(AtomicUsize::new(0));
    let ack_url = format!("{url}/api/v1/ack");
    let mut tasks = Vec::new();
    for _ in 0..consumers.max(1).min(urls.len().max(1)) {
        let (http, urls, next, ack_url, progress) =
            (http.clone(), urls.clone(), next.clone(), ack_url.clone(), progress.clone());
        tasks.push(tokio::spawn(async move {
            let mut m = Measured::default();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(pop_url) = urls.get(i) else { break };
                pop_and_ack(&http, pop_url, &ack_url, &mut m).await?;
                progress.add(counter, 1);
            }
            Ok::<_, String>(m)
        }));
    }
    let mut all = Measured::default();
    join_all(tasks, |m| all.merge(m)).await?;
    Ok(all)
}

/// One pop and, if it brought a message, its ack.
async fn pop_and_ack(http: &reqwest::Client, pop_url: &str, ack_url: &str, m: &mut Measured) -> Result<(), String> {
    let t = Instant::now();
    let r = http.get(pop_url).send().await.map_err(|e| format!("pop failed: {e}"))?;
    let status = r.status();
    let body = r.bytes().await.map_err(|e| format!("pop body: {e}"))?;
    m.pop.record(t.elapsed().as_micros() as u64);
    if status.as_u16() == 204 {
        m.empty += 1;
        return Ok(());
    }
    if !status.is_success() {
        return Err(format!("pop answered {status}: {}", String::from_utf8_lossy(&body)));
    }
    let v: Value = serde_json::from_slice(&body).map_err(|e| format!("pop answer is not JSON: {e}"))?;
    let Some(msg) = v["messages"].as_array().and_then(|a| a.iter().find(|x| !x.is_null())) else {
        m.empty += 1;
        return Ok(());
    };
    let mut ack = json!({"transactionId": msg["transactionId"], "partitionId": msg["partitionId"],
                         "status": "completed", "consumerGroup": GROUP});
    if let Some(l) = msg["leaseId"].as_str().filter(|l| !l.is_empty()) {
        ack["leaseId"] = json!(l);
    }
    let r = http.post(ack_url).json(&ack).send().await.map_err(|e| format!("ack failed: {e}"))?;
    if !r.status().is_success() {
        return Err(format!("ack answered {}", r.status()));
    }
    let answer: Value = r.json().await.map_err(|e| format!("ack answer is not JSON: {e}"))?;
    m.pop_ack.record(t.elapsed().as_micros() as u64);
    if !acked(&answer) {
        m.refused += 1;
    }
    m.drained.push(msg["partition"].as_str().unwrap_or_default().to_string());
    Ok(())
}

/// Whether an ack answer (an array with one result, or that one result)
/// says it succeeded.
fn acked(answer: &Value) -> bool {
    let first = answer.as_array().and_then(|a| a.first()).unwrap_or(answer);
    first["success"] == json!(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pop_urls() {
        assert_eq!(
            wildcard_url("http://h:1", "q"),
            "http://h:1/api/v1/pop/queue/q?batch=1&wait=false&consumerGroup=scale&subscriptionMode=all"
        );
        assert_eq!(
            named_url("http://h:1", "q", "p7"),
            "http://h:1/api/v1/pop/queue/q/partition/p7?batch=1&wait=false&consumerGroup=scale&subscriptionMode=all"
        );
    }

    #[test]
    fn ack_answers() {
        assert!(acked(&json!([{"index": 0, "success": true}])));
        assert!(acked(&json!({"success": true})));
        assert!(!acked(&json!([{"index": 0, "success": false, "error": "lease"}])));
        assert!(!acked(&json!([])));
    }
}
