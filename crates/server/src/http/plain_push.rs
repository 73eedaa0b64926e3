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

use memchr::memchr2;

/// Nesting the plain reader follows inside a value; deeper bodies go to
/// serde, which refuses past 128 levels.
const NESTING_MAX: usize = 64;

/// One item as the body holds it; `payload` is the value's JSON text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PlainItem<'a> {
    pub queue: &'a str,
    pub partition: Option<&'a str>,
    pub payload: Option<&'a str>,
    pub transaction_id: Option<&'a str>,
}

/// The items of `body`, or `None` when the body is not of the plain shape
/// (or not valid JSON at all).
pub(crate) fn items(body: &[u8]) -> Option<Vec<PlainItem<'_>>> {
    let text = std::str::from_utf8(body).ok()?;
    // A body without any control byte (as clients write compact JSON) has
    // none in a string either, so no string needs its own look.
    let mut r = Reader { text, at: 0, controls: has_control(body) };
    let mut items = None;
    r.space();
    r.object(|r, key| match key {
        "items" if items.is_some() => None,
        "items" => {
            items = Some(r.items()?);
            Some(())
        }
        _ => r.value(1),
    })?;
    r.space();
    if r.at != r.text.len() {
        return None;
    }
    items
}

struct Reader<'a> {
    text: &'a str,
    at: usize,
    /// Whether the body holds a control byte anywhere (whitespace or not).
    controls: bool,
}

impl<'a> Reader<'a> {
    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    fn peek(&self) -> Option<u8> {
        self.bytes().get(self.at).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let b = self.peek()?;
        self.at += 1;
        Some(b)
    }

    fn eat(&mut self, b: u8) -> bool {
        let found = self.peek() == Some(b);
        self.at += found as usize;
        found
    }

    fn expect(&mut self, b: u8) -> Option<()> {
        self.eat(b).then_some(())
    }

    /// JSON's whitespace (as serde: space, tab, CR, LF).
    fn space(&mut self) {
        while let Some(b' ' | b'\n' | b'\t' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    fn colon(&mut self) -> Option<()> {
        self.space();
        self.expect(b':')?;
        self.space();
        Some(())
    }

    /// After a member or element: `Some(false)` at a comma, `Some(true)`
    /// at `close`.
    fn end_of_member(&mut self, close: u8) -> Option<bool> {
        self.space();
        match self.next()? {
            b',' => Some(false),
            b if b == close => Some(true),
            _ => None,
        }
    }

    fn items(&mut self) -> Option<Vec<PlainItem<'a>>> {
        self.expect(b'[')?;
        let mut items = Vec::new();
        self.elements(b']', |r| {
            items.push(r.item()?);
            Some(())
        })?;
        Some(items)
    }

    fn item(&mut self) -> Option<PlainItem<'a>> {
        let (mut queue, mut partition, mut payload, mut transaction_id) = (None, None, None, None);
        let mut trace_id = false;
        self.object(|r, key| {
            match key {
                "queue" if queue.is_none() => queue = Some(r.plain_string()?),
                "partition" if partition.is_none() => partition = Some(r.string_or_null()?),
                "transactionId" if transaction_id.is_none() => transaction_id = Some(r.string_or_null()?),
                "payload" if payload.is_none() => {
                    let start = r.at;
                    r.value(3)?;
                    payload = Some(&r.text[start..r.at]);
                }
                // Read and checked, but not kept (a plain push stores no
                // trace id).
                "traceId" if !trace_id => {
                    trace_id = true;
                    r.value(3)?;
                }
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
        })
    }

    /// An object whose keys are plain strings; `member` reads each value.
    fn object(&mut self, mut member: impl FnMut(&mut Self, &'a str) -> Option<()>) -> Option<()> {
        self.expect(b'{')?;
        self.elements(b'}', |r| {
            let key = r.plain_string()?;
            r.colon()?;
            member(r, key)
        })
    }

    /// What follows an object's or array's opening byte: `element` read
    /// for each member or element, up to `close`.
    fn elements(&mut self, close: u8, mut element: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.space();
        if self.eat(close) {
            return Some(());
        }
        loop {
            self.space();
            element(self)?;
            if self.end_of_member(close)? {
                return Some(());
            }
        }
    }

    /// A string without escapes, as borrowed text.
    fn plain_string(&mut self) -> Option<&'a str> {
        self.expect(b'"')?;
        let start = self.at;
        let len = memchr2(b'"', b'\\', &self.bytes()[start..])?;
        let end = start + len;
        if self.bytes()[end] != b'"' || (self.controls && has_control(&self.bytes()[start..end])) {
            return None;
        }
        self.at = end + 1;
        Some(&self.text[start..end])
    }

    fn string_or_null(&mut self) -> Option<Option<&'a str>> {
        if self.peek() == Some(b'n') {
            return self.literal(b"null").map(|()| None);
        }
        self.plain_string().map(Some)
    }

