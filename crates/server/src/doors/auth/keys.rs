//! Static API keys, for services that do not mint JWTs.
//!
//! A key file (`--api-keys-file`, JSON) lists keys by the SHA-256 of their
//! secret, never the secret itself, each with its roles and tenants:
//!
//! ```json
//! {"keys": [{"name": "billing", "sha256": "<64 hex digits>", "role": "write-only",
//!            "tenant": "acme"}]}
//! ```
//!
//! (`roles` may list several; `tenants` limits the key to a list; `sub`
//! names the producer stamped on its pushes, by default `key:<name>`.) A
//! caller presents the secret as its bearer token. The file is read at start
//! and again on SIGHUP; a file that does not parse keeps the keys in force
//! and says why in the log.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::RwLock;
use serde::Deserialize;

use super::{Principal, Role};

/// The keys in force, by the SHA-256 of their secret.
#[derive(Default)]
pub struct ApiKeys {
    by_hash: HashMap<[u8; 32], Arc<Principal>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyFile {
    keys: Vec<KeyEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyEntry {
    name: String,
    sha256: String,
    #[serde(default)]
    role: Option<String>,
    #[serde(default)]
    roles: Vec<String>,
    #[serde(default)]
    tenant: Option<String>,
    #[serde(default)]
    tenants: Option<Vec<String>>,
    #[serde(default)]
    sub: Option<String>,
}

/// The SHA-256 of a presented secret.
pub fn digest(secret: &[u8]) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, secret);
    d.as_ref().try_into().expect("SHA-256 is 32 bytes")
}

impl ApiKeys {
    /// Parses a key file's text.
    pub fn parse(text: &str) -> Result<ApiKeys, String> {
        let file: KeyFile = serde_json::from_str(text).map_err(|e| format!("not a key file: {e}"))?;
        let mut by_hash = HashMap::new();
        for (i, k) in file.keys.into_iter().enumerate() {
            let what = format!("key {i} ({:?})", k.name);
            let hash = hex32(&k.sha256).ok_or(format!("{what}: sha256 must be 64 hex digits"))?;
            let names: Vec<&String> = k.role.iter().chain(k.roles.iter()).collect();
            let roles = names
                .iter()
                .map(|r| Role::parse(r).ok_or(format!("{what}: {r:?} is not a role")))
                .collect::<Result<Vec<_>, _>>()?;
            if roles.is_empty() {
                return Err(format!("{what}: no role"));
            }
            let tenant_name = |t: &String| match crate::http::tenant_header::parse(Some(t.as_bytes())) {
                Ok(Some(t)) => Ok(t),
                _ => Err(format!("{what}: {t:?} is not a tenant name")),
            };
            let tenant = k.tenant.as_ref().map(tenant_name).transpose()?;
            let tenants =
                k.tenants.as_ref().map(|l| l.iter().map(tenant_name).collect::<Result<Vec<_>, _>>()).transpose()?;
            let subject = Some(k.sub.unwrap_or_else(|| format!("key:{}", k.name)));
            let principal = Principal { subject, roles, tenant, tenants };
            if by_hash.insert(hash, Arc::new(principal)).is_some() {
                return Err(format!("{what}: the same key is listed twice"));
            }
        }
        Ok(ApiKeys { by_hash })
    }

    pub fn len(&self) -> usize {
        self.by_hash.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_hash.is_empty()
    }

    /// The principal of a presented secret. The lookup is by its digest,
    /// so its time says nothing about the secrets themselves.
    pub fn find(&self, secret: &str) -> Option<Arc<Principal>> {
        self.by_hash.get(&digest(secret.as_bytes())).cloned()
    }
}

fn hex32(s: &str) -> Option<[u8; 32]> {
    let s = s.trim();
    if s.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// A key file and the keys read from it last.
pub struct KeyFileSource {
    pub path: PathBuf,
    current: RwLock<Arc<ApiKeys>>,
}

impl KeyFileSource {
    pub fn open(path: &Path) -> Result<KeyFileSource, String> {
        let keys = read(path)?;
        Ok(KeyFileSource { path: path.to_path_buf(), current: RwLock::new(Arc::new(keys)) })
    }

    pub fn current(&self) -> Arc<ApiKeys> {
        self.current.read().clone()
    }

    /// Reads the file again; on an error the keys in force stay.
    pub fn reload(&self) -> Result<usize, String> {
        let keys = read(&self.path)?;
        let n = keys.len();
        *self.current.write() = Arc::new(keys);
        Ok(n)
    }
}

fn read(path: &Path) -> Result<ApiKeys, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    ApiKeys::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    #[test]
    fn keys_by_digest_with_roles_and_tenants() {
        let text = format!(
            r#"{{"keys": [{{"name": "billing", "sha256": "{}", "role": "write-only", "tenant": "acme"}},
                        {{"name": "ops", "sha256": "{}", "roles": ["read-only", "admin"], "sub": "ops-team"}}]}}"#,
            hex(&digest(b"k-billing")),
            hex(&digest(b"k-ops"))
        );
        let keys = ApiKeys::parse(&text).unwrap();
        let b = keys.find("k-billing").unwrap();
        assert_eq!(
            (b.subject.as_deref(), &b.roles[..], b.tenant.as_deref()),
            (Some("key:billing"), &[Role::WriteOnly][..], Some("acme"))
        );
        assert_eq!(keys.find("k-ops").unwrap().subject.as_deref(), Some("ops-team"));
        assert!(keys.find("k-other").is_none());
        let bad = |t: &str| ApiKeys::parse(t).is_err();
        assert!(bad(r#"{"keys": [{"name": "x", "sha256": "00", "role": "admin"}]}"#));
        assert!(bad(&format!(r#"{{"keys": [{{"name": "x", "sha256": "{}"}}]}}"#, hex(&[0; 32]))), "no role");
        assert!(bad(&format!(r#"{{"keys": [{{"name": "x", "sha256": "{}", "role": "root"}}]}}"#, hex(&[0; 32]))));
        assert!(bad(r#"{"keys": [{"name": "x", "secret": "plain"}]}"#), "secrets are never stored");
    }
}
