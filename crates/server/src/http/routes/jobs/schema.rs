//! JSON Schema checks of job payloads and results. A queue stores its
//! schemas as text; compiled validators are kept by that text, so a busy
//! queue compiles its schema once. References are not fetched: a schema
//! that needs the network or the disk does not compile.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

/// Compiled schemas kept at most; past it the cache starts afresh.
const CACHED_SCHEMAS_MAX: usize = 256;

type Cache = Mutex<HashMap<String, Arc<jsonschema::Validator>>>;

fn cache() -> &'static Cache {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// Compiles a schema's text, or says why it cannot be used.
pub fn compile(text: &str) -> Result<Arc<jsonschema::Validator>, String> {
    if let Some(v) = cache().lock().get(text) {
        return Ok(v.clone());
    }
    let schema: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let validator = Arc::new(jsonschema::validator_for(&schema).map_err(|e| e.to_string())?);
    let mut c = cache().lock();
    if c.len() >= CACHED_SCHEMAS_MAX {
        c.clear();
    }
    c.insert(text.to_string(), validator.clone());
    Ok(validator)
}

/// Checks a JSON text against a schema's text: `Err` says the first way it
/// does not conform.
pub fn check(schema: &str, json_text: &[u8]) -> Result<(), String> {
    let validator = compile(schema)?;
    let value: serde_json::Value = serde_json::from_slice(json_text).map_err(|e| e.to_string())?;
    let first = validator.iter_errors(&value).next().map(|e| format!("{e} (at {})", e.instance_path()));
    match first {
        None => Ok(()),
        Some(e) => Err(e),
    }
}
