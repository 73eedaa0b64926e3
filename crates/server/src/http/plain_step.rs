//! The plain reader of a step's JSON body (`POST /api/v1/transaction`, or
//! the JSON head of its binary form) in the shape clients send: acks and
//! pushes with plain strings for their names and ids, KV riders as their
//! fields (each value's text), timer and job riders as the text of their
//! arrays.
//!
//! serde read a step three times: the envelope (each operation and KV
//! rider kept raw), each operation's `type`, then its body. That was about
//! a sixth of a step's instructions (docs/benchmarks.md, item 21). This
//! reader goes through the body once, with the pieces the push and ack
//! readers use.
//!
//! It declines whatever it is not sure of (an escape in a name or id, a
//! repeated field, an operation of another type, an operation or rider that
//! is not an object), and the route reads the body with serde, which also
//! words the refusal of a bad one. A fuzz target and a property test hold
//! it to reading every body it accepts as serde does
//! (`transaction::plain_reader_agrees`).

use crate::http::plain_ack::{self, PlainAck};
use crate::http::plain_json::{document, Reader};
use crate::http::plain_push::{push_item, PlainItem};

/// A step's body as the plain reader read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PlainStep<'a> {
    pub operations: Vec<PlainOp<'a>>,
    pub required_leases: Vec<&'a str>,
    /// Each KV rider's fields in the order written: name, value's JSON text.
    pub kv: Vec<Vec<(&'a str, &'a str)>>,
    /// The JSON text of the `timers` array, when given.
    pub timers: Option<&'a str>,
    /// The JSON text of the `jobs` array, when given.
    pub jobs: Option<&'a str>,
}

/// One operation: a push of its items, or an ack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PlainOp<'a> {
    Push(Vec<PlainItem<'a>>),
    Ack(PlainAck<'a>),
}

/// A step's body, or `None` when the reader declines it.
pub(crate) fn step(body: &[u8]) -> Option<PlainStep<'_>> {
    let (mut operations, mut leases, mut kv, mut timers, mut jobs) = (None, None, None, None, None);
    document(body, |r, key| {
        match key {
            "operations" if operations.is_none() => operations = Some(r.array(operation)?),
            "requiredLeases" if leases.is_none() => leases = Some(r.array(Reader::plain_string)?),
            "kv" if kv.is_none() => kv = Some(r.array(fields)?),
            "timers" if timers.is_none() => timers = Some(array_text(r)?),
            "jobs" if jobs.is_none() => jobs = Some(array_text(r)?),
            // A field named twice: serde refuses it.
            "operations" | "requiredLeases" | "kv" | "timers" | "jobs" => return None,
            _ => r.value(1)?,
        }
        Some(())
    })?;
    Some(PlainStep {
        operations: operations.unwrap_or_default(),
        required_leases: leases.unwrap_or_default(),
        kv: kv.unwrap_or_default(),
        timers,
        jobs,
    })
}

/// One operation object. Its `type` may come after its body, so the fields
/// of both kinds are read as they come, and the type picks one at the end
/// (serde's reading of either kind ignores the other kind's fields).
fn operation<'a>(r: &mut Reader<'a>) -> Option<PlainOp<'a>> {
    let (mut kind, mut items) = (None, None);
    let mut ack = plain_ack::Fields::default();
    r.object(|r, key| match key {
        "type" if kind.is_none() => {
            kind = Some(r.plain_string()?);
            Some(())
        }
        "items" if items.is_none() => {
            items = Some(r.array(push_item)?);
            Some(())
        }
        "type" | "items" => None,
        _ => ack.member(r, key),
    })?;
    match kind? {
        "push" => Some(PlainOp::Push(items?)),
        "ack" => Some(PlainOp::Ack(ack.finish()?)),
        _ => None,
    }
}

/// An object's members as written, each value as its text (a KV rider's
/// fields: its reader takes the last of a repeated name, as from serde).
fn fields<'a>(r: &mut Reader<'a>) -> Option<Vec<(&'a str, &'a str)>> {
    let mut members = Vec::with_capacity(8);
    r.object(|r, key| {
        members.push((key, r.value_text(3)?));
        Some(())
    })?;
    Some(members)
}

