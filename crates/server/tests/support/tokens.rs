//! Minting bearer tokens for the tests: HS256/384/512 with a secret, RS256
//! with the RSA key in `tests/fixtures`, EdDSA with a key made per test.
#![allow(dead_code)]

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use ring::rand::SystemRandom;
use ring::signature::{Ed25519KeyPair, KeyPair, RsaKeyPair};
use serde_json::{json, Value};

pub const SECRET: &str = "test-secret-for-hs-tokens";

pub fn now_s() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64
}

/// Claims of a token for `sub` with `role`, valid for an hour.
pub fn claims(sub: &str, role: &str) -> Value {
    json!({ "sub": sub, "username": sub, "role": role, "iat": now_s(), "exp": now_s() + 3600 })
}

pub enum Signer<'a> {
    Hmac(&'a str, &'a [u8]),
    Rsa(&'a RsaKeyPair),
    Ed(&'a Ed25519KeyPair, Option<&'a str>),
}

pub fn sign(signer: &Signer, claims: &Value) -> String {
    let header = match signer {
        Signer::Hmac(alg, _) => json!({ "alg": alg, "typ": "JWT" }),
        Signer::Rsa(_) => json!({ "alg": "RS256", "typ": "JWT" }),
        Signer::Ed(_, kid) => json!({ "alg": "EdDSA", "typ": "JWT", "kid": kid }),
    };
    let msg = format!("{}.{}", URL_SAFE_NO_PAD.encode(header.to_string()), URL_SAFE_NO_PAD.encode(claims.to_string()));
    let sig = match signer {
        Signer::Hmac(alg, secret) => {
            let a = match *alg {
                "HS256" => ring::hmac::HMAC_SHA256,
                "HS384" => ring::hmac::HMAC_SHA384,
                _ => ring::hmac::HMAC_SHA512,
            };
            ring::hmac::sign(&ring::hmac::Key::new(a, secret), msg.as_bytes()).as_ref().to_vec()
        }
        Signer::Rsa(key) => {
            let mut sig = vec![0u8; key.public().modulus_len()];
            key.sign(&ring::signature::RSA_PKCS1_SHA256, &SystemRandom::new(), msg.as_bytes(), &mut sig).unwrap();
            sig
        }
        Signer::Ed(key, _) => key.sign(msg.as_bytes()).as_ref().to_vec(),
    };
    format!("{msg}.{}", URL_SAFE_NO_PAD.encode(sig))
}

/// An HS256 token signed with [`SECRET`].
pub fn hs256(claims: &Value) -> String {
    sign(&Signer::Hmac("HS256", SECRET.as_bytes()), claims)
}

/// A token for `sub` with `role`.
pub fn token(sub: &str, role: &str) -> String {
    hs256(&claims(sub, role))
}

fn pem_der(text: &str) -> Vec<u8> {
    let body: String = text.lines().filter(|l| !l.starts_with("-----")).collect();
    STANDARD.decode(body).unwrap()
}

pub fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

pub fn rsa_key(name: &str) -> RsaKeyPair {
    RsaKeyPair::from_pkcs8(&pem_der(&fixture(name))).unwrap()
}

pub fn ed25519_key() -> Ed25519KeyPair {
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).unwrap();
    Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap()
}

/// A JWKS document holding `key` under `kid`.
pub fn ed25519_jwks(key: &Ed25519KeyPair, kid: &str) -> String {
    json!({ "keys": [{ "kty": "OKP", "crv": "Ed25519", "kid": kid, "use": "sig",
                       "x": URL_SAFE_NO_PAD.encode(key.public_key().as_ref()) }] })
    .to_string()
}

/// `key`'s public half as a PEM SubjectPublicKeyInfo.
pub fn ed25519_pem(key: &Ed25519KeyPair) -> String {
    let mut der = vec![0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00];
    der.extend_from_slice(key.public_key().as_ref());
    format!("-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n", STANDARD.encode(der))
}
