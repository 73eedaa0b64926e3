//! Rendering stored messages as the JSON the clients read.

use base64::Engine;
use serde::Serialize;
use serde_json::value::RawValue;

use regina_state::outcome::PopResult;
use regina_state::BodyRecord;
use regina_types::time::Iso;

use crate::http::codes;
use crate::http::error::{ApiError, ApiResult};
use regina_node::Replica;

/// Reads one stored message: its body, decoded, with a sealed payload
/// opened, and its producer (`producerSub`) when it was stamped with one.
/// A damaged body is delivered, not refused (see [`damaged_message`]).
pub fn read_message(node: &Replica, pos: u64, len: u32) -> ApiResult<(BodyRecord, Option<String>)> {
    let mut b = match stored_body(node, pos, len)? {
        Ok(b) => b,
        Err(damaged) => return Ok((damaged_message(&damaged), None)),
    };
    let opened = node.sealer().open(std::mem::take(&mut b.payload)).map_err(ApiError::internal)?;
    let (producer, payload) = crate::http::producer::unstamp(opened);
    b.payload = payload;
    Ok((b, producer))
}

/// Bytes at a body's place that are not the body written there.
pub struct Damaged {
    pub reason: String,
    pub bytes: Vec<u8>,
}

/// The body at `pos`, checked against its checksum, or what is wrong with
/// it. A missing or short file is the message's damage; any other read
/// error is the disk's (503 `storage_failed`): it may pass, and delivering
/// the message as damaged would invite the reader to ack it away.
pub fn stored_body(node: &Replica, pos: u64, len: u32) -> ApiResult<Result<BodyRecord, Damaged>> {
    let bytes = match node.read_body(pos, len) {
        Ok(bytes) => bytes,
        Err(e) if matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::UnexpectedEof) => {
            let reason = format!("the stored body cannot be read: {e}");
            return Ok(Err(Damaged { reason, bytes: Vec::new() }));
        }
        Err(e) => return Err(ApiError::new(codes::STORAGE_FAILED, format!("reading a message body: {e}"))),
    };
    Ok(BodyRecord::decode_checked(&bytes).map_err(|why| {
        tracing::error!(pos, len, "{why}");
        Damaged { reason: why.to_string(), bytes }
    }))
}

/// A damaged body as a message the reader can take: its ids from the head
/// when that still parses (so it can be acked or dead-lettered), and as
/// payload `{"unreadableBody": {"reason", "base64"}}` with the bytes found.
pub fn damaged_message(d: &Damaged) -> BodyRecord {
    let mut b = BodyRecord::salvage(&d.bytes).unwrap_or(BodyRecord {
        id: [0; 16],
        created_ms: 0,
        trace_id: None,
        transaction_id: String::new(),
        payload: Vec::new(),
    });
    let wrapped = serde_json::json!({ "unreadableBody": {
        "reason": d.reason,
        "base64": base64::engine::general_purpose::STANDARD.encode(&d.bytes),
    }});
    b.payload = wrapped.to_string().into_bytes();
    b
}

pub fn uuid_string(b: &[u8; 16]) -> String {
    uuid::Uuid::from_bytes(*b).to_string()
}

/// A value the answer spells as a JSON string (ids, times, partition
/// ids), written without an intermediate `String`.
pub struct Text<T>(pub T);

impl<T: std::fmt::Display> Serialize for Text<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.0)
    }
}

/// A message id as its hyphenated text, encoded on the stack: formatting
/// it through `fmt` cost more than the rest of its answer.
pub struct UuidText(pub [u8; 16]);

impl Serialize for UuidText {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut buf = [0u8; uuid::fmt::Hyphenated::LENGTH];
        s.serialize_str(uuid::Uuid::from_bytes(self.0).hyphenated().encode_lower(&mut buf))
    }
}

/// A number the answer spells as a string (partition ids), written
/// without `fmt`.
pub struct NumberText(pub u64);

impl Serialize for NumberText {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(crate::http::json_out::decimal(&mut [0u8; 20], self.0))
    }
}

/// A partition id, or `""` for a pop that claimed none (as the clients read it).
pub struct OrEmpty(pub Option<u64>);

impl std::fmt::Display for OrEmpty {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(id) => write!(f, "{id}"),
            None => Ok(()),
        }
    }
}

fn uuid_text(b: &[u8; 16]) -> UuidText {
    UuidText(*b)
}

