//! The authentication settings, named the Queen way.
//!
//! Each has a flag, a `REGINA_*` variable and, where Queen has one, Queen's
//! own variable (`JWT_*`), so a Queen deployment's environment works
//! unchanged. Flags win over `REGINA_*`, which wins over `JWT_*`. Secrets
//! (the HMAC secret, an inline public key) have no flag, so that they never
//! show in a process list: give them in the environment or in a file.

use std::collections::BTreeMap;

use super::jwt::{self, Alg, Key, Verifier};

/// One setting: its flag (`None`: environment only), its `REGINA_*`
/// variable (also its key) and Queen's variable.
pub struct Setting {
    pub flag: Option<&'static str>,
    pub env: &'static str,
    pub queen: Option<&'static str>,
    pub help: &'static str,
}

const fn s(flag: Option<&'static str>, env: &'static str, queen: Option<&'static str>, help: &'static str) -> Setting {
    Setting { flag, env, queen, help }
}

pub const DEFAULT_SKIP_PATHS: &str = "/health,/metrics/prometheus,/metrics,/";

pub const SETTINGS: &[Setting] = &[
    s(Some("--jwt-enabled"), "REGINA_JWT_ENABLED", Some("JWT_ENABLED"), "on|off: require a bearer token (default off)"),
    s(
        Some("--jwt-algorithm"),
        "REGINA_JWT_ALGORITHM",
        Some("JWT_ALGORITHM"),
        "HS256, HS384, HS512, RS256, EdDSA, a comma list, or auto (every algorithm a key is given for; default)",
    ),
    s(None, "REGINA_JWT_SECRET", Some("JWT_SECRET"), "the HMAC secret (environment only)"),
    s(Some("--jwt-secret-file"), "REGINA_JWT_SECRET_FILE", None, "the HMAC secret, the file's first line"),
    s(None, "REGINA_JWT_PUBLIC_KEY", Some("JWT_PUBLIC_KEY"), "PEM public key(s), RSA or Ed25519 (environment only)"),
    s(
        Some("--jwt-public-key-file"),
        "REGINA_JWT_PUBLIC_KEY_FILE",
        Some("JWT_PUBLIC_KEY_FILE"),
        "a PEM file of public keys",
    ),
    s(
        Some("--jwt-jwks-file"),
        "REGINA_JWT_JWKS_FILE",
        Some("JWT_JWKS_FILE"),
        "a JWKS file (RSA and Ed25519 keys, by kid)",
    ),
    s(Some("--jwt-issuer"), "REGINA_JWT_ISSUER", Some("JWT_ISSUER"), "the iss every token must carry"),
    s(Some("--jwt-audience"), "REGINA_JWT_AUDIENCE", Some("JWT_AUDIENCE"), "an aud every token must carry"),
    s(
        Some("--jwt-leeway"),
        "REGINA_JWT_LEEWAY",
        Some("JWT_CLOCK_SKEW"),
        "seconds of clock skew forgiven on exp and nbf (default 30)",
    ),
    s(Some("--jwt-skip-paths"), "REGINA_JWT_SKIP_PATHS", Some("JWT_SKIP_PATHS"), "paths served without a token"),
    s(
        Some("--jwt-roles-claim"),
        "REGINA_JWT_ROLES_CLAIM",
        Some("JWT_ROLES_CLAIM"),
        "the claim holding the role (default role)",
    ),
    s(
        Some("--jwt-roles-array-claim"),
        "REGINA_JWT_ROLES_ARRAY_CLAIM",
        Some("JWT_ROLES_ARRAY_CLAIM"),
        "the claim holding a list of roles (default roles)",
    ),
    s(
        Some("--jwt-tenant-claim"),
        "REGINA_JWT_TENANT_CLAIM",
        None,
        "the claim naming the token's tenant (default tenant)",
    ),
    s(
        Some("--jwt-tenants-claim"),
        "REGINA_JWT_TENANTS_CLAIM",
        None,
        "the claim listing the tenants a token may act for (default tenants)",
    ),
    s(
        Some("--api-keys-file"),
        "REGINA_API_KEYS_FILE",
        None,
        "static API keys (hashed, with roles and tenants), read again on SIGHUP",
    ),
];

/// The raw values given, by `REGINA_*` name. Compared in config tests;
/// never printed (they hold secrets).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct AuthSettings {
    values: BTreeMap<&'static str, String>,
}

impl std::fmt::Debug for AuthSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.values.keys()).finish()
    }
}

