//! The one timestamp format on the wire: ISO-8601 UTC with microseconds and
//! `Z`, fixed width, so clients that compare timestamps as strings get the
//! right order. Internally time is milliseconds since the Unix epoch, stamped
//! by the leader into every log entry.

/// Milliseconds since the Unix epoch.
pub type Millis = u64;

/// Formats `ms` as `YYYY-MM-DDTHH:MM:SS.ffffffZ`.
pub fn format_iso(ms: Millis) -> String {
    match Iso(ms).fixed_width() {
        // Allocated once at its size; `to_string` grows through `fmt`.
        Some(text) => std::str::from_utf8(&text).expect("ASCII digits").to_owned(),
        None => Iso(ms).to_string(),
    }
}

/// A time in milliseconds that displays as [`format_iso`] spells it, for
/// writers that need no `String` of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Iso(pub Millis);

impl Iso {
    /// The text as fixed-width ASCII, written without `fmt` (a popped
    /// message's `createdAt` through `write!` cost about a tenth of its
    /// answer), for years up to 9999; `None` beyond, where the year needs
    /// more digits and [`Display`](std::fmt::Display) spells it.
    pub fn fixed_width(&self) -> Option<[u8; 27]> {
        let ms = self.0;
        let secs = ms / 1000;
        let rem = secs % 86_400;
        let (y, m, d) = civil_from_days((secs / 86_400) as i64);
        if y > 9999 {
            return None;
        }
        let mut out = *b"0000-00-00T00:00:00.000000Z";
        let mut put = |at: usize, width: usize, mut n: u64| {
            for i in (at..at + width).rev() {
                out[i] = b'0' + (n % 10) as u8;
                n /= 10;
            }
        };
        put(0, 4, y as u64);
        put(5, 2, u64::from(m));
        put(8, 2, u64::from(d));
        put(11, 2, rem / 3600);
        put(14, 2, (rem % 3600) / 60);
        put(17, 2, rem % 60);
        // Milliseconds, then the three microsecond digits stay zero.
        put(20, 3, ms % 1000);
        Some(out)
    }
}

impl std::fmt::Display for Iso {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(text) = self.fixed_width() {
            return f.write_str(std::str::from_utf8(&text).expect("ASCII digits"));
        }
        let ms = self.0;
        let secs = ms / 1000;
        let micros = (ms % 1000) * 1000;
        let days = (secs / 86_400) as i64;
        let rem = secs % 86_400;
        let (y, m, d) = civil_from_days(days);
        write!(
            f,
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z",
            y,
            m,
            d,
            rem / 3600,
            (rem % 3600) / 60,
            rem % 60,
            micros
        )
    }
}

/// Parses an ISO-8601 timestamp with any fraction length and `Z` or `±hh:mm`
/// (a date alone means midnight UTC). Returns milliseconds since the epoch;
/// instants before 1970 clamp to 0.
pub fn parse_iso(s: &str) -> Option<Millis> {
    let s = s.trim();
    let b = s.as_bytes();
    if b.len() < 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let number = |r: std::ops::Range<usize>| {
        let part = s.get(r)?;
        part.bytes().all(|b| b.is_ascii_digit()).then(|| part.parse::<u32>().ok()).flatten()
    };
    let year = i64::from(number(0..4)?);
    let month = number(5..7)?;
    let day = number(8..10)?;
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    let mut ms_of_day: i64 = 0;
    let mut offset_ms: i64 = 0;
    if b.len() > 10 {
        if b[10] != b'T' && b[10] != b't' && b[10] != b' ' {
            return None;
        }
        let rest = &s[11..];
        let (clock, zone) = split_zone(rest)?;
        ms_of_day = parse_clock(clock)?;
        offset_ms = parse_zone(zone)?;
    }
    let days = days_from_civil(year, month, day);
    let total = days * 86_400_000 + ms_of_day - offset_ms;
    Some(total.max(0) as Millis)
}

fn split_zone(rest: &str) -> Option<(&str, &str)> {
    if let Some(stripped) = rest.strip_suffix('Z').or_else(|| rest.strip_suffix('z')) {
        return Some((stripped, ""));
    }
    match rest.rfind(['+', '-']) {
        Some(i) if i >= 5 => Some((&rest[..i], &rest[i..])),
        _ => Some((rest, "")),
    }
}

