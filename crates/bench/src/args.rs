//! Command-line settings of a run.

pub const USAGE: &str = "usage: regina-bench <push|consume|e2e|kv|partitions|fill|wait-ready|txn|timers> [--url U] \
[--seconds S] [--producers P] [--consumers C] [--groups G] [--batch B] [--payload BYTES] \
[--partitions N] [--messages N] [--queue NAME] [--rate MSG_PER_S] [--ratio READS] [--keys K] [--pid P]
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
                other => return Err(format!("unknown flag {other}")),
            }
        }
        Ok(a)
    }
}
