//! Line charts as SVG files, drawn with plotters' SVG backend. SVG leaves
//! text to the viewer, so no font is needed at build or run time, and the
//! files diff as text when a rerun moves a point.

pub mod runs;
pub mod scale;

use plotters::prelude::*;

/// Series colours in order; more series than colours reuse them.
pub const PALETTE: [RGBColor; 4] =
    [RGBColor(31, 119, 180), RGBColor(214, 39, 40), RGBColor(44, 160, 44), RGBColor(148, 103, 189)];

/// One line of a chart: its legend name and (x, y) points.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// `v` with as many decimals as `step` needs, in thousands (K) or millions
/// (M) once the axis reaches `top` of 10,000 or more.
pub fn format_number(v: f64, step: f64, top: f64) -> String {
    let (div, suffix) = match top {
        t if t >= 1e6 => (1e6, "M"),
        t if t >= 1e4 => (1e3, "K"),
        _ => (1.0, ""),
    };
    let decimals = (-(step / div).log10().floor()).clamp(0.0, 3.0) as usize;
    // Whatever rounds to zero prints as a bare "0": no decimals, no suffix,
    // and never "-0".
    if (v / div * 10f64.powi(decimals as i32)).round() == 0.0 {
        return "0".into();
    }
    format!("{:.*}{}", decimals, v / div, suffix)
}

/// The points a chart can place: finite, and with x > 0 on a log axis
/// (where x is drawn as its log10).
fn placed(series: &Series, log_x: bool) -> Vec<(f64, f64)> {
    series
        .points
        .iter()
        .filter(|(x, y)| x.is_finite() && y.is_finite() && (!log_x || *x > 0.0))
        .map(|&(x, y)| (if log_x { x.log10() } else { x }, y))
        .collect()
}

/// The x range (whole decades on a log axis) and the y range, which always
/// starts at zero so differences are not exaggerated.
fn ranges(lines: &[Vec<(f64, f64)>], log_x: bool) -> ((f64, f64), f64) {
    let all = lines.iter().flatten();
    let (lo, hi) = all.clone().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| (lo.min(p.0), hi.max(p.0)));
    let top = all.fold(0f64, |top, p| top.max(p.1));
    let (mut lo, mut hi) = if lo.is_finite() { (lo, hi) } else { (0.0, 1.0) };
    if log_x {
        (lo, hi) = (lo.floor(), hi.ceil());
    }
    if hi <= lo {
        (lo, hi) = (lo - 1.0, hi + 1.0);
    }
    ((lo, hi), if top > 0.0 { top * 1.1 } else { 1.0 })
}

/// Draws a line chart of `series` as an SVG document. With `log_x` the x
/// axis is log10 and points with x <= 0 are left out.
pub fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    log_x: bool,
    width: u32,
    height: u32,
) -> Result<String, String> {
    let lines: Vec<Vec<(f64, f64)>> = series.iter().map(|s| placed(s, log_x)).collect();
    let ((x_lo, x_hi), y_hi) = ranges(&lines, log_x);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width.max(240), height.max(160))).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(64)
            .build_cartesian_2d(x_lo..x_hi, 0f64..y_hi)
            .map_err(|e| e.to_string())?;
        let x_text = |v: &f64| match log_x {
            true => format_number(10f64.powf(*v), 10f64.powf(*v), 10f64.powf(*v)),
            false => format_number(*v, (x_hi - x_lo) / 5.0, x_hi.abs().max(x_lo.abs())),
        };
        let y_text = |v: &f64| format_number(*v, y_hi / 5.0, y_hi);
        let decades = (x_hi - x_lo).round() as usize + 1;
        chart
            .configure_mesh()
            .x_desc(x_label)
            .y_desc(y_label)
            .x_labels(if log_x { decades.min(12) } else { 6 })
            .y_labels(6)
            .x_label_formatter(&x_text)
            .y_label_formatter(&y_text)
            .light_line_style(RGBColor(240, 240, 240))
            .draw()
            .map_err(|e| e.to_string())?;
        for (i, (s, points)) in series.iter().zip(lines).enumerate() {
            let colour = PALETTE[i % PALETTE.len()];
            let style = colour.stroke_width(2);
            chart
                .draw_series(LineSeries::new(points.clone(), style))
                .map_err(|e| e.to_string())?
                .label(s.name.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
            chart
                .draw_series(points.into_iter().map(|p| Circle::new(p, 3, colour.filled())))
                .map_err(|e| e.to_string())?;
        }
        if !series.is_empty() {
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.9))
                .border_style(RGBColor(160, 160, 160))
                .draw()
                .map_err(|e| e.to_string())?;
        }
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests;
