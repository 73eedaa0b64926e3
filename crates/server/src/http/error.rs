//! Errors as stable codes, mapped to HTTP status in one place. Every error
//! answer is JSON: `{"error": "<what was wrong>", "code": "<stable code>"}`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use regina_node::ProposeError;

#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError { status: StatusCode::BAD_REQUEST, code: "bad_request", message: message.into() }
    }

    pub fn bad_body(message: impl Into<String>) -> Self {
        ApiError { status: StatusCode::BAD_REQUEST, code: "bad_body", message: message.into() }
    }

    pub fn too_large(message: impl Into<String>) -> Self {
        ApiError { status: StatusCode::PAYLOAD_TOO_LARGE, code: "too_large", message: message.into() }
    }

    pub fn name_too_long(message: impl Into<String>) -> Self {
        ApiError { status: StatusCode::PAYLOAD_TOO_LARGE, code: "name_too_long", message: message.into() }
    }

    pub fn not_found(code: &'static str, message: impl Into<String>) -> Self {
        ApiError { status: StatusCode::NOT_FOUND, code, message: message.into() }
    }

    /// 429 `overloaded` (with `Retry-After`): refused to protect the node;
    /// nothing was done.
    pub fn overloaded(message: impl Into<String>) -> Self {
        ApiError { status: StatusCode::TOO_MANY_REQUESTS, code: "overloaded", message: message.into() }
    }

    pub fn internal(message: impl Into<String>) -> Self {
        ApiError { status: StatusCode::INTERNAL_SERVER_ERROR, code: "internal", message: message.into() }
    }

    /// A name failed its rules: too long is 413, anything else 400.
    pub fn from_name(e: regina_types::NameError) -> Self {
        if e.is_too_long() {
            Self::name_too_long(e.to_string())
        } else {
            Self::bad_request(e.to_string())
        }
    }
}

/// The status and code a refused proposal answers with, on every route.
pub(crate) fn propose_refusal(e: &ProposeError) -> (StatusCode, &'static str) {
    match e {
        ProposeError::NoLeader => (StatusCode::SERVICE_UNAVAILABLE, "no_leader"),
        ProposeError::NoQuorum(_) => (StatusCode::SERVICE_UNAVAILABLE, "no_quorum"),
        ProposeError::Storage(_) => (StatusCode::SERVICE_UNAVAILABLE, "storage_failed"),
        ProposeError::Unknown(_) => (StatusCode::SERVICE_UNAVAILABLE, "outcome_unknown"),
        ProposeError::Overloaded(_) => (StatusCode::TOO_MANY_REQUESTS, "overloaded"),
        ProposeError::StorageFull(_) => (StatusCode::INSUFFICIENT_STORAGE, "storage_full"),
    }
}

impl From<ProposeError> for ApiError {
    fn from(e: ProposeError) -> Self {
        let (status, code) = propose_refusal(&e);
        ApiError { status, code, message: e.to_string() }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({ "error": self.message, "code": self.code });
        let mut resp = (self.status, axum::Json(body)).into_response();
        if self.status == StatusCode::SERVICE_UNAVAILABLE || self.status == StatusCode::TOO_MANY_REQUESTS {
            resp.headers_mut().insert("retry-after", axum::http::HeaderValue::from_static("1"));
        }
        resp
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

/// A refusal of the KV and locks routes, in their envelope:
/// `{"error": "<code>", "reason": "<stable id>", "detail": "<prose>"}`.
/// Clients branch on `error` and `reason`; `detail` is for people.
#[derive(Debug, Clone)]
pub struct KvError {
    pub status: StatusCode,
    pub code: &'static str,
    pub reason: &'static str,
    pub detail: String,
}

impl KvError {
    /// 400 `kv_bad_request`.
    pub fn bad(reason: &'static str, detail: impl Into<String>) -> Self {
        KvError { status: StatusCode::BAD_REQUEST, code: "kv_bad_request", reason, detail: detail.into() }
    }

    /// 413 `payload_too_large`.
    pub fn too_large(reason: &'static str, detail: impl Into<String>) -> Self {
        KvError { status: StatusCode::PAYLOAD_TOO_LARGE, code: "payload_too_large", reason, detail: detail.into() }
    }

    /// 400 `locks_bad_request`.
    pub fn locks(reason: &'static str, detail: impl Into<String>) -> Self {
        KvError { status: StatusCode::BAD_REQUEST, code: "locks_bad_request", reason, detail: detail.into() }
    }

    /// 503 `<code>`: the write was not, or may not have been, applied.
    pub fn unavailable(code: &'static str, e: ProposeError) -> Self {
        let (status, reason) = propose_refusal(&e);
        KvError { status, code, reason, detail: e.to_string() }
    }

    /// The same refusal worded as the transaction route words its errors
    /// (`{"error": prose, "code": code}`), keeping `reason`: a client shows
    /// `error` to people, so there it says what was wrong.
    pub fn in_transaction(self) -> Response {
        let body = json!({ "error": self.detail, "code": self.code, "reason": self.reason });
        (self.status, axum::Json(body)).into_response()
    }
}

impl IntoResponse for KvError {
    fn into_response(self) -> Response {
        let body = json!({ "error": self.code, "reason": self.reason, "detail": self.detail });
        let mut resp = (self.status, axum::Json(body)).into_response();
        if self.status == StatusCode::SERVICE_UNAVAILABLE || self.status == StatusCode::TOO_MANY_REQUESTS {
            resp.headers_mut().insert("retry-after", axum::http::HeaderValue::from_static("1"));
        }
        resp
    }
}
