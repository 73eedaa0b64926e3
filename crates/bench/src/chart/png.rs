//! A minimal PNG encoder: 8-bit RGB, filter 0 on every row, and a zlib
//! stream made of stored (uncompressed) deflate blocks. Stored blocks keep
//! the encoder small enough to check by eye and need no compression crate;
//! the price is size (width * height * 3 bytes plus a little framing).

const SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A];

/// Largest payload of one stored deflate block (its length field is 16 bits).
const MAX_STORED: usize = 65_535;

/// CRC-32 (ISO-HDLC, reflected polynomial 0xEDB88320) lookup table, built at
/// compile time so no run pays for it.
const CRC_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut n = 0;
    while n < 256 {
        let mut c = n as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { 0xEDB8_8320 ^ (c >> 1) } else { c >> 1 };
            k += 1;
        }
        table[n] = c;
        n += 1;
    }
    table
};

/// The CRC-32 PNG chunks carry.
pub fn crc32(data: &[u8]) -> u32 {
    !data.iter().fold(!0u32, |c, &b| CRC_TABLE[((c ^ b as u32) & 0xFF) as usize] ^ (c >> 8))
}

/// The Adler-32 checksum that ends a zlib stream.
pub fn adler32(data: &[u8]) -> u32 {
    const MOD: u32 = 65_521;
    // 5552 is the most bytes that can be summed before `b` could overflow
    // 32 bits, so the modulo runs once per chunk instead of once per byte.
    let (mut a, mut b) = (1u32, 0u32);
    for chunk in data.chunks(5552) {
        for &byte in chunk {
            a += byte as u32;
            b += a;
        }
        a %= MOD;
        b %= MOD;
    }
    (b << 16) | a
}

/// Wraps `data` in a zlib stream of stored deflate blocks.
pub fn zlib_stored(data: &[u8]) -> Vec<u8> {
    // CMF 0x78: deflate with a 32 KiB window. FLG 0x01: no preset
    // dictionary, "fastest" level, and 0x7801 is a multiple of 31 as the
    // header check requires.
    let mut out = Vec::with_capacity(data.len() + data.len() / MAX_STORED * 5 + 11);
    out.extend_from_slice(&[0x78, 0x01]);
    if data.is_empty() {
        // One final empty block: a stream must hold at least one.
        out.extend_from_slice(&[0x01, 0x00, 0x00, 0xFF, 0xFF]);
    }
    let mut blocks = data.chunks(MAX_STORED).peekable();
    while let Some(block) = blocks.next() {
        // Header bits: BFINAL, then BTYPE 00 (stored); the rest of the byte
        // is padding because stored data starts byte-aligned.
        out.push(u8::from(blocks.peek().is_none()));
        let len = block.len() as u16;
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(block);
    }
    out.extend_from_slice(&adler32(data).to_be_bytes());
    out
}

fn chunk(png: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    png.extend_from_slice(&(data.len() as u32).to_be_bytes());
    let start = png.len();
    png.extend_from_slice(kind);
    png.extend_from_slice(data);
    // The CRC covers the chunk type and data, not the length.
    let crc = crc32(&png[start..]);
    png.extend_from_slice(&crc.to_be_bytes());
}