fn parse_clock(clock: &str) -> Option<i64> {
    let (hms, frac) = match clock.find('.') {
        Some(i) => (&clock[..i], &clock[i + 1..]),
        None => (clock, ""),
    };
    // Each part is one or two digits: no sign, no padding a parser would
    // take (a minute of "-0366..." once overflowed the arithmetic below).
    let digits = |p: &str| -> Option<i64> {
        (!p.is_empty() && p.len() <= 2 && p.bytes().all(|b| b.is_ascii_digit())).then(|| p.parse().ok()).flatten()
    };
    let mut parts = hms.split(':');
    let h = digits(parts.next()?)?;
    let m = parts.next().map_or(Some(0), digits)?;
    let sec = parts.next().map_or(Some(0), digits)?;
    if parts.next().is_some() || h > 23 || m > 59 || sec > 60 {
        return None;
    }
    if !frac.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let mut ms_frac = 0i64;
    for (i, c) in frac.chars().take(3).enumerate() {
        ms_frac += (c as i64 - '0' as i64) * 10i64.pow(2 - i as u32);
    }
    Some(((h * 60 + m) * 60 + sec) * 1000 + ms_frac)
}

fn parse_zone(zone: &str) -> Option<i64> {
    if zone.is_empty() {
        return Some(0);
    }
    let sign = if zone.starts_with('-') { -1 } else { 1 };
    // `±hh:mm` or `±hhmm`, and an offset a clock can have.
    let (h, m) = match zone.as_bytes() {
        [_, h1, h2, b':', m1, m2] | [_, h1, h2, m1, m2] => (two_digits(*h1, *h2)?, two_digits(*m1, *m2)?),
        _ => return None,
    };
    if h > 23 || m > 59 {
        return None;
    }
    Some(sign * (h * 60 + m) * 60_000)
}

fn two_digits(a: u8, b: u8) -> Option<i64> {
    (a.is_ascii_digit() && b.is_ascii_digit()).then(|| i64::from(a - b'0') * 10 + i64::from(b - b'0'))
}

/// Days in a month of the proleptic Gregorian calendar.
fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

// Howard Hinnant's civil-date algorithms (public domain).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fixed_width_text_is_what_fmt_spells() {
        let spelled = |ms: u64| {
            let secs = ms / 1000;
            let rem = secs % 86_400;
            let (y, m, d) = civil_from_days((secs / 86_400) as i64);
            let (h, mi, s, us) = (rem / 3600, (rem % 3600) / 60, rem % 60, (ms % 1000) * 1000);
            format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{us:06}Z")
        };
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let edges = [0, 999, 1_000, 86_399_999, 951_782_400_000, 253_402_300_799_999, 253_402_300_800_000, u64::MAX];
        for ms in edges.into_iter().chain((0..20_000).map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % 300_000_000_000_000
        })) {
            assert_eq!(Iso(ms).to_string(), spelled(ms), "{ms}");
            assert_eq!(format_iso(ms), spelled(ms), "{ms}");
            assert_eq!(Iso(ms).fixed_width().is_some(), ms < 253_402_300_800_000, "{ms}");
        }
    }

    #[test]
    fn round_trips() {
        for ms in [0u64, 1_700_000_000_123, 951_782_400_000, 4_102_444_800_999] {
            assert_eq!(parse_iso(&format_iso(ms)), Some(ms), "{}", format_iso(ms));
        }
        assert_eq!(format_iso(1_700_000_000_123), "2023-11-14T22:13:20.123000Z");
    }

    #[test]
    fn parses_offsets_and_fractions() {
        let base = parse_iso("2024-03-01T10:00:00Z").unwrap();
        assert_eq!(parse_iso("2024-03-01T12:00:00+02:00"), Some(base));
        assert_eq!(parse_iso("2024-03-01T09:30:00.5-00:30"), Some(base + 500));
        assert_eq!(parse_iso("2024-03-01T10:00:00.123456789Z"), Some(base + 123));
        assert_eq!(parse_iso("2024-03-01"), parse_iso("2024-03-01T00:00:00Z"));
        assert_eq!(parse_iso("garbage"), None);
        assert_eq!(parse_iso("2024-13-01T00:00:00Z"), None);
        // Offsets and dates no clock or calendar has.
        for bad in [
            "2025-03-01T09:-0366333033333333325- 3:0",
            "2024-03-01T+1:00:00Z",
            "+202-03-01",
            "2024-03-01T10:00:00+99:99",
            "2024-03-01T10:00:00+24:00",
            "2024-03-01T10:00:00-00:60",
            "2024-03-01T10:00:00+1:00",
            "2024-03-01T10:00:00+0100x",
            "2023-02-29",
            "2024-04-31T00:00:00Z",
        ] {
            assert_eq!(parse_iso(bad), None, "{bad}");
        }
        assert_eq!(parse_iso("2024-02-29"), Some(base - base % 86_400_000 - 86_400_000));
        assert_eq!(parse_iso("2024-03-01T11:00:00+0100"), Some(base));
    }
}
