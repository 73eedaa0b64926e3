//! Errors as stable codes from the one table (`codes.rs`), which also gives
//! their status. Every error answer is JSON: `{"error": "<what was wrong>",
//! "code": "<stable code>", "field"?: "<the field or parameter>"}`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use regina_node::ProposeError;

use super::codes::{self, Code};

#[derive(Debug, Clone)]
pub struct ApiError {
    pub code: &'static Code,
    pub message: String,
    /// The field or parameter that was wrong, where one was (`items[0].partition`).
    pub field: Option<String>,
}

impl ApiError {
    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(codes::BAD_REQUEST, message)
    }

    pub fn bad_body(message: impl Into<String>) -> Self {
        ApiError::new(codes::BAD_BODY, message)
    }

    pub fn too_large(message: impl Into<String>) -> Self {
        ApiError::new(codes::TOO_LARGE, message)
    }

    pub fn name_too_long(message: impl Into<String>) -> Self {
        ApiError::new(codes::NAME_TOO_LONG, message)
    }

    pub fn new(code: &'static Code, message: impl Into<String>) -> Self {
        ApiError { code, message: message.into(), field: None }
    }

    /// The same refusal, naming the field or parameter it is about.
    pub fn at_field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    pub fn status(&self) -> StatusCode {
        self.code.status
    }

    /// 429 `overloaded` (with `Retry-After`): refused to protect the node;
    /// nothing was done.
    pub fn overloaded(message: impl Into<String>) -> Self {
        ApiError::new(codes::OVERLOADED, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        ApiError::new(codes::INTERNAL, message)
    }

    /// A name failed its rules: too long is 413, anything else 400; the
    /// answer names the field the name came in.
    pub fn from_name(e: regina_types::NameError) -> Self {
        let refusal =
            if e.is_too_long() { Self::name_too_long(e.to_string()) } else { Self::bad_request(e.to_string()) };
        refusal.at_field(e.field())
    }
}

/// The code a refused proposal answers with, on every route.
pub(crate) fn propose_refusal(e: &ProposeError) -> &'static Code {
    match e {
        ProposeError::NoLeader => codes::NO_LEADER,
        ProposeError::NoQuorum(_) => codes::NO_QUORUM,
        ProposeError::Storage(_) => codes::STORAGE_FAILED,
        ProposeError::Unknown(_) => codes::OUTCOME_UNKNOWN,
        ProposeError::Overloaded(_) => codes::OVERLOADED,
        ProposeError::StorageFull(_) => codes::STORAGE_FULL,
    }
}

impl From<ProposeError> for ApiError {
    fn from(e: ProposeError) -> Self {
        ApiError::new(propose_refusal(&e), e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let mut body = json!({ "error": self.message, "code": self.code.name });
        if let Some(field) = self.field {
            body["field"] = json!(field);
        }
        let mut resp = (status, axum::Json(body)).into_response();
        if status == StatusCode::SERVICE_UNAVAILABLE || status == StatusCode::TOO_MANY_REQUESTS {
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
    /// The code's own status, or the refused proposal's (`unavailable`).
    pub status: StatusCode,
    pub code: &'static Code,
    pub reason: &'static str,
    pub detail: String,
}

impl KvError {
    /// 400 `kv_bad_request`.
    pub fn bad(reason: &'static str, detail: impl Into<String>) -> Self {
        KvError::new(codes::KV_BAD_REQUEST, reason, detail)
    }

    /// 413 `payload_too_large`.
    pub fn too_large(reason: &'static str, detail: impl Into<String>) -> Self {
        KvError::new(codes::PAYLOAD_TOO_LARGE, reason, detail)
    }

    /// 400 `locks_bad_request`.
    pub fn locks(reason: &'static str, detail: impl Into<String>) -> Self {
        KvError::new(codes::LOCKS_BAD_REQUEST, reason, detail)
    }

    pub fn new(code: &'static Code, reason: &'static str, detail: impl Into<String>) -> Self {
        KvError { status: code.status, code, reason, detail: detail.into() }
    }

    /// `<code>` (`kv_unavailable`, `locks_unavailable`): the write was not,
    /// or may not have been, applied; the status and `reason` are the
    /// refused proposal's.
    pub fn unavailable(code: &'static Code, e: ProposeError) -> Self {
        let refusal = propose_refusal(&e);
        KvError { status: refusal.status, code, reason: refusal.name, detail: e.to_string() }
    }

    /// The same refusal worded as the transaction route words its errors
    /// (`{"error": prose, "code": code}`), keeping `reason`: a client shows
    /// `error` to people, so there it says what was wrong.
    pub fn in_transaction(self) -> Response {
        let body = json!({ "error": self.detail, "code": self.code.name, "reason": self.reason });
        (self.status, axum::Json(body)).into_response()
    }
}

impl IntoResponse for KvError {
    fn into_response(self) -> Response {
        let body = json!({ "error": self.code.name, "reason": self.reason, "detail": self.detail });
        let mut resp = (self.status, axum::Json(body)).into_response();
        if self.status == StatusCode::SERVICE_UNAVAILABLE || self.status == StatusCode::TOO_MANY_REQUESTS {
            resp.headers_mut().insert("retry-after", axum::http::HeaderValue::from_static("1"));
        }
        resp
    }
}
