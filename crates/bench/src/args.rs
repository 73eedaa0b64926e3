//! Command-line settings of a run.

pub const USAGE: &str =
    "usage: regina-bench <push|consume|e2e|kv|partitions|scale|fill|wait-ready|txn|timers|jobs|redis-push|redis-consume> [--url U] \
[--seconds S] [--producers P] [--consumers C] [--groups G] [--batch B] [--payload BYTES] \
[--partitions N] [--messages N] [--queue NAME] [--rate MSG_PER_S] [--ratio READS] [--keys K] [--pid P] \
[--steps N,N,...] [--pops N] [--pending N] [--workers W] [--tenants N] [--follow-leader on|off] \
[--tag KEY=VALUE]...
       regina-bench chart --input RESULTS.json [--out DIR]";

#[derive(Debug, Clone)]
pub struct Args {
    pub scenario: String,
    pub url: String,
    pub seconds: f64,
    pub producers: usize,
    pub batch: usize,
    pub payload: usize,
    pub partitions: usize,
    pub messages: u64,
    pub queue: String,
    /// Consumers per consumer group (`consume`, `e2e`).
    pub consumers: usize,
    /// Independent consumer groups that each read everything.
    pub groups: usize,
    /// Offered load of the open-loop `e2e` producers, messages per second.
    pub rate: f64,
    /// Fraction of `kv` operations that are reads.
    pub ratio: f64,
    /// Size of the `kv` key space.
    pub keys: usize,
    /// Broker process whose resident memory `partitions` reports.
    pub pid: Option<u32>,
    /// JSON file of collected reports that `chart` draws.
    pub input: Option<String>,
    /// Directory `chart` writes its PNG files into.
    pub out: String,
    /// Partition counts `scale` grows its queue through, ascending.
    pub steps: Vec<u64>,
    /// Wildcard pops `scale` measures at each step.
    pub pops: usize,
    /// Jobs `jobs` enqueues before its workers start.
    pub pending: u64,
    /// Workers `jobs` runs, each claiming and completing one job at a time.
    pub workers: usize,
    /// Tenants `push` spreads its batches over (0: the default tenant).
    pub tenants: usize,
    /// Whether `push` sends a tenant's next batch to the leader the broker
    /// named.
    pub follow_leader: bool,
    /// `key=value` pairs copied into the report as string fields, so a
    /// script can mark how the broker was run (e.g. `fsync=off`) without
    /// the scenarios knowing about it.
    pub tags: Vec<(String, String)>,
}

/// Partition counts `scale` visits when `--steps` is not given.
pub const DEFAULT_STEPS: [u64; 4] = [1_000, 10_000, 100_000, 1_000_000];

/// Parses `--steps`: a comma list of positive, strictly ascending counts;
/// `_` may group digits (`1_000_000`). Ascending because `scale` only ever
/// adds partitions to the queue it grows.
pub fn parse_steps(v: &str) -> Result<Vec<u64>, String> {
    let mut steps: Vec<u64> = Vec::new();
    for part in v.split(',') {
        let digits = part.trim().replace('_', "");
        let n: u64 = digits.parse().map_err(|_| format!("--steps: {:?} is not a count", part.trim()))?;
        if n == 0 {
            return Err("--steps: a step needs at least one partition".into());
        }
        if let Some(&prev) = steps.last() {
            if n <= prev {
                return Err(format!("--steps must ascend: {n} follows {prev}"));
            }
        }
        steps.push(n);
    }
    Ok(steps)
}

/// Parses a count that may group digits with `_` (`1_000_000`).
fn parse_count(flag: &str, v: &str) -> Result<u64, String> {
    v.trim().replace('_', "").parse().map_err(|_| format!("{flag}: {v:?} is not a count"))
}

/// Parses `--tag key=value`; the key must be non-empty.
fn parse_tag(v: &str) -> Result<(String, String), String> {
    match v.split_once('=') {
        Some((k, val)) if !k.trim().is_empty() => Ok((k.trim().to_string(), val.to_string())),
        _ => Err(format!("--tag: {v:?} is not key=value")),
    }
}