impl AuthSettings {
    /// Reads Queen's variables, then Regina's over them.
    pub fn from_env(env: &impl Fn(&str) -> Option<String>) -> Result<AuthSettings, String> {
        if env("JWT_JWKS_URL").is_some() || env("REGINA_JWT_JWKS_URL").is_some() {
            return Err("JWT_JWKS_URL: a node does not fetch keys over the network to start; save the key set \
                        to a file and name it in JWT_JWKS_FILE (or --jwt-jwks-file)"
                .into());
        }
        let mut out = AuthSettings::default();
        for setting in SETTINGS {
            if let Some(v) = setting.queen.and_then(env) {
                out.values.insert(setting.env, v);
            }
            if let Some(v) = env(setting.env) {
                out.values.insert(setting.env, v);
            }
        }
        Ok(out)
    }

    /// The setting a flag names, if it is one of these.
    pub fn flag(flag: &str) -> Option<&'static Setting> {
        SETTINGS.iter().find(|s| s.flag == Some(flag))
    }

    pub fn set(&mut self, setting: &'static Setting, value: String) {
        self.values.insert(setting.env, value);
    }

    pub fn get(&self, env: &str) -> Option<&str> {
        self.values.get(env).map(String::as_str)
    }

    /// Whether tokens are checked: `JWT_ENABLED`, or a key file given.
    pub fn enabled(&self) -> Result<bool, String> {
        Ok(self.jwt_enabled()? || self.get("REGINA_API_KEYS_FILE").is_some())
    }

    pub fn jwt_enabled(&self) -> Result<bool, String> {
        match self.get("REGINA_JWT_ENABLED") {
            None => Ok(false),
            Some(v) => parse_bool(v).ok_or(format!("JWT_ENABLED: {v:?} is not true/false, 1/0, yes/no or on/off")),
        }
    }

    pub fn skip_paths(&self) -> Vec<String> {
        let raw = self.get("REGINA_JWT_SKIP_PATHS").unwrap_or(DEFAULT_SKIP_PATHS);
        raw.split(',').map(str::trim).filter(|p| !p.is_empty()).map(str::to_string).collect()
    }

    /// The verifier these settings describe (`None` when JWT is off): its
    /// keys read (from files too) and checked now, so a mistake stops the
    /// start instead of refusing every request later.
    pub fn verifier(&self) -> Result<Option<Verifier>, String> {
        if !self.jwt_enabled()? {
            return Ok(None);
        }
        let mut keys = Vec::new();
        let secret = match (self.get("REGINA_JWT_SECRET_FILE"), self.get("REGINA_JWT_SECRET")) {
            (Some(path), _) => Some(first_line(path, "--jwt-secret-file")?),
            (None, Some(s)) => Some(s.to_string()),
            (None, None) => None,
        };
        if let Some(secret) = secret {
            if secret.is_empty() {
                return Err("JWT_SECRET is empty".into());
            }
            keys.push(Key::Secret(secret.into_bytes()));
        }
        if let Some(pem) = self.get("REGINA_JWT_PUBLIC_KEY") {
            keys.extend(jwt::keys_from_pem(pem).map_err(|e| format!("JWT_PUBLIC_KEY: {e}"))?);
        }
        if let Some(path) = self.get("REGINA_JWT_PUBLIC_KEY_FILE") {
            let text = read(path, "--jwt-public-key-file")?;
            keys.extend(jwt::keys_from_pem(&text).map_err(|e| format!("--jwt-public-key-file {path}: {e}"))?);
        }
        if let Some(path) = self.get("REGINA_JWT_JWKS_FILE") {
            let text = read(path, "--jwt-jwks-file")?;
            keys.extend(jwt::keys_from_jwks(&text).map_err(|e| format!("--jwt-jwks-file {path}: {e}"))?);
        }
        if keys.is_empty() {
            return Err("JWT_ENABLED is on but no key is given: set JWT_SECRET (HS256/384/512), or a public key \
                        or JWKS file (RS256, EdDSA)"
                .into());
        }
        let algorithms = self.algorithms(&keys)?;
        let leeway_s = match self.get("REGINA_JWT_LEEWAY") {
            None => 30,
            Some(v) => v.trim().parse().map_err(|_| format!("JWT_CLOCK_SKEW: {v:?} is not a count of seconds"))?,
        };
        let text = |k: &str| self.get(k).map(str::to_string).filter(|v| !v.is_empty());
        Ok(Some(Verifier {
            algorithms,
            keys,
            issuer: text("REGINA_JWT_ISSUER"),
            audience: text("REGINA_JWT_AUDIENCE"),
            leeway_s,
        }))
    }

    /// The algorithms accepted: those named, each of which must have a key
    /// of its kind, or (`auto`, the default) every one a key is given for.
    fn algorithms(&self, keys: &[Key]) -> Result<Vec<Alg>, String> {
        let has = |alg: Alg| {
            keys.iter().any(|k| match k {
                Key::Secret(_) => matches!(alg, Alg::HS256 | Alg::HS384 | Alg::HS512),
                Key::Rsa { .. } => alg == Alg::RS256,
                Key::Ed25519 { .. } => alg == Alg::EdDSA,
            })
        };
        let named = self.get("REGINA_JWT_ALGORITHM").unwrap_or("auto").trim();
        if named.eq_ignore_ascii_case("auto") {
            return Ok(Alg::ALL.into_iter().filter(|a| has(*a)).collect());
        }
        let mut out = Vec::new();
        for name in named.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let alg = Alg::parse(name)
                .ok_or(format!("JWT_ALGORITHM: {name:?} is not HS256, HS384, HS512, RS256, EdDSA or auto"))?;
            if !has(alg) {
                return Err(format!("JWT_ALGORITHM names {name} but no key of its kind is given"));
            }
            out.push(alg);
        }
        if out.is_empty() {
            return Err("JWT_ALGORITHM names no algorithm".into());
        }
        Ok(out)
    }
}

