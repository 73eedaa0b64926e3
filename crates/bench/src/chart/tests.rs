use serde_json::json;

use super::*;

fn count(c: &Canvas, colour: Rgb, (x0, y0, x1, y1): (u32, u32, u32, u32)) -> usize {
    let mut n = 0;
    for y in y0..y1.min(c.height) {
        for x in x0..x1.min(c.width) {
            n += usize::from(c.get(x, y) == colour);
        }
    }
    n
}

fn whole(c: &Canvas) -> (u32, u32, u32, u32) {
    (0, 0, c.width, c.height)
}

fn two_series() -> Vec<Series> {
    vec![
        Series { name: "regina".into(), points: vec![(1.0, 90_000.0), (1000.0, 80_000.0), (1e7, 20_000.0)] },
        Series { name: "queen".into(), points: vec![(10.0, 40_000.0), (1e5, 30_000.0), (1e6, 5_000.0)] },
    ]
}

#[test]
fn two_series_draw_in_both_colours() {
    let c = draw("Push throughput", "partitions", "messages/s", &two_series(), true, 640, 360);
    assert!(count(&c, PALETTE[0], whole(&c)) > 200, "first series drawn");
    assert!(count(&c, PALETTE[1], whole(&c)) > 200, "second series drawn");
    assert_eq!(count(&c, PALETTE[2], whole(&c)), 0);
}

#[test]
fn text_renders_the_font_bitmaps() {
    let mut c = Canvas::new(100, 40, WHITE);
    c.text(3, 4, "P99 (ms)", 1, INK);
    for (i, ch) in "P99 (ms)".chars().enumerate() {
        let rows = font::glyph(ch);
        for (r, bits) in rows.iter().enumerate() {
            for col in 0..5 {
                let on = bits >> (4 - col) & 1 == 1;
                let (x, y) = (3 + i as u32 * 6 + col, 4 + r as u32);
                assert_eq!(c.get(x, y) == INK, on, "{ch:?} at column {col}, row {r}");
            }
        }
    }
    // Nothing outside the text box.
    assert_eq!(count(&c, INK, whole(&c)), count(&c, INK, (3, 4, 3 + 47, 11)));
}

#[test]
fn scaled_and_upward_text() {
    let mut c = Canvas::new(40, 40, WHITE);
    c.text(0, 0, "-", 2, INK);
    // The dash is row 3, five columns wide: 10 x 2 pixels at scale 2.
    assert_eq!(count(&c, INK, whole(&c)), 20);
    assert_eq!(count(&c, INK, (0, 6, 10, 8)), 20);

    let mut c = Canvas::new(40, 40, WHITE);
    c.text_up(5, 30, "L", 1, INK);
    // Turned a quarter left, L's seven rows become columns 5..12 and its
    // left edge lies along y = 30.
    assert_eq!(count(&c, INK, (5, 30, 12, 31)), 7);
    // The foot (bottom row, five pixels) becomes the column x = 11.
    assert_eq!(count(&c, INK, (11, 26, 12, 31)), 5);
    assert_eq!(count(&c, INK, whole(&c)), 11);
}

#[test]
fn chart_labels_render() {
    let blank = draw("", "", "", &two_series(), true, 640, 360);
    let labelled = draw("Push throughput", "partitions", "messages/s", &two_series(), true, 640, 360);
    // Title band at the top, x label at the bottom, y label at the left.
    assert_eq!(count(&blank, INK, (0, 0, 640, 30)), 0);
    assert!(count(&labelled, INK, (0, 0, 640, 30)) > 100);
    assert!(count(&labelled, INK, (0, 340, 640, 360)) > count(&blank, INK, (0, 340, 640, 360)) + 30);
    assert!(count(&labelled, INK, (0, 0, 16, 360)) > 30);
    // Tick labels: ink below the x axis in both.
    assert!(count(&blank, INK, (60, 320, 640, 335)) > 100);
}

