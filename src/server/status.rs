//! The HTTP status a served error is answered with, for every served format.

use crate::Error;
use crate::provider::TransportErrorKind;

impl Error {
    /// The HTTP status a server answers this error with: 4xx only for what the
    /// client can fix, never a 500 for its mistake.
    ///
    /// - the client's request: [`InvalidRequest`](crate::Error::InvalidRequest)
    ///   and an unpaired history ([`ToolPairing`](crate::Error::ToolPairing)) →
    ///   400; a request the server [refused](crate::Error::Refused) → its status;
    /// - the upstream provider's answer: 400, 413 and 422 (a request the model's
    ///   server refused: too long, a bad parameter) and 429 pass through; 401,
    ///   403 and 404 (the gateway's key or configuration) → 502; 408 and 504 →
    ///   504; 503 and 529 (overloaded) → 503; any other → 502;
    /// - the connection to it: a time-out → 504, anything else → 502;
    /// - what the model wrote (limits, invalid calls, a reply that breaks the
    ///   response format, the tool loop's bound, JSON the lifting could not
    ///   read) → 502;
    /// - anything else (a stage's failure, a duplicate tool) → 500.
    ///
    /// ```
    /// use lmstack::Error;
    /// use lmstack::provider::ProviderError;
    /// use std::time::SystemTime;
    ///
    /// assert_eq!(Error::InvalidRequest("messages: missing".into()).http_status(), 400);
    /// let busy: Error =
    ///     ProviderError::from_response("openai", 429, &[], b"slow down", SystemTime::now()).into();
    /// assert_eq!(busy.http_status(), 429);
    /// ```
    pub fn http_status(&self) -> u16 {
        use crate::Error as E;
        match self {
            E::InvalidRequest(_) | E::ToolPairing { .. } => 400,
            E::Refused { status, .. } => *status,
            E::Provider(_) => match self.provider_error().map(|error| error.status) {
                Some(status @ (400 | 413 | 422 | 429)) => status,
                Some(408 | 504) => 504,
                Some(503 | 529) => 503,
                _ => 502,
            },
            E::Transport(_) => match self.transport_error().map(|error| error.kind) {
                Some(TransportErrorKind::Timeout) => 504,
                _ => 502,
            },
            E::LimitExceeded { .. }
            | E::ToolCallLimit { .. }
            | E::InvalidToolCall { .. }
            | E::InvalidOutput { .. }
            | E::ToolLoopLimit { .. }
            | E::Json { .. } => 502,
            _ => 500,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use crate::provider::{ProviderError, TransportError, TransportErrorKind};

    fn read(status: u16) -> ProviderError {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480);
        ProviderError::from_response("openai", status, &[], b"{}", now)
    }

    #[test]
    fn the_status_a_server_answers_is_4xx_only_for_the_clients_mistakes() {
        let upstream = |status| crate::Error::from(read(status)).http_status();
        for (status, answered) in [
            (400, 400),
            (413, 413),
            (422, 422),
            (429, 429),
            (401, 502),
            (403, 502),
            (404, 502),
            (408, 504),
            (504, 504),
            (503, 503),
            (529, 503),
            (500, 502),
            (200, 502),
        ] {
            assert_eq!(upstream(status), answered, "upstream {status}");
        }
        let transport =
            |kind| crate::Error::from(TransportError::new("openai", kind, "x")).http_status();
        assert_eq!(transport(TransportErrorKind::Timeout), 504);
        assert_eq!(transport(TransportErrorKind::Connect), 502);
        assert_eq!(crate::Error::InvalidRequest("x".into()).http_status(), 400);
        let refused = crate::Error::Refused {
            status: 429,
            message: "busy".into(),
        };
        assert_eq!(refused.http_status(), 429);
        let unpaired = crate::Error::ToolPairing {
            stage: "s",
            message: 1,
            call_id: "c".into(),
            problem: "p",
        };
        assert_eq!(unpaired.http_status(), 400);
        let loop_limit = crate::Error::ToolLoopLimit { max_iterations: 3 };
        assert_eq!(loop_limit.http_status(), 502);
        assert_eq!(crate::Error::stage("s", "broke").http_status(), 500);
    }
}
