//! Verifying a JSON Web Token (RFC 7519) signed with HMAC (`HS256`,
//! `HS384`, `HS512`), RSA PKCS#1 v1.5 (`RS256`) or Ed25519 (`EdDSA`).
//!
//! A token is `header.claims.signature`, each base64url without padding.
//! The header's `alg` must be one of the algorithms the node was told to
//! accept, and the signature must verify with a configured key of that
//! algorithm (an RSA or Ed25519 key is never used as an HMAC secret, so a
//! token cannot pick its own verification). A `kid` in the header selects
//! among keys that carry one. The claims must then pass the time checks
//! (`exp` required, `nbf` when present, both with the leeway) and the
//! issuer and audience the node was told to expect.
//!
//! The crypto is `ring`'s; this file only parses and decides.

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use ring::signature::{RsaPublicKeyComponents, UnparsedPublicKey, ED25519, RSA_PKCS1_2048_8192_SHA256};
use serde::Deserialize;
use serde_json::{Map, Value};

/// An accepted signing algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alg {
    HS256,
    HS384,
    HS512,
    RS256,
    EdDSA,
}

impl Alg {
    pub fn parse(name: &str) -> Option<Alg> {
        Some(match name {
            "HS256" => Alg::HS256,
            "HS384" => Alg::HS384,
            "HS512" => Alg::HS512,
            "RS256" => Alg::RS256,
            "EdDSA" => Alg::EdDSA,
            _ => return None,
        })
    }

    pub const ALL: [Alg; 5] = [Alg::HS256, Alg::HS384, Alg::HS512, Alg::RS256, Alg::EdDSA];
}

/// One verification key.
pub enum Key {
    /// A shared secret, for the HMAC algorithms.
    Secret(Vec<u8>),
    /// An RSA public key: modulus and exponent, big-endian.
    Rsa { kid: Option<String>, n: Vec<u8>, e: Vec<u8> },
    /// An Ed25519 public key (32 bytes).
    Ed25519 { kid: Option<String>, public: Vec<u8> },
}

impl Key {
    fn kid(&self) -> Option<&str> {
        match self {
            Key::Secret(_) => None,
            Key::Rsa { kid, .. } | Key::Ed25519 { kid, .. } => kid.as_deref(),
        }
    }

    /// Whether this key verifies `sig` over `msg` under `alg`.
    fn verifies(&self, alg: Alg, msg: &[u8], sig: &[u8]) -> bool {
        match (self, alg) {
            (Key::Secret(secret), Alg::HS256 | Alg::HS384 | Alg::HS512) => {
                let algorithm = match alg {
                    Alg::HS256 => ring::hmac::HMAC_SHA256,
                    Alg::HS384 => ring::hmac::HMAC_SHA384,
                    _ => ring::hmac::HMAC_SHA512,
                };
                ring::hmac::verify(&ring::hmac::Key::new(algorithm, secret), msg, sig).is_ok()
            }
            (Key::Rsa { n, e, .. }, Alg::RS256) => {
                RsaPublicKeyComponents { n, e }.verify(&RSA_PKCS1_2048_8192_SHA256, msg, sig).is_ok()
            }
            (Key::Ed25519 { public, .. }, Alg::EdDSA) => {
                UnparsedPublicKey::new(&ED25519, public).verify(msg, sig).is_ok()
            }
            _ => false,
        }
    }
}

/// Why a token was refused; each maps to the 401 message clients see.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JwtError {
    Malformed,
    Algorithm,
    Signature,
    Expired,
    NotYetValid,
    MissingExpiry,
    Issuer,
    Audience,
}

impl JwtError {
    pub fn message(self) -> &'static str {
        match self {
            JwtError::Malformed => "Invalid token",
            JwtError::Algorithm => "Invalid token algorithm",
            JwtError::Signature => "Invalid token signature",
            JwtError::Expired => "Token has expired",
            JwtError::NotYetValid => "Token is not yet valid",
            JwtError::MissingExpiry => "Token has no expiry",
            JwtError::Issuer => "Invalid token issuer",
            JwtError::Audience => "Invalid token audience",
        }
    }
}