impl Args {
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Args, String> {
        let mut a = Args {
            scenario: String::new(),
            url: "http://127.0.0.1:6632".into(),
            seconds: 10.0,
            producers: 8,
            batch: 100,
            payload: 256,
            partitions: 1000,
            messages: 1_000_000,
            queue: "bench".into(),
            consumers: 4,
            groups: 1,
            rate: 1000.0,
            ratio: 0.8,
            keys: 1000,
            pid: None,
            input: None,
            out: "docs/charts".into(),
            steps: DEFAULT_STEPS.to_vec(),
            pops: 2000,
            pending: 1000,
            workers: 16,
            tenants: 0,
            follow_leader: false,
            tags: Vec::new(),
        };
        let mut it = args.into_iter();
        a.scenario = it.next().ok_or("a scenario is required")?;
        while let Some(flag) = it.next() {
            let v = it.next().ok_or(format!("{flag} needs a value"))?;
            let num = |v: &str| v.parse::<f64>().map_err(|_| format!("{flag}: {v:?} is not a number"));
            match flag.as_str() {
                "--url" => a.url = v.trim_end_matches('/').to_string(),
                "--seconds" => a.seconds = num(&v)?,
                "--producers" => a.producers = num(&v)?.max(1.0) as usize,
                "--batch" => a.batch = num(&v)?.max(1.0) as usize,
                "--payload" => a.payload = num(&v)? as usize,
                "--partitions" => a.partitions = num(&v)?.max(1.0) as usize,
                "--messages" => a.messages = num(&v)? as u64,
                "--queue" => a.queue = v,
                "--consumers" => a.consumers = num(&v)?.max(1.0) as usize,
                "--groups" => a.groups = num(&v)?.max(1.0) as usize,
                "--rate" => a.rate = num(&v)?.max(1.0),
                "--ratio" => a.ratio = num(&v)?.clamp(0.0, 1.0),
                "--keys" => a.keys = num(&v)?.max(1.0) as usize,
                "--pid" => a.pid = Some(v.parse().map_err(|_| format!("--pid: {v:?} is not a process id"))?),
                "--input" => a.input = Some(v),
                "--out" => a.out = v,
                "--steps" => a.steps = parse_steps(&v)?,
                "--pops" => a.pops = num(&v)?.max(1.0) as usize,
                "--pending" => a.pending = parse_count("--pending", &v)?,
                "--workers" => a.workers = num(&v)?.max(1.0) as usize,
                "--tenants" => a.tenants = num(&v)? as usize,
                "--follow-leader" => {
                    a.follow_leader = match v.as_str() {
                        "on" => true,
                        "off" => false,
                        _ => return Err(format!("--follow-leader: {v:?} is neither on nor off")),
                    }
                }
                "--tag" => a.tags.push(parse_tag(&v)?),
                other => return Err(format!("unknown flag {other}")),
            }
        }
        Ok(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: &[&str]) -> Result<Args, String> {
        Args::parse(v.iter().map(|s| s.to_string()))
    }

    #[test]
    fn steps_parse_ascending_lists() {
        assert_eq!(parse_steps("1000").unwrap(), [1000]);
        assert_eq!(parse_steps("1000, 10_000,100000").unwrap(), [1000, 10_000, 100_000]);
        assert!(parse_steps("").is_err());
        assert!(parse_steps("1000,,2000").is_err());
        assert!(parse_steps("0,10").unwrap_err().contains("at least one"));
        assert!(parse_steps("10,10").unwrap_err().contains("ascend"));
        assert!(parse_steps("100,10").unwrap_err().contains("ascend"));
        assert!(parse_steps("1e6").is_err());
        assert!(parse_steps("-5").is_err());
    }

    #[test]
    fn jobs_flags_and_defaults() {
        let a = parse(&["jobs"]).unwrap();
        assert_eq!((a.pending, a.workers), (1000, 16));
        let a = parse(&["jobs", "--pending", "1_000_000", "--workers", "4", "--queue", "q"]).unwrap();
        assert_eq!((a.pending, a.workers, a.queue.as_str()), (1_000_000, 4, "q"));
        assert!(parse(&["jobs", "--pending", "1e6"]).is_err());
        assert!(parse(&["jobs", "--pending", "-1"]).is_err());
        assert_eq!(parse(&["jobs", "--workers", "0"]).unwrap().workers, 1);
    }

    #[test]
    fn scale_flags_and_defaults() {
        let a = parse(&["scale"]).unwrap();
        assert_eq!(a.steps, DEFAULT_STEPS);
        assert_eq!(a.pops, 2000);
        assert!(a.tags.is_empty());
        let a =
            parse(&["scale", "--steps", "5,50", "--pops", "300", "--tag", "fsync=off", "--tag", "build=a=b"]).unwrap();
        assert_eq!(a.steps, [5, 50]);
        assert_eq!(a.pops, 300);
        assert_eq!(a.tags, [("fsync".to_string(), "off".to_string()), ("build".to_string(), "a=b".to_string())]);
        assert!(parse(&["scale", "--tag", "=off"]).is_err());
        assert!(parse(&["scale", "--tag", "off"]).is_err());
        assert!(parse(&["scale", "--steps", "9,3"]).is_err());
    }
}
