//! A state decoded from a reader, every length inside it checked against
//! the bytes the reader has left.
//!
//! bincode's reader path allocates a string's announced length before it
//! reads it, so a damaged length (a flipped byte in a snapshot whose
//! checksum is known only at its end) could ask for exabytes. bincode's
//! own bound, `with_limit`, is counted on every field read, not only on
//! lengths. Here only the lengths are checked, each against
//! [`BytesLeft::bytes_left`], which a snapshot stream knows without
//! counting per field; the fields themselves read straight through.
//! Decoding a 10 M-partition snapshot from memory took 2.7-3.0 s of CPU
//! with bincode's bound and 2.1-2.4 s with this one (docs/benchmarks.md,
//! item 29).

use std::io::{self, Read};

use bincode::{BincodeRead, ErrorKind};
use serde::de::Visitor;

/// A reader that knows how many bytes it has left to give.
pub trait BytesLeft: Read {
    fn bytes_left(&self) -> u64;
}

impl BytesLeft for &[u8] {
    fn bytes_left(&self) -> u64 {
        self.len() as u64
    }
}

/// bincode's byte source over a [`BytesLeft`] reader: strings and byte
/// strings longer than what is left are refused before anything is
/// allocated for them.
pub(crate) struct LengthChecked<'r, R> {
    reader: &'r mut R,
    /// Where strings are read before they are handed to the decoder
    /// (it copies them into their own allocations).
    scratch: Vec<u8>,
}

impl<'r, R: BytesLeft> LengthChecked<'r, R> {
    pub(crate) fn new(reader: &'r mut R) -> Self {
        LengthChecked { reader, scratch: Vec::new() }
    }

    fn check(&self, length: usize) -> bincode::Result<()> {
        let left = self.reader.bytes_left();
        if length as u64 > left {
            return Err(Box::new(ErrorKind::Custom(format!(
                "a length of {length} bytes runs past the state's end ({left} bytes left)"
            ))));
        }
        Ok(())
    }

    fn fill_scratch(&mut self, length: usize) -> bincode::Result<()> {
        self.check(length)?;
        self.scratch.resize(length, 0);
        self.reader.read_exact(&mut self.scratch).map_err(|e| Box::new(ErrorKind::Io(e)))
    }
}

impl<R: BytesLeft> Read for LengthChecked<'_, R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        self.reader.read(out)
    }

    /// Every fixed-size field is read here: kept inlined, one call into
    /// the reader's own (inlined) fast path.
    #[inline]
    fn read_exact(&mut self, out: &mut [u8]) -> io::Result<()> {
        self.reader.read_exact(out)
    }
}

impl<'de, R: BytesLeft> BincodeRead<'de> for LengthChecked<'_, R> {
    fn forward_read_str<V: Visitor<'de>>(&mut self, length: usize, visitor: V) -> bincode::Result<V::Value> {
        self.fill_scratch(length)?;
        let text = std::str::from_utf8(&self.scratch).map_err(|e| Box::new(ErrorKind::InvalidUtf8Encoding(e)))?;
        visitor.visit_str(text)
    }

    fn get_byte_buffer(&mut self, length: usize) -> bincode::Result<Vec<u8>> {
        self.check(length)?;
        let mut buffer = vec![0u8; length];
        self.reader.read_exact(&mut buffer).map_err(|e| Box::new(ErrorKind::Io(e)))?;
        Ok(buffer)
    }

    fn forward_read_bytes<V: Visitor<'de>>(&mut self, length: usize, visitor: V) -> bincode::Result<V::Value> {
        self.fill_scratch(length)?;
        visitor.visit_bytes(&self.scratch)
    }
}