/// What a node accepts.
pub struct Verifier {
    pub algorithms: Vec<Alg>,
    pub keys: Vec<Key>,
    pub issuer: Option<String>,
    pub audience: Option<String>,
    /// Clock skew forgiven on `exp` and `nbf`, in seconds.
    pub leeway_s: u64,
}

#[derive(Deserialize)]
struct Header {
    alg: String,
    #[serde(default)]
    kid: Option<String>,
}

/// Whether `token` has the shape of a JWT (three dot-separated parts).
pub fn looks_like_jwt(token: &str) -> bool {
    token.bytes().filter(|b| *b == b'.').count() == 2
}

impl Verifier {
    /// The token's claims, once its signature, times, issuer and audience
    /// pass; `now_s` is the node's clock in Unix seconds.
    pub fn verify(&self, token: &str, now_s: u64) -> Result<Map<String, Value>, JwtError> {
        let mut parts = token.split('.');
        let (Some(h), Some(c), Some(s), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
            return Err(JwtError::Malformed);
        };
        let header: Header = decode_json(h)?;
        let alg = Alg::parse(&header.alg).filter(|a| self.algorithms.contains(a)).ok_or(JwtError::Algorithm)?;
        let sig = URL_SAFE_NO_PAD.decode(s).map_err(|_| JwtError::Malformed)?;
        let signed = &token.as_bytes()[..h.len() + 1 + c.len()];
        let verified = self
            .keys
            .iter()
            .filter(|k| match (header.kid.as_deref(), k.kid()) {
                (Some(want), Some(have)) => want == have,
                _ => true,
            })
            .any(|k| k.verifies(alg, signed, &sig));
        if !verified {
            return Err(JwtError::Signature);
        }
        let claims: Map<String, Value> = decode_json(c)?;
        self.check_claims(&claims, now_s)?;
        Ok(claims)
    }

    fn check_claims(&self, claims: &Map<String, Value>, now_s: u64) -> Result<(), JwtError> {
        let time = |name: &str| match claims.get(name) {
            None => Ok(None),
            Some(v) => v.as_f64().map(|t| Some(t.floor() as i64)).ok_or(JwtError::Malformed),
        };
        let now = now_s as i64;
        let leeway = self.leeway_s as i64;
        match time("exp")? {
            None => return Err(JwtError::MissingExpiry),
            Some(exp) if now > exp.saturating_add(leeway) => return Err(JwtError::Expired),
            Some(_) => {}
        }
        if let Some(nbf) = time("nbf")? {
            if now.saturating_add(leeway) < nbf {
                return Err(JwtError::NotYetValid);
            }
        }
        if let Some(want) = &self.issuer {
            if claims.get("iss").and_then(Value::as_str) != Some(want) {
                return Err(JwtError::Issuer);
            }
        }
        if let Some(want) = &self.audience {
            let ok = match claims.get("aud") {
                Some(Value::String(a)) => a == want,
                Some(Value::Array(list)) => list.iter().any(|a| a.as_str() == Some(want)),
                _ => false,
            };
            if !ok {
                return Err(JwtError::Audience);
            }
        }
        Ok(())
    }
}

fn decode_json<T: serde::de::DeserializeOwned>(part: &str) -> Result<T, JwtError> {
    let bytes = URL_SAFE_NO_PAD.decode(part).map_err(|_| JwtError::Malformed)?;
    serde_json::from_slice(&bytes).map_err(|_| JwtError::Malformed)
}

/// The keys of a PEM text: `PUBLIC KEY` blocks (RSA or Ed25519) and
/// `RSA PUBLIC KEY` blocks (PKCS#1).
pub fn keys_from_pem(text: &str) -> Result<Vec<Key>, String> {
    let mut keys = Vec::new();
    let mut lines = text.lines().map(str::trim);
    while let Some(line) = lines.next() {
        let Some(label) = line.strip_prefix("-----BEGIN ").and_then(|l| l.strip_suffix("-----")) else { continue };
        let end = format!("-----END {label}-----");
        let body: String = lines.by_ref().take_while(|l| *l != end).collect();
        let der = STANDARD.decode(body).map_err(|e| format!("a {label} block is not base64: {e}"))?;
        keys.push(match label {
            "PUBLIC KEY" => key_from_spki(&der)?,
            "RSA PUBLIC KEY" => rsa_from_pkcs1(&der, None)?,
            other => return Err(format!("a {other} block is not a public key")),
        });
    }
    if keys.is_empty() {
        return Err("no PUBLIC KEY block found".into());
    }
    Ok(keys)
}

