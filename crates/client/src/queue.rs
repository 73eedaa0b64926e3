//! Queues: push items, pop a batch under a lease, settle it with acks, and
//! extend a lease that needs more time.

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::client::{
    bool_of, field, opt_str, segment, str_of, u64_of, Client, Error, Request, Result, REQUEST_TIMEOUT,
};

/// The partition an item lands in when it names none.
pub const DEFAULT_PARTITION: &str = "Default";
/// The group name the broker reports for queue mode (no consumer group).
const QUEUE_MODE_GROUP: &str = "__QUEUE_MODE__";

/// One message to push. Its transaction id is minted here, so sending the
/// same item again (after a lost answer) is deduplicated by the broker.
#[derive(Debug, Clone)]
pub struct PushItem {
    pub queue: String,
    pub partition: String,
    pub transaction_id: String,
    pub payload: Value,
}

impl PushItem {
    pub fn new(queue: impl Into<String>, payload: Value) -> Self {
        PushItem {
            queue: queue.into(),
            partition: DEFAULT_PARTITION.to_string(),
            transaction_id: uuid::Uuid::now_v7().to_string(),
            payload,
        }
    }

    pub fn partition(mut self, partition: impl Into<String>) -> Self {
        self.partition = partition.into();
        self
    }

    /// The caller's own id: the broker keeps one message per
    /// (queue, partition, transaction id) inside the dedup window.
    pub fn transaction_id(mut self, id: impl Into<String>) -> Self {
        self.transaction_id = id.into();
        self
    }

    pub(crate) fn wire(&self) -> Value {
        json!({
            "queue": self.queue,
            "partition": self.partition,
            "transactionId": self.transaction_id,
            "payload": self.payload,
        })
    }
}

/// What the broker did with one pushed item.
#[derive(Debug, Clone)]
pub struct Pushed {
    pub message_id: String,
    pub transaction_id: String,
    pub partition_id: String,
    pub offset: u64,
    /// True when the item repeated one already stored; `message_id` and
    /// `offset` are then the original's.
    pub duplicate: bool,
}

/// A message handed out by a pop. Keep it to settle it.
#[derive(Debug, Clone)]
pub struct Message {
    pub id: String,
    pub transaction_id: String,
    pub queue: String,
    pub partition: String,
    pub partition_id: String,
    pub offset: u64,
    /// The lease the pop took; `None` when the pop committed at delivery.
    pub lease_id: Option<String>,
    /// `None` in queue mode.
    pub consumer_group: Option<String>,
    pub delivery_attempt: u32,
    pub created_at: String,
    pub data: Value,
}

impl Message {
    fn from_wire(m: &Value) -> Message {
        let group = str_of(m, "consumerGroup");
        Message {
            id: str_of(m, "id"),
            transaction_id: str_of(m, "transactionId"),
            queue: str_of(m, "queue"),
            partition: str_of(m, "partition"),
            partition_id: str_of(m, "partitionId"),
            offset: u64_of(m, "offset"),
            lease_id: opt_str(m, "leaseId").filter(|l| !l.is_empty()),
            consumer_group: Some(group).filter(|g| !g.is_empty() && g != QUEUE_MODE_GROUP),
            delivery_attempt: u64_of(m, "deliveryAttempt") as u32,
            created_at: str_of(m, "createdAt"),
            data: m.get("data").cloned().unwrap_or(Value::Null),
        }
    }
}

impl Client {
    /// Pushes items (to any queues and partitions) as one durable write.
    /// Answers one [`Pushed`] per item, in order.
    pub async fn push(&self, items: &[PushItem]) -> Result<Vec<Pushed>> {
        let body = json!({ "items": items.iter().map(PushItem::wire).collect::<Vec<_>>() });
        let answer = self.post("/api/v1/push", &body).await?;
        let list = answer.as_array().ok_or_else(|| Error::Decode(format!("push answered {answer}")))?;
        if list.len() != items.len() {
            return Err(Error::Decode(format!("{} push results for {} items", list.len(), items.len())));
        }
        Ok(list
            .iter()
            .map(|r| Pushed {
                message_id: str_of(r, "message_id"),
                transaction_id: str_of(r, "transactionId"),
                partition_id: str_of(r, "partitionId"),
                offset: u64_of(r, "offset"),
                duplicate: r.get("status").and_then(Value::as_str) == Some("duplicate"),
            })
            .collect())
    }

