//! Reading requests: JSON bodies, query strings and path segments, each
//! refused with a JSON error that names the problem.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use serde::Deserialize;

use crate::http::error::{ApiError, ApiResult};
use regina_types::limits::REQUEST_BODY_BYTES_MAX;

/// The request body, or a 413 when it is over the limit.
pub fn body_bytes(body: Result<Bytes, BytesRejection>) -> ApiResult<Bytes> {
    body.map_err(|e| {
        if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::too_large(format!("request body is over the limit of {REQUEST_BODY_BYTES_MAX} bytes"))
        } else {
            ApiError::bad_body(format!("could not read the request body: {e}"))
        }
    })
}

/// Parses a JSON body. An empty body parses as `{}` where `empty_ok`.
pub fn json_body<'a, T: Deserialize<'a>>(bytes: &'a [u8], empty_ok: bool) -> ApiResult<T> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        if empty_ok {
            return serde_json::from_slice(b"{}").map_err(|e| ApiError::bad_body(e.to_string()));
        }
        return Err(ApiError::bad_body("request body is empty; a JSON object is required"));
    }
    // Parsed once at full speed; only a refusal parses again, tracking the
    // path, to name the field it is about.
    serde_json::from_slice(bytes).map_err(|e| {
        let refusal = ApiError::bad_body(format!("invalid JSON body: {e}"));
        let mut de = serde_json::Deserializer::from_slice(bytes);
        let Err(tracked) = serde_path_to_error::deserialize::<_, T>(&mut de) else { return refusal };
        match field_of(&tracked.path().to_string(), &tracked.inner().to_string()) {
            Some(f) => ApiError { message: format!("invalid JSON body at {f}: {e}"), ..refusal.at_field(f) },
            None => refusal,
        }
    })
}

/// The field a body's parse error is about: the path serde reached, with
/// the name a "missing field `x`" (or unknown, duplicate) error gives, if
/// the path does not end in it. `None` for the document itself.
fn field_of(path: &str, message: &str) -> Option<String> {
    let path = if path == "." { "" } else { path };
    let named = message.split_once("field `").and_then(|(_, rest)| rest.split_once('`')).map(|(name, _)| name);
    let field = match named {
        Some(name) if !path.ends_with(name) && path.is_empty() => name.to_string(),
        Some(name) if !path.ends_with(name) => format!("{path}.{name}"),
        _ => path.to_string(),
    };
    (!field.is_empty()).then_some(field)
}

/// Query parameters in order; `+` decodes as a space.
pub fn query_pairs(raw: Option<&str>) -> ApiResult<Vec<(String, String)>> {
    match raw {
        None | Some("") => Ok(Vec::new()),
        Some(q) => {
            serde_urlencoded::from_str(q).map_err(|e| ApiError::bad_request(format!("invalid query string: {e}")))
        }
    }
}

/// The last value of a query parameter.
pub fn query_get<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

pub fn query_bool(pairs: &[(String, String)], key: &str) -> ApiResult<Option<bool>> {
    match query_get(pairs, key) {
        None | Some("") => Ok(None),
        Some(v) if v.eq_ignore_ascii_case("true") || v == "1" => Ok(Some(true)),
        Some(v) if v.eq_ignore_ascii_case("false") || v == "0" => Ok(Some(false)),
        Some(v) => Err(ApiError::bad_request(format!("{key} must be true or false, not {v:?}")).at_field(key)),
    }
}

/// An unsigned integer parameter within `[min, max]`.
pub fn query_u64(pairs: &[(String, String)], key: &str, min: u64, max: u64) -> ApiResult<Option<u64>> {
    match query_get(pairs, key) {
        None | Some("") => Ok(None),
        Some(v) => {
            match v.parse::<u64>() {
                Ok(n) if n >= min && n <= max => Ok(Some(n)),
                _ => Err(ApiError::bad_request(format!("{key} must be an integer from {min} to {max}, not {v:?}"))
                    .at_field(key)),
            }
        }
    }
}

