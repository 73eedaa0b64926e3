//! The `regina` binary: read the configuration, serve until SIGTERM or
//! Ctrl-C, then shut down cleanly; or, when the first argument names one
//! of its commands, the operator CLI (`regina_server::cli`).

use regina_server::config::{Config, USAGE};

// mimalloc, not glibc malloc: a request allocates and frees many small
// buffers across threads, where glibc's arenas and consolidation cost more
// than a quarter of a pushed message's instructions (docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // A first argument naming a command (`push`, `queues`, `cluster`, ...)
    // runs the operator CLI; anything else (flags) starts the server.
    if regina_server::cli::wants_cli(&args) {
        std::process::exit(regina_server::cli::main(&args));
    }
    let config = match Config::from_args_and_env(args, |k| std::env::var(k).ok()) {
        Ok(Some(c)) => c,
        Ok(None) => {
            print!("{USAGE}");
            return;
        }
        Err(e) => {
            eprintln!("regina: {e}");
            std::process::exit(2);
        }
    };
    init_logs(|k| std::env::var(k).ok());
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let result = runtime.block_on(async move {
        let addr = std::net::SocketAddr::new(config.bind, config.port);
        let listener =
            tokio::net::TcpListener::bind(addr).await.map_err(|e| format!("cannot listen on {addr}: {e}"))?;
        let raft_listener = match config.internal_addr() {
            Some(raft) => {
                Some(tokio::net::TcpListener::bind(raft).await.map_err(|e| format!("cannot listen on {raft}: {e}"))?)
            }
            None => None,
        };
        let auth = regina_server::doors::auth::Auth::from_settings(&config.auth)?;
        let tls = match (&config.tls_cert_file, &config.tls_key_file) {
            (Some(cert), Some(key)) => Some(std::sync::Arc::new(regina_server::doors::tls::Tls::open(cert, key)?)),
            _ => None,
        };
        let tls_ca = match &config.tls_ca_file {
            Some(path) => Some(std::fs::read(path).map_err(|e| format!("--tls-ca-file {}: {e}", path.display()))?),
            None => None,
        };
        tokio::spawn(reload_on_hangup(auth.clone(), tls.clone()));
        let doors = regina_server::DoorOptions {
            tenancy: config.tenancy,
            auth,
            tls: tls.clone(),
            rate_limit: config.rate_limit,
            rate_burst: config.rate_burst,
        };
        let options = regina_server::NodeOptions {
            encryption_key_file: config.encryption_key_file.clone(),
            fsync: config.fsync,
            node_id: config.node_id,
            raft_addr: config.raft_addr.map(|a| a.to_string()),
            peers: config.peers.clone(),
            raft_groups: config.raft_groups,
            tenant_groups: config.tenant_groups.clone(),
            cluster_token: config.cluster_token.as_ref().map(|t| t.0.clone()),
            internal_port: raft_listener.is_some(),
            peer_tls: tls.is_some(),
            tls_ca,
            max_queued_proposals: config.max_queued_proposals,
            max_long_polls: config.max_long_polls,
            recent_body_bytes: config.recent_body_bytes,
            disk_high_pct: config.disk_high_pct,
            disk_low_pct: config.disk_low_pct,
            clock: regina_node::clock::system(),
        };
        regina_server::serve_with_raft(listener, raft_listener, &config.data_dir, options, doors, shutdown_signal())
            .await
    });
    if let Err(e) = result {
        eprintln!("regina: {e}");
        std::process::exit(1);
    }
}

/// SIGHUP reads the API key file and the TLS certificate and key again; a
/// file that does not load keeps what is in force.
async fn reload_on_hangup(
    auth: Option<std::sync::Arc<regina_server::doors::auth::Auth>>,
    tls: Option<std::sync::Arc<regina_server::doors::tls::Tls>>,
) {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut hup) = signal(SignalKind::hangup()) else { return };
    while hup.recv().await.is_some() {
        match auth.as_ref().and_then(|a| a.reload_keys()) {
            Some(Ok(n)) => tracing::info!("SIGHUP: {n} API keys in force"),
            Some(Err(e)) => tracing::error!("SIGHUP: the API key file was not reloaded, the previous keys stay: {e}"),
            None => {}
        }
        match tls.as_ref().map(|t| t.reload()) {
            Some(Ok(())) => tracing::info!("SIGHUP: the TLS certificate and key were read again"),
            Some(Err(e)) => {
                tracing::error!("SIGHUP: the TLS certificate was not reloaded, the previous one stays: {e}")
            }
            None => {}
        }
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("a SIGTERM handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    tracing::info!("shutting down");
}

/// Logs to stderr, filtered by `REGINA_LOG`, else Queen's `RUST_LOG`, else
/// `LOG_LEVEL`; one JSON object per line when `QUEEN_LOG_JSON` (or
/// `REGINA_LOG_JSON`) is `true` or `on`.
fn init_logs(env: impl Fn(&str) -> Option<String>) {
    let filter = ["REGINA_LOG", "RUST_LOG", "LOG_LEVEL"]
        .iter()
        .find_map(|k| env(k).filter(|v| !v.trim().is_empty()))
        .unwrap_or_else(|| "info,openraft=warn".into());
    let filter = tracing_subscriber::EnvFilter::try_new(&filter).unwrap_or_else(|e| {
        eprintln!("regina: log filter {filter:?} is not valid ({e}); using info");
        tracing_subscriber::EnvFilter::new("info,openraft=warn")
    });
    let json = ["REGINA_LOG_JSON", "QUEEN_LOG_JSON"]
        .iter()
        .find_map(|k| env(k))
        .is_some_and(|v| matches!(v.trim(), "true" | "on" | "1"));
    let logs = tracing_subscriber::fmt().with_env_filter(filter);
    if json {
        logs.json().with_current_span(false).init();
    } else {
        logs.init();
    }
}
