//! Resource quantities (`100m`, `1.5Gi`, `1e3`) parsed and printed as kube-apiserver
//! does (Go's `resource.Quantity`).
//!
//! The API server stores a quantity in its canonical form: `0.5` comes back as `500m`,
//! `1024Mi` as `1Gi`, `2000m` as `2`. A controller that compares what it wrote with what
//! it reads must compare values, not strings:
//!
//! ```
//! use kubewright_core::quantity::Quantity;
//! let wrote: Quantity = "0.5".parse()?;
//! let read: Quantity = "500m".parse()?;
//! assert_eq!(wrote, read);
//! assert_eq!(wrote.to_string(), "500m");
//! assert_eq!("1024Mi".parse::<Quantity>()?.to_string(), "1Gi");
//! assert!("1.5.5".parse::<Quantity>().is_err());
//! # Ok::<(), kubewright_core::quantity::QuantityError>(())
//! ```
//!
//! A string already in canonical form is kept as written (`+1Ki`, `1e3` and `010` stay),
//! as Go keeps it. Values too large for 38 significant digits keep their string and
//! compare by it.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

/// Why a string is not a quantity (Go's error texts).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// Not of the quantity grammar.
    #[error(
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )]
    Format,
    /// A suffix that is no unit and no exponent (`1e`, `1Ki2`).
    #[error("unable to parse quantity's suffix")]
    Suffix,
    /// The number does not parse.
    #[error("unable to parse numeric part of quantity")]
    Numeric,
}

/// How a quantity is printed: decimal units (`k`, `M`, `m`), binary units (`Ki`, `Mi`)
/// or a decimal exponent (`e3`). The suffix a quantity is written with chooses it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuantityFormat {
    /// `n u m "" k M G T P E`.
    DecimalSi,
    /// `Ki Mi Gi Ti Pi Ei`.
    BinarySi,
    /// `e<n>` / `E<n>`.
    DecimalExponent,
}

/// A parsed quantity: its exact value (`mantissa × 10^exponent`), its format, and the
/// string it is printed as.
#[derive(Clone, Debug)]
pub struct Quantity {
    mantissa: i128,
    exponent: i64,
    format: QuantityFormat,
    /// Go keeps small values as a scaled int64 (`int64Amount`) and others as an
    /// arbitrary-precision decimal; rounding keeps the written string only for the former.
    small: bool,
    /// The string kept as written (canonical already), else printed canonically.
    text: Option<String>,
    /// Past 38 digits: not computed, compared by `text`.
    overflow: bool,
}

/// Nano, the finest scale Go keeps: smaller fractions are rounded up to it.
const NANO: i64 = -9;
/// Go's int64 quantities hold at most this many digits.
const MAX_INT64_FACTORS: i64 = 18;

impl FromStr for Quantity {
    type Err = QuantityError;

    fn from_str(s: &str) -> Result<Self, QuantityError> {
        // Go trims the JSON string before parsing.
        parse(s.trim())
    }
}

struct Parts<'a> {
    positive: bool,
    num: &'a str,
    denom: &'a str,
    suffix: &'a str,
}

/// Splits a quantity into sign, integer digits (leading zeros dropped), fraction digits
/// and suffix, with Go's grammar (a trailing `.` and `1.G` are accepted).
fn split(s: &str) -> Result<Parts<'_>, QuantityError> {
    let b = s.as_bytes();
    let end = b.len();
    let mut pos = 0;
    let mut positive = true;
    match b.first() {
        Some(b'-') => {
            positive = false;
            pos += 1;
        }
        Some(b'+') => pos += 1,
        _ => {}
    }
    let whole = |positive| Parts {
        positive,
        num: "0",
        denom: "",
        suffix: "",
    };
    while pos < end && b[pos] == b'0' {
        pos += 1;
    }
    if pos >= end {
        return Ok(whole(positive));
    }
    let start = pos;
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    let mut num = &s[start..pos];
    if pos >= end {
        return Ok(Parts {
            num,
            ..whole(positive)
        });
    }
    if num.is_empty() {
        num = "0";
    }
    let mut denom = "";
    if b[pos] == b'.' {
        pos += 1;
        let start = pos;
        while pos < end && b[pos].is_ascii_digit() {
            pos += 1;
        }
        denom = &s[start..pos];
        if pos >= end {
            return Ok(Parts {
                positive,
                num,
                denom,
                suffix: "",
            });
        }
    }
    let suffix_start = pos;
    while pos < end && b"eEinumkKMGTP".contains(&b[pos]) {
        pos += 1;
    }
    if pos < end && matches!(b[pos], b'-' | b'+') {
        pos += 1;
    }
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos < end {
        return Err(QuantityError::Format);
    }
    Ok(Parts {
        positive,
        num,
        denom,
        suffix: &s[suffix_start..],
    })
}

