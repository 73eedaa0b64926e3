use serde_json::json;

use super::*;

fn two_series() -> Vec<Series> {
    vec![
        Series { name: "regina".into(), points: vec![(1.0, 90_000.0), (1000.0, 80_000.0), (1e7, 20_000.0)] },
        Series { name: "queen".into(), points: vec![(10.0, 40_000.0), (1e5, 30_000.0), (1e6, 5_000.0)] },
    ]
}

/// The text of every `<text>` element, trimmed.
fn texts(svg: &str) -> Vec<String> {
    svg.split("</text>")
        .filter_map(|chunk| chunk.rfind("<text").map(|i| &chunk[i..]))
        .filter_map(|el| el.split_once('>').map(|(_, t)| t.trim().to_string()))
        .collect()
}

/// `#rrggbb` as plotters writes a colour into the SVG.
fn hex(c: RGBColor) -> String {
    format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
}

#[test]
fn two_series_draw_in_their_colours_with_labels_and_legend() {
    let svg = line_chart("Push throughput", "partitions", "messages/s", &two_series(), true, 640, 360).unwrap();
    assert!(svg.starts_with("<svg"), "{svg}");
    let texts = texts(&svg);
    for text in ["Push throughput", "partitions", "messages/s", "regina", "queen"] {
        assert!(texts.iter().any(|t| t == text), "{text} is drawn: {texts:?}");
    }
    assert!(svg.matches(&hex(PALETTE[0])).count() >= 4, "first series: line, points, legend");
    assert!(svg.matches(&hex(PALETTE[1])).count() >= 4, "second series");
    assert!(!svg.contains(&hex(PALETTE[2])), "no third series");
    // Log x ticks at decades, y ticks in thousands.
    for tick in ["1", "10", "100", "1000", "10K", "100K", "1M", "10M"] {
        assert!(texts.iter().any(|t| t == tick), "decade tick {tick}: {texts:?}");
    }
    assert!(texts.iter().any(|t| t.ends_with('K') && t.len() > 2), "thousands on the y axis: {texts:?}");
}

#[test]
fn numbers_format_with_the_decimals_their_step_needs() {
    assert_eq!(format_number(2_500_000.0, 500_000.0, 3e6), "2.5M");
    assert_eq!(format_number(-0.0000001, 0.5, 2.0), "0");
    assert_eq!(format_number(15_000.0, 5_000.0, 20_000.0), "15K");
    assert_eq!(format_number(0.25, 0.05, 1.0), "0.25");
}

#[test]
fn empty_and_degenerate_inputs_still_draw() {
    for series in [vec![], vec![Series { name: "one".into(), points: vec![(5.0, 3.0)] }]] {
        for log in [false, true] {
            let svg = line_chart("t", "x", "y", &series, log, 10, 10).unwrap();
            assert!(svg.starts_with("<svg") && svg.contains("width=\"240\""), "clamped to the minimum size");
        }
    }
    // Zero, negative and NaN x cannot go on a log axis; they are skipped.
    let s = [Series { name: "s".into(), points: vec![(0.0, 1.0), (-3.0, 2.0), (100.0, 2.0), (f64::NAN, 1.0)] }];
    let svg = line_chart("", "", "", &s, true, 300, 200).unwrap();
    assert_eq!(svg.matches("<circle").count(), 1, "only the point at x = 100 is placed");
}

#[test]
fn runs_become_three_charts() {
    let input = json!({"runs": [
        {"scenario": "push", "label": "regina", "partitions": 1000, "messagesPerSecond": 90000.0,
         "latencyMs": {"p50": 1.0, "p99": 4.5, "p999": 9.0, "max": 12.0}},
        {"scenario": "push", "label": "regina", "partitions": 10, "messagesPerSecond": 95000.0,
         "latencyMs": {"p99": 3.0}},
        {"scenario": "push", "label": "queen", "partitions": 1000, "messagesPerSecond": 40000.0,
         "latencyMs": {"p99": 9.5}},
        {"scenario": "e2e", "offeredRate": 1000.0, "latencyMs": {"p99": 12.0}},
        {"scenario": "e2e", "rate": 100000.0, "latencyMs": {"p99": 30.0}},
        {"scenario": "kv", "opsPerSecond": 5.0},
    ]});
    let charts = runs::charts(&input).unwrap();
    let files: Vec<&str> = charts.iter().map(|c| c.file).collect();
    assert_eq!(files, ["push-throughput.svg", "push-p99.svg", "e2e-p99.svg"]);
    assert_eq!(charts[0].series.len(), 2);
    assert_eq!(charts[0].series[0].name, "regina");
    assert_eq!(charts[0].series[0].points, [(1000.0, 90000.0), (10.0, 95000.0)]);
    assert_eq!(charts[1].series[1].points, [(1000.0, 9.5)]);
    assert_eq!(charts[2].series[0].name, "e2e");
    assert_eq!(charts[2].series[0].points, [(1000.0, 12.0), (100000.0, 30.0)]);
    assert!(charts[2].log_x, "rates spanning 100x go on a log axis");
    assert!(charts.iter().all(|c| c.svg().is_ok_and(|svg| svg.starts_with("<svg"))));

    // A bare array works; a push run without its throughput is an error.
    let bare = json!([{"scenario": "e2e", "offeredRate": 10.0, "latencyMs": {"p99": 1.0}}]);
    let charts = runs::charts(&bare).unwrap();
    assert_eq!(charts.len(), 1);
    assert!(!charts[0].log_x);
    let err =
        runs::charts(&json!({"runs": [{"scenario": "push", "partitions": 1, "latencyMs": {"p99": 1}}]})).err().unwrap();
    assert!(err.contains("run 0") && err.contains("messagesPerSecond"), "{err}");
    let err = runs::charts(&json!({"runs": [{"scenario": "e2e", "latencyMs": {"p99": 1}}]})).err().unwrap();
    assert!(err.contains("offeredRate"), "{err}");
    assert!(runs::charts(&json!({"runs": []})).is_err());
    assert!(runs::charts(&json!({"other": 1})).is_err());
}