    /// Any string, escapes checked as serde checks them.
    fn string(&mut self) -> Option<()> {
        self.expect(b'"')?;
        loop {
            let rest = &self.bytes()[self.at..];
            let len = memchr2(b'"', b'\\', rest)?;
            if self.controls && has_control(&rest[..len]) {
                return None;
            }
            self.at += len + 1;
            if rest[len] == b'"' {
                return Some(());
            }
            match self.next()? {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                b'u' => {
                    for _ in 0..4 {
                        self.next().filter(u8::is_ascii_hexdigit)?;
                    }
                }
                _ => return None,
            }
        }
    }

    /// Any JSON value, `depth` levels in.
    fn value(&mut self, depth: usize) -> Option<()> {
        if depth > NESTING_MAX {
            return None;
        }
        match self.peek()? {
            b'"' => self.string(),
            b'{' => {
                self.at += 1;
                self.elements(b'}', |r| {
                    r.string()?;
                    r.colon()?;
                    r.value(depth + 1)
                })
            }
            b'[' => {
                self.at += 1;
                self.elements(b']', |r| r.value(depth + 1))
            }
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let found = self.bytes()[self.at..].starts_with(word);
        self.at += if found { word.len() } else { 0 };
        found.then_some(())
    }

    /// `-?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?`; a digit right after
    /// a leading 0 is left for the caller, which refuses it.
    fn number(&mut self) -> Option<()> {
        self.eat(b'-');
        match self.next()? {
            b'0' => {}
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.eat(b'.') {
            self.next().filter(u8::is_ascii_digit)?;
            self.digits();
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.at += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.at += 1;
            }
            self.next().filter(u8::is_ascii_digit)?;
            self.digits();
        }
        Some(())
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.at += 1;
        }
    }
}

/// Whether `bytes` hold a control character, which JSON strings may not.
fn has_control(bytes: &[u8]) -> bool {
    crate::http::json_out::any_byte(bytes, |b| b < 0x20)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item<'a>(queue: &'a str, partition: Option<&'a str>, payload: Option<&'a str>) -> PlainItem<'a> {
        PlainItem { queue, partition, payload, transaction_id: None }
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
                transaction_id: Some("t1")
            }
        );
        assert_eq!(items[1], item("r", None, Some(r#"[1,-2.5e+3,true,false,null,"",{}]"#)));
        let spaced = " {\n\t\"items\" : [ { \"queue\" : \"q\" , \"payload\" : null , \"partition\" : null } ] } \r\n";
        assert_eq!(items_of(spaced), Some(vec![item("q", None, None)]));
        assert_eq!(items_of(r#"{"other":{"a":[1]},"items":[]}"#), Some(vec![]));
        assert_eq!(items_of(r#"{"items":[{"queue":"é","payload":"ü"}]}"#), Some(vec![item("é", None, Some("\"ü\""))]));
    }

    fn items_of(s: &str) -> Option<Vec<PlainItem<'_>>> {
        items(s.as_bytes())
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
    const VALUES: &[&str] = &[
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
    const SPACE: &[&str] = &["", " ", "\n", "\t ", "\r\n"];

    fn body_of(items: &[Vec<(usize, usize)>], space: usize, extra: Option<usize>) -> String {
        let ws = SPACE[space % SPACE.len()];
        let rendered: Vec<String> = items
            .iter()
            .map(|fields| {
                let members: Vec<String> = fields
                    .iter()
                    .map(|&(k, v)| format!("{ws}\"{}\"{ws}:{ws}{}", KEYS[k % KEYS.len()], VALUES[v % VALUES.len()]))
                    .collect();
                format!("{ws}{{{}{ws}}}", members.join(","))
            })
            .collect();
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
            if let Some((at, byte)) = cut {
                let at = at % (body.len() + 1);
                if byte % 2 == 0 { body.truncate(at) } else { body.insert(at, byte) }
            }
            proptest::prop_assert!(crate::http::routes::push::plain_reader_agrees(&body),
                "disagree on {}", String::from_utf8_lossy(&body));
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
