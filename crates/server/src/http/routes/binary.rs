//! The binary push body `QPB1` (and the pushes of a `QTB1` transaction),
//! as the Queen clients send it with `binary_push` / `push_compression`.
//! All integers little-endian.
//!
//! ```text
//! "QPB1" | u8 flags | [u32 raw_len if flags&1] | body
//! flags: 1 body is one zstd frame | 2 answer counts only
//!        4 every item carries a transaction id | 8 groups are pre-framed
//! body:  u32 groups | per group: u16+queue | u16+partition | u32 n | items
//! items (no flag 8): n x ([u16+txn if flag 4] | u32+payload JSON)
//! items (flag 8):    u32 z_len | z = one zstd frame of n frames
//!                    (u32 body_len | u8 0 | [16] message id | u16+txn | payload)
//! ```

use std::io::Read;

use regina_types::limits::REQUEST_BODY_BYTES_MAX;

pub const PUSH_MAGIC: &[u8; 4] = b"QPB1";
pub const TXN_MAGIC: &[u8; 4] = b"QTB1";
const FLAG_ZSTD: u8 = 1;
pub const FLAG_COUNTS: u8 = 2;
const FLAG_TXN_IDS: u8 = 4;
const FLAG_FRAMED: u8 = 8;

/// One item read from a binary body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinaryItem {
    pub queue: String,
    pub partition: String,
    /// Empty when the client left it to the broker.
    pub transaction_id: String,
    /// Minted by the client (flag 8), kept as the message id.
    pub message_id: Option<[u8; 16]>,
    pub payload: Vec<u8>,
}

/// A cursor over a binary body that refuses to read past its end.
pub struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf }
    }

    pub fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        if self.buf.len() < n {
            return Err(format!("the binary body ends inside {what}"));
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    pub fn u8(&mut self, what: &str) -> Result<u8, String> {
        Ok(self.take(1, what)?[0])
    }

    pub fn u16(&mut self, what: &str) -> Result<usize, String> {
        Ok(u16::from_le_bytes(self.take(2, what)?.try_into().expect("two bytes")) as usize)
    }

    pub fn u32(&mut self, what: &str) -> Result<usize, String> {
        Ok(u32::from_le_bytes(self.take(4, what)?.try_into().expect("four bytes")) as usize)
    }

    pub fn text16(&mut self, what: &str) -> Result<String, String> {
        let n = self.u16(what)?;
        String::from_utf8(self.take(n, what)?.to_vec()).map_err(|_| format!("{what} is not UTF-8"))
    }

    pub fn rest(&self) -> &'a [u8] {
        self.buf
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
}

/// Decompresses one zstd frame, refusing output over the body limit.
pub fn unzstd(z: &[u8]) -> Result<Vec<u8>, String> {
    let mut source = z;
    let decoder = ruzstd::decoding::StreamingDecoder::new(&mut source).map_err(|e| format!("bad zstd frame: {e}"))?;
    let mut out = Vec::new();
    decoder
        .take(REQUEST_BODY_BYTES_MAX as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| format!("bad zstd frame: {e}"))?;
    if out.len() > REQUEST_BODY_BYTES_MAX {
        return Err(format!("the decompressed body is over {REQUEST_BODY_BYTES_MAX} bytes"));
    }
    Ok(out)
}

/// Parses a whole `QPB1` body: its flags and its items in wire order.
pub fn parse_push(body: &[u8]) -> Result<(u8, Vec<BinaryItem>), String> {
    let mut r = Reader::new(body);
    if r.take(4, "the magic")? != PUSH_MAGIC {
        return Err("a binary push must start with QPB1".into());
    }
    let flags = r.u8("the flags")?;
    let raw;
    let groups_body: &[u8] = if flags & FLAG_ZSTD != 0 {
        let _raw_len = r.u32("the raw length")?;
        raw = unzstd(r.rest())?;
        &raw
    } else {
        r.rest()
    };
    Ok((flags, parse_groups(groups_body, flags)?))
}

/// Parses the groups of a push body (also the tail of a `QTB1` body).
pub fn parse_groups(body: &[u8], flags: u8) -> Result<Vec<BinaryItem>, String> {
    let mut r = Reader::new(body);
    let groups = r.u32("the group count")?;
    let mut items = Vec::new();
    for _ in 0..groups {
        let queue = r.text16("a queue name")?;
        let partition = r.text16("a partition name")?;
        let n = r.u32("an item count")?;
        if flags & FLAG_FRAMED != 0 {
            let z_len = r.u32("a frame length")?;
            let frames = unzstd(r.take(z_len, "a zstd frame")?)?;
            read_frames(&frames, n, &queue, &partition, &mut items)?;
        } else {
            for _ in 0..n {
                let transaction_id =
                    if flags & FLAG_TXN_IDS != 0 { r.text16("a transaction id")? } else { String::new() };
                let len = r.u32("a payload length")?;
                let payload = r.take(len, "a payload")?.to_vec();
                items.push(BinaryItem {
                    queue: queue.clone(),
                    partition: partition.clone(),
                    transaction_id,
                    message_id: None,
                    payload,
                });
            }
        }
    }
    if !r.is_empty() {
        return Err("the binary body has bytes after its last group".into());
    }
    Ok(items)
}

