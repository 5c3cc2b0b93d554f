//! `current_time`: the current date and time.

use std::convert::Infallible;
use std::time::{SystemTime, UNIX_EPOCH};

use lmstack::function::{Json, Tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `current_time` takes no arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Arguments {}

/// What `current_time` answers.
#[derive(Debug, Serialize)]
pub struct Now {
    /// RFC 3339, UTC, to the second.
    pub utc: String,
    /// Seconds since 1970-01-01T00:00:00Z.
    pub unix_seconds: u64,
}

/// The tool.
pub fn tool() -> Tool {
    Tool::typed(
        "current_time",
        "Returns the current date and time (UTC).",
        |_: Arguments| async { Ok::<_, Infallible>(Json(now(SystemTime::now()))) },
    )
}

/// The answer at `at`.
pub fn now(at: SystemTime) -> Now {
    Now {
        utc: humantime::format_rfc3339_seconds(at).to_string(),
        unix_seconds: at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn answers_utc_and_unix_time() {
        let at = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let now = now(at);
        assert_eq!(now.utc, "2023-11-14T22:13:20Z");
        assert_eq!(now.unix_seconds, 1_700_000_000);
    }
}
