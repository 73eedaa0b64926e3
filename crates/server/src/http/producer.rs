//! The producer's identity on a stored message (`producerSub`).
//!
//! With authentication on, a push (plain, binary, in a transaction, or a
//! timer's schedule) is stamped with the validated `sub` of its token, and
//! any `producerSub` in the body is ignored; without auth nothing is
//! stamped and the field reads `null`. The stamp travels inside the stored
//! payload, as at-rest sealing does, so the log and the state machine see
//! opaque bytes and no log or snapshot format changes: a stamped payload
//! starts with a zero byte, which no JSON text can start with:
//! `0x00 | "RSUB" | u16 LE length | sub | the payload`. It is added before
//! sealing, so an encrypted queue's messages hide their producer too, and
//! taken off after opening, on every read.

const MARK: &[u8; 5] = b"\x00RSUB";

/// `payload` stamped with `sub` (at most `u16::MAX` bytes of it are kept;
/// tokens are refused long before, see `AUTH_SUBJECT_BYTES_MAX`).
pub fn stamp(sub: &str, payload: &[u8]) -> Vec<u8> {
    let len = sub.len().min(u16::MAX as usize);
    let mut out = Vec::with_capacity(MARK.len() + 2 + len + payload.len());
    out.extend_from_slice(MARK);
    out.extend_from_slice(&(len as u16).to_le_bytes());
    out.extend_from_slice(&sub.as_bytes()[..len]);
    out.extend_from_slice(payload);
    out
}

/// The producer and the payload of a stored (opened) payload; payloads
/// without a stamp pass through.
pub fn unstamp(stored: Vec<u8>) -> (Option<String>, Vec<u8>) {
    if !stored.starts_with(MARK) {
        return (None, stored);
    }
    let at = MARK.len();
    let Some(len) = stored.get(at..at + 2).map(|b| u16::from_le_bytes([b[0], b[1]]) as usize) else {
        return (None, stored);
    };
    let Some(sub) = stored.get(at + 2..at + 2 + len) else { return (None, stored) };
    let sub = String::from_utf8_lossy(sub).into_owned();
    (Some(sub), stored[at + 2 + len..].to_vec())
}

/// Stamps `payload` with the subject of the request being handled, if it
/// has one.
pub fn stamp_current(payload: &mut Vec<u8>) {
    if let Some(sub) = crate::doors::auth::subject() {
        *payload = stamp(&sub, payload);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_come_off_whole() {
        let s = stamp("alice", br#"{"a":1}"#);
        assert_eq!(unstamp(s), (Some("alice".to_string()), br#"{"a":1}"#.to_vec()));
        assert_eq!(unstamp(stamp("", b"")), (Some(String::new()), Vec::new()));
        assert_eq!(unstamp(br#"{"a":1}"#.to_vec()), (None, br#"{"a":1}"#.to_vec()));
        // A sealed payload is not a stamp.
        assert_eq!(unstamp(b"\x00RENCxxxx".to_vec()).0, None);
        assert_eq!(unstamp(b"\x00RSUB\x09\x00ab".to_vec()).0, None, "truncated");
    }
}
