//! Field selectors (`?fieldSelector=`): parse, print, match.
//!
//! Input: the selector on the first line; each further line a `field=value` pair of the
//! object matched. Checks: no panic; what parses prints to a selector that parses to the
//! same thing; `required_value` names a requirement.
#![no_main]

use kubewright_core::FieldSelector;
use libfuzzer_sys::fuzz_target;
use std::collections::BTreeMap;

fuzz_target!(|data: &[u8]| {
    let (selector, rest) = kubewright_fuzz::first_line(data);
    let Ok(text) = std::str::from_utf8(selector) else {
        return;
    };
    let Ok(sel) = FieldSelector::parse(text) else {
        return;
    };
    let printed = sel.to_string();
    let again = FieldSelector::parse(&printed)
        .unwrap_or_else(|e| panic!("{printed:?}, printed from {text:?}, does not parse: {e}"));
    assert_eq!(again, sel, "{text:?} printed as {printed:?}");
    let fields: BTreeMap<String, String> = String::from_utf8_lossy(rest)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let matched = sel.matches(|f| fields.get(f).cloned());
    assert_eq!(again.matches(|f| fields.get(f).cloned()), matched);
    for r in &sel.requirements {
        let v = sel.required_value(&r.field);
        if !r.negated {
            assert!(v.is_some(), "{text:?}: no required value for {}", r.field);
        }
        if let Some(v) = v {
            assert!(
                sel.requirements
                    .iter()
                    .any(|q| q.field == r.field && !q.negated && q.value == v)
            );
        }
    }
});
