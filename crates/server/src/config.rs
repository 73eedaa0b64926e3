//! Where the node listens and keeps its data. Flags win over environment
//! variables, which win over the embedded defaults.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

pub const DEFAULT_BIND: &str = "127.0.0.1";
pub const DEFAULT_PORT: u16 = 6632;
pub const DEFAULT_DATA_DIR: &str = "./regina-data";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub bind: IpAddr,
    pub port: u16,
    pub data_dir: PathBuf,
    /// Key of at-rest payload encryption; default `<data-dir>/encryption.key`.
    pub encryption_key_file: Option<PathBuf>,
    /// `false` only to measure what durability costs (`--fsync off`).
    pub fsync: bool,
    /// This node's id in its Raft group (1 when alone).
    pub node_id: u64,
    /// Where peers reach this node's Raft routes; also served on the HTTP
    /// port. `None`: the HTTP address is the Raft address.
    pub raft_addr: Option<SocketAddr>,
    /// The voters of a fresh cluster, this node among them: (id, Raft
    /// address). Empty: a single node (which can be grown later).
    pub peers: Vec<(u64, String)>,
    /// Whether `x-queen-tenant` selects an isolated tenant.
    pub tenancy: bool,
    /// Raft groups on this node; tenants are spread over them.
    pub raft_groups: u16,
    /// Tenants placed in a named group instead of the hashed one.
    pub tenant_groups: std::collections::BTreeMap<String, u16>,
    /// The token every request to this node's Raft address must carry, and
    /// that it sends to its peers (`REGINA_CLUSTER_TOKEN`, or the first
    /// line of `--cluster-token-file`).
    pub cluster_token: Option<Secret>,
    /// Lets a node serve a Raft address without a cluster token (local
    /// trials only: anyone who reaches that address can then read the state
    /// and vote).
    pub insecure_cluster: bool,
    /// Bearer-token settings (`crate::doors::auth::settings`), Queen's names
    /// included.
    pub auth: crate::doors::auth::AuthSettings,
    /// Requests per second per caller (0: no limit) and the burst allowed.
    pub rate_limit: u32,
    pub rate_burst: Option<u32>,
    /// Pops that may long-poll at once.
    pub max_long_polls: usize,
    /// Bytes of the newest message bodies each Raft group keeps in memory.
    pub recent_body_bytes: usize,
    /// Disk watermarks, percent in use (`--disk-high-pct`, `--disk-low-pct`).
    pub disk_high_pct: u8,
    pub disk_low_pct: u8,
    /// Requests that may wait for a Raft group's proposer at once.
    pub max_queued_proposals: usize,
    /// TLS on both doors: the certificate chain and key (PEM), and the CA
    /// peers' certificates must chain to.
    pub tls_cert_file: Option<PathBuf>,
    pub tls_key_file: Option<PathBuf>,
    pub tls_ca_file: Option<PathBuf>,
}

/// A secret setting: compared and sent, never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: DEFAULT_BIND.parse().expect("valid default address"),
            port: DEFAULT_PORT,
            data_dir: PathBuf::from(DEFAULT_DATA_DIR),
            encryption_key_file: None,
            fsync: true,
            node_id: 1,
            raft_addr: None,
            peers: Vec::new(),
            tenancy: false,
            raft_groups: 1,
            tenant_groups: Default::default(),
            cluster_token: None,
            insecure_cluster: false,
            auth: crate::doors::auth::AuthSettings::default(),
            rate_limit: 0,
            rate_burst: None,
            max_long_polls: regina_types::limits::LONG_POLLS_MAX,
            recent_body_bytes: regina_storage::RECENT_BODY_BYTES,
            disk_high_pct: regina_types::limits::DISK_HIGH_PCT_DEFAULT,
            disk_low_pct: regina_types::limits::DISK_LOW_PCT_DEFAULT,
            max_queued_proposals: regina_types::limits::PROPOSER_QUEUE_REQUESTS_MAX,
            tls_cert_file: None,
            tls_key_file: None,
            tls_ca_file: None,
        }
    }
}

