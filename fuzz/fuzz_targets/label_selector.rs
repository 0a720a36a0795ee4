//! Label selectors (`?labelSelector=`, `kubectl -l`): parse, print, match.
//!
//! Input: the selector on the first line; each further line a `key=value` label.
//! Checks: no panic; what parses prints to a selector that parses to the same thing;
//! the matching accessors agree.
#![no_main]

use kubewright_core::LabelSelector;
use libfuzzer_sys::fuzz_target;
use std::collections::BTreeMap;

fuzz_target!(|data: &[u8]| {
    let (selector, rest) = kubewright_fuzz::first_line(data);
    let Ok(text) = std::str::from_utf8(selector) else {
        return;
    };
    let Ok(sel) = LabelSelector::parse(text) else {
        return;
    };
    let printed = sel.to_string();
    let again = LabelSelector::parse(&printed)
        .unwrap_or_else(|e| panic!("{printed:?}, printed from {text:?}, does not parse: {e}"));
    assert_eq!(again, sel, "{text:?} printed as {printed:?}");
    let labels: BTreeMap<String, String> = String::from_utf8_lossy(rest)
        .lines()
        .map(|l| match l.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => (l.to_string(), String::new()),
        })
        .collect();
    let matched = sel.matches(&labels);
    assert_eq!(
        sel.matches_fn(|k| labels.get(k).map(String::as_str)),
        matched
    );
    assert_eq!(again.matches(&labels), matched);
    if sel.is_empty() {
        assert!(matched, "the empty selector matches everything");
    }
});
