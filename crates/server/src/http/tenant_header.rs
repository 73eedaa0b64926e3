//! The tenant a request names.
//!
//! With tenancy on, the `x-queen-tenant` header names the tenant; without
//! it (or with tenancy off) the request acts for the default tenant. The
//! dispatcher reads it once into [`RequestTenant`]; the route layer runs
//! each handler inside `regina_node::tenant::scope`.

use regina_types::limits::TENANT_NAME_BYTES_MAX;

use crate::http::ApiError;

pub const TENANT_HEADER: &str = "x-queen-tenant";
/// [`TENANT_HEADER`] as a header name (looked up on every request).
pub const TENANT_NAME: axum::http::HeaderName = axum::http::HeaderName::from_static(TENANT_HEADER);

/// The tenant a request was found to act for, attached to it by the
/// dispatcher (`http::dispatch`), which reads the header once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestTenant(pub Option<String>);

/// The tenant a header value names: letters, digits, `.`, `_`, `-`, 1 to
/// [`TENANT_NAME_BYTES_MAX`] bytes. An empty value is the default tenant.
pub fn parse(value: Option<&[u8]>) -> Result<Option<String>, ApiError> {
    let Some(raw) = value.filter(|v| !v.is_empty()) else { return Ok(None) };
    let ok = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-');
    if raw.len() > TENANT_NAME_BYTES_MAX {
        return Err(ApiError::bad_request(format!(
            "{TENANT_HEADER} is {} bytes; at most {TENANT_NAME_BYTES_MAX}",
            raw.len()
        )));
    }
    if !raw.iter().all(ok) {
        return Err(ApiError::bad_request(format!("{TENANT_HEADER} may hold only letters, digits, '.', '_' and '-'")));
    }
    Ok(Some(String::from_utf8(raw.to_vec()).expect("ASCII")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenant_names() {
        assert_eq!(parse(None).unwrap(), None);
        assert_eq!(parse(Some(b"")).unwrap(), None);
        assert_eq!(parse(Some(b"acme-1.eu_west")).unwrap().as_deref(), Some("acme-1.eu_west"));
        assert!(parse(Some(b"a/b")).is_err());
        assert!(parse(Some(&[b'a'; TENANT_NAME_BYTES_MAX + 1])).is_err());
    }
}