/// One delivered message; names borrow from the pop's result.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageJson<'a> {
    pub id: UuidText,
    pub transaction_id: String,
    pub trace_id: Option<UuidText>,
    pub data: JsonText,
    pub producer_sub: Option<String>,
    pub created_at: Text<Iso>,
    pub partition_id: NumberText,
    pub partition: &'a str,
    pub queue: &'a str,
    pub lease_id: &'a str,
    pub consumer_group: &'a str,
    pub delivery_attempt: u32,
    pub offset: u64,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PopJson<'a> {
    pub success: bool,
    pub queue: &'a str,
    pub partition: &'a str,
    pub partition_id: Text<OrEmpty>,
    pub lease_id: &'a str,
    pub lease_expires_at: Option<Text<Iso>>,
    pub consumer_group: &'a str,
    pub messages: Vec<MessageJson<'a>>,
    pub partitions_claimed: usize,
    /// Echo for a pop that asked for conflation: the group conflates.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conflation: Option<bool>,
    /// Echo for a pop that asked for conflation of a group stored without it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conflation_conflict: Option<bool>,
}

impl MessageJson<'_> {
    /// This message as JSON, written straight to bytes
    /// (`crate::http::json_out`): the same document serde's derive writes.
    fn write(&self, out: &mut Vec<u8>) {
        use crate::http::json_out as j;
        out.extend_from_slice(b"{\"id\":");
        j::uuid(out, &self.id.0);
        out.extend_from_slice(b",\"transactionId\":");
        j::string(out, &self.transaction_id);
        out.extend_from_slice(b",\"traceId\":");
        j::or_null(out, self.trace_id.as_ref(), |out, t| j::uuid(out, &t.0));
        out.extend_from_slice(b",\"data\":");
        out.extend_from_slice(self.data.get().as_bytes());
        out.extend_from_slice(b",\"producerSub\":");
        j::or_null(out, self.producer_sub.as_deref(), j::string);
        out.extend_from_slice(b",\"createdAt\":");
        iso(out, &self.created_at.0);
        out.extend_from_slice(b",\"partitionId\":");
        j::number_text(out, self.partition_id.0);
        out.extend_from_slice(b",\"partition\":");
        j::string(out, self.partition);
        out.extend_from_slice(b",\"queue\":");
        j::string(out, self.queue);
        out.extend_from_slice(b",\"leaseId\":");
        j::string(out, self.lease_id);
        out.extend_from_slice(b",\"consumerGroup\":");
        j::string(out, self.consumer_group);
        out.extend_from_slice(b",\"deliveryAttempt\":");
        j::number(out, u64::from(self.delivery_attempt));
        out.extend_from_slice(b",\"offset\":");
        j::number(out, self.offset);
        out.push(b'}');
    }
}

impl PopJson<'_> {
    /// The pop answer as JSON bytes: the same document serde's derive
    /// writes, without its per-key escaping (a consumed message's answer
    /// was a tenth of its instructions).
    pub fn to_bytes(&self) -> Vec<u8> {
        use crate::http::json_out as j;
        // Room for the whole answer at once (a guess short of it made most
        // pop answers grow, and copy themselves, at least once): each
        // message's keys, ids, times and numbers take under 400 bytes.
        let texts: usize = self
            .messages
            .iter()
            .map(|m| {
                let sub = m.producer_sub.as_ref().map_or(0, String::len);
                400 + m.data.get().len()
                    + m.transaction_id.len()
                    + sub
                    + m.partition.len()
                    + m.queue.len()
                    + m.lease_id.len()
                    + m.consumer_group.len()
            })
            .sum();
        let mut out = Vec::with_capacity(512 + self.queue.len() + self.partition.len() + self.lease_id.len() + texts);
        out.extend_from_slice(b"{\"success\":");
        j::boolean(&mut out, self.success);
        out.extend_from_slice(b",\"queue\":");
        j::string(&mut out, self.queue);
        out.extend_from_slice(b",\"partition\":");
        j::string(&mut out, self.partition);
        out.extend_from_slice(b",\"partitionId\":");
        match self.partition_id.0 .0 {
            Some(id) => j::number_text(&mut out, id),
            None => out.extend_from_slice(b"\"\""),
        }
        out.extend_from_slice(b",\"leaseId\":");
        j::string(&mut out, self.lease_id);
        out.extend_from_slice(b",\"leaseExpiresAt\":");
        j::or_null(&mut out, self.lease_expires_at.as_ref(), |out, t| iso(out, &t.0));
        out.extend_from_slice(b",\"consumerGroup\":");
        j::string(&mut out, self.consumer_group);
        out.extend_from_slice(b",\"messages\":[");
        for (i, m) in self.messages.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            m.write(&mut out);
        }
        out.extend_from_slice(b"],\"partitionsClaimed\":");
        j::number(&mut out, self.partitions_claimed as u64);
        if let Some(c) = self.conflation {
            out.extend_from_slice(if c { b",\"conflation\":true" } else { b",\"conflation\":false" });
        }
        if let Some(c) = self.conflation_conflict {
            out.extend_from_slice(if c { b",\"conflationConflict\":true" } else { b",\"conflationConflict\":false" });
        }
        out.push(b'}');
        out
    }
}

