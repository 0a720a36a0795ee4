//! CronJob schedules, parsed as kube-apiserver parses them (robfig/cron's standard
//! parser: five fields, or a descriptor), with its error texts; and time zone names.

/// A field's bounds and names.
struct Bounds {
    min: u32,
    max: u32,
    names: &'static [&'static str],
}

const MINUTE: Bounds = Bounds {
    min: 0,
    max: 59,
    names: &[],
};
const HOUR: Bounds = Bounds {
    min: 0,
    max: 23,
    names: &[],
};
const DOM: Bounds = Bounds {
    min: 1,
    max: 31,
    names: &[],
};
const MONTH: Bounds = Bounds {
    min: 1,
    max: 12,
    names: &[
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ],
};
const DOW: Bounds = Bounds {
    min: 0,
    max: 6,
    names: &["sun", "mon", "tue", "wed", "thu", "fri", "sat"],
};

/// Checks a schedule; the error is the parser's text.
pub(crate) fn parse(spec: &str) -> Result<(), String> {
    if let Some(d) = spec.strip_prefix('@') {
        return match d {
            "yearly" | "annually" | "monthly" | "weekly" | "daily" | "midnight" | "hourly" => {
                Ok(())
            }
            _ if d.starts_with("every ") => Ok(()),
            _ => Err(format!("unrecognized descriptor: {spec}")),
        };
    }
    let fields: Vec<&str> = spec.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(format!(
            "expected exactly 5 fields, found {}: [{}]",
            fields.len(),
            fields.join(" ")
        ));
    }
    for (f, b) in fields.iter().zip([MINUTE, HOUR, DOM, MONTH, DOW]) {
        for expr in f.split(',') {
            range(expr, &b)?;
        }
    }
    Ok(())
}

/// `getRange`: `*`, `?`, `n` or `a-b`, with an optional `/step`.
fn range(expr: &str, b: &Bounds) -> Result<(), String> {
    let parts: Vec<&str> = expr.split('/').collect();
    let hyphens: Vec<&str> = parts[0].split('-').collect();
    let single = hyphens.len() == 1;
    let (start, mut end) = if parts[0] == "*" || parts[0] == "?" {
        (b.min, b.max)
    } else {
        let start = int_or_name(hyphens[0], b.names)?;
        let end = match hyphens.len() {
            1 => start,
            2 => int_or_name(hyphens[1], b.names)?,
            _ => return Err(format!("too many hyphens: {expr}")),
        };
        (start, end)
    };
    let step = match parts.len() {
        1 => 1,
        2 => {
            let step = int(parts[1])?;
            // `n/step` means n through the maximum.
            if single {
                end = b.max;
            }
            step
        }
        _ => return Err(format!("too many slashes: {expr}")),
    };
    if start < b.min {
        return Err(format!(
            "beginning of range ({start}) below minimum ({}): {expr}",
            b.min
        ));
    }
    if end > b.max {
        return Err(format!(
            "end of range ({end}) above maximum ({}): {expr}",
            b.max
        ));
    }
    if start > end {
        return Err(format!(
            "beginning of range ({start}) beyond end of range ({end}): {expr}"
        ));
    }
    if step == 0 {
        return Err(format!("step of range should be a positive number: {expr}"));
    }
    Ok(())
}

fn int_or_name(expr: &str, names: &[&str]) -> Result<u32, String> {
    let lower = expr.to_ascii_lowercase();
    if let Some(i) = names.iter().position(|n| *n == lower) {
        // Months count from 1, weekdays from 0.
        return Ok(i as u32 + u32::from(names.len() == 12));
    }
    int(expr)
}

/// `mustParseInt`: Go's `strconv.Atoi`, then non-negative.
fn int(expr: &str) -> Result<u32, String> {
    let digits = expr.strip_prefix(['+', '-']).unwrap_or(expr);
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return Err(format!(
            "failed to parse int from {expr}: strconv.Atoi: parsing {}: invalid syntax",
            crate::error::go_quote(expr)
        ));
    }
    let n: i64 = expr.parse().map_err(|_| {
        format!(
            "failed to parse int from {expr}: strconv.Atoi: parsing {}: value out of range",
            crate::error::go_quote(expr)
        )
    })?;
    if n < 0 {
        return Err(format!("negative number ({n}) not allowed: {expr}"));
    }
    u32::try_from(n).map_err(|_| format!("end of range ({n}) above maximum: {expr}"))
}

/// Whether Go's `time.LoadLocation` knows the zone: `UTC`, `Local`, or an IANA name in
/// the time zone database. (Without a database on the machine, every name is taken.)
pub(crate) fn known_time_zone(name: &str) -> bool {
    if matches!(name, "" | "UTC" | "Local") {
        return true;
    }
    let db = jiff::tz::db();
    db.available().next().is_none() || db.get(name).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules_and_their_errors() {
        for ok in [
            "0 * * * *",
            "*/15 * * * *",
            "0 0 * * MON-FRI",
            "0 0 1 jan,jul ?",
            "5/10 * * * *",
            "@hourly",
        ] {
            assert_eq!(parse(ok), Ok(()), "{ok}");
        }
        assert_eq!(
            parse("not a schedule").unwrap_err(),
            "expected exactly 5 fields, found 3: [not a schedule]"
        );
        assert_eq!(
            parse("61 * * * *").unwrap_err(),
            "end of range (61) above maximum (59): 61"
        );
        assert_eq!(
            parse("x * * * *").unwrap_err(),
            "failed to parse int from x: strconv.Atoi: parsing \"x\": invalid syntax"
        );
        assert_eq!(
            parse("@sometimes").unwrap_err(),
            "unrecognized descriptor: @sometimes"
        );
        assert_eq!(
            parse("* * 0 * *").unwrap_err(),
            "beginning of range (0) below minimum (1): 0"
        );
        assert_eq!(
            parse("5-2 * * * *").unwrap_err(),
            "beginning of range (5) beyond end of range (2): 5-2"
        );
        assert_eq!(
            parse("*/0 * * * *").unwrap_err(),
            "step of range should be a positive number: */0"
        );
    }

    #[test]
    fn time_zones() {
        assert!(known_time_zone("UTC"));
        assert!(known_time_zone("Europe/Berlin"));
        assert!(!known_time_zone("Mars/Olympus"));
    }
}
