//! The operator's command line: `regina COMMAND ...` against a running
//! node, over the HTTP API through the SDK (`regina-client`) only.
//!
//! One file per family of commands; this one holds the arguments every
//! command takes, the dispatch, the exit codes and the table printer.
//! `regina cluster ...` keeps its own argument reading ([`cluster`]).
//!
//! Exit codes ([`EXIT_OK`] ...): 0 done; 1 the server refused or the thing
//! named is not there; 2 bad usage; 3 the server could not be reached;
//! 4 `tail --timeout-ms` ran out before `--count` messages came.

/// `println!` that ends the process quietly when stdout is gone (a
/// closed pipe: `regina export q | head`) instead of panicking.
macro_rules! say {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        if writeln!(std::io::stdout(), $($t)*).is_err() {
            std::process::exit($crate::cli::EXIT_OK);
        }
    }};
}

mod backup;
pub mod cluster;
mod dlq;
mod jobs;
mod kv;
mod moves;
mod push;
mod queues;
mod tail;
mod timers;

use clap::{CommandFactory, Parser, Subcommand};
use serde_json::Value;

pub use cluster::{run, DEFAULT_URL};

/// Done.
pub const EXIT_OK: i32 = 0;
/// The server refused, or what was named does not exist.
pub const EXIT_REFUSED: i32 = 1;
/// The command line (or its input) is not usable.
pub const EXIT_USAGE: i32 = 2;
/// No answer: the server could not be reached, or the request broke off.
pub const EXIT_UNREACHABLE: i32 = 3;
/// `tail --timeout-ms` ran out before `--count` messages came.
pub const EXIT_TIMED_OUT: i32 = 4;

