//! Settling popped messages: acks and nacks, one at a time or in a batch.
//!
//! A `completed` ack of offset N commits every offset up to N for the
//! group. A refused ack (a lapsed lease, an unknown message, a nack below
//! the cursor) is an answer with `success: false`, not an error: the
//! broker answers 200 and the rest of a batch still counts.

use serde_json::{json, Value};

use crate::client::{bool_of, opt_str, Client, Error, Result};
use crate::queue::Message;

/// What an ack does with its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckStatus {
    /// Done: commits the cursor past it.
    Completed,
    /// Handed back for redelivery; counts toward the queue's retry limit.
    Failed,
    /// Handed back for redelivery without counting a retry.
    Retry,
    /// Filed to the dead-letter queue at once.
    Dlq,
}

impl AckStatus {
    fn wire(self) -> &'static str {
        match self {
            AckStatus::Completed => "completed",
            AckStatus::Failed => "failed",
            AckStatus::Retry => "retry",
            AckStatus::Dlq => "dlq",
        }
    }
}

/// One acknowledgement, built from the message it settles.
#[derive(Debug, Clone)]
pub struct Ack {
    pub transaction_id: String,
    pub partition_id: String,
    pub lease_id: Option<String>,
    pub consumer_group: Option<String>,
    pub status: AckStatus,
    pub error: Option<String>,
}

impl Ack {
    pub fn completed(m: &Message) -> Ack {
        Ack::with_status(m, AckStatus::Completed, None)
    }

    /// A nack; `error` is kept with the message if it ends in the DLQ.
    pub fn failed(m: &Message, error: impl Into<String>) -> Ack {
        Ack::with_status(m, AckStatus::Failed, Some(error.into()))
    }

    pub fn retry(m: &Message) -> Ack {
        Ack::with_status(m, AckStatus::Retry, None)
    }

    pub fn dlq(m: &Message, error: impl Into<String>) -> Ack {
        Ack::with_status(m, AckStatus::Dlq, Some(error.into()))
    }

    pub fn with_status(m: &Message, status: AckStatus, error: Option<String>) -> Ack {
        Ack {
            transaction_id: m.transaction_id.clone(),
            partition_id: m.partition_id.clone(),
            lease_id: m.lease_id.clone(),
            consumer_group: m.consumer_group.clone(),
            status,
            error,
        }
    }

    /// Drops the lease fence: the broker then settles the message even when
    /// the pop's lease has lapsed, as long as nobody committed it since.
    pub fn without_lease(mut self) -> Ack {
        self.lease_id = None;
        self
    }

    /// The wire form without the group, which a batch names once.
    pub(crate) fn wire(&self) -> Value {
        let mut v = json!({
            "transactionId": self.transaction_id,
            "partitionId": self.partition_id,
            "status": self.status.wire(),
            "error": self.error,
        });
        if let Some(l) = &self.lease_id {
            v["leaseId"] = json!(l);
        }
        v
    }
}

/// The broker's verdict on one ack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AckResult {
    pub success: bool,
    /// Why it was refused; contains `lease`, `unresolv` or `committed`.
    pub error: Option<String>,
    /// The whole leased batch is settled and its lease is gone.
    pub lease_released: bool,
    /// The message went to the dead-letter queue.
    pub dlq: bool,
    /// A completed ack of something already committed: nothing changed.
    pub noop: bool,
}

impl AckResult {
    fn from_wire(v: &Value) -> AckResult {
        AckResult {
            success: bool_of(v, "success"),
            error: opt_str(v, "error"),
            lease_released: bool_of(v, "leaseReleased"),
            dlq: bool_of(v, "dlq"),
            noop: bool_of(v, "noop"),
        }
    }
}

impl Client {
    /// Acks one message as completed.
    pub async fn ack(&self, m: &Message) -> Result<AckResult> {
        self.settle(Ack::completed(m)).await
    }

    /// Nacks one message: it comes back for another attempt, or goes to the
    /// DLQ once its retries are spent.
    pub async fn nack(&self, m: &Message, error: impl Into<String>) -> Result<AckResult> {
        self.settle(Ack::failed(m, error)).await
    }

    /// Sends one acknowledgement of any status.
    pub async fn settle(&self, ack: Ack) -> Result<AckResult> {
        let mut body = ack.wire();
        body["consumerGroup"] = json!(ack.consumer_group);
        let answer = self.post("/api/v1/ack", &body).await?;
        match answer.as_array().and_then(|a| a.first()) {
            Some(first) => Ok(AckResult::from_wire(first)),
            None => Err(Error::Decode(format!("ack answered {answer}"))),
        }
    }

    /// Settles many messages of one consumer group in one durable write.
    /// A nack in the batch hands its partition back from its offset, so later
    /// completed acks of that partition in the same batch commit nothing.
    pub async fn ack_batch(&self, acks: &[Ack]) -> Result<Vec<AckResult>> {
        let Some(first) = acks.first() else { return Ok(Vec::new()) };
        let group = &first.consumer_group;
        if acks.iter().any(|a| &a.consumer_group != group) {
            return Err(Error::Invalid("one ack batch settles messages of one consumer group".into()));
        }
        let body = json!({
            "acknowledgments": acks.iter().map(Ack::wire).collect::<Vec<_>>(),
            "consumerGroup": group,
        });
        let answer = self.post("/api/v1/ack/batch", &body).await?;
        let list = answer.as_array().ok_or_else(|| Error::Decode(format!("ack batch answered {answer}")))?;
        if list.len() != acks.len() {
            return Err(Error::Decode(format!("{} ack results for {} acks", list.len(), acks.len())));
        }
        Ok(list.iter().map(AckResult::from_wire).collect())
    }
}