/// The keys of a JWKS document: `RSA` keys (`n`, `e`) and `OKP` keys of
/// curve `Ed25519` (`x`); keys marked for encryption are skipped.
pub fn keys_from_jwks(text: &str) -> Result<Vec<Key>, String> {
    let doc: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let list = doc["keys"].as_array().ok_or("no \"keys\" array")?;
    let mut keys = Vec::new();
    for (i, k) in list.iter().enumerate() {
        if k["use"].as_str().is_some_and(|u| u != "sig") {
            continue;
        }
        let kid = k["kid"].as_str().map(str::to_string);
        let field = |name: &str| -> Result<Vec<u8>, String> {
            let v = k[name].as_str().ok_or(format!("key {i}: no \"{name}\""))?;
            URL_SAFE_NO_PAD.decode(v.trim_end_matches('=')).map_err(|e| format!("key {i}: \"{name}\": {e}"))
        };
        match (k["kty"].as_str(), k["crv"].as_str()) {
            (Some("RSA"), _) => keys.push(Key::Rsa { kid, n: strip_zeros(field("n")?), e: strip_zeros(field("e")?) }),
            (Some("OKP"), Some("Ed25519")) => {
                let public = field("x")?;
                if public.len() != 32 {
                    return Err(format!("key {i}: an Ed25519 key is 32 bytes, not {}", public.len()));
                }
                keys.push(Key::Ed25519 { kid, public });
            }
            (kty, _) => return Err(format!("key {i}: kty {kty:?} is not RSA or OKP/Ed25519")),
        }
    }
    if keys.is_empty() {
        return Err("no signing key in the set".into());
    }
    Ok(keys)
}

const OID_RSA: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
const OID_ED25519: &[u8] = &[0x2b, 0x65, 0x70];

/// A SubjectPublicKeyInfo: `SEQUENCE { SEQUENCE { OID, params }, BIT STRING }`.
fn key_from_spki(der: &[u8]) -> Result<Key, String> {
    let bad = || "the PUBLIC KEY block is not a SubjectPublicKeyInfo".to_string();
    let (spki, _) = der_take(der, 0x30).ok_or_else(bad)?;
    let (algo, rest) = der_take(spki, 0x30).ok_or_else(bad)?;
    let (oid, _) = der_take(algo, 0x06).ok_or_else(bad)?;
    let (bits, _) = der_take(rest, 0x03).ok_or_else(bad)?;
    let key = bits.strip_prefix(&[0u8]).ok_or_else(bad)?;
    match oid {
        OID_RSA => rsa_from_pkcs1(key, None),
        OID_ED25519 if key.len() == 32 => Ok(Key::Ed25519 { kid: None, public: key.to_vec() }),
        _ => Err("the PUBLIC KEY is neither RSA nor Ed25519".into()),
    }
}

/// An RSAPublicKey: `SEQUENCE { INTEGER n, INTEGER e }`.
fn rsa_from_pkcs1(der: &[u8], kid: Option<String>) -> Result<Key, String> {
    let bad = || "not an RSA public key".to_string();
    let (seq, _) = der_take(der, 0x30).ok_or_else(bad)?;
    let (n, rest) = der_take(seq, 0x02).ok_or_else(bad)?;
    let (e, _) = der_take(rest, 0x02).ok_or_else(bad)?;
    Ok(Key::Rsa { kid, n: strip_zeros(n.to_vec()), e: strip_zeros(e.to_vec()) })
}

/// One DER element of tag `tag` at the front of `b`: its content and what
/// follows it.
fn der_take(b: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    if *b.first()? != tag {
        return None;
    }
    let first = *b.get(1)? as usize;
    let (len, at) = if first < 0x80 {
        (first, 2)
    } else {
        let n = first & 0x7f;
        if n == 0 || n > 4 {
            return None;
        }
        let len = b.get(2..2 + n)?.iter().fold(0usize, |acc, x| (acc << 8) | *x as usize);
        (len, 2 + n)
    };
    let content = b.get(at..at.checked_add(len)?)?;
    Some((content, &b[at + len..]))
}

