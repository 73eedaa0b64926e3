//! `POST /api/v1/ack`, `POST /api/v1/ack/batch` and
//! `POST /api/v1/lease/{leaseId}/extend`. Refusals of individual acks and of
//! renewals are answers, not errors: HTTP 200 with `success: false`.

use std::borrow::Cow;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use regina_state::command::{AckCmd, AckItem, AckStatus};
use regina_state::outcome::{AckResult, ERR_UNRESOLVABLE};
use regina_state::{Command, Outcome};
use regina_types::limits::{ACK_BATCH_MAX, ACK_ERROR_BYTES_MAX, LEASE_SECONDS_MAX, TRANSACTION_ID_BYTES_MAX};
use regina_types::time::format_iso;
use regina_types::{validate_name, NameKind, QUEUE_MODE_GROUP};

use crate::http::error::{ApiError, ApiResult};
use crate::http::input::{body_bytes, json_body};
use crate::http::plain_ack::{self, PlainAck, PlainBatch};
use regina_node::Replica;

/// Longest lease id accepted in a path or an ack.
const LEASE_ID_BYTES_MAX: usize = 128;

/// One ack as the body holds it. Its strings borrow from the body when
/// they hold no escape: a batch of 100 acks was a tenth of a consumed
/// message's instructions, most of it allocations.
#[derive(Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AckBody<'a> {
    #[serde(borrow)]
    pub(crate) transaction_id: Cow<'a, str>,
    partition_id: PartitionRef,
    #[serde(default, borrow)]
    status: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    error: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub(crate) consumer_group: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    lease_id: Option<Cow<'a, str>>,
}

#[derive(Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
struct BatchBody<'a> {
    #[serde(borrow)]
    acknowledgments: Vec<AckBody<'a>>,
    #[serde(default, borrow)]
    consumer_group: Option<Cow<'a, str>>,
}

/// An ack's `partitionId`: a string or a number that names a partition
/// (`Some`), one that names none (`None`: the ack is refused, not the
/// call), or some other JSON value (the call is refused).
#[derive(Debug, PartialEq)]
enum PartitionRef {
    Id(Option<u64>),
    NotAString,
}

impl<'de> Deserialize<'de> for PartitionRef {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(PartitionRefVisitor)
    }
}

struct PartitionRefVisitor;

impl<'de> serde::de::Visitor<'de> for PartitionRefVisitor {
    type Value = PartitionRef;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a partition id")
    }
    fn visit_str<E>(self, v: &str) -> Result<PartitionRef, E> {
        Ok(PartitionRef::Id(v.parse().ok()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<PartitionRef, E> {
        Ok(PartitionRef::Id(Some(v)))
    }
    fn visit_i64<E>(self, v: i64) -> Result<PartitionRef, E> {
        Ok(PartitionRef::Id(u64::try_from(v).ok()))
    }
    fn visit_f64<E>(self, _: f64) -> Result<PartitionRef, E> {
        Ok(PartitionRef::Id(None))
    }
    fn visit_bool<E>(self, _: bool) -> Result<PartitionRef, E> {
        Ok(PartitionRef::NotAString)
    }
    fn visit_unit<E>(self) -> Result<PartitionRef, E> {
        Ok(PartitionRef::NotAString)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<PartitionRef, A::Error> {
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(PartitionRef::NotAString)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<PartitionRef, A::Error> {
        while map.next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?.is_some() {}
        Ok(PartitionRef::NotAString)
    }
}

impl<'a> From<PlainAck<'a>> for AckBody<'a> {
    fn from(a: PlainAck<'a>) -> Self {
        AckBody {
            transaction_id: Cow::Borrowed(a.transaction_id),
            partition_id: PartitionRef::Id(a.partition_id.parse().ok()),
            status: a.status.map(Cow::Borrowed),
            error: a.error.map(Cow::Borrowed),
            consumer_group: a.consumer_group.map(Cow::Borrowed),
            lease_id: a.lease_id.map(Cow::Borrowed),
        }
    }
}

/// A single ack's body: by the plain reader, else by serde.
fn read_one(bytes: &[u8]) -> ApiResult<AckBody<'_>> {
    match plain_ack::one(bytes) {
        Some(a) => Ok(a.into()),
        None => json_body(bytes, false),
    }
}

impl<'a> From<PlainBatch<'a>> for BatchBody<'a> {
    fn from(b: PlainBatch<'a>) -> Self {
        BatchBody {
            acknowledgments: b.acks.into_iter().map(AckBody::from).collect(),
            consumer_group: b.consumer_group.map(Cow::Borrowed),
        }
    }
}

/// A batch ack's body: by the plain reader, else by serde.
fn read_batch(bytes: &[u8]) -> ApiResult<BatchBody<'_>> {
    match plain_ack::batch(bytes) {
        Some(b) => Ok(b.into()),
        None => json_body(bytes, false),
    }
}