pub const USAGE: &str = "\
regina: a durable message broker speaking the Queen MQ HTTP API

usage: regina [--bind ADDR] [--port PORT] [--data-dir DIR] [--encryption-key-file FILE]
              [--fsync on|off]

  --bind ADDR      address to listen on      (env REGINA_BIND, default 127.0.0.1)
  --port PORT      HTTP port                 (env REGINA_PORT, default 6632)
  --data-dir DIR   where the data lives      (env REGINA_DATA_DIR, default ./regina-data)
  --encryption-key-file FILE
                   32-byte key sealing payloads of queues with encryptionEnabled
                   (env REGINA_ENCRYPTION_KEY_FILE, default DIR/encryption.key,
                   created on first start)
  --fsync on|off   whether every answer waits for fdatasync (env REGINA_FSYNC,
                   default on). `off` exists only to measure what durability
                   costs: a machine crash may then lose answered writes.
  --node-id N      this node's id in the cluster, a positive integer
                   (env REGINA_NODE_ID, default 1)
  --raft-addr HOST:PORT
                   address peers use for Raft messages and forwarded requests;
                   the node listens there too (env REGINA_RAFT_ADDR, default:
                   the HTTP address)
  --peers ID=HOST:PORT,...
                   the voters of a new cluster, this node included, each with
                   its Raft address (env REGINA_PEERS). On a first start the
                   lowest id forms the group; later starts ignore it. Without
                   it the node runs alone and can be grown with
                   `regina cluster add`.
  --tenancy on|off whether the x-queen-tenant header selects an isolated tenant
                   (env REGINA_TENANCY, default off: every request acts for
                   the default tenant)
  --raft-groups N  Raft groups per node, 1 to 64 (env REGINA_RAFT_GROUPS,
                   default 1); each tenant lives in one, all share one WAL.
                   Fixed when the data directory is created; every node of
                   a cluster must use the same count.
  --tenant-groups TENANT=GROUP,...
                   place these tenants in the named group instead of the one
                   their name hashes to (env REGINA_TENANT_GROUPS, or Queen's
                   QUEEN_TENANT_GROUPS). The same on every node; a tenant
                   does not move with its data, so pin it before it writes
                   (a start that would hide a tenant's data is refused).
  --cluster-token-file FILE
                   the secret every request between nodes carries, on the
                   file's first line (env REGINA_CLUSTER_TOKEN_FILE, or the
                   token itself in REGINA_CLUSTER_TOKEN), at least 16 bytes.
                   Required when the node serves a Raft address of its own.
  --insecure-cluster
                   serve the Raft address without a cluster token (env
                   REGINA_INSECURE_CLUSTER=on): anyone reaching it can read
                   the whole state and vote. For local trials only.
  --jwt-enabled on|off
                   require `Authorization: Bearer <token>` on every request but
                   the skip paths (env REGINA_JWT_ENABLED or Queen's JWT_ENABLED,
                   default off). Keys: JWT_SECRET (HMAC, environment only) or
                   --jwt-secret-file, --jwt-public-key-file (PEM, RSA or
                   Ed25519), --jwt-jwks-file. Checks: --jwt-algorithm,
                   --jwt-issuer, --jwt-audience, --jwt-leeway SECONDS (30).
                   Claims: --jwt-roles-claim (role), --jwt-roles-array-claim
                   (roles), --jwt-tenant-claim (tenant), --jwt-tenants-claim
                   (tenants). --jwt-skip-paths (default
                   /health,/metrics/prometheus,/metrics,/). Each also as
                   REGINA_JWT_* and Queen's JWT_*; see docs/security.md.
  --tls-cert-file FILE, --tls-key-file FILE
                   TLS on the client port and the Raft address (PEM; env
                   REGINA_TLS_CERT_FILE, REGINA_TLS_KEY_FILE; default off);
                   read again on SIGHUP
  --tls-ca-file FILE
                   the CA peers' certificates chain to (env REGINA_TLS_CA_FILE);
                   required with TLS and a Raft address
  --rate-limit N   requests per second each caller may send: its token's
                   subject, else its tenant (env REGINA_RATE_LIMIT, default 0:
                   no limit); past it 429 rate_limited with Retry-After
  --rate-burst N   requests a caller may send at once (env REGINA_RATE_BURST,
                   default: one second's worth)
  --max-long-polls N
                   pops that may wait at once (env REGINA_MAX_LONG_POLLS,
                   default 10000); past it 429 overloaded
  --recent-body-mb N
                   MiB of the newest message bodies the node keeps in
                   memory, split evenly among its Raft groups, so consumers
                   near the head read no file (env REGINA_RECENT_BODY_MB,
                   default 128; 0 keeps none)
  --max-queued-proposals N
                   writes that may wait for a Raft group's log at once (env
                   REGINA_MAX_QUEUED_PROPOSALS, default 65536); past it 429
                   overloaded
  --disk-high-pct P, --disk-low-pct P
                   past P% of the data directory's filesystem in use, writes
                   that grow storage (pushes, KV writes, timer schedules, job
                   enqueues, steps) answer 507 storage_full until use is
                   under the low mark; reads, acks and deletes go on (env
                   QUEEN_RAFT_DISK_HIGH_PCT / REGINA_DISK_HIGH_PCT, default
                   85; QUEEN_RAFT_DISK_LOW_PCT / REGINA_DISK_LOW_PCT, default
                   80; a high mark of 100 never refuses)
  --help           show this text

