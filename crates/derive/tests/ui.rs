//! Compile errors for misuse of `#[derive(CustomResource)]`, checked with trybuild.
//!
//! The expected messages are in `tests/ui/*.stderr`; regenerate them with
//! `TRYBUILD=overwrite cargo test -p kubewright-derive --test ui` and review the diff.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
