//! The `NaturalToolUse` layer: makes a model without native tool calling
//! tool-capable.

use super::dialect::Dialect;
use super::parser::{NaturalToolUseParser, ParserMachine};
use super::prompt;
use super::transformer::{Consolidation, NaturalToolUseTransformer};
use crate::service::MachineFactory;
use crate::{ChatRequest, Error, Message, ToolChoice};

/// Tool calling for models that only read and write text: the transformer on
/// the way in, the parser on the way out.
///
/// For each request:
/// - the history's tool calls and results (aggregates, `tool_calls`,
///   `tool_results`) are written as text by the [`NaturalToolUseTransformer`];
/// - a section describing the tools — name, description, JSON Schema and an
///   example call in the chosen dialect — goes into the system message (created
///   when there is none). It is added once: a history that already holds it is
///   left alone, and an earlier section is replaced, so tool-loop rounds and
///   stored histories do not pile sections up. `tool_choice` `required` or a
///   named tool becomes a sentence of it; `none` leaves the section out;
/// - the native `tools` and `tool_choice` are removed from the options sent on;
/// - the reply goes through the [`NaturalToolUseParser`], which checks calls
///   against the request's tools and its `tool_choice`: a call the choice does
///   not allow (any call under `none`) is marked invalid, never a plain call.
///
/// On its own, it turns a text-only model's `<tool_call>` text into a tool call
/// and shows the model the tools as text; placed under the function layer
/// (`lmstack::function`), it makes the whole tool loop work with such a model
/// (the README's example).
///
/// ```
/// use lmstack::natural::NaturalToolUse;
/// use lmstack::testing::ScriptedModel;
/// use lmstack::{ChatRequest, Message, ToolCall, ToolSpec};
/// use serde_json::json;
/// use tower::{Layer, ServiceExt};
///
/// # futures::executor::block_on(async {
/// let model = ScriptedModel::new().reply("<tool_call name=\"add\">\n{\"a\": 2, \"b\": 3}\n</tool_call>");
/// let add = ToolSpec::new("add", "Adds two integers", json!({"type": "object"}));
/// let request = ChatRequest::new(vec![Message::user("2 + 3?")]).tool(add);
/// let reply = NaturalToolUse::new().layer(model.clone()).oneshot(request).await?;
/// assert_eq!(
///     reply.collect().await?,
///     vec![Message::tool_calls(vec![ToolCall::new("call_1", "add", json!({"a": 2, "b": 3}))])]
/// );
///
/// // What the model saw: no native tools, and the tools described in the system prompt.
/// let sent = &model.requests()[0];
/// assert!(sent.options.tools.is_empty());
/// assert!(sent.messages[0].as_text().unwrap().contains("## add"));
/// # Ok::<(), lmstack::Error>(())
/// # }).unwrap();
/// ```
#[derive(Clone, Debug, Default)]
pub struct NaturalToolUse {
    transformer: NaturalToolUseTransformer,
    parser: NaturalToolUseParser,
}

impl NaturalToolUse {
    /// The tagged dialect; the parser reads all four XML dialects.
    pub fn new() -> Self {
        Self::default()
    }

    /// The layer for `model`, by its name: the history and the prompt's
    /// examples in the family's own call form ([`Dialect::for_model`], as
    /// [`Dialect::rendered_as`] renders it: Hermes for the Qwen family, tagged
    /// for models it does not know), the
    /// reply read in the family's own dialect ([`Dialect::for_model`]), which
    /// also reads the tagged form the writer falls back to, or by `auto` when
    /// that dialect would not read the form written (Qwen3-Coder, unknown
    /// models).
    ///
    /// ```
    /// use lmstack::natural::NaturalToolUse;
    /// use lmstack::testing::ScriptedModel;
    /// use lmstack::{ChatRequest, Message, ToolCall, ToolSpec};
    /// use serde_json::json;
    /// use tower::{Layer, ServiceExt};
    ///
    /// # futures::executor::block_on(async {
    /// // A Granite model is shown its own format, and answers in it.
    /// let model = ScriptedModel::new()
    ///     .reply(r#"<|tool_call|>[{"name": "add", "arguments": {"a": 2, "b": 3}}]"#);
    /// let add = ToolSpec::new("add", "Adds two integers", json!({"type": "object"}));
    /// let request = ChatRequest::new(vec![Message::user("2 + 3?")]).tool(add);
    /// let layer = NaturalToolUse::for_model("ibm-granite/granite-3.3-8b-instruct");
    /// let reply = layer.layer(model.clone()).oneshot(request).await?;
    /// assert_eq!(
    ///     reply.collect().await?,
    ///     vec![Message::tool_calls(vec![ToolCall::new("call_1", "add", json!({"a": 2, "b": 3}))])]
    /// );
    /// let system = model.requests()[0].messages[0].as_text().unwrap().to_owned();
    /// assert!(system.contains("Example:\n<|tool_call|>[{\"name\": \"add\", \"arguments\": {}}]"));
    /// # Ok::<(), lmstack::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn for_model(model: &str) -> Self {
        let native = Dialect::for_model(model);
        let written = native.rendered_as();
        let read = if native.reads(written) {
            native
        } else {
            Dialect::Auto
        };
        Self::new()
            .dialect(written)
            .parser(NaturalToolUseParser::new().dialect(read))
    }

    /// The dialect the history and the prompt's examples are written in
    /// (`Tagged` by default); the reply is then read by
    /// [`Dialect::read_by`]: `auto` when it reads that form, else the family's
    /// own dialect. A dialect the transformer does not render is written as
    /// [`Dialect::rendered_as`] says. [`parser`](Self::parser) set after this
    /// one wins.
    pub fn dialect(mut self, dialect: Dialect) -> Self {
        self.transformer = self.transformer.dialect(dialect);
        self.parser = self.parser.dialect(dialect.read_by());
        self
    }

    /// How the history's turns are written: `Split` (the default) or `Single`
    /// (see [`Consolidation`]).
    pub fn consolidation(mut self, consolidation: Consolidation) -> Self {
        self.transformer = self.transformer.consolidation(consolidation);
        self
    }

    /// Whether the history's calls and responses carry their ids (on by
    /// default; see [`NaturalToolUseTransformer::call_ids`]).
    pub fn call_ids(mut self, written: bool) -> Self {
        self.transformer = self.transformer.call_ids(written);
        self
    }

    /// Replaces the transformer (its dialect, form, ids and limits).
    pub fn transformer(mut self, transformer: NaturalToolUseTransformer) -> Self {
        self.transformer = transformer;
        self
    }

    /// Replaces the parser (its dialects, bad-output policy and limits).
    pub fn parser(mut self, parser: NaturalToolUseParser) -> Self {
        self.parser = parser;
        self
    }
}

crate::service::factory_layer!(NaturalToolUse);

impl MachineFactory for NaturalToolUse {
    type Machine = ParserMachine;

    fn start(&self, request: &mut ChatRequest) -> Result<ParserMachine, Error> {
        let id_base = request.messages.iter().map(|m| m.calls().len()).sum();
        let tools = std::mem::take(&mut request.options.tools);
        let choice = request.options.tool_choice.take();
        let history: Vec<Message> = std::mem::take(&mut request.messages);
        request.messages = self.transformer.render(history)?;
        if !tools.is_empty() && choice != Some(ToolChoice::None) {
            let section = prompt::section(&tools, choice.as_ref(), self.transformer.written());
            prompt::install(&mut request.messages, &section);
        }
        self.parser.machine_for(&tools, choice.as_ref(), id_base)
    }
}
