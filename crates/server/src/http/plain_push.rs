//! The plain reader of a JSON push body: the shape every client sends
//! (`{"items":[{"queue":..,"partition":..,"payload":..,"transactionId":..}]}`)
//! read in one pass, with payloads checked as JSON and kept as their text.
//!
//! serde's reader cost about a quarter of the instructions of a pushed
//! message (docs/benchmarks.md, item 18): it walks every payload byte by
//! byte through its generic visitor. This one finds each string's end with
//! `memchr` and checks the whole body's UTF-8 once.
//!
//! It only ever says yes to a body serde reads the same way: anything it is
//! not sure of (an escape in a name or key, a repeated field, a name that is
//! not a string, a payload nested deeper than [`NESTING_MAX`]) makes it
//! decline, and the route reads the body with serde, which also words the
//! refusal of a bad one. A fuzz target and a property test hold it to that
//! (`push::plain_reader_agrees`).

use crate::http::plain_json::{document, Reader};

/// One item as the body holds it; `payload` is the value's JSON text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PlainItem<'a> {
    pub queue: &'a str,
    pub partition: Option<&'a str>,
    pub payload: Option<&'a str>,
    pub transaction_id: Option<&'a str>,
    /// A `traceId` string; a step's push keeps it, a plain push stores none.
    pub trace_id: Option<&'a str>,
}

/// The items of `body`, or `None` when the body is not of the plain shape
/// (or not valid JSON at all).
pub(crate) fn items(body: &[u8]) -> Option<Vec<PlainItem<'_>>> {
    let mut items = None;
    document(body, |r, key| match key {
        "items" if items.is_some() => None,
        "items" => {
            items = Some(r.array(push_item)?);
            Some(())
        }
        _ => r.value(1),
    })?;
    items
}

/// One item object of an `items` array (a push body's or a step's push).
pub(crate) fn push_item<'a>(r: &mut Reader<'a>) -> Option<PlainItem<'a>> {
    let (mut queue, mut partition, mut payload, mut transaction_id, mut trace_id) = (None, None, None, None, None);
    r.object(|r, key| {
        match key {
            "queue" if queue.is_none() => queue = Some(r.plain_string()?),
            "partition" if partition.is_none() => partition = Some(r.string_or_null()?),
            "transactionId" if transaction_id.is_none() => transaction_id = Some(r.string_or_null()?),
            "payload" if payload.is_none() => payload = Some(r.value_text(3)?),
            "traceId" if trace_id.is_none() => trace_id = Some(trace_text(r.value_text(3)?)?),
            // A field named twice: serde refuses it.
            "queue" | "partition" | "transactionId" | "payload" | "traceId" => return None,
            _ => r.value(3)?,
        }
        Some(())
    })?;
    Some(PlainItem {
        queue: queue?,
        partition: partition.flatten(),
        payload: payload.filter(|p| *p != "null"),
        transaction_id: transaction_id.flatten(),
        trace_id: trace_id.flatten(),
    })
}