fn scale_step(partitions: u64, pop: f64, rss: Option<f64>) -> serde_json::Value {
    let mut s = json!({"partitions": partitions, "createdPerSecond": 1e5,
                       "popLatencyMs": {"p50": pop / 2.0, "p99": pop}, "popAckLatencyMs": {"p99": pop * 2.0},
                       "namedPopLatencyMs": {"p99": 0.5}});
    if let Some(r) = rss {
        s["rssBytesPerPartition"] = json!(r);
    }
    s
}

#[test]
fn scale_runs_become_latency_and_memory_charts() {
    let input = json!({"runs": [
        {"scenario": "scale", "fsync": "on", "steps": [
            scale_step(1000, 1.0, Some(900.0)), scale_step(10_000, 2.0, Some(800.0)), scale_step(100_000, 9.0, None)]},
        {"scenario": "scale", "label": "next", "steps": [scale_step(1000, 0.5, None)]},
        {"scenario": "scale", "fsync": "off", "steps": [scale_step(1000, 99.0, Some(1.0))]},
    ]});
    let charts = runs::charts(&input).unwrap();
    let files: Vec<&str> = charts.iter().map(|c| c.file).collect();
    assert_eq!(files, ["scale-pop-p99.svg", "scale-memory.svg"]);
    assert!(charts.iter().all(|c| c.log_x));
    let names: Vec<&str> = charts[0].series.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        ["pop p99", "pop+ack p99", "named pop p99", "next: pop p99", "next: pop+ack p99", "next: named pop p99"]
    );
    assert_eq!(charts[0].series[0].points, [(1000.0, 1.0), (10_000.0, 2.0), (100_000.0, 9.0)]);
    assert_eq!(charts[0].series[1].points, [(1000.0, 2.0), (10_000.0, 4.0), (100_000.0, 18.0)]);
    // Memory only where RSS was measured; the unlabelled run is "scale".
    assert_eq!(charts[1].series.len(), 1);
    assert_eq!(charts[1].series[0].name, "scale");
    assert_eq!(charts[1].series[0].points, [(1000.0, 900.0), (10_000.0, 800.0)]);
    assert!(charts.iter().all(|c| c.svg().is_ok_and(|svg| svg.starts_with("<svg"))));

    // Without any RSS there is no memory chart.
    let charts = runs::charts(&json!([{"scenario": "scale", "steps": [scale_step(10, 1.0, None)]}])).unwrap();
    assert_eq!(charts.iter().map(|c| c.file).collect::<Vec<_>>(), ["scale-pop-p99.svg"]);

    // A step without its pop latency is an error naming run and step.
    let bad = json!([{"scenario": "scale", "steps": [scale_step(10, 1.0, None), {"partitions": 100}]}]);
    let err = runs::charts(&bad).err().unwrap();
    assert!(err.contains("run 0") && err.contains("step 1") && err.contains("popLatencyMs.p99"), "{err}");
    assert!(runs::charts(&json!([{"scenario": "scale"}])).err().unwrap().contains("steps"));
}

#[test]
fn fsync_off_runs_stay_off_the_charts() {
    let push = |p: u64, rate: f64, fsync: &str| {
        json!({"scenario": "push", "fsync": fsync, "partitions": p, "messagesPerSecond": rate,
               "latencyMs": {"p99": 1.0}})
    };
    let input = json!({"runs": [push(1000, 10.0, "on"), push(1000, 99.0, "off"), push(1, 5.0, "on"),
        {"scenario": "e2e", "fsync": "off", "offeredRate": 10.0, "latencyMs": {"p99": 1.0}}]});
    let charts = runs::charts(&input).unwrap();
    let files: Vec<&str> = charts.iter().map(|c| c.file).collect();
    assert_eq!(files, ["push-throughput.svg", "push-p99.svg"], "the fsync-off e2e run draws no chart");
    assert_eq!(charts[0].series[0].points, [(1000.0, 10.0), (1.0, 5.0)]);
    // A malformed fsync-off run is skipped, not an error; only fsync-off runs is nothing to draw.
    let err = runs::charts(&json!([{"scenario": "push", "fsync": "off"}])).err().unwrap();
    assert!(err.contains("fsync off"), "{err}");
}