fn array_text<'a>(r: &mut Reader<'a>) -> Option<&'a str> {
    r.value_text(1).filter(|t| t.starts_with('['))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::plain_push::tests::{damage, SPACE, VALUES};
    use crate::http::routes::transaction::plain_reader_agrees;

    const STEP: &str = r#"{"operations":[
        {"type":"ack","transactionId":"m-1","partitionId":"42","leaseId":"l-1","status":"completed"},
        {"items":[{"queue":"out","partition":"p","payload":{"n":1,"s":"a\"b"},"traceId":"t"}],"type":"push"}],
        "requiredLeases":["l-1"],
        "kv":[{"op":"put","ns":"n","key":"k\u00e9","value":{"v":[1,2]},"ttlSeconds":60}],
        "timers":[{"op":"set","name":"x"}],"other":{"a":1}}"#;

    #[test]
    fn reads_what_clients_send() {
        let s = step(STEP.as_bytes()).expect("the plain shape");
        let [PlainOp::Ack(ack), PlainOp::Push(items)] = &s.operations[..] else { panic!("{s:?}") };
        assert_eq!((ack.transaction_id, ack.partition_id, ack.lease_id), ("m-1", "42", Some("l-1")));
        assert_eq!(ack.status, Some("completed"));
        assert_eq!(items.len(), 1);
        assert_eq!(
            (items[0].queue, items[0].payload, items[0].trace_id),
            ("out", Some(r#"{"n":1,"s":"a\"b"}"#), Some("t"))
        );
        assert_eq!(s.required_leases, ["l-1"]);
        let put = [
            ("op", r#""put""#),
            ("ns", r#""n""#),
            ("key", r#""k\u00e9""#),
            ("value", r#"{"v":[1,2]}"#),
            ("ttlSeconds", "60"),
        ];
        assert_eq!(s.kv, [put.to_vec()]);
        assert_eq!((s.timers, s.jobs), (Some(r#"[{"op":"set","name":"x"}]"#), None));
        assert!(plain_reader_agrees(STEP.as_bytes()));
        // Riders only, and an empty body.
        let riders = step(br#" {"kv":[]} "#).expect("plain");
        assert!(riders.operations.is_empty() && riders.kv.is_empty());
        assert_eq!(step(b"{}").map(|s| s.operations.len()), Some(0));
    }

    #[test]
    fn declines_what_it_is_not_sure_of() {
        for body in [
            r#"{"operations":[{"type":"pop"}]}"#,
            r#"{"operations":[{"items":[]}]}"#,
            r#"{"operations":[{"type":"push"}]}"#,
            r#"{"operations":[{"type":"ack","partitionId":"1"}]}"#,
            r#"{"operations":[{"type":"push","type":"push","items":[]}]}"#,
            r#"{"operations":[{"type":"push","items":[],"items":[]}]}"#,
            r#"{"operations":[{"type":"\u0061ck","transactionId":"t","partitionId":"1"}]}"#,
            r#"{"operations":[{"type":"ack","transactionId":"t","partitionId":1}]}"#,
            r#"{"operations":[1]}"#,
            r#"{"operations":null}"#,
            r#"{"operations":[],"operations":[]}"#,
            r#"{"requiredLeases":["l\n"]}"#,
            r#"{"requiredLeases":"l"}"#,
            r#"{"kv":[1]}"#,
            r#"{"kv":{}}"#,
            r#"{"timers":{}}"#,
            r#"{"jobs":null}"#,
            r#"{"timers":[],"timers":[]}"#,
            r#"{"kv":[]"#,
            "",
        ] {
            assert_eq!(step(body.as_bytes()), None, "{body}");
            assert!(plain_reader_agrees(body.as_bytes()), "{body}");
        }
    }

    /// An operation's keys: both kinds' fields, and some of neither.
    const OP_KEYS: &[&str] = &[
        "type",
        "items",
        "transactionId",
        "partitionId",
        "status",
        "leaseId",
        "error",
        "consumerGroup",
        "other",
        "t\\u0079pe",
    ];
    /// An item's keys.
    const ITEM_KEYS: &[&str] = &["queue", "partition", "payload", "transactionId", "traceId", "x"];
    /// The envelope's keys.
    const STEP_KEYS: &[&str] = &["requiredLeases", "kv", "timers", "jobs", "other", "operations"];
    /// Values that make an operation of one kind or the other more often
    /// than [`VALUES`] alone would.
    const KINDS: &[&str] = &[r#""push""#, r#""push""#, r#""ack""#, r#""ack""#, r#""pop""#];
    /// Values for an operation's fields: mostly what an ack's fields take.
    const FIELDS: &[&str] = &[r#""q""#, r#""7""#, "null", r#""""#, r#""a\"b""#, "7", "{}", r#""é""#];
    /// Whole values for the envelope's keys.
    const RIDERS: &[&str] = &[
        "[]",
        r#"["l-1","l-2"]"#,
        r#"[{"op":"get","ns":"n","key":"k"}]"#,
        r#"[{"op":"put","ns":"n","key":"k","value":1e400}]"#,
        r#"[{"at":1e400}]"#,
        r#"[{"a":[1,{"b":"\u00e9"}]},{}]"#,
        "[1]",
        "null",
        "{}",
    ];

    /// `"key": value` with `ws` around its tokens, the value one of [`VALUES`].
    fn member(key: &str, value: usize, ws: &str) -> String {
        format!("{ws}\"{key}\"{ws}:{ws}{}", VALUES[value % VALUES.len()])
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]

        /// Whatever the plain reader reads, serde reads the same way.
        #[test]
        fn agrees_with_serde(
            ops in proptest::collection::vec((
                0usize..KINDS.len(),
                proptest::bool::ANY,
                proptest::collection::vec((0usize..OP_KEYS.len(), 0usize..FIELDS.len()), 0..2),
                proptest::option::weighted(0.8, proptest::collection::vec(
                    proptest::collection::vec((0usize..ITEM_KEYS.len(), 0usize..VALUES.len()), 0..3), 0..3)),
            ), 0..4),
            envelope in proptest::collection::vec((0usize..STEP_KEYS.len(), 0usize..RIDERS.len()), 0..3),
            space in 0usize..SPACE.len(),
            cut in proptest::option::weighted(0.3, (0usize..600, 0u8..128)),
        ) {
            let ws = SPACE[space % SPACE.len()];
            // Each operation and item starts from the fields its kind needs,
            // so that many are read; the generated fields may repeat or
            // spoil them.
            let rendered: Vec<String> = ops
                .iter()
                .map(|(kind, type_last, fields, items)| {
                    let mut members = vec![format!("\"type\":{ws}{}", KINDS[*kind])];
                    if KINDS[*kind] == r#""ack""# {
                        members.push(r#""transactionId":"t","partitionId":"7""#.to_string());
                    }
                    members.extend(fields.iter().map(|&(k, v)| format!("{ws}\"{}\":{ws}{}", OP_KEYS[k], FIELDS[v])));
                    if let Some(items) = items {
                        let items: Vec<String> = items
                            .iter()
                            .map(|f| {
                                let item: Vec<String> = f.iter().map(|&(k, v)| member(ITEM_KEYS[k], v, ws)).collect();
                                format!("{{\"queue\":\"q\"{}{}}}", if item.is_empty() { "" } else { "," }, item.join(","))
                            })
                            .collect();
                        members.push(format!("\"items\":{ws}[{}]", items.join(",")));
                    }
                    if *type_last {
                        members.rotate_left(1);
                    }
                    format!("{{{}}}", members.join(","))
                })
                .collect();
            let mut members = vec![format!("\"operations\":{ws}[{}]", rendered.join(","))];
            members.extend(envelope.iter().map(|&(k, v)| format!("{ws}\"{}\":{ws}{}", STEP_KEYS[k], RIDERS[v])));
            let mut body = format!("{ws}{{{}}}{ws}", members.join(",")).into_bytes();
            damage(&mut body, cut);
            proptest::prop_assert!(plain_reader_agrees(&body), "disagree on {}", String::from_utf8_lossy(&body));
        }

        /// The steps clients send are read by the plain reader, as serde reads them.
        #[test]
        fn reads_the_usual_shape(
            kinds in proptest::collection::vec(proptest::bool::ANY, 0..6),
            payload in 0usize..VALUES.len(),
            riders in proptest::collection::vec(0usize..3, 0..3),
            space in 0usize..SPACE.len(),
        ) {
            let ws = SPACE[space % SPACE.len()];
            let valid: Vec<&str> =
                VALUES.iter().copied().filter(|v| serde_json::from_str::<serde_json::Value>(v).is_ok()).collect();
            let payload = valid[payload % valid.len()];
            let ops: Vec<String> = kinds
                .iter()
                .enumerate()
                .map(|(i, &push)| match push {
                    true => format!(
                        r#"{{"type":{ws}"push","items":[{{"queue":"q","partition":"p{i}","payload":{payload},"transactionId":"t{i}"}}]}}"#
                    ),
                    false => format!(
                        r#"{{"type":"ack",{ws}"transactionId":"m{i}","partitionId":"{i}","leaseId":"l","status":"completed"}}"#
                    ),
                })
                .collect();
            let kv: Vec<String> =
                riders.iter().map(|&k| format!(r#"{{"op":"put","ns":"n","key":"k{k}","value":{payload}}}"#)).collect();
            let body = format!(
                r#"{ws}{{"operations":[{}],{ws}"requiredLeases":["l"],"kv":[{}]}}{ws}"#,
                ops.join(","),
                kv.join(",")
            );
            let read = step(body.as_bytes());
            proptest::prop_assert!(read.as_ref().is_some_and(|s| s.operations.len() == kinds.len()), "declined {body}");
            proptest::prop_assert!(plain_reader_agrees(body.as_bytes()), "disagree on {body}");
        }
    }
}
