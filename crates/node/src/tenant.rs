//! Which tenant a request acts for.
//!
//! The HTTP layer finds a request's tenant (a header, or the caller's
//! token) and runs each handler inside [`scope`], so the node wraps every
//! command the handler proposes for that tenant and reads that tenant's
//! state, without any handler knowing tenants exist. Work outside a
//! request (timers, sweeps) runs for every tenant at once.

use std::future::Future;

tokio::task_local! {
    static TENANT: Option<String>;
}

/// The tenant of the request being handled on this task; `None` for the
/// default tenant and outside requests.
pub fn current() -> Option<String> {
    TENANT.try_with(Clone::clone).ok().flatten()
}

/// Runs `fut` as work of `tenant`.
pub async fn scope<F: Future>(tenant: Option<String>, fut: F) -> F::Output {
    TENANT.scope(tenant, fut).await
}
