//! JSON written straight into a byte buffer, for the answers that carry one
//! element per message (push, pop). serde's derive spells every key through
//! the string escaper and every id through `fmt`; for a pushed message that
//! was a sixth of its instructions. Keys here are literals, ids are encoded
//! on the stack, and a string is copied whole when nothing in it needs an
//! escape (the common case: minted ids, names that passed validation).

/// A JSON string literal: `s` quoted, escaped as RFC 8259 requires.
pub fn string(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    // Checked whole first (the loop below goes byte by byte): most strings
    // need no escape at all.
    if !any_byte(bytes, needs_escape) {
        out.reserve(bytes.len() + 2);
        out.push(b'"');
        out.extend_from_slice(bytes);
        out.push(b'"');
        return;
    }
    out.push(b'"');
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if !needs_escape(b) {
            continue;
        }
        out.extend_from_slice(&bytes[start..i]);
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            _ => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(b"\\u00");
                out.push(HEX[(b >> 4) as usize]);
                out.push(HEX[(b & 0xf) as usize]);
            }
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// Whether any of `bytes` is one `matches` picks: folded over chunks
/// rather than stopping at the first, so that it runs over whole vectors.
pub fn any_byte(bytes: &[u8], matches: impl Fn(u8) -> bool) -> bool {
    bytes.chunks(64).any(|chunk| chunk.iter().fold(0u8, |seen, &b| seen | matches(b) as u8) != 0)
}

fn needs_escape(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

/// `true` or `false`.
pub fn boolean(out: &mut Vec<u8>, b: bool) {
    out.extend_from_slice(if b { b"true" } else { b"false" });
}

/// `value` written by `write`, or `null` when there is none.
pub fn or_null<T>(out: &mut Vec<u8>, value: Option<T>, write: impl FnOnce(&mut Vec<u8>, T)) {
    match value {
        Some(v) => write(out, v),
        None => out.extend_from_slice(b"null"),
    }
}

/// An unsigned number.
pub fn number(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(decimal_digits(&mut [0u8; 20], n));
}

/// `n` in decimal digits, written into `buf` without `fmt`.
pub fn decimal(buf: &mut [u8; 20], n: u64) -> &str {
    std::str::from_utf8(decimal_digits(buf, n)).expect("ASCII digits")
}

/// [`decimal`] as bytes, for a buffer that takes bytes: checking the
/// digits as UTF-8 cost ~160 instructions per pushed message's answer.
fn decimal_digits(buf: &mut [u8; 20], mut n: u64) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &buf[at..]
}

/// A number spelled as a JSON string (partition ids, as the clients read them).
pub fn number_text(out: &mut Vec<u8>, n: u64) {
    out.push(b'"');
    number(out, n);
    out.push(b'"');
}

/// A UUID as its quoted, hyphenated lower-case text.
pub fn uuid(out: &mut Vec<u8>, id: &[u8; 16]) {
    let mut buf = [0u8; uuid::fmt::Hyphenated::LENGTH];
    out.push(b'"');
    out.extend_from_slice(uuid::Uuid::from_bytes(*id).hyphenated().encode_lower(&mut buf).as_bytes());
    out.push(b'"');
}

/// A finished answer with its status and JSON content type.
pub fn answer(status: axum::http::StatusCode, body: Vec<u8>) -> axum::response::Response {
    use axum::response::IntoResponse;
    (status, [(axum::http::header::CONTENT_TYPE, "application/json")], body).into_response()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    fn rendered(s: &str) -> String {
        let mut out = Vec::new();
        super::string(&mut out, s);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn strings_escape_what_json_requires() {
        assert_eq!(rendered("plain"), "\"plain\"");
        assert_eq!(rendered("a\"b\\c\nd\u{1}é"), "\"a\\\"b\\\\c\\nd\\u0001é\"");
        assert_eq!(rendered(""), "\"\"");
    }

    #[test]
    fn numbers_and_ids() {
        let mut out = Vec::new();
        super::number(&mut out, 0);
        out.push(b',');
        super::number(&mut out, u64::MAX);
        out.push(b',');
        super::number_text(&mut out, 42);
        out.push(b',');
        super::uuid(&mut out, &[0xab; 16]);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            format!("0,{},\"42\",\"abababab-abab-abab-abab-abababababab\"", u64::MAX)
        );
    }

    proptest! {
        #[test]
        fn any_string_reads_back_as_itself(s in any::<String>()) {
            let text = rendered(&s);
            let back: String = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(back, s);
        }
    }
}