/// Whether raw payload bytes (a binary push item, a decoded timer payload)
/// are one JSON document in UTF-8. serde_json skips a string's bytes without
/// checking their UTF-8 when it only validates, so the text is checked first:
/// a payload that got in as bytes no reader could decode would block its
/// partition for every JSON consumer.
pub fn is_json_document(bytes: &[u8]) -> bool {
    std::str::from_utf8(bytes).is_ok_and(|text| serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok())
}

/// Whether `%XX`-escaped text (a path, a query string) decodes to UTF-8.
/// Decoders downstream would otherwise answer in plain text (the path) or
/// replace the bytes with U+FFFD (the query), naming a different thing.
fn unescapes_to_utf8(text: &str) -> bool {
    // Text without an escape is the `&str` itself.
    if !text.contains('%') {
        return true;
    }
    let raw = text.as_bytes();
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (raw[i], raw.get(i + 1).and_then(|b| hex(*b)), raw.get(i + 2).and_then(|b| hex(*b))) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    std::str::from_utf8(&out).is_ok()
}

/// The edge's first look at every request, before it is routed (in
/// `dispatch`, for both doors): the refusal of one no route could read. A
/// path or query that does not decode to UTF-8 is a 400, and a body with a
/// `Content-Encoding` (other than `identity`) is a 415: no route decodes
/// one, and reading compressed bytes as plain would apply garbage. (The
/// Queen clients never send one; their compression lives inside the binary
/// bodies, where each route bounds what it inflates.)
pub fn unreadable(req: &axum::extract::Request) -> Option<axum::response::Response> {
    use axum::response::IntoResponse;
    let uri = req.uri();
    if !unescapes_to_utf8(uri.path()) {
        return Some(ApiError::bad_request("the path does not decode to UTF-8").into_response());
    }
    if !uri.query().is_none_or(unescapes_to_utf8) {
        return Some(ApiError::bad_request("the query string does not decode to UTF-8").into_response());
    }
    let encoding = req.headers().get(axum::http::header::CONTENT_ENCODING);
    match encoding.map(|v| v.to_str().map(str::trim)) {
        None => None,
        Some(Ok(e)) if e.is_empty() || e.eq_ignore_ascii_case("identity") => None,
        Some(found) => {
            let named = found.map_or_else(|_| "a value that is not text".to_string(), |e| format!("{e:?}"));
            let why = format!("Content-Encoding {named} is not accepted; send the body uncompressed");
            Some(ApiError::new(crate::http::codes::UNSUPPORTED_ENCODING, why).into_response())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::unescapes_to_utf8;

    #[test]
    fn escaped_text_must_decode_to_utf8() {
        for ok in ["/api/v1/pop/queue/orders", "/q/%C3%A9", "a=1&b=%20x", "100%", "%zz", "%E2%82%AC"] {
            assert!(unescapes_to_utf8(ok), "{ok}");
        }
        for bad in ["/q/%FF", "g=%C3", "x=%E2%82", "%ff%fe"] {
            assert!(!unescapes_to_utf8(bad), "{bad}");
        }
    }
}

#[cfg(test)]
mod field_tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Item {
        #[allow(dead_code)]
        queue: String,
    }

    #[derive(Debug, Deserialize)]
    struct Body {
        #[allow(dead_code)]
        items: Vec<Item>,
    }

    fn field(body: &str) -> Option<String> {
        json_body::<Body>(body.as_bytes(), false).unwrap_err().field
    }

    #[test]
    fn a_body_refusal_names_the_field_it_is_about() {
        assert_eq!(field(r#"{"items": [{"queue": 5}]}"#).as_deref(), Some("items[0].queue"));
        assert_eq!(field(r#"{"items": [{}]}"#).as_deref(), Some("items[0].queue"));
        assert_eq!(field(r#"{"items": [{"queue": "q", "extra": 1}]}"#).as_deref(), Some("items[0].extra"));
        assert_eq!(field(r#"{}"#).as_deref(), Some("items"));
        assert_eq!(field(r#"{"items": "no"}"#).as_deref(), Some("items"));
        assert_eq!(field(r#"not json"#), None);
        assert_eq!(field(r#"{"items": []} trailing"#), None, "trailing bytes are still refused");
    }
}