usage: regina cluster status [--url URL]
       regina cluster add --id N --addr HOST:PORT [--url URL]
       regina cluster remove --id N [--url URL]
       regina cluster leader --group G --id N [--url URL]
       regina cluster leader --group G --unpin [--url URL]

  the cluster's members and their state; add a voter (it must be running,
  started with the same --node-id and --raft-addr); remove a member; pin
  group G's preferred leader to node N (the balancer moves it there and
  keeps it there while N is up), or drop the pin.
  --url defaults to http://127.0.0.1:6632 (env REGINA_URL). REGINA_TOKEN is
  sent as the bearer token when the node checks tokens; `status` asks each
  member at its Raft address with REGINA_CLUSTER_TOKEN (or the first line of
  REGINA_CLUSTER_TOKEN_FILE).

usage: regina [--url URL] [--json] COMMAND ...
  the operator commands against a running node (push, tail, queues, queue,
  groups, dlq, kv, timers, jobs, status, export, import, completions):
  `regina help` lists them, `regina help COMMAND` describes one; docs/cli.md.
";

/// The environment variables read at start, each standing for its flag
/// (later variables, and then the flags, win).
const ENV_FLAGS: &[(&str, &str)] = &[
    // Queen's names first, so Regina's own win (docs/queen-settings.md).
    ("PORT", "--port"),
    ("QUEEN_RAFT_DIR", "--data-dir"),
    ("QUEEN_RAFT_NODE_ID", "--node-id"),
    ("QUEEN_RAFT_GROUPS", "--raft-groups"),
    ("QUEEN_TENANCY_HEADER", "--tenancy"),
    ("QUEEN_RAFT_PEERS", "--peers"),
    ("REGINA_BIND", "--bind"),
    ("REGINA_PORT", "--port"),
    ("REGINA_DATA_DIR", "--data-dir"),
    ("REGINA_ENCRYPTION_KEY_FILE", "--encryption-key-file"),
    ("REGINA_FSYNC", "--fsync"),
    ("REGINA_NODE_ID", "--node-id"),
    ("REGINA_RAFT_ADDR", "--raft-addr"),
    ("REGINA_TENANCY", "--tenancy"),
    ("REGINA_RAFT_GROUPS", "--raft-groups"),
    ("QUEEN_TENANT_GROUPS", "--tenant-groups"),
    ("REGINA_TENANT_GROUPS", "--tenant-groups"),
    ("REGINA_PEERS", "--peers"),
    ("REGINA_CLUSTER_TOKEN_FILE", "--cluster-token-file"),
    ("REGINA_RATE_LIMIT", "--rate-limit"),
    ("REGINA_RATE_BURST", "--rate-burst"),
    ("REGINA_MAX_LONG_POLLS", "--max-long-polls"),
    ("REGINA_RECENT_BODY_MB", "--recent-body-mb"),
    ("REGINA_TLS_CERT_FILE", "--tls-cert-file"),
    ("REGINA_TLS_KEY_FILE", "--tls-key-file"),
    ("REGINA_TLS_CA_FILE", "--tls-ca-file"),
    ("REGINA_MAX_QUEUED_PROPOSALS", "--max-queued-proposals"),
    ("REGINA_INSECURE_CLUSTER", "--insecure-cluster"),
    ("QUEEN_RAFT_DISK_HIGH_PCT", "--disk-high-pct"),
    ("REGINA_DISK_HIGH_PCT", "--disk-high-pct"),
    ("QUEEN_RAFT_DISK_LOW_PCT", "--disk-low-pct"),
    ("REGINA_DISK_LOW_PCT", "--disk-low-pct"),
];