/// Queen's booleans: true/false, 1/0, yes/no, on/off.
pub fn parse_bool(v: &str) -> Option<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Some(true),
        "false" | "0" | "no" | "off" => Some(false),
        _ => None,
    }
}

fn read(path: &str, what: &str) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{what}: cannot read {path}: {e}"))
}

fn first_line(path: &str, what: &str) -> Result<String, String> {
    Ok(read(path, what)?.lines().next().unwrap_or("").trim_end_matches('\r').to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(env: &[(&str, &str)]) -> Result<AuthSettings, String> {
        AuthSettings::from_env(&|k: &str| env.iter().find(|(ek, _)| *ek == k).map(|(_, v)| v.to_string()))
    }

    #[test]
    fn queen_names_and_regina_names() {
        let s = settings(&[("JWT_ENABLED", "true"), ("JWT_SECRET", "a"), ("REGINA_JWT_SECRET", "b")]).unwrap();
        assert!(s.enabled().unwrap());
        assert_eq!(s.get("REGINA_JWT_SECRET"), Some("b"), "Regina's name wins");
        assert!(!settings(&[]).unwrap().enabled().unwrap());
        assert!(settings(&[("JWT_ENABLED", "maybe")]).unwrap().enabled().is_err());
        assert!(settings(&[("JWT_JWKS_URL", "https://x")]).is_err());
        assert_eq!(settings(&[]).unwrap().skip_paths(), vec!["/health", "/metrics/prometheus", "/metrics", "/"]);
        assert!(settings(&[("JWT_SKIP_PATHS", "")]).unwrap().skip_paths().is_empty());
        assert!(format!("{:?}", s).contains("REGINA_JWT_SECRET") && !format!("{:?}", s).contains("\"b\""));
    }

    #[test]
    fn keys_and_algorithms_are_checked_at_start() {
        let on = ("JWT_ENABLED", "on");
        let v = settings(&[on, ("JWT_SECRET", "k")]).unwrap().verifier().unwrap().unwrap();
        assert_eq!(v.algorithms, vec![Alg::HS256, Alg::HS384, Alg::HS512]);
        assert_eq!(v.leeway_s, 30);
        let v = settings(&[on, ("JWT_SECRET", "k"), ("JWT_ALGORITHM", "HS512"), ("JWT_CLOCK_SKEW", "0")]).unwrap();
        assert_eq!(v.verifier().unwrap().unwrap().algorithms, vec![Alg::HS512]);
        assert!(settings(&[("JWT_SECRET", "k")]).unwrap().verifier().unwrap().is_none(), "JWT off");
        assert!(settings(&[on]).unwrap().verifier().is_err(), "no key");
        assert!(settings(&[on, ("JWT_SECRET", "k"), ("JWT_ALGORITHM", "RS256")]).unwrap().verifier().is_err());
        assert!(settings(&[on, ("JWT_SECRET", "k"), ("JWT_ALGORITHM", "ES256")]).unwrap().verifier().is_err());
        assert!(settings(&[on, ("JWT_PUBLIC_KEY", "not pem")]).unwrap().verifier().is_err());
    }
}
