//! The crate's error type.

/// A boxed error from any source, as tower middleware produces.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What went wrong, and where.
///
/// Every variant names the stage or the input at fault, so that a message such as
/// `natural tool use parser: tool call exceeded its limit of 8388608 bytes` can be
/// acted on without a debugger. Errors from other tower middleware (`BoxError`)
/// convert with `?`; an `lmstack::Error` that went through a `BoxError` comes back
/// as itself.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The request cannot be served as given (a bad option, a malformed history).
    #[error("invalid request: {0}")]
    InvalidRequest(String),

    /// A server refused the request before running it — no valid token, an
    /// unknown model, a body too large, too many requests at once — with this
    /// HTTP status.
    #[error("{message}")]
    Refused {
        /// The HTTP status, such as 401, 404, 413 or 429.
        status: u16,
        /// Why, in words a client can act on.
        message: String,
    },

    /// A layer failed; `stage` names the layer.
    #[error("{stage}: {message}")]
    Stage {
        /// The layer or component, for example `scripted model`.
        stage: &'static str,
        /// What went wrong.
        message: String,
    },

    /// A buffer grew past its configured limit.
    #[error("{stage}: {what} exceeded its limit of {limit} bytes")]
    LimitExceeded {
        /// The layer or component.
        stage: &'static str,
        /// What grew too large.
        what: &'static str,
        /// The limit, in bytes.
        limit: usize,
    },

    /// A reply held more tool calls than its configured limit.
    #[error("{stage}: the reply has more than {limit} tool calls")]
    ToolCallLimit {
        /// The layer or component, for example `openai`.
        stage: &'static str,
        /// The most tool calls one reply may hold.
        limit: usize,
    },

    /// Model text that should be a tool call could not be read or checked (the
    /// parser's `Error` policy).
    #[error("{stage}: {} tool call: {}", invalid.kind, invalid.message)]
    InvalidToolCall {
        /// The layer, for example `natural tool use parser`.
        stage: &'static str,
        /// What was wrong, with the raw text.
        invalid: crate::message::InvalidCall,
    },

    /// The model's reply does not take the form the request's
    /// [`ResponseFormat`](crate::ResponseFormat) asks for: not JSON, or JSON
    /// that does not match the schema.
    #[error("{stage}: {message}")]
    InvalidOutput {
        /// The stage that checked the reply.
        stage: &'static str,
        /// What is wrong, with where.
        message: String,
    },

    /// A tool call and its result do not pair up: a result whose call is not
    /// there, or a call of an aggregate without its result.
    #[error("{stage}: message {message}: {problem} (call id `{call_id}`)")]
    ToolPairing {
        /// The layer, for example `natural tool use transformer`.
        stage: &'static str,
        /// The position of the message at fault (0-based) in the history or reply.
        message: usize,
        /// The call id at fault.
        call_id: String,
        /// What is wrong.
        problem: &'static str,
    },

    /// JSON that could not be read or written.
    #[error("{context}: {source}")]
    Json {
        /// What was being read or written.
        context: String,
        /// The underlying error.
        #[source]
        source: serde_json::Error,
    },

    /// Two tools of a registry have the same name (compared case-insensitively).
    #[error("tool registry: two tools are named `{name}`")]
    DuplicateTool {
        /// The name given twice.
        name: String,
    },

    /// The tool loop reached its bound while the model still called tools.
    #[error("tool loop: the model still called tools after {max_iterations} rounds")]
    ToolLoopLimit {
        /// The configured bound on model calls.
        max_iterations: usize,
    },

    /// The provider answered with an error (an HTTP error status, or an error
    /// object inside a stream): status, error type and code, message, request id
    /// and `Retry-After`.
    ///
    /// It holds a [`provider::ProviderError`](crate::provider::ProviderError)
    /// (made by its `From` conversion); [`Error::provider_error`] reads it.
    #[error(transparent)]
    Provider(BoxError),

    /// The connection to the provider failed, timed out or broke, or its response
    /// was truncated or malformed.
    ///
    /// It holds a [`provider::TransportError`](crate::provider::TransportError)
    /// (made by its `From` conversion); [`Error::transport_error`] reads it.
    #[error(transparent)]
    Transport(BoxError),

    /// Any other error, from a service or middleware outside this crate.
    #[error(transparent)]
    Other(BoxError),
}

impl Error {
    /// An error raised by `stage`.
    pub fn stage(stage: &'static str, message: impl Into<String>) -> Self {
        Error::Stage {
            stage,
            message: message.into(),
        }
    }

    /// A JSON error while reading or writing `context`.
    pub fn json(context: impl Into<String>, source: serde_json::Error) -> Self {
        Error::Json {
            context: context.into(),
            source,
        }
    }
}

impl From<BoxError> for Error {
    fn from(error: BoxError) -> Self {
        match error.downcast::<Error>() {
            Ok(error) => *error,
            Err(other) => Error::Other(other),
        }
    }
}
