//! At-rest encryption of payloads for queues with `encryptionEnabled`.
//!
//! A payload is sealed at the HTTP edge, before it is proposed, so neither
//! the log nor the body files ever hold its plaintext; it is opened when a
//! message is read back. The state machine sees opaque bytes. A sealed
//! payload is marked by a leading zero byte, which no JSON text can start
//! with: `0x00 | "RENC" | 24-byte nonce | XChaCha20-Poly1305 ciphertext`.
//!
//! The key is 32 bytes read from a key file: `--encryption-key-file` (or
//! `REGINA_ENCRYPTION_KEY_FILE`), else `<data-dir>/encryption.key`, created
//! with fresh random bytes (mode 0600) on first start. Keep it somewhere
//! other than the data for the encryption to protect against a stolen disk.

use std::io::Write;
use std::path::Path;

use chacha20poly1305::aead::{Aead, AeadCore, KeyInit, OsRng};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};

const MARK: &[u8; 5] = b"\x00RENC";
const NONCE_BYTES: usize = 24;

pub struct Sealer {
    cipher: XChaCha20Poly1305,
}

impl Sealer {
    /// Loads the key file, creating it with a fresh key if it is absent.
    pub fn load_or_create(path: &Path) -> Result<Sealer, String> {
        let key = match std::fs::read(path) {
            Ok(k) => k,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => create_key(path)?,
            Err(e) => return Err(format!("cannot read the encryption key {}: {e}", path.display())),
        };
        if key.len() != 32 {
            return Err(format!("the encryption key {} must be exactly 32 bytes, not {}", path.display(), key.len()));
        }
        Ok(Sealer { cipher: XChaCha20Poly1305::new(key.as_slice().into()) })
    }

    pub fn seal(&self, plain: &[u8]) -> Vec<u8> {
        let nonce = XChaCha20Poly1305::generate_nonce(&mut OsRng);
        let ct = self.cipher.encrypt(&nonce, plain).expect("sealing in memory cannot fail");
        let mut out = Vec::with_capacity(MARK.len() + NONCE_BYTES + ct.len());
        out.extend_from_slice(MARK);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&ct);
        out
    }

    /// The plaintext of a payload: unsealed payloads pass through.
    pub fn open(&self, stored: Vec<u8>) -> Result<Vec<u8>, String> {
        if !stored.starts_with(MARK) {
            return Ok(stored);
        }
        let rest = &stored[MARK.len()..];
        if rest.len() < NONCE_BYTES {
            return Err("a sealed payload is truncated".into());
        }
        let (nonce, ct) = rest.split_at(NONCE_BYTES);
        self.cipher
            .decrypt(XNonce::from_slice(nonce), ct)
            .map_err(|_| "a sealed payload does not open with this node's key".to_string())
    }
}

/// Whether a stored payload is sealed (opened on read).
pub fn is_sealed(stored: &[u8]) -> bool {
    stored.starts_with(MARK)
}

fn create_key(path: &Path) -> Result<Vec<u8>, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let key = XChaCha20Poly1305::generate_key(&mut OsRng).to_vec();
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| format!("cannot create {}: {e}", tmp.display()))?;
    f.write_all(&key).and_then(|_| f.sync_all()).map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seals_opens_and_passes_plain_payloads_through() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("k");
        let s = Sealer::load_or_create(&key).unwrap();
        let sealed = s.seal(br#"{"card":"4242"}"#);
        assert!(!sealed.windows(4).any(|w| w == b"4242"), "the plaintext leaked");
        assert_eq!(s.open(sealed.clone()).unwrap(), br#"{"card":"4242"}"#);
        assert_eq!(s.open(b"{}".to_vec()).unwrap(), b"{}");
        // The same key file opens it after a restart; a different key does not.
        assert_eq!(Sealer::load_or_create(&key).unwrap().open(sealed.clone()).unwrap(), br#"{"card":"4242"}"#);
        let other = Sealer::load_or_create(&dir.path().join("other")).unwrap();
        assert!(other.open(sealed.clone()).is_err());
        let mut tampered = sealed;
        let last = tampered.len() - 1;
        tampered[last] ^= 1;
        assert!(s.open(tampered).is_err());
    }
}