/// The base, exponent and format a suffix stands for.
fn interpret(suffix: &str) -> Option<(u32, i64, QuantityFormat)> {
    use QuantityFormat::*;
    let dec = |e| Some((10, e, DecimalSi));
    let bin = |e| Some((2, e, BinarySi));
    match suffix {
        "n" => dec(-9),
        "u" => dec(-6),
        "m" => dec(-3),
        "" => dec(0),
        "k" => dec(3),
        "M" => dec(6),
        "G" => dec(9),
        "T" => dec(12),
        "P" => dec(15),
        "E" => dec(18),
        "Ki" => bin(10),
        "Mi" => bin(20),
        "Gi" => bin(30),
        "Ti" => bin(40),
        "Pi" => bin(50),
        "Ei" => bin(60),
        s if s.len() > 1 && matches!(s.as_bytes()[0], b'e' | b'E') => {
            // Go truncates the parsed int64 to an int32.
            let e = s[1..].parse::<i64>().ok()? as i32;
            Some((10, i64::from(e), DecimalExponent))
        }
        _ => None,
    }
}

fn pow10(n: i64) -> Option<i128> {
    10i128.checked_pow(u32::try_from(n).ok()?)
}

/// `value / 10^n`, rounded away from zero; whether it was exact.
fn div_round_up(value: i128, n: i64) -> (i128, bool) {
    match pow10(n) {
        Some(d) => {
            let (q, r) = (value / d, value % d);
            if r == 0 {
                (q, true)
            } else {
                (q + value.signum(), false)
            }
        }
        // Dividing by more than 10^38: any non-zero value becomes ±1.
        None => (value.signum(), value == 0),
    }
}

fn parse(s: &str) -> Result<Quantity, QuantityError> {
    use QuantityFormat::*;
    if s.is_empty() {
        return Err(QuantityError::Format);
    }
    if s == "0" {
        return Ok(Quantity::exact(0, 0, DecimalSi, true, Some(s)));
    }
    let p = split(s)?;
    let (base, exponent, format) = interpret(p.suffix).ok_or(QuantityError::Suffix)?;
    let digits = (p.num.len() + p.denom.len()) as i64;

    // Go's int64 fast path: the value as a scaled int64, the string kept when canonical.
    let (mut scale, mantissa, precision) = match format {
        DecimalExponent | DecimalSi => (exponent, 1i64, MAX_INT64_FACTORS - digits),
        BinarySi if exponent >= 0 && p.denom.is_empty() => (
            0,
            1i64 << exponent,
            15 - p.num.len() as i64 - (exponent as f32 * 3.0 / 10.0) as i64 - 1,
        ),
        BinarySi => (0, 1, -1),
    };
    if precision >= 0 {
        scale -= p.denom.len() as i64;
        if scale >= NANO {
            let shifted = format!("{}{}", p.num, p.denom);
            let value: i64 = shifted.parse().map_err(|_| QuantityError::Numeric)?;
            if let Some(result) = value.checked_mul(mantissa) {
                let result = if p.positive { result } else { -result };
                let canonical = match format {
                    BinarySi => exponent % 10 == 0 && value & 0x07 != 0,
                    _ => scale % 3 == 0 && !shifted.ends_with("000") && !shifted.starts_with('0'),
                };
                return Ok(Quantity::exact(
                    i128::from(result),
                    scale,
                    format,
                    true,
                    canonical.then_some(s),
                ));
            }
        }
    }

    // The arbitrary-precision path: value = ±num.denom × base^exponent.
    let Ok(unscaled) = format!("{}{}", p.num, p.denom).parse::<i128>() else {
        return Ok(Quantity::overflowed(s, format));
    };
    let mut value = if p.positive { unscaled } else { -unscaled };
    let mut exp = -(p.denom.len() as i64);
    if base == 10 {
        exp += exponent;
    } else {
        let Some(v) = u32::try_from(exponent)
            .ok()
            .and_then(|e| 2i128.checked_pow(e))
            .and_then(|f| value.checked_mul(f))
        else {
            return Ok(Quantity::overflowed(s, format));
        };
        value = v;
    }
    // Non-zero values are rounded up (away from zero) to nano.
    if value != 0 && exp < NANO {
        value = div_round_up(value, NANO - exp).0;
        exp = NANO;
    }
    let mut format = format;
    if format == BinarySi {
        // Capped at the largest int64, and shown in decimal below 1.
        let max = Quantity::exact(i128::from(i64::MAX), 0, format, false, None);
        let this = Quantity::exact(value.abs(), exp, format, false, None);
        if this.cmp_value(&max) == Ordering::Greater {
            value = i128::from(i64::MAX) * value.signum();
            exp = 0;
        } else if value != 0
            && this
                .cmp_value(&Quantity::exact(1, 0, format, false, None))
                .is_lt()
        {
            format = DecimalSi;
        }
    }
    Ok(Quantity::exact(value, exp, format, false, None))
}