/// Whether a flag reads the next argument as its value (switches do not).
fn takes_value(flag: &str) -> bool {
    flag != "--insecure-cluster"
}

impl Config {
    /// Reads the environment, then the flags. `Err` carries a message for
    /// the user; `Ok(None)` means `--help` was asked for.
    pub fn from_args_and_env(
        args: impl IntoIterator<Item = String>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Config>, String> {
        let mut c = Config::default();
        let mut token_file = None;
        // Each variable stands for its flag; the flags come after, so they win.
        for (var, flag) in ENV_FLAGS {
            if let Some(v) = env(var) {
                c.apply(flag, Some(v), &mut token_file)?;
            }
        }
        c.auth = crate::doors::auth::AuthSettings::from_env(&env)?;
        let mut args = args.into_iter();
        while let Some(a) = args.next() {
            let (flag, inline) = match a.split_once('=') {
                Some((f, v)) => (f.to_string(), Some(v.to_string())),
                None => (a.clone(), None),
            };
            if flag == "--help" || flag == "-h" {
                return Ok(None);
            }
            let value = match (inline, takes_value(&flag)) {
                (Some(v), _) => Some(v),
                (None, true) => Some(args.next().ok_or(format!("{flag} needs a value"))?),
                (None, false) => None,
            };
            c.apply(&flag, value, &mut token_file)?;
        }
        let inline = env("REGINA_CLUSTER_TOKEN")
            .map(|v| (v, "REGINA_CLUSTER_TOKEN"))
            .or_else(|| env("QUEEN_RAFT_TOKEN").map(|v| (v, "QUEEN_RAFT_TOKEN")));
        c.cluster_token = match (token_file, inline) {
            (Some(path), _) => Some(read_token_file(&path)?),
            (None, Some((v, name))) => Some(check_token(v.trim().to_string(), name)?),
            (None, None) => None,
        };
        c.check()?;
        Ok(Some(c))
    }

    /// One setting, by its flag; `value` is `None` only for a switch given
    /// bare on the command line.
    fn apply(&mut self, flag: &str, value: Option<String>, token_file: &mut Option<PathBuf>) -> Result<(), String> {
        let v = || value.clone().ok_or(format!("{flag} needs a value"));
        match flag {
            "--bind" => self.bind = parse_bind(&v()?)?,
            "--port" => self.port = parse_port(&v()?)?,
            "--data-dir" => self.data_dir = PathBuf::from(v()?),
            "--encryption-key-file" => self.encryption_key_file = Some(PathBuf::from(v()?)),
            "--fsync" => self.fsync = parse_fsync(&v()?)?,
            "--node-id" => self.node_id = parse_node_id(&v()?)?,
            "--raft-addr" => self.raft_addr = Some(parse_addr(&v()?)?),
            "--peers" => self.peers = parse_peers(&v()?)?,
            "--tenancy" => self.tenancy = parse_switch("--tenancy", &v()?)?,
            "--raft-groups" => self.raft_groups = parse_groups(&v()?)?,
            "--tenant-groups" => self.tenant_groups = parse_tenant_groups(&v()?)?,
            "--cluster-token-file" => *token_file = Some(PathBuf::from(v()?)),
            "--insecure-cluster" => {
                self.insecure_cluster = value.as_deref().map_or(Ok(true), |v| parse_switch(flag, v))?
            }
            "--tls-cert-file" => self.tls_cert_file = Some(PathBuf::from(v()?)),
            "--tls-key-file" => self.tls_key_file = Some(PathBuf::from(v()?)),
            "--tls-ca-file" => self.tls_ca_file = Some(PathBuf::from(v()?)),
            "--rate-limit" => self.rate_limit = parse_count(flag, &v()?, 0)? as u32,
            "--rate-burst" => self.rate_burst = Some(parse_count(flag, &v()?, 1)? as u32),
            "--max-long-polls" => self.max_long_polls = parse_count(flag, &v()?, 1)?,
            "--recent-body-mb" => self.recent_body_bytes = parse_mib(flag, &v()?)?,
            "--max-queued-proposals" => self.max_queued_proposals = parse_count(flag, &v()?, 1)?,
            "--disk-high-pct" => self.disk_high_pct = parse_pct(flag, &v()?)?,
            "--disk-low-pct" => self.disk_low_pct = parse_pct(flag, &v()?)?,
            other => match crate::doors::auth::AuthSettings::flag(other) {
                Some(setting) => self.auth.set(setting, v()?),
                None => return Err(format!("unknown argument {other}\n\n{USAGE}")),
            },
        }
        Ok(())
    }

    /// The checks that span settings, once all are read.
    fn check(&self) -> Result<(), String> {
        if let Some((t, g)) = self.tenant_groups.iter().find(|(_, g)| **g >= self.raft_groups) {
            return Err(format!(
                "--tenant-groups: {t}={g}, but there are {} Raft groups (0 to {})",
                self.raft_groups,
                self.raft_groups - 1
            ));
        }
        if !self.peers.is_empty() && !self.peers.iter().any(|(id, _)| *id == self.node_id) {
            return Err(format!("--peers must list this node (--node-id {})", self.node_id));
        }
        self.check_internal_port()?;
        if self.tls_cert_file.is_some() != self.tls_key_file.is_some() {
            return Err("--tls-cert-file and --tls-key-file go together".into());
        }
        if self.tls_cert_file.is_some() && self.internal_addr().is_some() && self.tls_ca_file.is_none() {
            return Err("TLS on a node with a Raft address needs --tls-ca-file: the CA its peers' certificates \
                        chain to"
                .into());
        }
        // Keys and algorithms are checked now, so a mistake stops the start.
        crate::doors::auth::Auth::from_settings(&self.auth)?;
        Ok(())
    }

    /// The Raft address the node listens on apart from its HTTP port, if any:
    /// the only place its internal routes are served.
    pub fn internal_addr(&self) -> Option<SocketAddr> {
        self.raft_addr.filter(|raft| *raft != SocketAddr::new(self.bind, self.port))
    }

    /// Raft messages, snapshots and state dumps are served only on a Raft
    /// address of the node's own, and only to callers with the cluster token.
    fn check_internal_port(&self) -> Result<(), String> {
        if !self.peers.is_empty() && self.internal_addr().is_none() {
            return Err("--peers needs --raft-addr on a port other than the HTTP port: \
                        internal routes are never served on the client port"
                .to_string());
        }
        if self.internal_addr().is_some() && self.cluster_token.is_none() && !self.insecure_cluster {
            return Err("a node with a Raft address needs a cluster token (REGINA_CLUSTER_TOKEN or \
                        --cluster-token-file); --insecure-cluster serves it without one, for local trials only"
                .to_string());
        }
        Ok(())
    }
}

/// The cluster token on the first line of `path`.
fn read_token_file(path: &std::path::Path) -> Result<Secret, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("--cluster-token-file: cannot read {}: {e}", path.display()))?;
    let token = text.lines().next().unwrap_or("").trim().to_string();
    check_token(token, &format!("--cluster-token-file {}", path.display()))
}

