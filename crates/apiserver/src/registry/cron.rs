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
    Schedule::parse(spec).map(|_| ())
}

/// Bit 63 of a field: it was written `*` or `?` (with no step above 1). Day matching
/// depends on it, as in robfig/cron.
const STAR: u64 = 1 << 63;

/// A parsed schedule (robfig/cron's `ParseStandard`): five fields or a descriptor, with
/// an optional `TZ=`/`CRON_TZ=` prefix naming its zone.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Schedule {
    when: When,
    /// The zone of a `TZ=` prefix; without it the caller's zone applies.
    zone: Option<jiff::tz::TimeZone>,
}

#[derive(Debug, Clone, PartialEq)]
enum When {
    /// One bit per allowed value (minute, hour, day of month, month, day of week).
    Fields([u64; 5]),
    /// `@every <duration>`, in whole seconds (at least one).
    Every(i64),
}

/// Every value of a field from `min` through `max`, written `*`.
const fn all(min: u32, max: u32) -> u64 {
    let mut bits = 0u64;
    let mut i = min;
    while i <= max {
        bits |= 1 << i;
        i += 1;
    }
    bits | STAR
}

impl Schedule {
    /// Parses `spec`; the error is robfig/cron's text.
    pub(crate) fn parse(spec: &str) -> Result<Schedule, String> {
        if spec.is_empty() {
            return Err("empty spec string".into());
        }
        let mut zone = None;
        let mut spec = spec;
        if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
            let eq = spec.find('=').unwrap_or(0);
            let end = spec.find(' ').unwrap_or(spec.len());
            let name = &spec[eq + 1..end];
            zone = Some(load_zone(name).ok_or_else(|| {
                format!("provided bad location {name}: unknown time zone {name}")
            })?);
            spec = spec[end..].trim();
        }
        let when = if let Some(d) = spec.strip_prefix('@') {
            let fields =
                |m: u64, h: u64, dom: u64, mon: u64, dow: u64| When::Fields([m, h, dom, mon, dow]);
            let any = |b: &Bounds| all(b.min, b.max);
            match d {
                "yearly" | "annually" => fields(1, 1, 1 << 1, 1 << 1, any(&DOW)),
                "monthly" => fields(1, 1, 1 << 1, any(&MONTH), any(&DOW)),
                "weekly" => fields(1, 1, any(&DOM), any(&MONTH), 1),
                "daily" | "midnight" => fields(1, 1, any(&DOM), any(&MONTH), any(&DOW)),
                "hourly" => fields(1, any(&HOUR), any(&DOM), any(&MONTH), any(&DOW)),
                _ if d.starts_with("every ") => {
                    let text = &d["every ".len()..];
                    let secs = crate::registry::go_time::parse_go_duration(text)
                        .ok_or_else(|| {
                            format!(
                                "failed to parse duration {spec}: time: invalid duration {}",
                                crate::error::go_quote(text)
                            )
                        })?
                        .as_secs();
                    When::Every(i64::try_from(secs).unwrap_or(i64::MAX).max(1))
                }
                _ => return Err(format!("unrecognized descriptor: {spec}")),
            }
        } else {
            let fields: Vec<&str> = spec.split_whitespace().collect();
            if fields.len() != 5 {
                return Err(format!(
                    "expected exactly 5 fields, found {}: [{}]",
                    fields.len(),
                    fields.join(" ")
                ));
            }
            let mut bits = [0u64; 5];
            for ((f, b), out) in fields
                .iter()
                .zip([MINUTE, HOUR, DOM, MONTH, DOW])
                .zip(bits.iter_mut())
            {
                for expr in f.split(',') {
                    *out |= range(expr, &b)?;
                }
            }
            When::Fields(bits)
        };
        Ok(Schedule { when, zone })
    }

    /// The first time after `after` the schedule fires (robfig/cron's `Next`), in its
    /// own zone or else `tz`; `None` when nothing matches within five years.
    pub(crate) fn next(
        &self,
        after: jiff::Timestamp,
        tz: &jiff::tz::TimeZone,
    ) -> Option<jiff::Timestamp> {
        let bits = match &self.when {
            When::Every(secs) => {
                // `t + delay - t.Nanosecond()`.
                let whole = jiff::Timestamp::from_second(after.as_second()).ok()?;
                return whole
                    .checked_add(jiff::SignedDuration::from_secs(*secs))
                    .ok();
            }
            When::Fields(bits) => bits,
        };
        let tz = self.zone.as_ref().unwrap_or(tz);
        let has = |field: usize, v: i64| bits[field] & (1u64 << v) != 0;
        let start = after.to_zoned(tz.clone()).datetime();
        let mut date = start.date();
        // The first candidate minute: the whole minute after `after`'s.
        let first = (i64::from(start.hour()), i64::from(start.minute()) + 1);
        for day in 0..(5 * 366) {
            let day_ok = {
                let dom = has(2, i64::from(date.day()));
                let dow = has(4, i64::from(date.weekday().to_sunday_zero_offset()));
                if bits[2] & STAR != 0 || bits[4] & STAR != 0 {
                    dom && dow
                } else {
                    dom || dow
                }
            };
            if has(3, i64::from(date.month())) && day_ok {
                for h in 0..24 {
                    if !has(1, h) || (day == 0 && h < first.0) {
                        continue;
                    }
                    for m in 0..60 {
                        if !has(0, m) || (day == 0 && h == first.0 && m < first.1) {
                            continue;
                        }
                        let at = date.at(h as i8, m as i8, 0, 0);
                        let t = tz.to_ambiguous_zoned(at).compatible().ok()?.timestamp();
                        if t > after {
                            return Some(t);
                        }
                    }
                }
            }
            date = date.tomorrow().ok()?;
        }
        None
    }
}