/// A time as its quoted ISO-8601 text.
fn iso(out: &mut Vec<u8>, t: &Iso) {
    use std::io::Write;
    match t.fixed_width() {
        Some(text) => {
            out.push(b'"');
            out.extend_from_slice(&text);
            out.push(b'"');
        }
        None => {
            let _ = write!(out, "\"{t}\"");
        }
    }
}

/// Reads the bodies of a pop's messages and builds the answer.
pub fn pop_json<'a>(node: &Replica, r: &'a PopResult, group: &'a str, queue_hint: &'a str) -> ApiResult<PopJson<'a>> {
    let mut messages = Vec::with_capacity(r.message_count());
    let now = node.read_time(0);
    for c in &r.claims {
        let from = messages.len();
        for d in &c.messages {
            let (b, producer_sub) = read_message(node, d.pos, d.len)?;
            messages.push(MessageJson {
                id: uuid_text(&b.id),
                transaction_id: b.transaction_id,
                trace_id: b.trace_id.as_ref().map(uuid_text),
                data: payload_json(b.payload),
                producer_sub,
                created_at: Text(Iso(b.created_ms)),
                partition_id: NumberText(c.partition_id),
                partition: &c.partition,
                queue: &c.queue,
                lease_id: &r.lease_id,
                consumer_group: group,
                delivery_attempt: d.attempt,
                offset: d.offset,
            });
        }
        // How old this claim's messages are as they leave (Queen's pop lag).
        crate::http::pop_lag::record(&c.queue, now, messages[from..].iter().map(|m| m.created_at.0 .0));
    }
    let first = r.claims.first();
    Ok(PopJson {
        success: true,
        queue: first.map_or(queue_hint, |c| c.queue.as_str()),
        partition: first.map_or("", |c| c.partition.as_str()),
        partition_id: Text(OrEmpty(first.map(|c| c.partition_id))),
        lease_id: &r.lease_id,
        lease_expires_at: r.lease_expires_ms.filter(|_| !r.lease_id.is_empty()).map(|ms| Text(Iso(ms))),
        consumer_group: group,
        messages,
        partitions_claimed: r.claims.len(),
        conflation: None,
        conflation_conflict: None,
    })
}

/// Text known to be one JSON value, written into an answer as it is.
pub struct JsonText(String);

impl JsonText {
    pub fn get(&self) -> &str {
        &self.0
    }
}

impl Serialize for JsonText {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let raw: &RawValue = serde_json::from_str(&self.0).map_err(serde::ser::Error::custom)?;
        raw.serialize(s)
    }
}

/// A stored payload as JSON text. The edge only accepts JSON documents, but
/// whatever got in some other way (an older version, a bug) must not make
/// its partition unreadable: a payload that is not JSON in UTF-8 is delivered
/// as `{"unreadablePayload": {"reason", "base64"}}`, its bytes intact, so the
/// reader can take it, dead-letter it or ack past it.
///
/// The check is the one-pass reader of push bodies (`plain_json::json_value`),
/// with serde judging only what that reader declines: serde's check, done
/// twice (once to judge, once more by `RawValue::from_string`), was a
/// seventh of a consumed message's instructions.
pub fn payload_json(p: Vec<u8>) -> JsonText {
    if p.is_empty() {
        return JsonText("null".into());
    }
    let text = match String::from_utf8(p) {
        Ok(text) => text,
        Err(e) => {
            let reason = format!("the stored payload is not UTF-8: {}", e.utf8_error());
            return unreadable_payload(reason, e.as_bytes());
        }
    };
    let value = match crate::http::plain_json::json_value(&text) {
        Some(value) => Ok(value),
        None => serde_json::from_str::<&RawValue>(&text).map(RawValue::get),
    };
    match value {
        Ok(value) if value.len() == text.len() => JsonText(text),
        Ok(value) => JsonText(value.to_string()),
        Err(e) => unreadable_payload(format!("the stored payload is not JSON: {e}"), text.as_bytes()),
    }
}