/// Whether serde reads a body the plain reader accepts (as one ack or as a
/// batch) exactly as the plain reader does (the `json_ack` fuzz target and a
/// property test).
pub fn plain_reader_agrees(bytes: &[u8]) -> bool {
    let one = plain_ack::one(bytes).is_none_or(|a| serde_json::from_slice::<AckBody>(bytes).ok() == Some(a.into()));
    let batch =
        plain_ack::batch(bytes).is_none_or(|b| serde_json::from_slice::<BatchBody>(bytes).ok() == Some(b.into()));
    one && batch
}

pub async fn ack_one(State(node): State<Arc<Replica>>, body: Result<Bytes, BytesRejection>) -> ApiResult<Response> {
    let bytes = body_bytes(body)?;
    let b = read_one(&bytes)?;
    let group = b.consumer_group.clone();
    settle(&node, vec![b], group).await
}

pub async fn ack_batch(State(node): State<Arc<Replica>>, body: Result<Bytes, BytesRejection>) -> ApiResult<Response> {
    let bytes = body_bytes(body)?;
    let b = read_batch(&bytes)?;
    if b.acknowledgments.len() > ACK_BATCH_MAX {
        return Err(ApiError::too_large(format!(
            "{} acknowledgments in one call; the limit is {ACK_BATCH_MAX}",
            b.acknowledgments.len()
        )));
    }
    settle(&node, b.acknowledgments, b.consumer_group).await
}

/// An ack item the broker can judge, or the refusal it gets without a log
/// entry (a partition id that names no partition).
pub(crate) enum Judged {
    Item(AckItem),
    Refused,
}

async fn settle(node: &Replica, acks: Vec<AckBody<'_>>, group: Option<Cow<'_, str>>) -> ApiResult<Response> {
    let group = match group.as_deref() {
        None | Some("") => QUEUE_MODE_GROUP.to_string(),
        Some(g) => {
            validate_name(NameKind::ConsumerGroup, g).map_err(ApiError::from_name)?;
            g.to_string()
        }
    };
    // Which acks go to the log (`true`) and which are refused without it.
    let mut logged = Vec::with_capacity(acks.len());
    let mut items = Vec::with_capacity(acks.len());
    for (i, a) in acks.iter().enumerate() {
        match judge(i, a)? {
            Judged::Item(item) => {
                items.push(item);
                logged.push(true);
            }
            Judged::Refused => logged.push(false),
        }
    }
    let mut results = if items.is_empty() {
        Vec::new()
    } else {
        match node.propose(Command::Ack(AckCmd { group, items })).await? {
            Outcome::Ack(r) => r,
            other => return Err(ApiError::internal(format!("ack answered {other:?}"))),
        }
    }
    .into_iter();
    let answers = logged.iter().zip(&acks).enumerate().map(|(i, (&logged, a))| {
        let r = match logged {
            true => results.next().unwrap_or_else(|| AckResult::refused("no result")),
            false => AckResult::refused(ERR_UNRESOLVABLE),
        };
        AckAnswer {
            index: i,
            transaction_id: &a.transaction_id,
            success: r.success,
            error: r.error,
            lease_released: r.lease_released,
            dlq: r.dlq,
            noop: r.noop,
        }
    });
    Ok(crate::http::json_out::answer(axum::http::StatusCode::OK, AckAnswer::render_all(answers)))
}

/// One element of a batch ack's answer.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct AckAnswer<'a> {
    index: usize,
    transaction_id: &'a str,
    success: bool,
    error: Option<String>,
    lease_released: bool,
    dlq: bool,
    noop: bool,
}