fn check_token(token: String, source: &str) -> Result<Secret, String> {
    let min = regina_types::limits::CLUSTER_TOKEN_BYTES_MIN;
    if token.len() < min {
        return Err(format!("{source}: the cluster token must be at least {min} bytes, not {}", token.len()));
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!("{source}: the cluster token may hold only printable ASCII without spaces"));
    }
    Ok(Secret(token))
}

/// A count of at least `min`, below a billion.
fn parse_pct(flag: &str, v: &str) -> Result<u8, String> {
    match v.trim().parse::<u8>() {
        Ok(n) if n <= 100 => Ok(n),
        _ => Err(format!("{flag}: {v:?} is not a percent from 0 to 100")),
    }
}

fn parse_count(flag: &str, v: &str, min: usize) -> Result<usize, String> {
    match v.trim().parse::<usize>() {
        Ok(n) if n >= min && n < 1_000_000_000 => Ok(n),
        _ => Err(format!("{flag}: {v:?} is not a count from {min}")),
    }
}

/// Mebibytes from 0 to [`RECENT_BODY_MB_MAX`], as bytes.
fn parse_mib(flag: &str, v: &str) -> Result<usize, String> {
    match v.trim().parse::<usize>() {
        Ok(n) if n <= RECENT_BODY_MB_MAX => Ok(n << 20),
        _ => Err(format!("{flag}: {v:?} is not a count of MiB from 0 to {RECENT_BODY_MB_MAX}")),
    }
}

