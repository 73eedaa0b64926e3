//! The OpenAPI document: it is OpenAPI 3.1, it describes exactly the
//! routes of the class table that the client port serves (every `Internal`
//! route is left out, since only the Raft address serves those), and the
//! node serves the checked-in document at `/api/v1/openapi.json`.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;

use std::collections::BTreeSet;

use serde_json::Value;

use regina_server::http::classes::{Class, ROUTE_CLASSES};
use regina_server::http::OPENAPI_JSON;
use support::client;
use support::paused::{self, PausedNode};

/// A route path as registered, in OpenAPI form: `{*key}` becomes `{key}`.
fn openapi_path(registered: &str) -> String {
    registered.replace("{*", "{")
}

/// The document as checked in, read from the source tree.
fn checked_in() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.json")).unwrap()
}

fn document() -> Value {
    serde_json::from_str(&checked_in()).expect("crates/server/openapi.json parses as JSON")
}

#[test]
fn the_document_is_openapi_3_1_and_names_every_client_route() {
    let doc = document();
    let version = doc["openapi"].as_str().expect("an `openapi` field");
    assert!(version.starts_with("3.1."), "openapi is {version:?}, not 3.1.x");
    assert!(doc["info"]["title"].is_string() && doc["info"]["version"].is_string());

    let methods = ["get", "put", "post", "delete", "patch", "head", "options", "trace"];
    let mut described = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().unwrap() {
            assert!(methods.contains(&method.as_str()), "{path} has {method:?}, which is not an HTTP method");
            assert!(operation["responses"].is_object(), "{method} {path} has no responses");
            described.insert((method.to_uppercase(), path.clone()));
        }
    }
    let routed: BTreeSet<(String, String)> = ROUTE_CLASSES
        .iter()
        .filter(|(_, _, class)| *class != Class::Internal)
        .map(|(method, path, _)| (method.to_string(), openapi_path(path)))
        .collect();
    let undescribed: Vec<_> = routed.difference(&described).collect();
    let unrouted: Vec<_> = described.difference(&routed).collect();
    assert!(undescribed.is_empty(), "routes the document does not describe: {undescribed:?}");
    assert!(unrouted.is_empty(), "the document describes routes the router does not serve: {unrouted:?}");
    // No internal route slipped in under another class.
    assert!(described.iter().all(|(_, p)| !p.starts_with("/internal/")));
}

#[test]
fn every_path_parameter_is_declared_and_every_reference_resolves() {
    let doc = document();
    for (path, item) in doc["paths"].as_object().unwrap() {
        let in_path: BTreeSet<String> =
            path.split('/').filter_map(|s| s.strip_prefix('{')?.strip_suffix('}')).map(String::from).collect();
        for (method, operation) in item.as_object().unwrap() {
            let declared: BTreeSet<String> = operation["parameters"]
                .as_array()
                .map(|ps| {
                    ps.iter().filter(|p| p["in"] == "path").map(|p| p["name"].as_str().unwrap().to_string()).collect()
                })
                .unwrap_or_default();
            assert_eq!(declared, in_path, "{method} {path}: path parameters declared vs in the path");
        }
    }
    // Every `$ref` names a schema of the document.
    fn refs(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(r)) = m.get("$ref") {
                    out.push(r.clone());
                }
                m.values().for_each(|x| refs(x, out));
            }
            Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
            _ => {}
        }
    }
    let mut all = Vec::new();
    refs(&doc, &mut all);
    assert!(!all.is_empty());
    for r in all {
        let name = r.strip_prefix("#/components/schemas/").unwrap_or_else(|| panic!("{r} is not a local schema"));
        assert!(doc["components"]["schemas"][name].is_object(), "{r} does not resolve");
    }
}

#[test]
fn the_node_serves_the_checked_in_document() {
    paused::run(async {
        let node = PausedNode::start().await;
        let resp = client().get(node.url("/api/v1/openapi.json")).send().await.unwrap();
        assert_eq!(resp.status(), 200);
        let ctype = resp.headers()["content-type"].to_str().unwrap().to_string();
        assert!(ctype.starts_with("application/json"), "content-type {ctype}");
        let served = resp.text().await.unwrap();
        assert!(served == checked_in(), "the served document differs from crates/server/openapi.json");
        assert_eq!(served, OPENAPI_JSON);
        // Only GET.
        let resp = client().post(node.url("/api/v1/openapi.json")).send().await.unwrap();
        assert_eq!(resp.status(), 405);
    });
}
