//! Tools: a spec for the model and a handler to run.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde::de::DeserializeOwned;
use serde_json::Value;

use self::sealed::Outcome as _;
use super::context::CallContext;
use super::output::ToolOutput;
use crate::{BoxError, ToolSpec};

type Handler =
    dyn Fn(Value, CallContext) -> BoxFuture<'static, Result<ToolOutput, ToolError>> + Send + Sync;

/// A tool the model may call: its [`ToolSpec`] and the async function that runs it.
///
/// A **typed** tool takes an argument type that derives `serde::Deserialize` and
/// `schemars::JsonSchema`; its JSON Schema is generated from the type (doc comments
/// become descriptions):
///
/// ```
/// use lmstack::function::Tool;
/// use schemars::JsonSchema;
/// use serde::Deserialize;
///
/// #[derive(Deserialize, JsonSchema)]
/// struct Add {
///     /// The first term.
///     a: f64,
///     /// The second term.
///     b: f64,
/// }
///
/// let add = Tool::typed("add", "Adds two numbers", |args: Add| async move {
///     (args.a + args.b).to_string()
/// });
/// assert_eq!(add.spec().parameters["required"], serde_json::json!(["a", "b"]));
/// ```
///
/// A tool that can fail returns a `Result` instead; its error reaches the model as an
/// error result:
///
/// ```
/// use lmstack::function::Tool;
///
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Path {
///     path: String,
/// }
///
/// let read = Tool::typed("read", "Reads a text file", |args: Path| async move {
///     tokio::fs::read_to_string(args.path).await
/// });
/// assert_eq!(read.name(), "read");
/// ```
///
/// A **dynamic** tool takes a hand-written schema and a closure over the raw JSON
/// arguments:
///
/// ```
/// use lmstack::function::Tool;
/// use serde_json::{Value, json};
///
/// let echo = Tool::dynamic(
///     "echo",
///     "Repeats its input",
///     json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
///     |args: Value| async move { args["text"].clone() },
/// );
/// assert_eq!(echo.name(), "echo");
/// ```
///
/// A handler returns anything that converts into a [`ToolOutput`] — text, a JSON
/// value, [`Json`](super::Json) of any serialisable type, content blocks, or a `ToolOutput` built
/// with images, documents and files — or a `Result` of one, whose error the model
/// receives as an error result ([`ToolReturn`]).
///
/// A tool made with [`Tool::new`] takes the spec and a function of the JSON
/// arguments and the call's [`CallContext`]; [`Tool::typed`] and [`Tool::dynamic`]
/// are the same without the context.
///
/// # Tools that block
///
/// The time limit and the cancellation of a dropped reply stop a tool by dropping its
/// future, which takes effect at its next `.await`. A tool that blocks its thread
/// instead — `std::thread::sleep`, blocking file or network IO, a long computation
/// in the `async` block — cannot be stopped: it holds a worker thread of the runtime
/// until it returns (a timed-out call is answered meanwhile, but the work goes on).
/// Await async IO (`tokio::fs`, `tokio::net`, an async HTTP client), or move the
/// blocking work to `tokio::task::spawn_blocking` and have it check, between pieces,
/// whether the call was stopped: a tool made with [`Tool::new`] gets the call's
/// [`CallContext`], which is cancelled when the call is (its docs have the example).
#[derive(Clone)]
pub struct Tool {
    spec: ToolSpec,
    timeout: Option<Duration>,
    handler: Arc<Handler>,
}

impl Tool {
    /// A tool whose arguments deserialise into `A`; the schema is generated from `A`.
    pub fn typed<A, F, Fut>(
        name: impl Into<String>,
        description: impl Into<String>,
        function: F,
    ) -> Self
    where
        A: DeserializeOwned + JsonSchema,
        F: Fn(A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output: ToolReturn> + Send + 'static,
    {
        let handler =
            move |arguments: Value, _: CallContext| match serde_json::from_value::<A>(arguments) {
                Ok(arguments) => run(function(arguments)),
                Err(error) => {
                    futures::future::ready(Err(ToolError::Arguments(error.to_string()))).boxed()
                }
            };
        Tool {
            spec: ToolSpec::new(name, description, schema_for::<A>()),
            timeout: None,
            handler: Arc::new(handler),
        }
    }

    /// A tool with a hand-written JSON Schema whose handler takes the arguments as
    /// JSON.
    pub fn dynamic<F, Fut>(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
        function: F,
    ) -> Self
    where
        F: Fn(Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output: ToolReturn> + Send + 'static,
    {
        let spec = ToolSpec::new(name, description, parameters);
        Tool::new(spec, move |arguments, _| function(arguments))
    }

    /// A tool of `spec` whose function takes the arguments as JSON and the call's
    /// [`CallContext`] (its deadline, and whether it was stopped).
    pub fn new<F, Fut>(spec: ToolSpec, function: F) -> Self
    where
        F: Fn(Value, CallContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output: ToolReturn> + Send + 'static,
    {
        Tool {
            spec,
            timeout: None,
            handler: Arc::new(move |arguments, context| run(function(arguments, context))),
        }
    }

    /// Gives this tool its own time limit, instead of the layer's.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The tool's own time limit, if it has one.
    pub fn time_limit(&self) -> Option<Duration> {
        self.timeout
    }

    /// The spec the model sees.
    pub fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// The same tool under another name: what the model sees and calls changes, the
    /// function that runs does not.
    pub fn renamed(mut self, name: impl Into<String>) -> Self {
        self.spec.name = name.into();
        self
    }

    /// Runs the tool on `arguments` (not checked against the schema here; the
    /// function layer does that first) in the call's `context`.
    pub fn call(
        &self,
        arguments: Value,
        context: CallContext,
    ) -> BoxFuture<'static, Result<ToolOutput, ToolError>> {
        (self.handler)(arguments, context)
    }
}

impl fmt::Debug for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tool")
            .field("spec", &self.spec)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

fn run<Fut>(future: Fut) -> BoxFuture<'static, Result<ToolOutput, ToolError>>
where
    Fut: Future<Output: ToolReturn> + Send + 'static,
{
    future
        .map(|returned| returned.into_outcome().map_err(ToolError::Failed))
        .boxed()
}

/// What a tool's function may return: an output — anything that converts into a
/// [`ToolOutput`] (text, JSON, content blocks…) — for a tool that cannot fail, or
/// a `Result` of one whose error (anything that converts into a [`BoxError`])
/// becomes an error result the model reads.
///
/// Implemented for every `O: Into<ToolOutput>` and every `Result<O, E>` with such
/// an `O` and `E: Into<BoxError>`; sealed.
pub trait ToolReturn: sealed::Outcome {}

impl<T: sealed::Outcome> ToolReturn for T {}

mod sealed {
    use super::{BoxError, ToolOutput};

    /// The output or the error of one run of a tool.
    pub trait Outcome {
        fn into_outcome(self) -> Result<ToolOutput, BoxError>;
    }

    impl<O: Into<ToolOutput>> Outcome for O {
        fn into_outcome(self) -> Result<ToolOutput, BoxError> {
            Ok(self.into())
        }
    }

    impl<O: Into<ToolOutput>, E: Into<BoxError>> Outcome for Result<O, E> {
        fn into_outcome(self) -> Result<ToolOutput, BoxError> {
            self.map(Into::into).map_err(Into::into)
        }
    }
}

/// The JSON Schema of `A` as tool parameters: subschemas inlined (several providers
/// refuse `$ref`), without the `$schema` and `title` keys.
fn schema_for<A: JsonSchema>() -> Value {
    let mut schema = SchemaSettings::draft2020_12()
        .with(|settings| {
            settings.inline_subschemas = true;
            settings.meta_schema = None;
        })
        .into_generator()
        .into_root_schema_for::<A>();
    schema.remove("title");
    schema.to_value()
}

/// Why a tool produced no output.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The arguments could not be read as the tool's argument type.
    #[error("the arguments do not fit the tool: {0}")]
    Arguments(String),
    /// The tool's function returned an error.
    #[error("{}", Chain(.0.as_ref()))]
    Failed(BoxError),
}

/// Displays an error with its sources: `outer: inner: innermost`.
struct Chain<'a>(&'a (dyn std::error::Error + 'static));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(error) = source {
            write!(f, ": {error}")?;
            source = error.source();
        }
        Ok(())
    }
}
