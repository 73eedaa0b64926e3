//! A one-pass reader of the JSON bodies every client sends in the same
//! shape (pushes, acks, steps): each string's end found with `memchr`, the whole
//! text's UTF-8 checked once, values checked and kept as their text.
//!
//! serde's reader walks every byte through its generic visitor: for a push
//! it was about a quarter of a message's instructions, for a batch ack a
//! fifth of a consumed message's (docs/benchmarks.md, items 18 and 19).
//!
//! Every reader built on it only ever says yes to a body serde reads the same
//! way: anything it is not sure of (an escape in a name or key, a repeated
//! field, a value nested deeper than [`NESTING_MAX`]) makes it decline, and
//! the route reads the body with serde, which also words the refusal of a
//! bad one. Property tests and a fuzz target hold each shape to that
//! (`plain_push`, `plain_ack`, `plain_step`).

use memchr::memchr2;

/// Nesting the plain reader follows inside a value; deeper bodies go to
/// serde, which refuses past 128 levels.
pub(crate) const NESTING_MAX: usize = 64;

/// Reads `body` as one JSON object whose keys are plain strings, `member`
/// reading each value; `None` when it declines.
pub(crate) fn document<'a>(body: &'a [u8], member: impl FnMut(&mut Reader<'a>, &'a str) -> Option<()>) -> Option<()> {
    let mut r = Reader::new(std::str::from_utf8(body).ok()?);
    r.space();
    r.object(member)?;
    r.space();
    (r.at == r.text.len()).then_some(())
}

/// `text` without its surrounding whitespace when it is one JSON value the
/// plain reader is sure of (as serde would read it); `None` when it is not
/// JSON or the reader is not sure, and serde must judge. A stored payload
/// is checked with it on its way out (`render::payload_json`).
pub(crate) fn json_value(text: &str) -> Option<&str> {
    let mut r = Reader::new(text);
    r.space();
    let start = r.at;
    r.value(1)?;
    let end = r.at;
    r.space();
    (r.at == text.len()).then(|| &text[start..end])
}

pub(crate) struct Reader<'a> {
    pub(crate) text: &'a str,
    pub(crate) at: usize,
    /// Whether the body holds a control byte anywhere (whitespace or not).
    controls: bool,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        // A text without any control byte (as clients write compact JSON)
        // has none in a string either, so no string needs its own look.
        Reader { text, at: 0, controls: has_control(text.as_bytes()) }
    }

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

    /// An object whose keys are plain strings; `member` reads each value.
    pub(crate) fn object(&mut self, mut member: impl FnMut(&mut Self, &'a str) -> Option<()>) -> Option<()> {
        self.expect(b'{')?;
        self.elements(b'}', |r| {
            let key = r.plain_string()?;
            r.colon()?;
            member(r, key)
        })
    }

    /// An array, `element` reading each element into the result.
    pub(crate) fn array<T>(&mut self, mut element: impl FnMut(&mut Self) -> Option<T>) -> Option<Vec<T>> {
        self.expect(b'[')?;
        let mut read = Vec::new();
        self.elements(b']', |r| {
            read.push(element(r)?);
            Some(())
        })?;
        Some(read)
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
    pub(crate) fn plain_string(&mut self) -> Option<&'a str> {
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

    pub(crate) fn string_or_null(&mut self) -> Option<Option<&'a str>> {
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

    /// Any JSON value, `depth` levels in, as its text.
    pub(crate) fn value_text(&mut self, depth: usize) -> Option<&'a str> {
        let start = self.at;
        self.value(depth)?;
        Some(&self.text[start..self.at])
    }

    /// Any JSON value, `depth` levels in.
    pub(crate) fn value(&mut self, depth: usize) -> Option<()> {
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
