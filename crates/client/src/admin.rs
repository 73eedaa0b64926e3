//! The administration reads and the dead-letter calls: the queues and
//! their figures, consumer groups, the broker's status, the kept messages
//! of a queue, and the dead-letter queue (list, replay one, delete one).
//!
//! The overview reads answer the broker's JSON as it is ([`Value`]): their
//! shapes are the broker's to extend. The listings a caller pages through
//! or acts on (dead letters, kept messages) are typed.

use reqwest::Method;
use serde_json::Value;

use crate::client::{field, opt_str, segment, str_of, u64_of, Client, Error, Request, Result};

/// Most rows one dead-letter page may ask for (the broker's bound).
pub const DLQ_PAGE_MAX: u32 = 1_000;
/// Most rows one page of kept messages may ask for (the broker's bound).
pub const MESSAGES_PAGE_MAX: u32 = 1_000;

/// A message filed to the dead-letter queue.
#[derive(Debug, Clone, PartialEq)]
pub struct DeadLetter {
    pub queue: String,
    pub partition: String,
    /// The id the replay and delete calls name the partition by.
    pub partition_id: String,
    pub transaction_id: String,
    pub message_id: String,
    pub offset: u64,
    /// The group whose delivery filed it (`None` in queue mode).
    pub consumer_group: Option<String>,
    /// The failing ack's `error` text.
    pub error_message: Option<String>,
    pub retry_count: u64,
    pub created_at: String,
    pub failed_at: String,
    /// The original payload.
    pub data: Value,
}

impl DeadLetter {
    fn from_wire(v: &Value) -> DeadLetter {
        DeadLetter {
            queue: str_of(v, "queue"),
            partition: str_of(v, "partition"),
            partition_id: str_of(v, "partitionId"),
            transaction_id: str_of(v, "transactionId"),
            message_id: str_of(v, "id"),
            offset: u64_of(v, "offset"),
            consumer_group: opt_str(v, "consumerGroup").filter(|g| !g.is_empty() && g != "__QUEUE_MODE__"),
            error_message: opt_str(v, "errorMessage"),
            retry_count: u64_of(v, "retryCount"),
            created_at: str_of(v, "createdAt"),
            failed_at: str_of(v, "failedAt"),
            data: v.get("data").cloned().unwrap_or(Value::Null),
        }
    }
}

/// One page of dead letters.
#[derive(Debug, Clone, PartialEq)]
pub struct DeadLetterPage {
    pub rows: Vec<DeadLetter>,
    /// Every dead letter the filter matches, before paging.
    pub total: u64,
}

/// A kept message as the message browser lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredMessage {
    pub queue: String,
    pub partition: String,
    pub partition_id: String,
    pub transaction_id: String,
    pub message_id: String,
    pub offset: u64,
    /// `pending`, `processing`, `completed` or `dead_letter`.
    pub status: String,
    pub created_at: String,
    pub payload: Value,
}

impl StoredMessage {
    fn from_wire(v: &Value) -> StoredMessage {
        StoredMessage {
            queue: str_of(v, "queue"),
            partition: str_of(v, "partition"),
            partition_id: str_of(v, "partitionId"),
            transaction_id: str_of(v, "transactionId"),
            message_id: str_of(v, "id"),
            offset: u64_of(v, "offset"),
            status: str_of(v, "status"),
            created_at: str_of(v, "createdAt"),
            payload: v.get("payload").or_else(|| v.get("data")).cloned().unwrap_or(Value::Null),
        }
    }
}

/// Which kept messages a [`Client::messages`] page holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MessageQuery {
    pub queue: Option<String>,
    pub partition: Option<String>,
    /// `pending`, `processing`, `completed` or `dead_letter`.
    pub status: Option<String>,
    /// Rows skipped (the broker's page starts newest first).
    pub offset: u64,
    /// At most this many rows (0: the broker's default).
    pub limit: u32,
}

impl Client {
    /// `GET /health`: the node's own view (role, term, indexes, members),
    /// answered whether or not the node is healthy.
    pub async fn health(&self) -> Result<Value> {
        let (status, body) = self.exchange(Request::new(Method::GET, "/health")).await?;
        if body.is_object() {
            Ok(body)
        } else {
            Err(Error::from_answer(status, &body))
        }
    }

    /// `GET /api/v1/status`: message, lease, DLQ and throughput figures.
    pub async fn status(&self) -> Result<Value> {
        self.get("/api/v1/status").await
    }

    /// `GET /api/v1/resources/queues`: every queue with its figures (`queues`).
    pub async fn queues(&self) -> Result<Value> {
        self.get("/api/v1/resources/queues").await
    }