impl AckAnswer<'_> {
    /// The answers as a JSON array, written straight to bytes: the
    /// document serde's derive writes (tested), without its per-key
    /// escaping (a sixth of a batch ack's instructions).
    fn render_all<'a>(answers: impl ExactSizeIterator<Item = AckAnswer<'a>>) -> Vec<u8> {
        use crate::http::json_out as j;
        let mut out = Vec::with_capacity(2 + answers.len() * 160);
        out.push(b'[');
        for (n, a) in answers.enumerate() {
            if n > 0 {
                out.push(b',');
            }
            out.extend_from_slice(b"{\"index\":");
            j::number(&mut out, a.index as u64);
            out.extend_from_slice(b",\"transactionId\":");
            j::string(&mut out, a.transaction_id);
            out.extend_from_slice(b",\"success\":");
            j::boolean(&mut out, a.success);
            out.extend_from_slice(b",\"error\":");
            j::or_null(&mut out, a.error.as_deref(), j::string);
            out.extend_from_slice(b",\"leaseReleased\":");
            j::boolean(&mut out, a.lease_released);
            out.extend_from_slice(b",\"dlq\":");
            j::boolean(&mut out, a.dlq);
            out.extend_from_slice(b",\"noop\":");
            j::boolean(&mut out, a.noop);
            out.push(b'}');
        }
        out.push(b']');
        out
    }
}

pub(crate) fn judge(i: usize, a: &AckBody) -> ApiResult<Judged> {
    let at = |field: &str, m: &str| {
        ApiError::bad_request(format!("acknowledgments[{i}]: {m}")).at_field(format!("acknowledgments[{i}].{field}"))
    };
    if a.transaction_id.is_empty() || a.transaction_id.len() > TRANSACTION_ID_BYTES_MAX {
        return Err(at("transactionId", "transactionId must be a non-empty string within the limit"));
    }
    let pid = match a.partition_id {
        PartitionRef::Id(pid) => pid,
        PartitionRef::NotAString => return Err(at("partitionId", "partitionId must be a string")),
    };
    let status = match a.status.as_deref() {
        None | Some("") => AckStatus::Completed,
        Some(s) if ["completed", "complete", "success"].iter().any(|w| s.eq_ignore_ascii_case(w)) => {
            AckStatus::Completed
        }
        Some(s) if ["failed", "fail", "failure"].iter().any(|w| s.eq_ignore_ascii_case(w)) => AckStatus::Failed,
        Some(s) if s.eq_ignore_ascii_case("retry") => AckStatus::Retry,
        Some(s) if s.eq_ignore_ascii_case("dlq") => AckStatus::Dlq,
        Some(other) => {
            let other = other.to_ascii_lowercase();
            return Err(at("status", &format!("status {other:?} is not one of completed, failed, retry, dlq")));
        }
    };
    if let Some(l) = &a.lease_id {
        if l.len() > LEASE_ID_BYTES_MAX {
            return Err(at("leaseId", "leaseId is too long"));
        }
    }
    let Some(partition_id) = pid else {
        return Ok(Judged::Refused);
    };
    let error = a.error.as_deref().map(|e| truncate(e, ACK_ERROR_BYTES_MAX));
    Ok(Judged::Item(AckItem {
        partition_id,
        transaction_id: a.transaction_id.to_string(),
        status,
        error,
        lease_id: a.lease_id.as_deref().filter(|l| !l.is_empty()).map(str::to_string),
    }))
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

/// The extend body: empty or `{}` renews by the lease's own length;
/// `{"seconds": N}` renews by N seconds from now.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExtendBody {
    #[serde(default)]
    seconds: Option<u64>,
}