fn read_frames(frames: &[u8], n: usize, queue: &str, partition: &str, out: &mut Vec<BinaryItem>) -> Result<(), String> {
    let mut r = Reader::new(frames);
    for _ in 0..n {
        let body_len = r.u32("a frame length")?;
        let mut f = Reader::new(r.take(body_len, "a frame")?);
        if f.u8("a frame flag")? != 0 {
            return Err("a stored frame has flags this broker does not accept".into());
        }
        let mut id = [0u8; 16];
        id.copy_from_slice(f.take(16, "a message id")?);
        let transaction_id = f.text16("a transaction id")?;
        out.push(BinaryItem {
            queue: queue.to_string(),
            partition: partition.to_string(),
            transaction_id,
            message_id: Some(id),
            payload: f.rest().to_vec(),
        });
    }
    if !r.is_empty() {
        return Err("a zstd frame holds more frames than its group counts".into());
    }
    Ok(())
}

/// Splits a `QTB1` body into its JSON head and its pushed items:
/// `"QTB1" | u8 flags | u32 len | head | groups as in QPB1 flag 8`.
pub fn parse_transaction(body: &[u8]) -> Result<(&[u8], Vec<BinaryItem>), String> {
    let mut r = Reader::new(body);
    if r.take(4, "the magic")? != TXN_MAGIC {
        return Err("a binary transaction must start with QTB1".into());
    }
    let flags = r.u8("the flags")?;
    if flags & !FLAG_COUNTS != 0 {
        return Err(format!("binary transaction flags {flags} are not supported"));
    }
    let head_len = r.u32("the head length")?;
    let head = r.take(head_len, "the JSON head")?;
    let items = parse_groups(r.rest(), FLAG_FRAMED)?;
    Ok((head, items))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(out: &mut Vec<u8>, s: &str) {
        out.extend_from_slice(&(s.len() as u16).to_le_bytes());
        out.extend_from_slice(s.as_bytes());
    }

    #[test]
    fn reads_plain_groups_with_transaction_ids() {
        let mut b = b"QPB1".to_vec();
        b.push(FLAG_TXN_IDS);
        b.extend_from_slice(&1u32.to_le_bytes());
        text(&mut b, "orders");
        text(&mut b, "p1");
        b.extend_from_slice(&2u32.to_le_bytes());
        for (t, p) in [("t1", "{\"a\":1}"), ("", "\"é\"")] {
            text(&mut b, t);
            b.extend_from_slice(&(p.len() as u32).to_le_bytes());
            b.extend_from_slice(p.as_bytes());
        }
        let (flags, items) = parse_push(&b).unwrap();
        assert_eq!(flags, FLAG_TXN_IDS);
        assert_eq!(items.len(), 2);
        assert_eq!((items[0].transaction_id.as_str(), items[0].payload.as_slice()), ("t1", &b"{\"a\":1}"[..]));
        assert_eq!(items[1].payload, "\"é\"".as_bytes());
    }

    #[test]
    fn reads_a_binary_transaction_with_framed_pushes() {
        let mut frames = Vec::new();
        for (t, p) in [("a", "1"), ("b", "{\"x\":2}")] {
            let mut body = vec![0u8];
            body.extend_from_slice(&[7u8; 16]);
            text(&mut body, t);
            body.extend_from_slice(p.as_bytes());
            frames.extend_from_slice(&(body.len() as u32).to_le_bytes());
            frames.extend_from_slice(&body);
        }
        let z = ruzstd::encoding::compress_to_vec(&frames[..], ruzstd::encoding::CompressionLevel::Fastest);
        let head = br#"{"operations":[],"requiredLeases":[]}"#;
        let mut b = b"QTB1".to_vec();
        b.push(0);
        b.extend_from_slice(&(head.len() as u32).to_le_bytes());
        b.extend_from_slice(head);
        b.extend_from_slice(&1u32.to_le_bytes());
        text(&mut b, "out");
        text(&mut b, "P");
        b.extend_from_slice(&2u32.to_le_bytes());
        b.extend_from_slice(&(z.len() as u32).to_le_bytes());
        b.extend_from_slice(&z);
        let (h, items) = parse_transaction(&b).unwrap();
        assert_eq!(h, head);
        assert_eq!(items.len(), 2);
        assert_eq!(items[1].payload, b"{\"x\":2}");
        assert_eq!(items[0].message_id, Some([7u8; 16]));
        assert!(parse_transaction(&b[..b.len() - 1]).is_err());
    }

    #[test]
    fn refuses_damage_without_panicking() {
        let mut b = b"QPB1".to_vec();
        b.push(FLAG_TXN_IDS);
        b.extend_from_slice(&1u32.to_le_bytes());
        text(&mut b, "orders");
        for cut in 0..b.len() {
            assert!(parse_push(&b[..cut]).is_err());
        }
        assert!(parse_push(b"QPB1\x01\x05\x00\x00\x00garbage").is_err());
        assert!(parse_push(b"XXXX").is_err());
    }
}