impl Quantity {
    fn exact(
        mantissa: i128,
        exponent: i64,
        format: QuantityFormat,
        small: bool,
        text: Option<&str>,
    ) -> Self {
        Self {
            mantissa,
            exponent,
            format,
            small,
            text: text.map(str::to_string),
            overflow: false,
        }
    }

    fn overflowed(s: &str, format: QuantityFormat) -> Self {
        Self {
            mantissa: 0,
            exponent: 0,
            format,
            small: false,
            text: Some(s.to_string()),
            overflow: true,
        }
    }

    /// The format the quantity is printed in.
    pub fn format(&self) -> QuantityFormat {
        self.format
    }

    /// Whether the value is zero.
    pub fn is_zero(&self) -> bool {
        !self.overflow && self.mantissa == 0
    }

    /// The value in thousandths (`250m` is 250), rounded up; `None` past the range of
    /// `i64` (or of 38 digits).
    pub fn as_milli(&self) -> Option<i64> {
        if self.overflow {
            return None;
        }
        let shift = self.exponent + 3;
        let v = if shift >= 0 {
            self.mantissa.checked_mul(pow10(shift)?)?
        } else {
            div_round_up(self.mantissa, -shift).0
        };
        i64::try_from(v).ok()
    }

    /// Rounds the value up (away from zero) to `10^scale` (`-3` for milli), as Go's
    /// `Quantity.RoundUp`; whether it was exact. kube-apiserver rounds every
    /// `ResourceList` (container resources, quotas, capacities) up to milli.
    pub fn round_up(&mut self, scale: i32) -> bool {
        let scale = i64::from(scale);
        if self.overflow {
            return true;
        }
        if self.small && self.exponent >= scale {
            return true;
        }
        self.text = None;
        if self.exponent >= scale {
            return true;
        }
        let (v, exact) = div_round_up(self.mantissa, scale - self.exponent);
        self.mantissa = v;
        self.exponent = scale;
        exact
    }

    /// Compares values (`Ordering::Equal` for `0.5` and `500m`).
    fn cmp_value(&self, other: &Self) -> Ordering {
        if self.overflow || other.overflow {
            return self.text.cmp(&other.text);
        }
        let (a, b) = (self.mantissa, other.mantissa);
        if a.signum() != b.signum() || a == 0 {
            return a.signum().cmp(&b.signum());
        }
        // Same sign: bring both to the smaller exponent where that fits.
        let e = self.exponent.min(other.exponent);
        let scale = |m: i128, x: i64| pow10(x - e).and_then(|p| m.checked_mul(p));
        match (scale(a, self.exponent), scale(b, other.exponent)) {
            (Some(x), Some(y)) => x.cmp(&y),
            // One side has too many digits: it is the larger in magnitude.
            (None, Some(_)) => Ordering::Greater.reverse_if(a < 0),
            (Some(_), None) => Ordering::Less.reverse_if(a < 0),
            (None, None) => self.exponent.cmp(&other.exponent).reverse_if(a < 0),
        }
    }

