//! Recovery of the data directory's log (`objects.wal`): framed records (magic, length,
//! CRC-32, JSON), torn ends, damage in the middle, records of any JSON.
//!
//! Input: the first byte chooses salvage (odd) or the default; the rest is the log.
//! Checks: no panic; a refusal names damage; salvaging never refuses; what the default
//! accepts, salvage accepts with the same objects and revision.
#![no_main]

use kubewright_apiserver::fuzzing;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, log)) = data.split_first() else {
        return;
    };
    let salvaged = fuzzing::wal_recover(log, true);
    let (objects, rv) = match salvaged {
        Ok(r) => r,
        Err(e) => panic!("salvage refused: {e}"),
    };
    if mode % 2 == 1 {
        return;
    }
    match fuzzing::wal_recover(log, false) {
        Ok((mut strict, strict_rv)) => {
            let mut salvaged = objects;
            strict.sort();
            salvaged.sort();
            assert_eq!(strict, salvaged);
            assert_eq!(strict_rv, rv);
        }
        Err(e) => assert!(e.contains("refusing to start"), "{e}"),
    }
});
