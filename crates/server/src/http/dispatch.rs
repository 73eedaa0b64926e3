//! Which Raft group's router a request goes to.
//!
//! [`dispatch`] reads the request's tenant (once, for every later layer:
//! the `x-queen-tenant` header, or the caller's token) and picks the
//! group's router: by the `/internal/g/{group}/...` prefix for Raft
//! messages between nodes, by the tenant's placement for client routes.
//! `/api/v1/cluster...`, `/api/v1/system/raft/...` and `/health` are
//! group 0's (they report on every group); a backup path names its group.

use std::sync::Arc;

use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use axum::Router;
use regina_node::raft_groups::Placement;
use tower::ServiceExt;

/// Paths of the backup routes, which name their group.
const BACKUP_PREFIX: &str = "/api/v1/system/backup/";

/// Routes each request to its group's router.
pub async fn dispatch(routers: Arc<Vec<Router>>, tenancy: bool, placement: &Placement, mut req: Request) -> Response {
    // First of all: a request no route could read is refused.
    if let Some(refused) = crate::http::input::unreadable(&req) {
        return refused;
    }
    let groups = routers.len() as u16;
    let path = req.uri().path();
    let internal = path == "/health" || path.starts_with("/internal/");
    // A backup path names its group, and reads every tenant of it.
    let backup_group = path.strip_prefix(BACKUP_PREFIX).map(|rest| rest.split('/').next().unwrap_or(""));
    let tenant = match tenancy && !internal && backup_group.is_none() {
        true => match crate::http::tenant_header::parse(
            req.headers().get(crate::http::tenant_header::TENANT_NAME).map(|v| v.as_bytes()),
        ) {
            Ok(t) => match req.extensions().get::<crate::doors::auth::Authn>() {
                // With tokens, the token decides (see `Principal::tenant_for`).
                Some(crate::doors::auth::Authn::Principal(p)) => match p.tenant_for(t) {
                    Ok(t) => t,
                    Err(refused) => return refused.into_response(),
                },
                _ => t,
            },
            Err(e) => return e.into_response(),
        },
        false => None,
    };
    let group = if let Some(rest) = path.strip_prefix("/internal/g/") {
        let (g, tail) = rest.split_once('/').unwrap_or((rest, ""));
        let Some(g) = g.parse::<u16>().ok().filter(|g| *g < groups) else {
            return crate::http::ApiError::new(crate::http::codes::NO_SUCH_GROUP, format!("no Raft group {g:?} here"))
                .into_response();
        };
        let pq = match req.uri().query() {
            Some(q) => format!("/internal/{tail}?{q}"),
            None => format!("/internal/{tail}"),
        };
        if let Ok(uri) = pq.parse() {
            *req.uri_mut() = uri;
        }
        g
    } else if let Some(g) = backup_group {
        // A group that does not exist goes to group 0, whose router checks
        // the caller's token first and then refuses the group.
        g.parse::<u16>().ok().filter(|g| *g < groups).unwrap_or(0)
    } else if internal || path.starts_with("/api/v1/cluster") || path.starts_with("/api/v1/system/raft") {
        0
    } else {
        let group = placement.group_of(tenant.as_deref());
        // A request another node forwarded names the group it placed it
        // in; nodes placing tenants differently would split a tenant.
        let placed = req.headers().get(crate::http::forward::GROUP_NAME).and_then(|v| v.to_str().ok());
        if req.headers().contains_key(crate::http::forward::FORWARDED_NAME)
            && placed.is_some_and(|p| p != group.to_string())
        {
            let why = format!(
                "the forwarding node placed this request in group {}, this node in group {group}: \
                 every node must run with the same --raft-groups and --tenant-groups",
                placed.unwrap_or("?")
            );
            return crate::http::ApiError::new(crate::http::codes::PLACEMENT_DIFFERS, why).into_response();
        }
        group
    };
    req.extensions_mut().insert(crate::http::tenant_header::RequestTenant(tenant));
    match routers[group as usize].clone().oneshot(req).await {
        Ok(resp) => resp,
        Err(never) => match never {},
    }
}