/// The most memory `--recent-body-mb` may ask for.
const RECENT_BODY_MB_MAX: usize = 16 * 1024;

fn parse_groups(v: &str) -> Result<u16, String> {
    let max = regina_types::limits::RAFT_GROUPS_MAX;
    match v.parse::<u16>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!("--raft-groups: {v:?} is not a count from 1 to {max}")),
    }
}

/// `acme=3,globex=0`: Queen's `QUEEN_TENANT_GROUPS` form; each tenant once.
pub fn parse_tenant_groups(v: &str) -> Result<std::collections::BTreeMap<String, u16>, String> {
    let mut pins = std::collections::BTreeMap::new();
    for part in v.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (tenant, group) = part.split_once('=').ok_or(format!("--tenant-groups: {part:?} is not TENANT=GROUP"))?;
        let tenant = match crate::http::tenant_header::parse(Some(tenant.trim().as_bytes())) {
            Ok(Some(t)) => t,
            _ => return Err(format!("--tenant-groups: {tenant:?} is not a tenant name")),
        };
        let group: u16 = group
            .trim()
            .parse()
            .ok()
            .filter(|g| *g < regina_types::limits::RAFT_GROUPS_MAX)
            .ok_or(format!("--tenant-groups: {group:?} is not a group number"))?;
        if pins.insert(tenant.clone(), group).is_some() {
            return Err(format!("--tenant-groups: tenant {tenant} is listed twice"));
        }
    }
    Ok(pins)
}

fn parse_node_id(v: &str) -> Result<u64, String> {
    match v.parse::<u64>() {
        Ok(id) if id > 0 => Ok(id),
        _ => Err(format!("--node-id: {v:?} is not a positive integer")),
    }
}

fn parse_addr(v: &str) -> Result<SocketAddr, String> {
    v.parse().map_err(|_| format!("--raft-addr: {v:?} is not an IP:PORT address"))
}