    /// A pop from `queue`; set its options, then [`Pop::send`].
    pub fn pop(&self, queue: impl Into<String>) -> Pop {
        Pop {
            client: self.clone(),
            queue: queue.into(),
            partition: None,
            group: None,
            batch: 1,
            partitions: None,
            wait: None,
            lease: None,
            subscription: None,
            auto_ack: false,
        }
    }
}

/// Where a consumer group meeting a queue for the first time starts. Unset,
/// the broker's default applies: `New`. Queue mode always reads from the
/// oldest kept message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subscription {
    /// From the oldest kept message.
    All,
    /// After everything already in the queue.
    New,
}

/// A pop being described. Defaults: queue mode, one message, no waiting,
/// the queue's lease time.
#[derive(Debug, Clone)]
pub struct Pop {
    client: Client,
    queue: String,
    partition: Option<String>,
    group: Option<String>,
    batch: u32,
    partitions: Option<u32>,
    wait: Option<Duration>,
    lease: Option<Duration>,
    subscription: Option<Subscription>,
    auto_ack: bool,
}

impl Pop {
    /// Reads as this consumer group (each group has its own cursor).
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.group = Some(group.into());
        self
    }

    /// At most this many messages in total.
    pub fn batch(mut self, n: u32) -> Self {
        self.batch = n.max(1);
        self
    }

    /// Only this partition.
    pub fn partition(mut self, partition: impl Into<String>) -> Self {
        self.partition = Some(partition.into());
        self
    }

    /// Claims up to `n` partitions at once, all under one lease.
    pub fn partitions(mut self, n: u32) -> Self {
        self.partitions = Some(n.max(1));
        self
    }

    /// Long-polls up to `wait` when nothing is ready.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = Some(wait);
        self
    }

    /// A lease of this length instead of the queue's (whole seconds, rounded up).
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = Some(lease);
        self
    }

    pub fn subscription(mut self, s: Subscription) -> Self {
        self.subscription = Some(s);
        self
    }

    /// Commits at delivery: no lease, nothing to ack.
    pub fn auto_ack(mut self) -> Self {
        self.auto_ack = true;
        self
    }

    /// Sends the pop. An empty vector means nothing was ready in time.
    pub async fn send(self) -> Result<Vec<Message>> {
        let mut path = format!("/api/v1/pop/queue/{}", segment(&self.queue, false));
        if let Some(p) = &self.partition {
            path.push_str(&format!("/partition/{}", segment(p, false)));
        }
        let wait_ms = self.wait.map_or(0, |w| w.as_millis() as u64);
        let mut req = Request::new(Method::GET, path)
            .query("batch", self.batch)
            .query("wait", wait_ms > 0)
            .query("timeout", wait_ms)
            // A long poll may hold the answer for the whole wait.
            .timeout(REQUEST_TIMEOUT + self.wait.unwrap_or_default());
        if let Some(g) = &self.group {
            req = req.query("consumerGroup", g);
        }
        if let Some(n) = self.partitions {
            req = req.query("partitions", n);
        }
        if let Some(l) = self.lease {
            req = req.query("leaseSeconds", whole_seconds(l));
        }
        match self.subscription {
            Some(Subscription::All) => req = req.query("subscriptionMode", "all"),
            Some(Subscription::New) => req = req.query("subscriptionMode", "new"),
            None => {}
        }
        if self.auto_ack {
            req = req.query("autoAck", true);
        }
        let answer = self.client.call(req).await?;
        let list = match answer.get("messages") {
            None if answer.is_null() => return Ok(Vec::new()),
            None => return Err(Error::Decode(format!("pop answered {answer}"))),
            Some(m) => m.as_array().cloned().unwrap_or_default(),
        };
        Ok(list.iter().filter(|m| m.is_object()).map(Message::from_wire).collect())
    }
}

/// Seconds for the broker's whole-second fields: at least one, rounded up.
pub(crate) fn whole_seconds(d: Duration) -> u64 {
    (d.as_millis() as u64).div_ceil(1000).max(1)
}

/// The answer to a lease extension.
#[derive(Debug, Clone)]
pub struct LeaseExtension {
    /// False when the lease is unknown, lapsed or already settled.
    pub extended: bool,
    pub expires_at: Option<String>,
}

impl Client {
    /// Extends every partition held under `lease_id` by its lease length.
    pub async fn extend_lease(&self, lease_id: &str) -> Result<LeaseExtension> {
        let path = format!("/api/v1/lease/{}/extend", segment(lease_id, false));
        let answer = self.call(Request::new(Method::POST, path)).await?;
        field(&answer, "success")?;
        Ok(LeaseExtension { extended: bool_of(&answer, "success"), expires_at: opt_str(&answer, "newExpiresAt") })
    }
}
