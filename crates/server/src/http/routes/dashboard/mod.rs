//! The web dashboard: a single-page app compiled into the binary
//! (`crates/server/dashboard/`, served at `/` and `/dashboard/...`), the
//! history it charts ([`history`]) and the read-only listings it needs that
//! no other route gives ([`listings`]). The page calls the ordinary API
//! routes for everything else, with the caller's token.

pub mod history;
mod listings;

use axum::extract::Path;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::http::codes;

/// The dashboard's routes.
pub fn routes(history: Option<std::sync::Arc<history::History>>) -> crate::http::Routes {
    let history_route = match history {
        Some(h) => get(history::history).layer(axum::Extension(h)),
        None => get(history::history),
    };
    crate::http::Routes::default()
        .route("/", get(index))
        .route("/dashboard/{*file}", get(asset))
        .route("/api/v1/dashboard/history", history_route)
        .route("/api/v1/resources/kv/namespaces", get(listings::kv_namespaces))
        .route("/api/v1/resources/kv/list", get(listings::kv_list))
        .route("/api/v1/resources/locks", get(listings::locks))
        .route("/api/v1/resources/timers", get(listings::timer_queues))
        .route("/api/v1/resources/jobs", get(listings::job_queues))
}

/// Whether `path` is one of the dashboard's static files: they hold no
/// data, so the door serves them without a token (the page then asks for
/// one before it calls the API). `/` itself follows the skip paths.
pub fn is_asset(path: &str) -> bool {
    path.strip_prefix("/dashboard/").is_some_and(|f| ASSETS.iter().any(|(name, _, _)| *name == f))
}

/// (file name under `/dashboard/`, content type, bytes).
const ASSETS: &[(&str, &str, &[u8])] = &[
    ("app.js", "text/javascript; charset=utf-8", include_bytes!("../../../../dashboard/app.js")),
    ("app.css", "text/css; charset=utf-8", include_bytes!("../../../../dashboard/app.css")),
    (
        "vendor/uPlot.iife.min.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../../../dashboard/vendor/uPlot.iife.min.js"),
    ),
    ("vendor/uPlot.min.css", "text/css; charset=utf-8", include_bytes!("../../../../dashboard/vendor/uPlot.min.css")),
    (
        "vendor/gridjs.umd.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../../../dashboard/vendor/gridjs.umd.js"),
    ),
    (
        "vendor/gridjs-mermaid.min.css",
        "text/css; charset=utf-8",
        include_bytes!("../../../../dashboard/vendor/gridjs-mermaid.min.css"),
    ),
];

const INDEX_HTML: &[u8] = include_bytes!("../../../../dashboard/index.html");

/// A strong validator of a file's bytes (FNV-1a 64), so a browser revalidates
/// cheaply and never keeps a file an upgraded binary replaced.
fn etag(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("\"{h:016x}-{}\"", bytes.len())
}

fn file(headers: &HeaderMap, content_type: &'static str, bytes: &'static [u8]) -> Response {
    let tag = etag(bytes);
    let cache = (header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == tag || t.trim() == "*"));
    let tag = HeaderValue::from_str(&tag).unwrap_or_else(|_| HeaderValue::from_static("\"0\""));
    if matches {
        return (StatusCode::NOT_MODIFIED, [cache, (header::ETAG, tag)]).into_response();
    }
    let headers = [
        (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
        cache,
        (header::ETAG, tag),
        (header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
    ];
    (headers, bytes).into_response()
}

/// `GET /`: the dashboard's page.
async fn index(headers: HeaderMap) -> Response {
    file(&headers, "text/html; charset=utf-8", INDEX_HTML)
}

/// `GET /dashboard/{file}`: one of its scripts, style sheets or vendored
/// libraries; 404 for any other name.
async fn asset(headers: HeaderMap, Path(name): Path<String>) -> Response {
    match ASSETS.iter().find(|(n, _, _)| *n == name) {
        Some((_, content_type, bytes)) => file(&headers, content_type, bytes),
        None => {
            let body = serde_json::json!({
                "code": codes::NO_SUCH_ROUTE.name,
                "error": format!("the dashboard has no file {name:?}"),
                "path": format!("/dashboard/{name}"),
            });
            (codes::NO_SUCH_ROUTE.status, axum::Json(body)).into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assets_are_known_by_name_only() {
        assert!(is_asset("/dashboard/app.js") && is_asset("/dashboard/vendor/uPlot.iife.min.js"));
        assert!(!is_asset("/dashboard/../x") && !is_asset("/dashboard/") && !is_asset("/api/v1/dashboard/history"));
        assert_ne!(etag(b"a"), etag(b"b"));
        for (_, _, bytes) in ASSETS {
            assert!(!bytes.is_empty());
        }
    }
}