/// `1=127.0.0.1:7001,2=127.0.0.1:7002`: ids unique, addresses IP:PORT.
pub fn parse_peers(v: &str) -> Result<Vec<(u64, String)>, String> {
    let mut peers: Vec<(u64, String)> = Vec::new();
    for part in v.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (id, addr) = part.split_once('=').ok_or(format!("--peers: {part:?} is not ID=HOST:PORT"))?;
        let id = parse_node_id(id.trim()).map_err(|e| format!("--peers: {e}"))?;
        // Queen's QUEEN_RAFT_PEERS writes ID=RAFT/HTTP; the Raft address is the one a peer list needs.
        let addr = addr.split_once('/').map_or(addr, |(raft, _http)| raft);
        let addr = parse_addr(addr.trim()).map_err(|e| format!("--peers: {e}"))?;
        if peers.iter().any(|(known, _)| *known == id) {
            return Err(format!("--peers: node id {id} is listed twice"));
        }
        peers.push((id, addr.to_string()));
    }
    Ok(peers)
}

fn parse_bind(v: &str) -> Result<IpAddr, String> {
    v.parse().map_err(|_| format!("--bind: {v:?} is not an IP address"))
}

fn parse_fsync(v: &str) -> Result<bool, String> {
    parse_switch("--fsync", v)
}

fn parse_switch(flag: &str, v: &str) -> Result<bool, String> {
    // Queen's settings say true and false.
    match v {
        "on" | "true" => Ok(true),
        "off" | "false" => Ok(false),
        _ => Err(format!("{flag}: {v:?} is neither on nor off")),
    }
}