/// The `regina` operator commands.
#[derive(Debug, Parser)]
#[command(
    name = "regina",
    about = "Operate a Regina broker over its HTTP API (run `regina --help` without a command for the server's flags)",
    disable_version_flag = true,
    after_help = "Exit codes: 0 ok, 1 refused or not found, 2 usage error, 3 server unreachable, 4 tail timed out."
)]
pub struct Cli {
    /// The broker's URL.
    #[arg(long, global = true, env = "REGINA_URL", default_value = DEFAULT_URL)]
    pub url: String,
    /// A bearer token sent with every request.
    #[arg(long, global = true, env = "REGINA_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// The tenant the commands act for (the `x-queen-tenant` header).
    #[arg(long, global = true, env = "REGINA_TENANT")]
    pub tenant: Option<String>,
    /// Machine-readable output: one JSON document (ndjson for tail and export).
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Push messages to a queue: a JSON argument, a file, or stdin.
    Push(push::PushArgs),
    /// Follow a queue (or one partition) as a consumer group, printing each message.
    Tail(tail::TailArgs),
    /// List the queues with their figures.
    Queues,
    /// One queue.
    Queue {
        #[command(subcommand)]
        command: queues::QueueCommand,
    },
    /// List the consumer groups with their lag.
    Groups,
    /// The dead-letter queue: list, replay, delete, purge.
    Dlq {
        #[command(subcommand)]
        command: dlq::DlqCommand,
    },
    /// Key/value rows: get, put, scan, delete.
    Kv {
        #[command(subcommand)]
        command: kv::KvCommand,
    },
    /// Timers: list, cancel, retry.
    Timers {
        #[command(subcommand)]
        command: timers::TimersCommand,
    },
    /// Job queues: list, get, stats, retry.
    Jobs {
        #[command(subcommand)]
        command: jobs::JobsCommand,
    },
    /// The node's health and the broker's figures.
    Status,
    /// Write a queue's kept messages to stdout as ndjson.
    Export(moves::ExportArgs),
    /// Push ndjson lines (as `export` writes them) to a queue, keeping transaction ids.
    Import(moves::ImportArgs),
    /// Cluster membership and leaders: status, add, remove, leader (see `regina cluster status`).
    Cluster {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// An online, consistent backup of every Raft group into DIR, taken while the node serves writes.
    Backup {
        /// An empty or new directory.
        dir: std::path::PathBuf,
    },
    /// Build a new node's data directory from a backup (offline: nothing is contacted).
    Restore {
        /// The backup's directory.
        dir: std::path::PathBuf,
        /// The data directory to build (empty or new).
        #[arg(long, env = "REGINA_DATA_DIR")]
        data_dir: std::path::PathBuf,
        /// The restored node's id: the sole voter of its new cluster.
        #[arg(long, default_value_t = 1)]
        node_id: u64,
        /// Its Raft address in the new membership (default 127.0.0.1:6632).
        #[arg(long)]
        addr: Option<String>,
    },
    /// Print a shell completion script.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// True when `word` names a CLI command.
pub fn is_command(word: &str) -> bool {
    word == "help" || Cli::command().get_subcommands().any(|c| c.get_name() == word)
}

/// True when the binary's arguments ask for a CLI command: the first one
/// that is not a global CLI option (`--url U`, `--token T`, `--tenant T`,
/// `--json`) names a command. Anything else starts the server.
pub fn wants_cli(args: &[String]) -> bool {
    let mut rest = args.iter();
    while let Some(a) = rest.next() {
        match a.as_str() {
            "--url" | "--token" | "--tenant" => {
                rest.next();
            }
            "--json" => {}
            a if ["--url=", "--token=", "--tenant="].iter().any(|p| a.starts_with(p)) => {}
            word => return is_command(word),
        }
    }
    false
}

/// Runs the command line (without the binary's name); answers the exit code.
pub fn main(args: &[String]) -> i32 {
    if args.first().map(String::as_str) == Some("cluster") {
        // Exactly as before the other commands came: its own arguments,
        // 1 on any failure.
        return match run(&args[1..], |k| std::env::var(k).ok()) {
            Ok(()) => EXIT_OK,
            Err(e) => {
                eprintln!("regina: {e}");
                EXIT_REFUSED
            }
        };
    }
    let cli = match Cli::try_parse_from(std::iter::once("regina".to_string()).chain(args.iter().cloned())) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { EXIT_USAGE } else { EXIT_OK };
        }
    };
    match &cli.command {
        Command::Cluster { args } => return cluster_with_url(args, &cli.url),
        Command::Backup { dir } => return exit_with(backup::backup(&cli.url, cli.token.as_deref(), dir)),
        Command::Restore { dir, data_dir, node_id, addr } => {
            return exit_with(backup::restore(dir, data_dir, *node_id, addr.clone()))
        }
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(*shell, &mut Cli::command(), "regina", &mut script);
            use std::io::Write as _;
            let _ = std::io::stdout().write_all(&script);
            return EXIT_OK;
        }
        _ => {}
    }
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("regina: cannot start a runtime: {e}");
            return EXIT_REFUSED;
        }
    };
    match runtime.block_on(dispatch(cli)) {
        Ok(()) => EXIT_OK,
        Err(e) => {
            eprintln!("regina: {e}");
            e.exit_code()
        }
    }
}

async fn dispatch(cli: Cli) -> Result<(), CliError> {
    let out = Out { json: cli.json };
    let client = connect(&cli.url, cli.token.as_deref(), cli.tenant.as_deref())?;
    match cli.command {
        Command::Push(a) => push::push(&client, &out, a).await,
        Command::Tail(a) => tail::tail(&client, &out, a).await,
        Command::Queues => queues::list(&client, &out).await,
        Command::Queue { command } => queues::queue(&client, &out, command).await,
        Command::Groups => queues::groups(&client, &out).await,
        Command::Status => queues::status(&client, &out).await,
        Command::Dlq { command } => dlq::run(&client, &out, command).await,
        Command::Kv { command } => kv::run(&client, &out, command).await,
        Command::Timers { command } => timers::run(&client, &out, command).await,
        Command::Jobs { command } => jobs::run(&client, &out, command).await,
        Command::Export(a) => moves::export(&client, &out, a).await,
        Command::Import(a) => moves::import(&client, &out, a).await,
        // Both are run before the runtime starts (see `main`).
        Command::Cluster { .. } | Command::Completions { .. } | Command::Backup { .. } | Command::Restore { .. } => {
            Ok(())
        }
    }
}

