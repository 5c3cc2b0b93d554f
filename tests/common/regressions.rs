//! Where proptest keeps the failures it found: beside the test module's file
//! (`tests/natural/parser.rs` → `tests/natural/parser.proptest-regressions`),
//! where they are read back on every run.
//!
//! Proptest's default (`SourceParallel`) looks up from the source file for a
//! `main.rs`; every directory of `tests/` holds one, so it would read and
//! write `tests/proptest-regressions/<module>.txt` instead, and modules of the
//! same name in two areas would share one file. Every `proptest!` block of the
//! tests therefore passes its configuration through [`beside`]; each test binary
//! with properties includes this file as `mod regressions`.

use proptest::test_runner::{Config, FileFailurePersistence};

/// `config`, its failures persisted beside the source file of the test.
pub fn beside(config: Config) -> Config {
    Config {
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..config
    }
}
