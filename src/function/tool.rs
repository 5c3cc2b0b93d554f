//! Tools: a spec for the model and a handler to run.

use std::fmt;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::MediaPolicy;
use crate::{BoxError, ContentBlock, MediaSource, Metadata, ToolResult, ToolSpec};

type Handler = dyn Fn(Value) -> BoxFuture<'static, Result<ToolOutput, ToolError>> + Send + Sync;

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
///     Ok::<_, std::convert::Infallible>((args.a + args.b).to_string())
/// });
/// assert_eq!(add.spec().parameters["required"], serde_json::json!(["a", "b"]));
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
///     |args: Value| async move { Ok::<_, std::convert::Infallible>(args["text"].clone()) },
/// );
/// assert_eq!(echo.name(), "echo");
/// ```
///
/// A handler returns anything that converts into a [`ToolOutput`] — text, a JSON
/// value, [`Json`] of any serialisable type, content blocks, or a `ToolOutput` built
/// with images, documents and files — or an error, which the model receives as an
/// error result.
#[derive(Clone)]
pub struct Tool {
    spec: ToolSpec,
    timeout: Option<Duration>,
    handler: Arc<Handler>,
}

impl Tool {
    /// A tool whose arguments deserialise into `A`; the schema is generated from `A`.
    pub fn typed<A, F, Fut, O, E>(
        name: impl Into<String>,
        description: impl Into<String>,
        function: F,
    ) -> Self
    where
        A: DeserializeOwned + JsonSchema,
        F: Fn(A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, E>> + Send + 'static,
        O: Into<ToolOutput>,
        E: Into<BoxError>,
    {
        let handler = move |arguments: Value| match serde_json::from_value::<A>(arguments) {
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
    pub fn dynamic<F, Fut, O, E>(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
        function: F,
    ) -> Self
    where
        F: Fn(Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, E>> + Send + 'static,
        O: Into<ToolOutput>,
        E: Into<BoxError>,
    {
        Tool {
            spec: ToolSpec::new(name, description, parameters),
            timeout: None,
            handler: Arc::new(move |arguments| run(function(arguments))),
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

    /// Runs the tool on `arguments` (not checked against the schema here; the
    /// function layer does that first).
    pub fn call(&self, arguments: Value) -> BoxFuture<'static, Result<ToolOutput, ToolError>> {
        (self.handler)(arguments)
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

fn run<Fut, O, E>(future: Fut) -> BoxFuture<'static, Result<ToolOutput, ToolError>>
where
    Fut: Future<Output = Result<O, E>> + Send + 'static,
    O: Into<ToolOutput>,
    E: Into<BoxError>,
{
    future
        .map(|outcome| {
            outcome
                .map(Into::into)
                .map_err(|e| ToolError::Failed(e.into()))
        })
        .boxed()
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

/// What a tool returns: text, JSON, images, documents and files, in order, and
/// whether it is an error.
///
/// Images and documents — from bytes, files, or inline blocks — are checked by
/// the layer's [`MediaPolicy`] when the result is made; a file is read only then (lazily, after
/// the tool returned, off the async threads). Content the policy refuses turns the
/// result into an error result that says why.
///
/// ```
/// use lmstack::function::{MediaPolicy, ToolOutput};
/// use lmstack::{ContentBlock, ToolResult};
/// let png: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
/// let output = ToolOutput::text("Here is the chart:").with(ToolOutput::media(png, "image/png"));
/// let result = output.into_result("call_1", "chart", &MediaPolicy::new());
/// assert_eq!(
///     result,
///     ToolResult::new(
///         "call_1",
///         "chart",
///         vec![ContentBlock::text("Here is the chart:"), ContentBlock::image_bytes("image/png", png)]
///     )
/// );
///
/// // A file is read under the policy's root, which is unset here: an error result.
/// let refused = ToolOutput::file("report.pdf").into_result("call_2", "report", &MediaPolicy::new());
/// assert!(refused.is_error);
/// assert!(refused.text_content().contains("no file root is configured"));
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolOutput {
    parts: Vec<Part>,
    is_error: bool,
    metadata: Metadata,
}

#[derive(Clone, Debug, PartialEq)]
enum Part {
    Block(ContentBlock),
    Bytes {
        bytes: Vec<u8>,
        media_type: String,
    },
    File {
        path: PathBuf,
        media_type: Option<String>,
    },
}

impl ToolOutput {
    /// Empty output.
    pub fn new() -> Self {
        Self::default()
    }

    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::block(ContentBlock::text(text))
    }

    /// Any value as JSON text. A value that cannot be serialised gives an error
    /// output saying so.
    pub fn json<T: Serialize + ?Sized>(value: &T) -> Self {
        match serde_json::to_string(value) {
            Ok(text) => Self::text(text),
            Err(error) => Self::error(format!("the result could not be written as JSON: {error}")),
        }
    }

    /// One content block. An inline (base64) image or document is checked against
    /// the media policy like [`media`](Self::media) when the result is made; text
    /// and media by URL are passed on as they are.
    pub fn block(block: ContentBlock) -> Self {
        ToolOutput {
            parts: vec![Part::Block(block)],
            ..Self::default()
        }
    }

    /// An image or document from bytes of the claimed MIME type; checked against the
    /// media policy (sniffed type, allow-list, size) when the result is made.
    pub fn media(bytes: impl Into<Vec<u8>>, media_type: impl Into<String>) -> Self {
        ToolOutput {
            parts: vec![Part::Bytes {
                bytes: bytes.into(),
                media_type: media_type.into(),
            }],
            ..Self::default()
        }
    }

    /// An image or document read from a file under the media policy's root, when the
    /// result is made; its type is sniffed from its bytes.
    pub fn file(path: impl Into<PathBuf>) -> Self {
        ToolOutput {
            parts: vec![Part::File {
                path: path.into(),
                media_type: None,
            }],
            ..Self::default()
        }
    }

    /// Like [`file`](Self::file), with a claimed MIME type the bytes must match.
    pub fn file_as(path: impl Into<PathBuf>, media_type: impl Into<String>) -> Self {
        ToolOutput {
            parts: vec![Part::File {
                path: path.into(),
                media_type: Some(media_type.into()),
            }],
            ..Self::default()
        }
    }

    /// An error output: the model is told the call failed, and why.
    pub fn error(message: impl Into<String>) -> Self {
        Self::text(message).into_error()
    }

    /// Appends the parts of `more`; the result is an error if either is.
    pub fn with(mut self, more: ToolOutput) -> Self {
        self.parts.extend(more.parts);
        self.is_error |= more.is_error;
        self.metadata.merge_missing(&more.metadata);
        self
    }

    /// Marks the output as an error.
    pub fn into_error(mut self) -> Self {
        self.is_error = true;
        self
    }

    /// Sets the metadata the result will carry.
    pub fn with_metadata(mut self, metadata: Metadata) -> Self {
        self.metadata = metadata;
        self
    }

    /// True for an error output.
    pub fn is_error(&self) -> bool {
        self.is_error
    }

    /// True when making the result checks media or reads files (work done off the
    /// async threads).
    pub fn has_media(&self) -> bool {
        self.parts.iter().any(|part| match part {
            Part::Block(block) => block
                .as_media()
                .is_some_and(|media| matches!(media.source, MediaSource::Base64 { .. })),
            Part::Bytes { .. } | Part::File { .. } => true,
        })
    }

    /// Makes the result of call `call_id` of tool `name`: media is checked and files
    /// are read under `policy` (blocking IO when there are files).
    /// Refused media makes an error result that says why.
    pub fn into_result(self, call_id: &str, name: &str, policy: &MediaPolicy) -> ToolResult {
        let content: Result<Vec<ContentBlock>, _> = self
            .parts
            .into_iter()
            .map(|part| match part {
                Part::Block(block) => policy.check_block(block),
                Part::Bytes { bytes, media_type } => policy.block(&bytes, Some(&media_type)),
                Part::File { path, media_type } => policy.read_block(&path, media_type.as_deref()),
            })
            .collect();
        match content {
            Ok(content) => ToolResult {
                call_id: call_id.to_owned(),
                name: name.to_owned(),
                content,
                is_error: self.is_error,
                metadata: self.metadata,
            },
            Err(error) => ToolResult {
                metadata: self.metadata,
                ..ToolResult::error(
                    call_id,
                    name,
                    format!("The tool `{name}` returned content that was refused: {error}."),
                )
            },
        }
    }
}

impl From<String> for ToolOutput {
    fn from(text: String) -> Self {
        Self::text(text)
    }
}

impl From<&str> for ToolOutput {
    fn from(text: &str) -> Self {
        Self::text(text)
    }
}

impl From<Value> for ToolOutput {
    /// JSON text; a JSON string becomes its text.
    fn from(value: Value) -> Self {
        match value {
            Value::String(text) => Self::text(text),
            other => Self::text(other.to_string()),
        }
    }
}

impl From<ContentBlock> for ToolOutput {
    fn from(block: ContentBlock) -> Self {
        Self::block(block)
    }
}

impl From<Vec<ContentBlock>> for ToolOutput {
    fn from(blocks: Vec<ContentBlock>) -> Self {
        ToolOutput {
            parts: blocks.into_iter().map(Part::Block).collect(),
            ..Self::default()
        }
    }
}

impl<T: Serialize> From<Json<T>> for ToolOutput {
    fn from(Json(value): Json<T>) -> Self {
        Self::json(&value)
    }
}

/// Wraps a serialisable value so that a tool can return it as JSON.
///
/// ```
/// use lmstack::function::{Json, ToolOutput};
/// #[derive(serde::Serialize)]
/// struct Weather { celsius: i32 }
/// let output = ToolOutput::from(Json(Weather { celsius: 18 }));
/// assert_eq!(output, ToolOutput::text(r#"{"celsius":18}"#));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Json<T>(pub T);