#[test]
fn lines_are_two_pixels_thick() {
    let mut c = Canvas::new(30, 30, WHITE);
    c.line((2, 5), (20, 5), PALETTE[0]);
    assert_eq!(count(&c, PALETTE[0], whole(&c)), 19 * 2 + 2);
    let mut c = Canvas::new(30, 30, WHITE);
    c.line((20, 20), (2, 2), PALETTE[1]);
    for i in 2..=20 {
        assert_eq!(c.get(i, i), PALETTE[1]);
        assert_eq!(c.get(i + 1, i), PALETTE[1]);
    }
    // Off-canvas drawing is clipped, not a panic.
    c.line((-10, -10), (40, 50), PALETTE[2]);
}

#[test]
fn axes_and_numbers() {
    let a = log_axis(0.0, 7.0);
    let labels: Vec<&str> = a.ticks.iter().map(|(_, l)| l.as_str()).collect();
    assert_eq!(labels, ["1", "10", "100", "1000", "10K", "100K", "1M", "10M"]);
    let a = linear_axis(0.0, 87_000.0);
    assert_eq!((a.lo, a.hi), (0.0, 100_000.0));
    let labels: Vec<&str> = a.ticks.iter().map(|(_, l)| l.as_str()).collect();
    assert_eq!(labels, ["0", "20K", "40K", "60K", "80K", "100K"]);
    let a = linear_axis(0.0, 2.2);
    let labels: Vec<&str> = a.ticks.iter().map(|(_, l)| l.as_str()).collect();
    assert_eq!(labels, ["0", "0.5", "1.0", "1.5", "2.0", "2.5"]);
    let a = linear_axis(0.0, 0.0);
    assert!(a.hi > a.lo);
    assert_eq!(format_number(2_500_000.0, 500_000.0, 3e6), "2.5M");
    assert_eq!(format_number(-0.0000001, 0.5, 2.0), "0");
}

#[test]
fn empty_and_degenerate_inputs_still_draw() {
    for series in [vec![], vec![Series { name: "one".into(), points: vec![(5.0, 3.0)] }]] {
        for log in [false, true] {
            let png = line_chart("t", "x", "y", &series, log, 10, 10);
            assert_eq!(png[..8], [0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A]);
            assert_eq!(png[16..24], [0, 0, 0, 240, 0, 0, 0, 160], "clamped to the minimum size");
        }
    }
    // Zero and negative x cannot go on a log axis; they are skipped.
    let s = [Series { name: "s".into(), points: vec![(0.0, 1.0), (-3.0, 2.0), (100.0, 2.0), (f64::NAN, 1.0)] }];
    let c = draw("", "", "", &s, true, 300, 200);
    assert!(count(&c, PALETTE[0], whole(&c)) > 0);
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
    assert_eq!(files, ["push-throughput.png", "push-p99.png", "e2e-p99.png"]);
    assert_eq!(charts[0].series.len(), 2);
    assert_eq!(charts[0].series[0].name, "regina");
    assert_eq!(charts[0].series[0].points, [(1000.0, 90000.0), (10.0, 95000.0)]);
    assert_eq!(charts[1].series[1].points, [(1000.0, 9.5)]);
    assert_eq!(charts[2].series[0].name, "e2e");
    assert_eq!(charts[2].series[0].points, [(1000.0, 12.0), (100000.0, 30.0)]);
    assert!(charts[2].log_x, "rates spanning 100x go on a log axis");
    assert!(charts.iter().all(|c| c.png().starts_with(b"\x89PNG")));

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
    assert_eq!(files, ["scale-pop-p99.png", "scale-memory.png"]);
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
    assert!(charts.iter().all(|c| c.png().starts_with(b"\x89PNG")));

    // Without any RSS there is no memory chart.
    let charts = runs::charts(&json!([{"scenario": "scale", "steps": [scale_step(10, 1.0, None)]}])).unwrap();
    assert_eq!(charts.iter().map(|c| c.file).collect::<Vec<_>>(), ["scale-pop-p99.png"]);

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
    assert_eq!(files, ["push-throughput.png", "push-p99.png"], "the fsync-off e2e run draws no chart");
    assert_eq!(charts[0].series[0].points, [(1000.0, 10.0), (1.0, 5.0)]);
    // A malformed fsync-off run is skipped, not an error; only fsync-off runs is nothing to draw.
    let err = runs::charts(&json!([{"scenario": "push", "fsync": "off"}])).err().unwrap();
    assert!(err.contains("fsync off"), "{err}");
}
