//! Errors as stable codes, mapped to HTTP status in one place. Every error
//! answer is JSON: `{"error": "<what was wrong>", "code": "<stable code>"}`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::node::ProposeError;

#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            code: "bad_request",
            message: message.into(),
        }
    }

    pub fn bad_body(message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            code: "bad_body",
            message: message.into(),
        }
    }

    pub fn too_large(message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            code: "too_large",
            message: message.into(),
        }
    }

    pub fn name_too_long(message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            code: "name_too_long",
            message: message.into(),
        }
    }

    pub fn not_found(code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::NOT_FOUND,
            code,
            message: message.into(),
        }
    }

    pub fn internal(message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            code: "internal",
            message: message.into(),
        }
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

impl From<ProposeError> for ApiError {
    fn from(e: ProposeError) -> Self {
        let code = match e {
            ProposeError::NoLeader => "no_leader",
            ProposeError::Storage(_) => "storage_failed",
            ProposeError::Unknown(_) => "outcome_unknown",
        };
        ApiError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            code,
            message: e.to_string(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({ "error": self.message, "code": self.code });
        let mut resp = (self.status, axum::Json(body)).into_response();
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            resp.headers_mut()
                .insert("retry-after", axum::http::HeaderValue::from_static("1"));
        }
        resp
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