pub async fn extend_lease(
    State(node): State<Arc<Replica>>,
    Path(lease_id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let bytes = body_bytes(body)?;
    let ExtendBody { seconds } = json_body(&bytes, true)?;
    let duration_ms = match seconds {
        None => None,
        Some(s) if (1..=LEASE_SECONDS_MAX).contains(&s) => Some(s * 1000),
        Some(s) => {
            return Err(ApiError::bad_request(format!("seconds must be from 1 to {LEASE_SECONDS_MAX}, not {s}"))
                .at_field("seconds"));
        }
    };
    if lease_id.is_empty() || lease_id.len() > LEASE_ID_BYTES_MAX || lease_id.chars().any(char::is_control) {
        return Err(ApiError::bad_request(format!(
            "lease id must be 1 to {LEASE_ID_BYTES_MAX} bytes without control characters"
        )));
    }
    let known = node.tenant_state().leases.contains_key(&lease_id);
    let r = if known {
        let cmd = match duration_ms {
            None => Command::ExtendLease { lease_id: lease_id.clone() },
            Some(duration_ms) => Command::ExtendLeaseFor { lease_id: lease_id.clone(), duration_ms },
        };
        match node.propose(cmd).await? {
            Outcome::Extend(r) => r,
            other => return Err(ApiError::internal(format!("extend answered {other:?}"))),
        }
    } else {
        Default::default()
    };
    let expires = r.expires_ms.map(format_iso);
    let mut body = json!({
        "leaseId": lease_id,
        "success": r.renewed > 0,
        "renewed": r.renewed,
        "newExpiresAt": expires,
        "expiresAt": expires,
        "lease_expires_at": expires,
    });
    if r.renewed == 0 {
        body["error"] = json!("lease is unknown, expired or already settled");
    }
    Ok(axum::Json(body).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_written_as_serde_writes_them() {
        let answer = |index, transaction_id, error: Option<&str>, flags: u8| AckAnswer {
            index,
            transaction_id,
            success: flags & 1 != 0,
            error: error.map(str::to_string),
            lease_released: flags & 2 != 0,
            dlq: flags & 4 != 0,
            noop: flags & 8 != 0,
        };
        let sets = [
            vec![],
            vec![answer(0, "tx-1", None, 1)],
            vec![answer(0, "t\"x\n", Some("lease \\ expired\u{1}"), 14), answer(1, "é", Some(""), 0)],
        ];
        for answers in sets {
            let want = serde_json::to_string(&answers).unwrap();
            let got = AckAnswer::render_all(answers.into_iter());
            assert_eq!(String::from_utf8(got).unwrap(), want);
        }
    }

    fn judged(body: &str) -> ApiResult<Option<AckItem>> {
        let a: AckBody = serde_json::from_str(body).expect("parses");
        judge(0, &a).map(|j| match j {
            Judged::Item(i) => Some(i),
            Judged::Refused => None,
        })
    }

    #[test]
    fn partition_ids_as_strings_or_numbers() {
        let id = |body: &str| judged(body).map(|i| i.map(|i| i.partition_id));
        assert_eq!(id(r#"{"transactionId":"t","partitionId":"42"}"#).unwrap(), Some(42));
        assert_eq!(id(r#"{"transactionId":"t","partitionId":42}"#).unwrap(), Some(42));
        // Names no partition: the ack is refused, not the call.
        for none in [r#""x""#, "-1", "4.5", r#""""#] {
            let body = format!(r#"{{"transactionId":"t","partitionId":{none}}}"#);
            assert_eq!(id(&body).unwrap(), None, "{body}");
        }
        for bad in ["null", "true", "[1]", r#"{"a":[1]}"#] {
            let body = format!(r#"{{"transactionId":"t","partitionId":{bad},"status":"failed"}}"#);
            let e = judged(&body).unwrap_err();
            assert!(e.message.contains("partitionId must be a string"), "{body}: {}", e.message);
        }
        assert!(serde_json::from_str::<AckBody>(r#"{"transactionId":"t"}"#).is_err());
    }

    #[test]
    fn strings_with_escapes_and_statuses_in_any_case() {
        let i =
            judged(r#"{"transactionId":"t\u0031","partitionId":"1","status":"FAILED","error":"b\nad","leaseId":""}"#)
                .unwrap()
                .unwrap();
        assert_eq!((i.transaction_id.as_str(), i.status, i.error.as_deref()), ("t1", AckStatus::Failed, Some("b\nad")));
        assert_eq!(i.lease_id, None);
        for (status, want) in [
            ("Completed", AckStatus::Completed),
            ("success", AckStatus::Completed),
            ("", AckStatus::Completed),
            ("Retry", AckStatus::Retry),
            ("DLQ", AckStatus::Dlq),
            ("failure", AckStatus::Failed),
        ] {
            let body = format!(r#"{{"transactionId":"t","partitionId":"1","status":"{status}"}}"#);
            assert_eq!(judged(&body).unwrap().unwrap().status, want, "{status}");
        }
        let e = judged(r#"{"transactionId":"t","partitionId":"1","status":"Maybe"}"#).unwrap_err();
        assert!(e.message.contains("\"maybe\" is not one of"), "{}", e.message);
    }
}