/// 0, or the message and 1.
fn exit_with(result: Result<(), String>) -> i32 {
    match result {
        Ok(()) => EXIT_OK,
        Err(e) => {
            eprintln!("regina: {e}");
            EXIT_REFUSED
        }
    }
}

/// `regina --url U cluster ...` (global options first): the cluster
/// command with that URL, unless its own arguments name another.
fn cluster_with_url(args: &[String], url: &str) -> i32 {
    let mut with_url = args.to_vec();
    if !with_url.is_empty() {
        with_url.splice(1..1, ["--url".to_string(), url.to_string()]);
    }
    match run(&with_url, |k| std::env::var(k).ok()) {
        Ok(()) => EXIT_OK,
        Err(e) => {
            eprintln!("regina: {e}");
            EXIT_REFUSED
        }
    }
}

fn connect(url: &str, token: Option<&str>, tenant: Option<&str>) -> Result<regina_client::Client, CliError> {
    let mut client = regina_client::Client::new(url).map_err(|e| CliError::Usage(format!("--url: {e}")))?;
    if let Some(t) = token {
        client = client.with_token(t);
    }
    if let Some(t) = tenant {
        client = client.with_tenant(t);
    }
    Ok(client)
}

/// Why a command failed, and so its exit code.
#[derive(Debug)]
pub enum CliError {
    /// Exit 2: the arguments or the input cannot be used.
    Usage(String),
    /// Exit 1: the server refused (its `code` and `error`), or the thing is not there.
    Refused(String),
    /// Exit 3: no answer.
    Unreachable(String),
    /// Exit 4.
    TimedOut(String),
}

impl CliError {
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Usage(_) => EXIT_USAGE,
            CliError::Refused(_) => EXIT_REFUSED,
            CliError::Unreachable(_) => EXIT_UNREACHABLE,
            CliError::TimedOut(_) => EXIT_TIMED_OUT,
        }
    }
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CliError::Usage(m) | CliError::Refused(m) | CliError::TimedOut(m) => f.write_str(m),
            CliError::Unreachable(m) => write!(f, "cannot reach the server: {m}"),
        }
    }
}

impl From<regina_client::Error> for CliError {
    fn from(e: regina_client::Error) -> Self {
        use regina_client::Error as E;
        match e {
            E::Broker { status, code, reason, message } => {
                let reason = reason.map(|r| format!("/{r}")).unwrap_or_default();
                CliError::Refused(format!("{code}{reason} (HTTP {status}): {message}"))
            }
            E::Transport(t) => CliError::Unreachable(t.to_string()),
            E::Decode(m) => CliError::Refused(format!("unexpected answer: {m}")),
            E::Invalid(m) => CliError::Usage(m),
        }
    }
}

/// How results are printed.
pub(crate) struct Out {
    pub json: bool,
}

impl Out {
    /// Prints one JSON document.
    pub fn doc(&self, v: &Value) {
        say!("{}", serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string()));
    }
}

/// Prints rows under a header, each column as wide as its widest cell.
pub(crate) fn table(header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        say!("{}", padded.join("  ").trim_end());
    };
    line(header.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
}

/// A JSON value as one table cell: strings bare, `-` for null, others compact.
pub(crate) fn cell(v: &Value) -> String {
    match v {
        Value::Null => "-".to_string(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A payload cut to fit a table cell.
pub(crate) fn short(v: &Value) -> String {
    const MAX: usize = 60;
    let s = v.to_string();
    if s.chars().count() <= MAX {
        s
    } else {
        format!("{}...", s.chars().take(MAX - 3).collect::<String>())
    }
}

/// Parses a JSON argument or input, naming where it came from.
pub(crate) fn parse_json(text: &str, what: &str) -> Result<Value, CliError> {
    serde_json::from_str(text).map_err(|e| CliError::Usage(format!("{what} is not JSON: {e}")))
}

/// A progress line on stderr, for the commands that move many rows.
pub(crate) fn progress(msg: &str) {
    eprintln!("regina: {msg}");
}
