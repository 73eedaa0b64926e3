//! Line charts as PNG files, with no drawing or image crates: an RGB
//! canvas, 2 px Bresenham lines, a 5x7 bitmap font and a stored-block PNG
//! encoder. Enough to put benchmark results in the docs reproducibly.

pub mod font;
pub mod png;
pub mod runs;
pub mod scale;

pub type Rgb = [u8; 3];

/// Series colours in order; more series than colours reuse them.
pub const PALETTE: [Rgb; 4] = [[31, 119, 180], [214, 39, 40], [44, 160, 44], [148, 103, 189]];
const WHITE: Rgb = [255, 255, 255];
const INK: Rgb = [40, 40, 40];
const GRID: Rgb = [225, 225, 225];
const FRAME: Rgb = [160, 160, 160];

/// One line of a chart: its legend name and (x, y) points.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// An RGB raster. Drawing outside it is clipped silently.
pub struct Canvas {
    pub width: u32,
    pub height: u32,
    rgb: Vec<u8>,
}

impl Canvas {
    pub fn new(width: u32, height: u32, background: Rgb) -> Canvas {
        let rgb = background.repeat(width as usize * height as usize);
        Canvas { width, height, rgb }
    }

    pub fn get(&self, x: u32, y: u32) -> Rgb {
        let i = (y as usize * self.width as usize + x as usize) * 3;
        [self.rgb[i], self.rgb[i + 1], self.rgb[i + 2]]
    }

    pub fn set(&mut self, x: i64, y: i64, c: Rgb) {
        if x >= 0 && y >= 0 && x < self.width as i64 && y < self.height as i64 {
            let i = (y as usize * self.width as usize + x as usize) * 3;
            self.rgb[i..i + 3].copy_from_slice(&c);
        }
    }

    pub fn fill_rect(&mut self, x: i64, y: i64, w: i64, h: i64, c: Rgb) {
        for yy in y..y + h {
            for xx in x..x + w {
                self.set(xx, yy, c);
            }
        }
    }

    /// A 2 px thick line: Bresenham's walk stamping a 2x2 brush, which is
    /// two pixels across at every slope.
    pub fn line(&mut self, (mut x0, mut y0): (i64, i64), (x1, y1): (i64, i64), c: Rgb) {
        let (dx, dy) = ((x1 - x0).abs(), -(y1 - y0).abs());
        let (sx, sy) = (if x0 < x1 { 1 } else { -1 }, if y0 < y1 { 1 } else { -1 });
        let mut err = dx + dy;
        loop {
            self.fill_rect(x0, y0, 2, 2, c);
            if x0 == x1 && y0 == y1 {
                break;
            }
            let e2 = 2 * err;
            if e2 >= dy {
                err += dy;
                x0 += sx;
            }
            if e2 <= dx {
                err += dx;
                y0 += sy;
            }
        }
    }

    /// Draws `text` left to right with its top-left corner at (x, y).
    pub fn text(&mut self, x: i64, y: i64, text: &str, scale: i64, c: Rgb) {
        self.glyphs(text, scale, c, |i, col, row| (x + i * font::ADVANCE * scale + col * scale, y + row * scale));
    }

    /// Draws `text` turned a quarter left (reading bottom to top) with the
    /// bottom-left corner of its first character at (x, y).
    pub fn text_up(&mut self, x: i64, y: i64, text: &str, scale: i64, c: Rgb) {
        self.glyphs(text, scale, c, |i, col, row| (x + row * scale, y - (i * font::ADVANCE + col + 1) * scale + 1));
    }

    /// Stamps each set font pixel as a `scale`-sized square whose top-left
    /// corner `at(char index, column, row)` gives.
    fn glyphs(&mut self, text: &str, scale: i64, c: Rgb, at: impl Fn(i64, i64, i64) -> (i64, i64)) {
        for (i, ch) in text.chars().enumerate() {
            for (row, bits) in font::glyph(ch).iter().enumerate() {
                for col in 0..font::GLYPH_W {
                    if bits >> (font::GLYPH_W - 1 - col) & 1 == 1 {
                        let (px, py) = at(i as i64, col, row as i64);
                        self.fill_rect(px, py, scale, scale, c);
                    }
                }
            }
        }
    }

    pub fn png(&self) -> Vec<u8> {
        png::encode_rgb(self.width, self.height, &self.rgb)
    }
}

/// An axis: data range after the optional log10, and its ticks.
struct Axis {
    lo: f64,
    hi: f64,
    /// (position in axis units, label)
    ticks: Vec<(f64, String)>,
}

/// Ticks at 1, 2 or 5 times a power of ten, about five of them, on a range
/// widened to whole steps.
fn linear_axis(mut lo: f64, mut hi: f64) -> Axis {
    if hi <= lo {
        let pad = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
        (lo, hi) = (if lo >= 0.0 && lo - pad < 0.0 { 0.0 } else { lo - pad }, hi + pad);
    }
    let raw = (hi - lo) / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * mag).find(|s| *s >= raw * 0.999).unwrap_or(10.0 * mag);
    let (lo, hi) = ((lo / step).floor() * step, (hi / step).ceil() * step);
    let n = ((hi - lo) / step).round() as i64;
    let ticks =
        (0..=n).map(|i| lo + i as f64 * step).map(|v| (v, format_number(v, step, hi.abs().max(lo.abs())))).collect();
    Axis { lo, hi, ticks }
}

