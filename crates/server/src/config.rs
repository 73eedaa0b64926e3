//! Where the node listens and keeps its data. Flags win over environment
//! variables, which win over the embedded defaults.

use std::net::IpAddr;
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
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: DEFAULT_BIND.parse().expect("valid default address"),
            port: DEFAULT_PORT,
            data_dir: PathBuf::from(DEFAULT_DATA_DIR),
            encryption_key_file: None,
            fsync: true,
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
  --help           show this text
";

impl Config {
    /// Reads the environment, then the flags. `Err` carries a message for
    /// the user; `Ok(None)` means `--help` was asked for.
    pub fn from_args_and_env(
        args: impl IntoIterator<Item = String>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Config>, String> {
        let mut c = Config::default();
        if let Some(v) = env("REGINA_BIND") {
            c.bind = parse_bind(&v)?;
        }
        if let Some(v) = env("REGINA_PORT") {
            c.port = parse_port(&v)?;
        }
        if let Some(v) = env("REGINA_DATA_DIR") {
            c.data_dir = PathBuf::from(v);
        }
        if let Some(v) = env("REGINA_ENCRYPTION_KEY_FILE") {
            c.encryption_key_file = Some(PathBuf::from(v));
        }
        if let Some(v) = env("REGINA_FSYNC") {
            c.fsync = parse_fsync(&v)?;
        }
        let mut args = args.into_iter();
        while let Some(a) = args.next() {
            let (flag, inline) = match a.split_once('=') {
                Some((f, v)) => (f.to_string(), Some(v.to_string())),
                None => (a.clone(), None),
            };
            let mut value = || inline.clone().or_else(|| args.next()).ok_or(format!("{flag} needs a value"));
            match flag.as_str() {
                "--bind" => c.bind = parse_bind(&value()?)?,
                "--port" => c.port = parse_port(&value()?)?,
                "--data-dir" => c.data_dir = PathBuf::from(value()?),
                "--encryption-key-file" => c.encryption_key_file = Some(PathBuf::from(value()?)),
                "--fsync" => c.fsync = parse_fsync(&value()?)?,
                "--help" | "-h" => return Ok(None),
                other => return Err(format!("unknown argument {other}\n\n{USAGE}")),
            }
        }
        Ok(Some(c))
    }
}

fn parse_bind(v: &str) -> Result<IpAddr, String> {
    v.parse().map_err(|_| format!("--bind: {v:?} is not an IP address"))
}

fn parse_fsync(v: &str) -> Result<bool, String> {
    match v {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("--fsync: {v:?} is neither on nor off")),
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
    fn fsync_is_on_unless_turned_off() {
        assert!(parse(&[], &[]).unwrap().unwrap().fsync);
        assert!(!parse(&[], &[("REGINA_FSYNC", "off")]).unwrap().unwrap().fsync);
        assert!(parse(&["--fsync", "on"], &[("REGINA_FSYNC", "off")]).unwrap().unwrap().fsync);
        assert!(parse(&["--fsync=maybe"], &[]).is_err());
    }
}
