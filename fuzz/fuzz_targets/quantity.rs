//! Resource quantities (`100m`, `1.5Gi`): parse, print, round, compare.
//!
//! Input: the quantity text. Checks: no panic; what parses prints to text that parses;
//! below 10^21 (where Go's decimal units run out of suffixes) the printed form has the
//! same value; rounding up to milli never lowers a positive value.
#![no_main]

use kubewright_core::quantity::Quantity;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(q) = text.parse::<Quantity>() else {
        return;
    };
    let printed = q.to_string();
    let again: Quantity = printed
        .parse()
        .unwrap_or_else(|e| panic!("{printed:?}, printed from {text:?}, does not parse: {e}"));
    let limit: Quantity = "1E".parse().expect("1E");
    let neg_limit: Quantity = "-1E".parse().expect("-1E");
    if q < limit && q > neg_limit {
        assert_eq!(again, q, "{text:?} printed as {printed:?}");
    }
    let mut rounded = q.clone();
    rounded.round_up(-3);
    let zero: Quantity = "0".parse().expect("0");
    if q > zero {
        assert!(rounded >= q, "{text:?} rounded down to {rounded}");
    }
    let _ = q.as_milli();
});