/// A `traceId` as serde's reader keeps it: a string's text (`Some`), or no
/// trace id for any other value (only a string names one). A string with an
/// escape declines.
fn trace_text(value: &str) -> Option<Option<&str>> {
    match value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
        Some(text) if text.contains('\\') => None,
        Some(text) => Some(Some(text)),
        None => Some(None),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::http::plain_json::{json_value, NESTING_MAX};

    fn item<'a>(queue: &'a str, partition: Option<&'a str>, payload: Option<&'a str>) -> PlainItem<'a> {
        PlainItem { queue, partition, payload, transaction_id: None, trace_id: None }
    }

    #[test]
    fn reads_what_clients_send() {
        let body =
            br#"{"items":[{"queue":"q","partition":"p-1","payload":{"s":1,"d":"x\"y\u00e9"},"transactionId":"t1"},
            {"queue":"r","payload":[1,-2.5e+3,true,false,null,"",{}],"traceId":null,"producerSub":"s"}]}"#;
        let items = items(body).expect("the plain shape");
        assert_eq!(
            items[0],
            PlainItem {
                queue: "q",
                partition: Some("p-1"),
                payload: Some(r#"{"s":1,"d":"x\"y\u00e9"}"#),
                transaction_id: Some("t1"),
                trace_id: None,
            }
        );
        assert_eq!(items[1], item("r", None, Some(r#"[1,-2.5e+3,true,false,null,"",{}]"#)));
        // A trace id is a string's text; any other value names none.
        let traced = items_of(r#"{"items":[{"queue":"q","traceId":"t-1"},{"queue":"q","traceId":{"a":"\n"}}]}"#);
        let traces: Option<Vec<_>> = traced.map(|t| t.iter().map(|i| i.trace_id).collect());
        assert_eq!(traces, Some(vec![Some("t-1"), None]));
        let spaced = " {\n\t\"items\" : [ { \"queue\" : \"q\" , \"payload\" : null , \"partition\" : null } ] } \r\n";
        assert_eq!(items_of(spaced), Some(vec![item("q", None, None)]));
        assert_eq!(items_of(r#"{"other":{"a":[1]},"items":[]}"#), Some(vec![]));
        assert_eq!(items_of(r#"{"items":[{"queue":"é","payload":"ü"}]}"#), Some(vec![item("é", None, Some("\"ü\""))]));
    }

    fn items_of(s: &str) -> Option<Vec<PlainItem<'_>>> {
        items(s.as_bytes())
    }

    #[test]
    fn lone_values_read_or_declined() {
        assert_eq!(json_value(" {\"a\":[1,\"\\u00e9\"]}\n"), Some("{\"a\":[1,\"\\u00e9\"]}"));
        assert_eq!(json_value("\"x\""), Some("\"x\""));
        assert_eq!(json_value("-0.5e+3"), Some("-0.5e+3"));
        for no in ["", " ", "01", "{", "[1,]", "1 2", "\"a\tb\"", "nul", "{\"a\":1}x"] {
            assert_eq!(json_value(no), None, "{no:?}");
        }
        // Deeper than the plain reader follows: serde judges it.
        let deep = format!("{}{}", "[".repeat(NESTING_MAX + 1), "]".repeat(NESTING_MAX + 1));
        assert_eq!(json_value(&deep), None);
        assert!(serde_json::from_str::<serde_json::Value>(&deep).is_ok());
    }

    #[test]
    fn declines_what_it_is_not_sure_of() {
        for body in [
            "",
            "[]",
            r#"{"items":[{"queue":"q"}]"#,
            r#"{"items":[{"queue":"q"}]} x"#,
            r#"{"items":[{"queue":"q"}],}"#,
            r#"{"items":[{"queue":"q"},]}"#,
            r#"{"items":[{"queue":"q"}],"items":[]}"#,
            r#"{"items":[{"queue":"q","queue":"r"}]}"#,
            r#"{"items":[{"queue":"q","traceId":1,"traceId":2}]}"#,
            r#"{"items":[{"queue":"q","traceId":"t\u002d1"}]}"#,
            r#"{"items":[{"qu\u0065ue":"q"}]}"#,
            r#"{"items":[{"queue":"q\n"}]}"#,
            r#"{"items":[{"queue":null}]}"#,
            r#"{"items":[{"queue":5}]}"#,
            r#"{"items":[{"partition":"p"}]}"#,
            r#"{"items":[{"queue":"q","partition":7}]}"#,
            r#"{"items":[{"queue":"q","payload":01}]}"#,
            r#"{"items":[{"queue":"q","payload":1.}]}"#,
            r#"{"items":[{"queue":"q","payload":-}]}"#,
            r#"{"items":[{"queue":"q","payload":1e}]}"#,
            r#"{"items":[{"queue":"q","payload":nul}]}"#,
            r#"{"items":[{"queue":"q","payload":"\x"}]}"#,
            r#"{"items":[{"queue":"q","payload":"\u12g4"}]}"#,
            r#"{"items":[{"queue":"q","payload":{"a":1,}}]}"#,
            r#"{"items":[{"queue":"q","payload":{1:1}}]}"#,
            "{\"items\":[{\"queue\":\"q\",\"payload\":\"a\tb\"}]}",
        ] {
            assert_eq!(items_of(body), None, "{body}");
        }
        let deep = format!(r#"{{"items":[{{"queue":"q","payload":{}1{}}}]}}"#, "[".repeat(70), "]".repeat(70));
        assert_eq!(items_of(&deep), None);
        assert_eq!(items(b"{\"items\":[{\"queue\":\"\xff\"}]}"), None);
    }

    /// Pieces a generated body is made of: names, values, broken values.
    pub(crate) const VALUES: &[&str] = &[
        r#""q""#,
        r#""p-1""#,
        r#""""#,
        r#""a\"b""#,
        r#""\u00e9\n""#,
        r#""é""#,
        "null",
        "true",
        "false",
        "0",
        "-0",
        "12",
        "-3.25e-7",
        "1E9",
        "01",
        "1.",
        ".5",
        "-",
        "{}",
        "[]",
        r#"{"a":[1,{"b":null}]}"#,
        "[1,2,[3]]",
        r#"{"a":1,}"#,
        "[1,]",
        "nul",
        r#""\x""#,
        "\"a\tb\"",
        r#""\ud800""#,
        r#"{"a" 1}"#,
        "{\"k\":\"v\"}",
    ];
    const KEYS: &[&str] =
        &["queue", "partition", "payload", "transactionId", "traceId", "producerSub", "qu\\u0065ue", "items", ""];
    pub(crate) const SPACE: &[&str] = &["", " ", "\n", "\t ", "\r\n"];

    /// A generated object: each field a key of `keys` and a piece of
    /// [`VALUES`], `ws` around every token.
    pub(crate) fn object_of(keys: &[&str], fields: &[(usize, usize)], ws: &str) -> String {
        let members: Vec<String> = fields
            .iter()
            .map(|&(k, v)| format!("{ws}\"{}\"{ws}:{ws}{}", keys[k % keys.len()], VALUES[v % VALUES.len()]))
            .collect();
        format!("{ws}{{{}{ws}}}", members.join(","))
    }

    /// A generated body damaged: cut short at, or a byte put in at, a place.
    pub(crate) fn damage(body: &mut Vec<u8>, cut: Option<(usize, u8)>) {
        if let Some((at, byte)) = cut {
            let at = at % (body.len() + 1);
            if byte % 2 == 0 {
                body.truncate(at)
            } else {
                body.insert(at, byte)
            }
        }
    }

    fn body_of(items: &[Vec<(usize, usize)>], space: usize, extra: Option<usize>) -> String {
        let ws = SPACE[space % SPACE.len()];
        let rendered: Vec<String> = items.iter().map(|fields| object_of(KEYS, fields, ws)).collect();
        let extra = extra.map(|v| format!(",\"other\":{}", VALUES[v % VALUES.len()])).unwrap_or_default();
        format!("{ws}{{\"items\":{ws}[{}]{extra}}}{ws}", rendered.join(","))
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]

        /// Whatever the plain reader reads, serde reads the same way; and
        /// the bodies clients send are read by the plain reader.
        #[test]
        fn agrees_with_serde(
            items in proptest::collection::vec(
                proptest::collection::vec((0usize..KEYS.len(), 0usize..VALUES.len()), 0..6), 0..4),
            space in 0usize..SPACE.len(),
            extra in proptest::option::of(0usize..VALUES.len()),
            cut in proptest::option::of((0usize..400, 0u8..128)),
        ) {
            let mut body = body_of(&items, space, extra).into_bytes();
            damage(&mut body, cut);
            proptest::prop_assert!(crate::http::routes::push::plain_reader_agrees(&body),
                "disagree on {}", String::from_utf8_lossy(&body));
        }

        /// A lone value (as a stored payload is checked on its way out): what
        /// the plain reader accepts, serde reads as the same value text.
        #[test]
        fn lone_values_agree_with_serde(
            parts in proptest::collection::vec(0usize..VALUES.len(), 1..4),
            space in 0usize..SPACE.len(),
            cut in proptest::option::of((0usize..200, 0u8..128)),
        ) {
            let ws = SPACE[space % SPACE.len()];
            let inner: Vec<&str> = parts.iter().map(|&v| VALUES[v]).collect();
            let text = if inner.len() == 1 { inner[0].to_string() } else { format!("[{}]", inner.join(",")) };
            let mut bytes = format!("{ws}{text}{ws}").into_bytes();
            damage(&mut bytes, cut);
            let Ok(text) = std::str::from_utf8(&bytes) else { return Ok(()) };
            if let Some(value) = json_value(text) {
                let by_serde = serde_json::from_str::<&serde_json::value::RawValue>(text).map(|r| r.get());
                proptest::prop_assert_eq!(by_serde.ok(), Some(value), "on {:?}", text);
            }
        }

        #[test]
        fn reads_the_usual_shape(
            n in 1usize..20,
            payload in 0usize..VALUES.len(),
            space in 0usize..SPACE.len(),
        ) {
            let valid: Vec<usize> =
                (0..VALUES.len()).filter(|&v| serde_json::from_str::<serde_json::Value>(VALUES[v]).is_ok()).collect();
            let payload = valid[payload % valid.len()];
            let items: Vec<Vec<(usize, usize)>> = (0..n).map(|_| vec![(0, 0), (1, 1), (2, payload), (3, 1)]).collect();
            let body = body_of(&items, space, None);
            let read = items_of(&body);
            proptest::prop_assert!(read.as_ref().is_some_and(|r| r.len() == n), "declined {body}");
            proptest::prop_assert!(crate::http::routes::push::plain_reader_agrees(body.as_bytes()));
        }
    }
}