    /// The canonical text (Go's `CanonicalizeBytes`).
    fn canonical(&self) -> String {
        use QuantityFormat::*;
        if self.mantissa == 0 {
            return "0".into();
        }
        let mut format = self.format;
        if format == BinarySi {
            let integer = self.integer();
            match integer {
                Some(n) if !(-1024 < n && n < 1024) => {
                    let (mut n, mut times) = (n, 0);
                    while n.abs() >= 1024 && n % 1024 == 0 {
                        n /= 1024;
                        times += 1;
                    }
                    let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
                        .get(times)
                        .copied()
                        .unwrap_or("");
                    return format!("{n}{suffix}");
                }
                _ => format = DecimalSi,
            }
        }
        let (mut m, mut e) = (self.mantissa, self.exponent);
        while m.abs() >= 10 && m % 10 == 0 {
            m /= 10;
            e += 1;
        }
        // Down to an exponent that is a multiple of 3: a zero per step (in text, so no
        // mantissa can overflow).
        let zeros = e.rem_euclid(3);
        e -= zeros;
        let digits = format!("{m}{}", "0".repeat(zeros as usize));
        let suffix = match format {
            DecimalExponent if e == 0 => String::new(),
            DecimalExponent => format!("e{e}"),
            // Past E and below n Go prints no suffix at all.
            _ => match e {
                -9 => "n",
                -6 => "u",
                -3 => "m",
                3 => "k",
                6 => "M",
                9 => "G",
                12 => "T",
                15 => "P",
                18 => "E",
                _ => "",
            }
            .to_string(),
        };
        format!("{digits}{suffix}")
    }

    /// The value as an integer, if it is one (and fits).
    fn integer(&self) -> Option<i128> {
        if self.exponent >= 0 {
            self.mantissa.checked_mul(pow10(self.exponent)?)
        } else {
            let (q, exact) = div_round_up(self.mantissa, -self.exponent);
            exact.then_some(q)
        }
    }
}

trait ReverseIf {
    fn reverse_if(self, yes: bool) -> Self;
}

impl ReverseIf for Ordering {
    fn reverse_if(self, yes: bool) -> Self {
        if yes { self.reverse() } else { self }
    }
}

/// Zero (`0`).
impl Default for Quantity {
    fn default() -> Self {
        Quantity::exact(0, 0, QuantityFormat::DecimalSi, true, Some("0"))
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.text {
            Some(t) => f.write_str(t),
            None => f.write_str(&self.canonical()),
        }
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.cmp_value(other) == Ordering::Equal
    }
}

impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        self.cmp_value(other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Inputs and what kube-apiserver v1.36 stored for them in a Pod's
    /// `emptyDir.sizeLimit` (a plain Quantity, no rounding to milli).
    const STORED: &[(&str, &str)] = &[
        ("1.5Ki", "1536"),
        ("0.5Ki", "512"),
        ("1Ki", "1Ki"),
        ("100000000000000000000", "100E"),
        ("1e100", "10e99"),
        ("12e-10", "2e-9"),
        ("9.99999999999999999999999E", "9999999999999999999999990u"),
        ("1.0", "1"),
        ("010", "010"),
        ("1.", "1."),
        ("0.0000000001", "1n"),
        ("0.000000001", "1n"),
        ("1000000Ki", "1000000Ki"),
        ("1500m", "1500m"),
        ("1024e3", "1024e3"),
        ("1.5e2", "150"),
        ("+1Ki", "+1Ki"),
        ("1.5", "1500m"),
        ("1234567890123456789", "1234567890123456789"),
        ("12345678901234567890123", "12345678901234567890123"),
        ("0.5e3", "500"),
        ("1024Mi", "1Gi"),
        ("1000m", "1"),
        ("0.1234567890123", "123456790n"),
        ("1.5Mi", "1536Ki"),
        ("1536Ki", "1536Ki"),
        ("2048", "2048"),
        ("1E", "1E"),
        ("1e3", "1e3"),
        ("1000", "1k"),
        ("1000000", "1M"),
        ("1024", "1024"),
        ("1.5E", "1500P"),
        ("0.5", "500m"),
        ("123.456789m", "123.456789m"),
        ("1e-3", "1e-3"),
        ("10e-1", "1"),
        ("0", "0"),
        ("00", "0"),
        (".5", "500m"),
        ("1.5n", "2n"),
        ("5Ei", "5Ei"),
        ("9Ei", "9223372036854775807"),
        ("0.3Ki", "307200m"),
        ("1023.5Ki", "1048064"),
        ("1e-9", "1e-9"),
        ("1e-10", "1e-9"),
        ("100e-3", "100e-3"),
        ("1.000", "1"),
        ("1200k", "1200k"),
        ("1Pi", "1Pi"),
        ("+0.5", "500m"),
        ("1e+3", "1e+3"),
        ("1E+3", "1E+3"),
        ("1e18", "1e18"),
        ("1e19", "10e18"),
        (" 1", "1"),
        ("1 ", "1"),
        ("0.0", "0"),
        ("-0", "0"),
        ("1.23456789123456789123456789", "1234567892n"),
        ("8Ki", "8Ki"),
        ("7Ki", "7Ki"),
        ("1000Ki", "1000Ki"),
        ("1025Ki", "1025Ki"),
        ("0.001Ki", "1024m"),
        ("10Ei", "9223372036854775807"),
        ("100m", "100m"),
        ("10m", "10m"),
        ("1m", "1m"),
        ("1u", "1u"),
        ("1000u", "1m"),
        ("1000000n", "1m"),
        ("1.5k", "1500"),
        ("1e2", "100"),
        ("10e2", "1e3"),
        ("100e2", "10e3"),
        ("1e-1", "100e-3"),
        ("0.1", "100m"),
        ("1e0", "1e0"),
        ("5e-1", "500e-3"),
        ("E", "0"),
        ("k", "0"),
    ];

    #[test]
    fn canonical_forms_are_kube_apiservers() {
        for (input, want) in STORED {
            let q: Quantity = input.parse().unwrap_or_else(|e| panic!("{input:?}: {e}"));
            assert_eq!(q.to_string(), *want, "{input:?}");
            // The canonical form parses to the same value.
            let again: Quantity = want.parse().unwrap_or_else(|e| panic!("{want:?}: {e}"));
            assert_eq!(again, q, "{input:?} -> {want:?}");
        }
    }

    /// Past `E` Go's decimal units have no suffix: kube-apiserver stores 10^21 as "1"
    /// (a value change kept here, as it is what the server answers).
    #[test]
    fn beyond_exa_the_suffix_is_lost_as_in_go() {
        for (input, want) in [
            ("1000000000000000000000", "1"),
            ("1000E", "1"),
            ("1e21", "1e21"),
        ] {
            assert_eq!(input.parse::<Quantity>().unwrap().to_string(), want);
        }
    }

    #[test]
    fn malformed_quantities_are_go_errors() {
        for (input, want) in [
            ("1.5.5", QuantityError::Format),
            ("abc", QuantityError::Format),
            ("1Kb", QuantityError::Format),
            ("", QuantityError::Format),
            ("  ", QuantityError::Format),
            ("1e3m", QuantityError::Format),
            ("1e", QuantityError::Suffix),
            ("1Ki2", QuantityError::Suffix),
            ("1mi", QuantityError::Suffix),
        ] {
            assert_eq!(input.parse::<Quantity>().unwrap_err(), want, "{input:?}");
        }
    }

    /// kube-apiserver rounds ResourceList values up to milli (cpu limits of a Pod,
    /// quota values): these are what v1.36 stored and named in its errors.
    #[test]
    fn resource_lists_round_up_to_milli() {
        for (input, want) in [
            ("0.1234567890123", "124m"),
            ("12e-10", "1e-3"),
            ("0.0000000001", "1m"),
            ("1500m", "1500m"),
            ("0.5", "500m"),
            ("123.456789m", "124m"),
            ("100000000000000000000", "100E"),
            ("9.99999999999999999999999E", "10E"),
            ("1Ki", "1Ki"),
            ("2000m", "2"),
        ] {
            let mut q: Quantity = input.parse().unwrap();
            q.round_up(-3);
            assert_eq!(q.to_string(), want, "{input:?}");
        }
        let mut q: Quantity = "-0.0000000001".parse().unwrap();
        q.round_up(-3);
        assert_eq!(q.to_string(), "-1m");
    }

    #[test]
    fn values_compare_whatever_their_form() {
        let q = |s: &str| s.parse::<Quantity>().unwrap();
        assert_eq!(q("1Gi"), q("1024Mi"));
        assert_eq!(q("1k"), q("1000"));
        assert_eq!(q("1e3"), q("1k"));
        assert!(q("100m") < q("1"));
        assert!(q("-1") < q("0"));
        assert!(q("-2") < q("-1"));
        assert!(q("1Ki") > q("1k"));
        assert!(q("12345678901234567890123") > q("1E"));
        assert_eq!(q("250m").as_milli(), Some(250));
        assert_eq!(q("1.5Gi").as_milli(), Some(1_610_612_736_000));
        assert_eq!(q("1n").as_milli(), Some(1));
        assert!(q("0").is_zero() && !q("1n").is_zero());
        assert_eq!(q("e130"), q("0"));
        // A mantissa of 38 digits that needs zeros to reach a multiple-of-3 exponent.
        let big = q("12345678901234567890123456789012345678e1");
        assert_eq!(big.to_string(), "123456789012345678901234567890123456780");
        assert_eq!(q(&big.to_string()), big);
    }
}