/// Whole decades around the data, ticked at each decade (every few decades
/// when there are many).
fn log_axis(lo: f64, hi: f64) -> Axis {
    let (lo, mut hi) = (lo.floor(), hi.ceil());
    if hi <= lo {
        hi = lo + 1.0;
    }
    let step = ((hi - lo) / 8.0).ceil().max(1.0);
    let n = ((hi - lo) / step).floor() as i64;
    let ticks = (0..=n)
        .map(|i| lo + i as f64 * step)
        .map(|e| {
            let v = 10f64.powf(e);
            (e, format_number(v, v, v))
        })
        .collect();
    Axis { lo, hi, ticks }
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

/// Draws a line chart of `series` and returns it as PNG bytes. With
/// `log_x` the x axis is log10 and points with x <= 0 are left out. The y
/// axis always includes zero so differences are not exaggerated.
pub fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    log_x: bool,
    width: u32,
    height: u32,
) -> Vec<u8> {
    draw(title, x_label, y_label, series, log_x, width, height).png()
}

/// [`line_chart`] before encoding, so tests can look at pixels.
pub fn draw(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    log_x: bool,
    width: u32,
    height: u32,
) -> Canvas {
    let (width, height) = (width.max(240), height.max(160));
    let tx = |x: f64| if log_x { x.log10() } else { x };
    let lines: Vec<Vec<(f64, f64)>> = series
        .iter()
        .map(|s| {
            let mut p: Vec<(f64, f64)> = s
                .points
                .iter()
                .filter(|(x, y)| x.is_finite() && y.is_finite() && (!log_x || *x > 0.0))
                .map(|&(x, y)| (tx(x), y))
                .collect();
            p.sort_by(|a, b| a.0.total_cmp(&b.0));
            p
        })
        .collect();
    let all = || lines.iter().flatten();
    let (xmin, xmax) = all().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| (lo.min(p.0), hi.max(p.0)));
    let ymax = all().fold(f64::NEG_INFINITY, |hi, p| hi.max(p.1));
    let ymin = all().fold(0f64, |lo, p| lo.min(p.1));
    let (xmin, xmax) = if xmin.is_finite() { (xmin, xmax) } else { (0.0, 1.0) };
    let xa = if log_x { log_axis(xmin, xmax) } else { linear_axis(xmin, xmax) };
    // Headroom above the highest point keeps it off the frame and clear of
    // the legend in the top corner.
    let ymax = if ymax.is_finite() { ymax + (ymax - ymin) * 0.05 } else { 1.0 };
    let ya = linear_axis(ymin, ymax);

    let mut c = Canvas::new(width, height, WHITE);
    let (w, h) = (width as i64, height as i64);
    let tick_w = ya.ticks.iter().map(|(_, l)| font::text_width(l, 1)).max().unwrap_or(0);
    let (left, right, top, bottom) = (8 + font::GLYPH_H + 10 + tick_w + 8, w - 24, 40, h - 44);
    let px = |x: f64| left + ((x - xa.lo) / (xa.hi - xa.lo) * (right - left) as f64).round() as i64;
    let py = |y: f64| bottom - ((y - ya.lo) / (ya.hi - ya.lo) * (bottom - top) as f64).round() as i64;

    for (v, label) in &xa.ticks {
        let x = px(*v);
        c.fill_rect(x, top, 1, bottom - top, GRID);
        c.fill_rect(x, bottom, 1, 5, INK);
        c.text(x - font::text_width(label, 1) / 2, bottom + 9, label, 1, INK);
    }
    for (v, label) in &ya.ticks {
        let y = py(*v);
        c.fill_rect(left, y, right - left + 1, 1, GRID);
        c.fill_rect(left - 5, y, 5, 1, INK);
        c.text(left - 8 - font::text_width(label, 1), y - font::GLYPH_H / 2, label, 1, INK);
    }
    c.fill_rect(left, top, 1, bottom - top + 1, INK);
    c.fill_rect(left, bottom, right - left + 1, 1, INK);

    for (i, pts) in lines.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        let pix: Vec<(i64, i64)> = pts.iter().map(|&(x, y)| (px(x), py(y))).collect();
        for pair in pix.windows(2) {
            c.line(pair[0], pair[1], colour);
        }
        // Markers show where the measurements are, and a lone point at all.
        for &(x, y) in &pix {
            c.fill_rect(x - 2, y - 2, 6, 6, colour);
        }
    }

    if !series.is_empty() {
        let name_w = series.iter().map(|s| font::text_width(&s.name, 1)).max().unwrap_or(0);
        let (lw, lh) = (name_w + 36, series.len() as i64 * 14 + 8);
        let (lx, ly) = (right - lw - 8, top + 8);
        c.fill_rect(lx, ly, lw, lh, WHITE);
        c.fill_rect(lx, ly, lw, 1, FRAME);
        c.fill_rect(lx, ly + lh - 1, lw, 1, FRAME);
        c.fill_rect(lx, ly, 1, lh, FRAME);
        c.fill_rect(lx + lw - 1, ly, 1, lh, FRAME);
        for (i, s) in series.iter().enumerate() {
            let y = ly + 6 + i as i64 * 14;
            c.fill_rect(lx + 6, y + 2, 18, 3, PALETTE[i % PALETTE.len()]);
            c.text(lx + 30, y, &s.name, 1, INK);
        }
    }

    c.text((w - font::text_width(title, 2)) / 2, 12, title, 2, INK);
    c.text((left + right - font::text_width(x_label, 1)) / 2, h - 16, x_label, 1, INK);
    c.text_up(8, (top + bottom + font::text_width(y_label, 1)) / 2, y_label, 1, INK);
    c
}

#[cfg(test)]
mod tests;
