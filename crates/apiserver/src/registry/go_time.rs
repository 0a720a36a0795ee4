//! Go's `time.Parse` with the layout `metav1.MicroTime` decodes with
//! (`2006-01-02T15:04:05.000000Z07:00`), and its error texts: a MicroTime sent with
//! fewer or more than six fractional digits is refused by kube-apiserver, and so here.

use crate::error::go_quote as quote;

/// Parses a Go duration like `30s`, `1m30s`, `500ms`.
pub(crate) fn parse_go_duration(s: &str) -> Option<std::time::Duration> {
    let mut total = 0f64;
    let mut rest = s;
    if rest == "0" {
        return Some(std::time::Duration::ZERO);
    }
    while !rest.is_empty() {
        let num_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let n: f64 = rest[..num_len].parse().ok()?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let mult = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += n * mult;
        rest = &rest[unit_len..];
    }
    // Too large for a Duration (or not finite): invalid, as Go's overflow error.
    std::time::Duration::try_from_secs_f64(total).ok()
}

const LAYOUT: &str = "2006-01-02T15:04:05.000000Z07:00";

/// One element of the layout: a literal, or a value.
enum Elem {
    Lit(&'static str),
    Year,
    Month,
    Day,
    Hour,
    Minute,
    Second,
    Micros,
    Zone,
}

impl Elem {
    fn layout(&self) -> &'static str {
        match self {
            Elem::Lit(l) => l,
            Elem::Year => "2006",
            Elem::Month => "01",
            Elem::Day => "02",
            Elem::Hour => "15",
            Elem::Minute => "04",
            Elem::Second => "05",
            Elem::Micros => ".000000",
            Elem::Zone => "Z07:00",
        }
    }
}

const ELEMS: [Elem; 13] = [
    Elem::Year,
    Elem::Lit("-"),
    Elem::Month,
    Elem::Lit("-"),
    Elem::Day,
    Elem::Lit("T"),
    Elem::Hour,
    Elem::Lit(":"),
    Elem::Minute,
    Elem::Lit(":"),
    Elem::Second,
    Elem::Micros,
    Elem::Zone,
];

fn digit(s: &[u8], i: usize) -> Option<u32> {
    s.get(i)
        .filter(|c| c.is_ascii_digit())
        .map(|c| u32::from(c - b'0'))
}

/// Go's `getnum`: one or two digits (exactly two when `fixed`).
fn getnum(s: &str, fixed: bool) -> Option<(u32, &str)> {
    let b = s.as_bytes();
    let d0 = digit(b, 0)?;
    match digit(b, 1) {
        Some(d1) => Some((d0 * 10 + d1, &s[2..])),
        None if fixed => None,
        None => Some((d0, &s[1..])),
    }
}

fn days_in(month: u32, year: i64) -> u32 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Parses `value` as Go parses a `MicroTime`; the error is Go's text.
pub(crate) fn parse_micro_time(value: &str) -> Result<(), String> {
    let cannot = |rest: &str, elem: &str| {
        format!(
            "parsing time {} as {}: cannot parse {} as {}",
            quote(value),
            quote(LAYOUT),
            quote(rest),
            quote(elem)
        )
    };
    let out_of_range = |what: &str| format!("parsing time {}: {what} out of range", quote(value));
    let mut rest = value;
    let (mut year, mut month, mut day) = (0i64, 0u32, 0u32);
    for e in &ELEMS {
        let hold = rest;
        match e {
            Elem::Lit(l) => match rest.strip_prefix(l) {
                Some(r) => rest = r,
                None => return Err(cannot(rest, l)),
            },
            Elem::Year => {
                let y = rest
                    .get(..4)
                    .filter(|y| y.bytes().all(|c| c.is_ascii_digit()));
                let Some(y) = y else {
                    return Err(cannot(hold, e.layout()));
                };
                year = y.parse().unwrap_or(0);
                rest = &rest[4..];
            }
            Elem::Month | Elem::Day | Elem::Hour | Elem::Minute | Elem::Second => {
                let fixed = !matches!(e, Elem::Hour);
                let Some((n, r)) = getnum(rest, fixed) else {
                    return Err(cannot(hold, e.layout()));
                };
                rest = r;
                let bad = match e {
                    Elem::Month => {
                        month = n;
                        (n == 0 || n > 12).then_some("month")
                    }
                    Elem::Day => {
                        day = n;
                        None
                    }
                    Elem::Hour => (n >= 24).then_some("hour"),
                    Elem::Minute => (n >= 60).then_some("minute"),
                    _ => (n >= 60).then_some("second"),
                };
                if let Some(what) = bad {
                    return Err(out_of_range(what));
                }
            }
            Elem::Micros => {
                // Exactly a separator and six digits.
                let b = rest.as_bytes();
                let ok = b.len() >= 7
                    && (b[0] == b'.' || b[0] == b',')
                    && b[1..7].iter().all(u8::is_ascii_digit);
                if !ok {
                    return Err(cannot(hold, e.layout()));
                }
                rest = &rest[7..];
            }
            Elem::Zone => {
                if let Some(r) = rest.strip_prefix('Z') {
                    rest = r;
                    continue;
                }
                let b = rest.as_bytes();
                let ok = b.len() >= 6
                    && (b[0] == b'+' || b[0] == b'-')
                    && b[3] == b':'
                    && getnum(&rest[1..3], true).is_some()
                    && getnum(&rest[4..6], true).is_some();
                if !ok {
                    return Err(cannot(hold, e.layout()));
                }
                rest = &rest[6..];
            }
        }
    }
    if !rest.is_empty() {
        return Err(format!(
            "parsing time {}: extra text: {}",
            quote(value),
            quote(rest)
        ));
    }
    if day < 1 || day > days_in(month, year) {
        return Err(out_of_range("day"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn six_digits_only_with_go_errors() {
        assert!(parse_micro_time("2026-12-03T14:00:00.123456Z").is_ok());
        assert!(parse_micro_time("2026-12-03T16:00:00.123456+02:00").is_ok());
        // Recorded from kube-apiserver v1.36 (tests/fixtures/differential/leases_and_events.json).
        let l = "as \"2006-01-02T15:04:05.000000Z07:00\": cannot parse";
        for (v, tail) in [
            ("2026-12-03T14:00:00.1Z", "\".1Z\" as \".000000\""),
            ("2026-12-03T14:00:00Z", "\"Z\" as \".000000\""),
            ("2026-12-03T14:00:00.123456789Z", "\"789Z\" as \"Z07:00\""),
            ("2026-12-03T16:00:00.5+02:00", "\".5+02:00\" as \".000000\""),
            ("yesterday", "\"yesterday\" as \"2006\""),
            (
                "2026/12/03T14:00:00.000000Z",
                "\"/12/03T14:00:00.000000Z\" as \"-\"",
            ),
        ] {
            assert_eq!(
                parse_micro_time(v).unwrap_err(),
                format!("parsing time \"{v}\" {l} {tail}")
            );
        }
        assert_eq!(
            parse_micro_time("2026-13-03T14:00:00.000000Z").unwrap_err(),
            "parsing time \"2026-13-03T14:00:00.000000Z\": month out of range"
        );
        assert_eq!(
            parse_micro_time("2026-02-30T14:00:00.000000Z").unwrap_err(),
            "parsing time \"2026-02-30T14:00:00.000000Z\": day out of range"
        );
        assert!(parse_micro_time("2026-12-03T14:00:00.000000Zjunk").is_err());
    }
}