/// A zone as Go's `time.LoadLocation` names it (`UTC`, `Local` or an IANA name).
pub(crate) fn load_zone(name: &str) -> Option<jiff::tz::TimeZone> {
    match name {
        "" | "UTC" => Some(jiff::tz::TimeZone::UTC),
        "Local" => Some(jiff::tz::TimeZone::system()),
        _ => jiff::tz::db().get(name).ok(),
    }
}

/// `getRange`: `*`, `?`, `n` or `a-b`, with an optional `/step`; the values it allows
/// (with [`STAR`] for a bare `*`).
fn range(expr: &str, b: &Bounds) -> Result<u64, String> {
    let parts: Vec<&str> = expr.split('/').collect();
    let hyphens: Vec<&str> = parts[0].split('-').collect();
    let single = hyphens.len() == 1;
    let mut star = false;
    let (start, mut end) = if parts[0] == "*" || parts[0] == "?" {
        star = true;
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
    let mut bits = if star && step == 1 { STAR } else { 0 };
    for v in (start..=end).step_by(step as usize) {
        bits |= 1 << v;
    }
    Ok(bits)
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
    fn next_times_as_robfig_cron_computes_them() {
        let utc = jiff::tz::TimeZone::UTC;
        let at = |s: &str| s.parse::<jiff::Timestamp>().unwrap();
        let next = |spec: &str, after: &str| {
            Schedule::parse(spec)
                .unwrap()
                .next(at(after), &utc)
                .map(|t| t.to_string())
        };
        let is = |t: &str| Some(t.to_string());
        assert_eq!(
            next("*/15 * * * *", "2026-12-05T10:07:30Z"),
            is("2026-12-05T10:15:00Z")
        );
        // Strictly after: a time on the schedule is not its own next.
        assert_eq!(
            next("*/15 * * * *", "2026-12-05T10:15:00Z"),
            is("2026-12-05T10:30:00Z")
        );
        assert_eq!(
            next("* * * * *", "2026-12-05T10:15:59.9Z"),
            is("2026-12-05T10:16:00Z")
        );
        assert_eq!(
            next("59 23 31 12 *", "2026-12-05T00:00:00Z"),
            is("2026-12-31T23:59:00Z")
        );
        // 2026-12-05 is a Saturday.
        assert_eq!(
            next("0 9 * * mon-fri", "2026-12-05T10:00:00Z"),
            is("2026-12-07T09:00:00Z")
        );
        // Neither day field a star: either may match (the 13th, or a Friday).
        assert_eq!(
            next("0 0 13 * 5", "2026-12-05T00:00:00Z"),
            is("2026-12-11T00:00:00Z")
        );
        // One is a star: both must.
        assert_eq!(
            next("0 0 * 12 5", "2026-12-05T00:00:00Z"),
            is("2026-12-11T00:00:00Z")
        );
        assert_eq!(
            next("0 0 */2 * 5", "2026-12-05T00:00:00Z"),
            is("2026-12-07T00:00:00Z")
        );
        assert_eq!(
            next("@hourly", "2026-12-05T10:00:00Z"),
            is("2026-12-05T11:00:00Z")
        );
        assert_eq!(
            next("@weekly", "2026-12-05T10:00:00Z"),
            is("2026-12-06T00:00:00Z")
        );
        assert_eq!(
            next("@yearly", "2026-12-05T10:00:00Z"),
            is("2027-01-01T00:00:00Z")
        );
        assert_eq!(
            next("@every 90s", "2026-12-05T10:00:00.5Z"),
            is("2026-12-05T10:01:30Z")
        );
        assert_eq!(next("0 0 30 2 *", "2026-12-05T00:00:00Z"), None);
        // In a zone: 09:00 in Berlin is 08:00 UTC in winter.
        let berlin = load_zone("Europe/Berlin").unwrap();
        assert_eq!(
            Schedule::parse("0 9 * * *")
                .unwrap()
                .next(at("2026-12-05T00:00:00Z"), &berlin)
                .map(|t| t.to_string()),
            is("2026-12-05T08:00:00Z")
        );
        assert_eq!(
            next("TZ=Europe/Berlin 0 9 * * *", "2026-12-05T00:00:00Z"),
            is("2026-12-05T08:00:00Z")
        );
        assert_eq!(
            Schedule::parse("TZ=Mars/Olympus 0 9 * * *").unwrap_err(),
            "provided bad location Mars/Olympus: unknown time zone Mars/Olympus"
        );
        assert_eq!(
            Schedule::parse("@every 1x").unwrap_err(),
            "failed to parse duration @every 1x: time: invalid duration \"1x\""
        );
    }

    #[test]
    fn time_zones() {
        assert!(known_time_zone("UTC"));
        assert!(known_time_zone("Europe/Berlin"));
        assert!(!known_time_zone("Mars/Olympus"));
    }
}