fn parse_port(v: &str) -> Result<u16, String> {
    v.parse().map_err(|_| format!("--port: {v:?} is not a port number (0-65535)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str], env: &[(&str, &str)]) -> Result<Option<Config>, String> {
        let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Config::from_args_and_env(args.iter().map(|s| s.to_string()), |k| {
            env.iter().find(|(ek, _)| ek == k).map(|(_, v)| v.clone())
        })
    }

    #[test]
    fn defaults_env_and_flags() {
        assert_eq!(parse(&[], &[]).unwrap().unwrap(), Config::default());
        let c = parse(&[], &[("REGINA_PORT", "7000"), ("REGINA_DATA_DIR", "/tmp/x")]).unwrap().unwrap();
        assert_eq!((c.port, c.data_dir.to_str().unwrap()), (7000, "/tmp/x"));
        let c = parse(&["--port", "7001", "--bind=0.0.0.0"], &[("REGINA_PORT", "7000")]).unwrap().unwrap();
        assert_eq!((c.port, c.bind.to_string().as_str()), (7001, "0.0.0.0"));
        assert!(parse(&["--port", "x"], &[]).is_err());
        assert!(parse(&["--nope"], &[]).is_err());
        assert_eq!(parse(&["--help"], &[]).unwrap(), None);
    }

    #[test]
    fn cluster_settings() {
        let c = parse(
            &["--node-id", "2", "--raft-addr", "127.0.0.1:7002", "--insecure-cluster"],
            &[("REGINA_PEERS", "1=127.0.0.1:7001, 2=127.0.0.1:7002,3=127.0.0.1:7003")],
        )
        .unwrap()
        .unwrap();
        assert_eq!(c.node_id, 2);
        assert_eq!(c.raft_addr, Some("127.0.0.1:7002".parse().unwrap()));
        assert_eq!(c.peers.len(), 3);
        assert_eq!(c.peers[2], (3, "127.0.0.1:7003".to_string()));
        assert!(parse(&["--node-id", "0"], &[]).is_err());
        assert_eq!(parse(&["--raft-groups", "64"], &[]).unwrap().unwrap().raft_groups, 64);
        assert!(parse(&["--raft-groups", "65"], &[]).is_err());
        assert!(parse(&[], &[("REGINA_RAFT_GROUPS", "0")]).is_err());
        assert!(parse(&["--peers", "1=127.0.0.1:1,1=127.0.0.1:2"], &[]).is_err(), "duplicate id");
        let c = parse(&["--raft-groups", "4"], &[("QUEEN_TENANT_GROUPS", "acme=3, globex=0")]).unwrap().unwrap();
        assert_eq!(c.tenant_groups.get("acme"), Some(&3));
        assert_eq!(c.tenant_groups.len(), 2);
        assert!(parse(&["--raft-groups", "4", "--tenant-groups", "acme=4"], &[]).is_err(), "no group 4");
        assert!(parse(&["--raft-groups", "4", "--tenant-groups", "a/b=1"], &[]).is_err(), "bad name");
        assert!(parse(&["--raft-groups", "4", "--tenant-groups", "a=1,a=2"], &[]).is_err(), "twice");
        assert!(parse(&["--raft-groups", "4", "--tenant-groups", "a"], &[]).is_err(), "no group");
        assert!(parse(&["--peers", "1=nowhere"], &[]).is_err());
        let e = parse(&["--node-id", "4", "--peers", "1=127.0.0.1:1"], &[]).unwrap_err();
        assert!(e.contains("must list this node"), "{e}");
    }

    #[test]
    fn internal_port_needs_its_own_address_and_a_token() {
        let peers = "1=127.0.0.1:7001,2=127.0.0.1:7002";
        let e = parse(&["--peers", peers], &[]).unwrap_err();
        assert!(e.contains("--raft-addr on a port other"), "{e}");
        let e = parse(&["--peers", peers, "--raft-addr", "127.0.0.1:6632"], &[]).unwrap_err();
        assert!(e.contains("--raft-addr on a port other"), "{e}");
        let e = parse(&["--peers", peers, "--raft-addr", "127.0.0.1:7001"], &[]).unwrap_err();
        assert!(e.contains("needs a cluster token"), "{e}");
        let c =
            parse(&["--peers", peers, "--raft-addr", "127.0.0.1:7001", "--insecure-cluster"], &[]).unwrap().unwrap();
        assert!(c.insecure_cluster && c.cluster_token.is_none());
        let token = ("REGINA_CLUSTER_TOKEN", "0123456789abcdef");
        let c = parse(&["--peers", peers, "--raft-addr", "127.0.0.1:7001"], &[token]).unwrap().unwrap();
        assert_eq!(c.cluster_token, Some(Secret("0123456789abcdef".into())));
        assert_eq!(format!("{:?}", c.cluster_token), "Some(Secret(..))", "never printed");
        let e = parse(&[], &[("REGINA_CLUSTER_TOKEN", "short")]).unwrap_err();
        assert!(e.contains("at least 16 bytes"), "{e}");
        // A node alone on one port serves no internal routes and needs none.
        assert!(parse(&[], &[]).unwrap().unwrap().internal_addr().is_none());
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, "fedcba9876543210fedcba\nignored\n").unwrap();
        let c = parse(&["--raft-addr", "127.0.0.1:7001", "--cluster-token-file", file.to_str().unwrap()], &[])
            .unwrap()
            .unwrap();
        assert_eq!(c.cluster_token, Some(Secret("fedcba9876543210fedcba".into())));
    }

    #[test]
    fn fsync_is_on_unless_turned_off() {
        assert!(parse(&[], &[]).unwrap().unwrap().fsync);
        assert!(!parse(&[], &[("REGINA_FSYNC", "off")]).unwrap().unwrap().fsync);
        assert!(parse(&["--fsync", "on"], &[("REGINA_FSYNC", "off")]).unwrap().unwrap().fsync);
        assert!(parse(&["--fsync=maybe"], &[]).is_err());
    }

    #[test]
    fn recent_bodies_are_sized_in_mib() {
        assert_eq!(parse(&[], &[]).unwrap().unwrap().recent_body_bytes, 128 << 20);
        assert_eq!(parse(&[], &[("REGINA_RECENT_BODY_MB", "0")]).unwrap().unwrap().recent_body_bytes, 0);
        assert_eq!(parse(&["--recent-body-mb", "3"], &[]).unwrap().unwrap().recent_body_bytes, 3 << 20);
        let e = parse(&["--recent-body-mb", "99999"], &[]).unwrap_err();
        assert!(e.contains("--recent-body-mb") && e.contains("16384"), "{e}");
        assert!(parse(&["--recent-body-mb", "-1"], &[]).is_err());
    }
}