/// Encodes `rgb` (rows top to bottom, three bytes a pixel) as a PNG file.
pub fn encode_rgb(width: u32, height: u32, rgb: &[u8]) -> Vec<u8> {
    assert!(width > 0 && height > 0, "a PNG needs at least one pixel");
    let row = width as usize * 3;
    assert_eq!(rgb.len(), row * height as usize, "pixel buffer does not match {width}x{height}");
    let mut raw = Vec::with_capacity((row + 1) * height as usize);
    for line in rgb.chunks(row) {
        raw.push(0); // filter type None
        raw.extend_from_slice(line);
    }
    let mut ihdr = Vec::with_capacity(13);
    ihdr.extend_from_slice(&width.to_be_bytes());
    ihdr.extend_from_slice(&height.to_be_bytes());
    // bit depth 8, colour type 2 (RGB), deflate, adaptive filtering, no interlace
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);

    let mut png = SIGNATURE.to_vec();
    chunk(&mut png, b"IHDR", &ihdr);
    // Charts are mostly flat colour: deflate shrinks them about a hundredfold.
    chunk(&mut png, b"IDAT", &miniz_oxide::deflate::compress_to_vec_zlib(&raw, 6));
    chunk(&mut png, b"IEND", &[]);
    png
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Splits a PNG into (type, data) chunks, checking every CRC.
    fn chunks(png: &[u8]) -> Vec<([u8; 4], Vec<u8>)> {
        assert_eq!(png[..8], SIGNATURE);
        let mut out = Vec::new();
        let mut at = 8;
        while at < png.len() {
            let len = u32::from_be_bytes(png[at..at + 4].try_into().unwrap()) as usize;
            let kind: [u8; 4] = png[at + 4..at + 8].try_into().unwrap();
            let data = png[at + 8..at + 8 + len].to_vec();
            let crc = u32::from_be_bytes(png[at + 8 + len..at + 12 + len].try_into().unwrap());
            assert_eq!(crc, crc32(&png[at + 4..at + 8 + len]), "CRC of {}", String::from_utf8_lossy(&kind));
            out.push((kind, data));
            at += 12 + len;
        }
        assert_eq!(at, png.len());
        out
    }

    /// Inflates a zlib stream that holds only stored blocks.
    fn inflate_stored(z: &[u8]) -> Vec<u8> {
        assert_eq!((z[0] as u16 * 256 + z[1] as u16) % 31, 0, "zlib header check");
        assert_eq!(z[0] & 0x0F, 8, "deflate");
        let mut out = Vec::new();
        let mut at = 2;
        loop {
            let header = z[at];
            assert_eq!(header >> 1 & 3, 0, "stored block");
            let len = u16::from_le_bytes([z[at + 1], z[at + 2]]);
            let nlen = u16::from_le_bytes([z[at + 3], z[at + 4]]);
            assert_eq!(len, !nlen);
            out.extend_from_slice(&z[at + 5..at + 5 + len as usize]);
            at += 5 + len as usize;
            if header & 1 == 1 {
                break;
            }
        }
        assert_eq!(z[at..], adler32(&out).to_be_bytes());
        out
    }

    #[test]
    fn checksums_match_known_values() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b"IEND"), 0xAE42_6082);
        assert_eq!(adler32(b"Wikipedia"), 0x11E6_0398);
        assert_eq!(adler32(b""), 1);
        // Long input exercises the chunked modulo.
        let long = vec![0xFFu8; 100_000];
        let (mut a, mut b) = (1u64, 0u64);
        for &x in &long {
            a = (a + x as u64) % 65_521;
            b = (b + a) % 65_521;
        }
        assert_eq!(adler32(&long) as u64, (b << 16) | a);
    }

    #[test]
    fn png_is_well_formed_and_inflates_to_the_pixels() {
        // 200 x 150 RGB is 90,150 bytes of scanlines: two stored blocks.
        let (w, h) = (200u32, 150u32);
        let rgb: Vec<u8> = (0..w * h * 3).map(|i| (i % 251) as u8).collect();
        let png = encode_rgb(w, h, &rgb);
        let chunks = chunks(&png);
        let kinds: Vec<&[u8; 4]> = chunks.iter().map(|(k, _)| k).collect();
        assert_eq!(kinds, [b"IHDR", b"IDAT", b"IEND"]);
        let ihdr = &chunks[0].1;
        assert_eq!(ihdr[..4], w.to_be_bytes());
        assert_eq!(ihdr[4..8], h.to_be_bytes());
        assert_eq!(ihdr[8..], [8, 2, 0, 0, 0]);
        assert!(chunks[2].1.is_empty());
        assert_eq!(png[png.len() - 12..], [0, 0, 0, 0, b'I', b'E', b'N', b'D', 0xAE, 0x42, 0x60, 0x82]);

        let raw = miniz_oxide::inflate::decompress_to_vec_zlib(&chunks[1].1).expect("IDAT inflates");
        let row = w as usize * 3;
        assert_eq!(raw.len(), (row + 1) * h as usize);
        for (y, line) in raw.chunks(row + 1).enumerate() {
            assert_eq!(line[0], 0, "filter byte of row {y}");
            assert_eq!(line[1..], rgb[y * row..(y + 1) * row]);
        }
    }

    #[test]
    fn empty_and_exact_block_sizes_round_trip() {
        for n in [0, 1, MAX_STORED, MAX_STORED + 1, 2 * MAX_STORED] {
            let data: Vec<u8> = (0..n).map(|i| (i * 7) as u8).collect();
            assert_eq!(inflate_stored(&zlib_stored(&data)), data, "{n} bytes");
        }
    }
}