fn unreadable_payload(reason: String, bytes: &[u8]) -> JsonText {
    let wrapped = serde_json::json!({ "unreadablePayload": {
        "reason": reason,
        "base64": base64::engine::general_purpose::STANDARD.encode(bytes),
    }});
    JsonText(wrapped.to_string())
}

#[cfg(test)]
mod tests {
    use super::payload_json;
    use base64::Engine;
    use serde_json::{json, Value};

    #[test]
    fn texts_render_as_json_strings_short_or_long() {
        use super::{OrEmpty, Text};
        assert_eq!(serde_json::to_string(&Text(12_345u64)).unwrap(), "\"12345\"");
        for n in [0, 7, 10, 12_345, u64::MAX] {
            assert_eq!(serde_json::to_string(&super::NumberText(n)).unwrap(), format!("\"{n}\""));
        }
        let id = [0xab; 16];
        let want = format!("\"{}\"", uuid::Uuid::from_bytes(id).hyphenated());
        assert_eq!(serde_json::to_string(&super::UuidText(id)).unwrap(), want);
        assert_eq!(serde_json::to_string(&Text(OrEmpty(None))).unwrap(), "\"\"");
        let long = format!("{}\"", "x".repeat(100));
        assert_eq!(serde_json::to_string(&Text(&long)).unwrap(), serde_json::to_string(&long).unwrap());
        assert_eq!(serde_json::to_string(&Text("a\"b")).unwrap(), "\"a\\\"b\"");
    }

    #[test]
    fn pop_answers_are_written_as_serde_writes_them() {
        use super::{MessageJson, NumberText, OrEmpty, PopJson, Text, UuidText};
        use regina_types::time::Iso;
        let message = |tx: &str, trace: Option<[u8; 16]>, sub: Option<&str>, data: &[u8]| MessageJson {
            id: UuidText([7; 16]),
            transaction_id: tx.to_string(),
            trace_id: trace.map(UuidText),
            data: payload_json(data.to_vec()),
            producer_sub: sub.map(str::to_string),
            created_at: Text(Iso(1_700_000_000_123)),
            partition_id: NumberText(42),
            partition: "p\"1\n",
            queue: "orders",
            lease_id: "lease-1",
            consumer_group: "__QUEUE_MODE__",
            delivery_attempt: 3,
            offset: u64::MAX,
        };
        for (partition_id, expires, conflation, conflict) in
            [(Some(42), Some(5), None, None), (None, None, Some(true), None), (Some(0), None, None, Some(true))]
        {
            let pop = PopJson {
                success: true,
                queue: "orders\\x",
                partition: "",
                partition_id: Text(OrEmpty(partition_id)),
                lease_id: "lease-1",
                lease_expires_at: expires.map(|ms| Text(Iso(ms))),
                consumer_group: "g\u{1}é",
                messages: vec![
                    message("t\"x", Some([9; 16]), Some("alice"), br#"{"a":[1,"\u00e9"]}"#),
                    message("", None, None, b"not json"),
                ],
                partitions_claimed: 1,
                conflation,
                conflation_conflict: conflict,
            };
            assert_eq!(String::from_utf8(pop.to_bytes()).unwrap(), serde_json::to_string(&pop).unwrap());
        }
    }

    fn rendered(p: &[u8]) -> Value {
        serde_json::from_str(payload_json(p.to_vec()).get()).expect("always JSON")
    }

    #[test]
    fn json_payloads_render_as_themselves() {
        assert_eq!(rendered(b""), Value::Null);
        assert_eq!(rendered(br#"{"a":[1,"\u00e9"]}"#), json!({"a": [1, "é"]}));
        // As serde's check left them: the value's own text, without the
        // whitespace around it, however deep (past the plain reader's depth).
        assert_eq!(payload_json(b" [1, 2]\n".to_vec()).get(), "[1, 2]");
        let deep = format!("{}{}", "[".repeat(100), "]".repeat(100));
        assert_eq!(payload_json(deep.clone().into_bytes()).get(), deep);
    }

    #[test]
    fn undecodable_payloads_render_wrapped_with_their_bytes() {
        for bad in [&b"\"\xff\""[..], b"{not json", b"\xc3"] {
            let v = rendered(bad);
            let inner = &v["unreadablePayload"];
            assert!(inner["reason"].as_str().is_some_and(|r| !r.is_empty()), "{v}");
            let bytes = base64::engine::general_purpose::STANDARD.decode(inner["base64"].as_str().unwrap()).unwrap();
            assert_eq!(bytes, bad);
        }
    }
}