    /// `GET /api/v1/resources/queues/{queue}`: one queue's configuration,
    /// partitions and consumer groups; `queue_not_found` when there is none.
    pub async fn queue_detail(&self, queue: &str) -> Result<Value> {
        self.get(&format!("/api/v1/resources/queues/{}", segment(queue, false))).await
    }

    /// `GET /api/v1/consumer-groups`: every group on every queue, with its lag.
    pub async fn consumer_groups(&self) -> Result<Value> {
        self.get("/api/v1/consumer-groups").await
    }

    /// `GET /api/v1/dlq`: one page of the dead letters of `queue` (every
    /// queue when `None`), `limit` at most [`DLQ_PAGE_MAX`].
    pub async fn dead_letters(&self, queue: Option<&str>, limit: u32, offset: u64) -> Result<DeadLetterPage> {
        let mut req = Request::new(Method::GET, "/api/v1/dlq")
            .query("limit", limit.clamp(1, DLQ_PAGE_MAX))
            .query("offset", offset);
        if let Some(q) = queue {
            req = req.query("queue", q);
        }
        let answer = self.call(req).await?;
        let rows = field(&answer, "messages")?
            .as_array()
            .ok_or_else(|| Error::Decode(format!("the dlq's messages are not a list: {answer}")))?
            .iter()
            .map(DeadLetter::from_wire)
            .collect();
        Ok(DeadLetterPage { rows, total: u64_of(&answer, "total") })
    }

    /// `POST /api/v1/messages/{partitionId}/{transactionId}/retry`: pushes a
    /// dead letter back to its partition (same transaction id) and drops
    /// the row. Answers the broker's JSON (`messageId`, `offset`).
    pub async fn replay_dead_letter(&self, partition_id: &str, transaction_id: &str) -> Result<Value> {
        let path =
            format!("/api/v1/messages/{}/{}/retry", segment(partition_id, false), segment(transaction_id, false));
        self.call(Request::new(Method::POST, path)).await
    }

    /// `DELETE /api/v1/messages/{partitionId}/{transactionId}`: drops a
    /// dead-letter row (`not_found` when there is none).
    pub async fn delete_dead_letter(&self, partition_id: &str, transaction_id: &str) -> Result<()> {
        let path = format!("/api/v1/messages/{}/{}", segment(partition_id, false), segment(transaction_id, false));
        self.call(Request::new(Method::DELETE, path)).await.map(|_| ())
    }

    /// `DELETE /api/v1/dlq?queue=`: deletes every dead letter of `queue`
    /// (of `group` only, when named) on the server, in one call; answers
    /// how many it deleted.
    pub async fn purge_dead_letters(&self, queue: &str, group: Option<&str>) -> Result<u64> {
        let mut req = Request::new(Method::DELETE, "/api/v1/dlq").query("queue", queue);
        if let Some(g) = group {
            req = req.query("consumerGroup", g);
        }
        let answer = self.call(req).await?;
        Ok(answer.get("purged").and_then(Value::as_u64).unwrap_or(0))
    }

    /// `POST /api/v1/fetch` of one partition from `offset`: the records
    /// (`offset`, `transactionId`, `payload`, `ts`) and the partition's
    /// `highWatermark` and `logStartOffset`, as the broker answers them.
    pub async fn fetch_from(&self, queue: &str, partition: &str, offset: u64) -> Result<Value> {
        let body = serde_json::json!({ "entries": [{ "queue": queue, "partition": partition, "offset": offset }] });
        let answer = self.post("/api/v1/fetch", &body).await?;
        Ok(answer.get("entries").and_then(|e| e.get(0)).cloned().unwrap_or(Value::Null))
    }

    /// `GET /api/v1/messages`: one page of kept messages, newest first.
    pub async fn messages(&self, query: &MessageQuery) -> Result<Vec<StoredMessage>> {
        let mut req = Request::new(Method::GET, "/api/v1/messages").query("offset", query.offset);
        if query.limit > 0 {
            req = req.query("limit", query.limit.min(MESSAGES_PAGE_MAX));
        }
        if let Some(q) = &query.queue {
            req = req.query("queue", q);
        }
        if let Some(p) = &query.partition {
            req = req.query("partition", p);
        }
        if let Some(s) = &query.status {
            req = req.query("status", s);
        }
        let answer = self.call(req).await?;
        Ok(field(&answer, "messages")?
            .as_array()
            .ok_or_else(|| Error::Decode(format!("the messages are not a list: {answer}")))?
            .iter()
            .map(StoredMessage::from_wire)
            .collect())
    }
}