fn strip_zeros(mut v: Vec<u8>) -> Vec<u8> {
    let zeros = v.iter().take_while(|b| **b == 0).count();
    v.drain(..zeros.min(v.len().saturating_sub(1)));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(v: &[u8]) -> String {
        URL_SAFE_NO_PAD.encode(v)
    }

    fn hs256(claims: &Value, secret: &[u8]) -> String {
        let head = b64(br#"{"alg":"HS256","typ":"JWT"}"#);
        let body = b64(claims.to_string().as_bytes());
        let msg = format!("{head}.{body}");
        let tag = ring::hmac::sign(&ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret), msg.as_bytes());
        format!("{msg}.{}", b64(tag.as_ref()))
    }

    fn verifier() -> Verifier {
        Verifier {
            algorithms: vec![Alg::HS256],
            keys: vec![Key::Secret(b"s3cret".to_vec())],
            issuer: None,
            audience: None,
            leeway_s: 30,
        }
    }

    #[test]
    fn hmac_tokens_and_their_times() {
        let v = verifier();
        let now = 1_000_000;
        let ok = hs256(&serde_json::json!({ "sub": "a", "exp": now + 10 }), b"s3cret");
        assert_eq!(v.verify(&ok, now).unwrap()["sub"], "a");
        assert_eq!(v.verify(&ok, now + 41), Err(JwtError::Expired), "past exp and the leeway");
        assert!(v.verify(&ok, now + 40).is_ok(), "inside the leeway");
        let wrong = hs256(&serde_json::json!({ "exp": now + 10 }), b"other");
        assert_eq!(v.verify(&wrong, now), Err(JwtError::Signature));
        let early = hs256(&serde_json::json!({ "exp": now + 100, "nbf": now + 31 }), b"s3cret");
        assert_eq!(v.verify(&early, now), Err(JwtError::NotYetValid));
        let no_exp = hs256(&serde_json::json!({ "sub": "a" }), b"s3cret");
        assert_eq!(v.verify(&no_exp, now), Err(JwtError::MissingExpiry));
        assert_eq!(v.verify("a.b", now), Err(JwtError::Malformed));
        assert_eq!(v.verify("a.b.c.d", now), Err(JwtError::Malformed));
        let mut tampered = ok.clone();
        tampered.insert(ok.find('.').unwrap() + 2, 'x');
        assert!(v.verify(&tampered, now).is_err());
    }

    #[test]
    fn only_configured_algorithms_and_claims_pass() {
        let now = 1_000_000;
        let claims = serde_json::json!({ "exp": now + 10, "iss": "me", "aud": ["x", "y"] });
        let token = hs256(&claims, b"s3cret");
        let v = Verifier { algorithms: vec![Alg::HS512], ..verifier() };
        assert_eq!(v.verify(&token, now), Err(JwtError::Algorithm));
        // "none" is never an algorithm.
        let none = format!("{}.{}.", b64(br#"{"alg":"none"}"#), b64(claims.to_string().as_bytes()));
        assert_eq!(verifier().verify(&none, now), Err(JwtError::Algorithm));
        let v = Verifier { issuer: Some("me".into()), audience: Some("y".into()), ..verifier() };
        assert!(v.verify(&token, now).is_ok());
        let v = Verifier { issuer: Some("you".into()), ..verifier() };
        assert_eq!(v.verify(&token, now), Err(JwtError::Issuer));
        let v = Verifier { audience: Some("z".into()), ..verifier() };
        assert_eq!(v.verify(&token, now), Err(JwtError::Audience));
    }

    #[test]
    fn der_lengths() {
        assert_eq!(der_take(&[0x02, 0x01, 0x05, 0xff], 0x02), Some((&[0x05u8][..], &[0xffu8][..])));
        assert_eq!(der_take(&[0x02, 0x05, 0x05], 0x02), None, "short");
        assert_eq!(der_take(&[0x30, 0x81, 0x01, 0x07], 0x30), Some((&[0x07u8][..], &[][..])));
        assert_eq!(strip_zeros(vec![0, 0, 1, 0]), vec![1, 0]);
        assert_eq!(strip_zeros(vec![0]), vec![0]);
    }
}
