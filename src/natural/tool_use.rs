//! The `NaturalToolUse` layer: makes a model without native tool calling
//! tool-capable.

use super::answer_format::{self, AnswerJson};
use super::dialect::Dialect;
use super::parser::{NaturalToolUseParser, ParserMachine};
use super::prompt;
use super::transformer::{Consolidation, NaturalToolUseTransformer};
use crate::service::{Machine, MachineFactory, Output};
use crate::{ChatRequest, Error, Event, Message, ToolChoice};

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
///   not allow (any call under `none`) is marked invalid, never a plain call;
/// - a `response_format` goes into the system prompt too (a section asking for
///   only a JSON value matching the schema, shown as pretty JSON), and the
///   final answer — a reply that calls no tool — is read for its JSON: a text
///   that wraps it (a ```` ```json ```` fence, prose around it) becomes the
///   JSON alone (compact); a text without JSON is left as it is. The answer's
///   text then comes out whole when the reply ends, in both modes. The format
///   is sent on as well (a server such as llama.cpp constrains the output to
///   it, and the provider checks the reply) unless tools are described in the
///   prompt — a format enforced below would forbid a call written as text —
///   or [`native_response_format(false)`](Self::native_response_format) says
///   the server takes none; then this layer checks the answer itself
///   ([`Error::InvalidOutput`]).
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
#[derive(Clone, Debug)]
pub struct NaturalToolUse {
    transformer: NaturalToolUseTransformer,
    parser: NaturalToolUseParser,
    native_response_format: bool,
}

impl Default for NaturalToolUse {
    fn default() -> Self {
        NaturalToolUse {
            transformer: NaturalToolUseTransformer::default(),
            parser: NaturalToolUseParser::default(),
            native_response_format: true,
        }
    }
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

    /// Whether a request's `response_format` is sent on to the server when no
    /// tools are described in the prompt (on by default: servers such as
    /// llama.cpp and vLLM constrain the output to it). Off, for a server that
    /// takes none, the format is only asked for in the prompt and this layer
    /// checks the answer.
    ///
    /// ```
    /// use lmstack::natural::NaturalToolUse;
    /// use lmstack::testing::ScriptedModel;
    /// use lmstack::{ChatRequest, Message, ResponseFormat};
    /// use serde_json::json;
    /// use tower::{Layer, ServiceExt};
    ///
    /// # futures::executor::block_on(async {
    /// let model = ScriptedModel::new().reply("Sure:\n```json\n{\"city\": \"Paris\"}\n```");
    /// let format = ResponseFormat::json_schema(json!({"type": "object", "required": ["city"]}));
    /// let mut request = ChatRequest::new(vec![Message::user("Capital of France?")]);
    /// request.options.response_format = Some(format);
    /// let layer = NaturalToolUse::new().native_response_format(false);
    /// let reply = layer.layer(model.clone()).oneshot(request).await?;
    /// assert_eq!(reply.collect().await?, vec![Message::assistant(r#"{"city":"Paris"}"#)]);
    ///
    /// let sent = &model.requests()[0];
    /// assert!(sent.options.response_format.is_none());
    /// assert!(sent.messages[0].as_text().unwrap().contains("\"required\": [\n    \"city\"\n  ]"));
    /// # Ok::<(), lmstack::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn native_response_format(mut self, sent_on: bool) -> Self {
        self.native_response_format = sent_on;
        self
    }
}

crate::service::factory_layer!(NaturalToolUse);

impl MachineFactory for NaturalToolUse {
    type Machine = NaturalToolUseMachine;

    fn start(&self, request: &mut ChatRequest) -> Result<NaturalToolUseMachine, Error> {
        let id_base = request.messages.iter().map(|m| m.calls().len()).sum();
        let tools = std::mem::take(&mut request.options.tools);
        let choice = request.options.tool_choice.take();
        let history: Vec<Message> = std::mem::take(&mut request.messages);
        request.messages = self.transformer.render(history)?;
        let described = !tools.is_empty() && choice != Some(ToolChoice::None);
        if described {
            let section = prompt::section(&tools, choice.as_ref(), self.transformer.written());
            prompt::install(&mut request.messages, &section, prompt::START, prompt::END);
        }
        let answer = match request.options.response_format.clone() {
            Some(format) => {
                let section = answer_format::section(&format);
                let (start, end) = (answer_format::START, answer_format::END);
                prompt::install(&mut request.messages, &section, start, end);
                let sent_on = self.native_response_format && !described;
                if !sent_on {
                    request.options.response_format = None;
                }
                Some(AnswerJson::new(&format, !sent_on)?)
            }
            None => None,
        };
        Ok(NaturalToolUseMachine {
            parser: self.parser.machine_for(&tools, choice.as_ref(), id_base)?,
            answer,
            parsed: Output::new(),
        })
    }
}

/// The [`NaturalToolUse`] layer's machine for one reply: the
/// [`ParserMachine`], then, for a request with a `response_format`, the
/// reading of the answer's JSON.
#[derive(Debug)]
pub struct NaturalToolUseMachine {
    parser: ParserMachine,
    answer: Option<AnswerJson>,
    /// The parser's output, on its way to the answer's reader; one queue,
    /// kept with its memory.
    parsed: Output,
}

impl NaturalToolUseMachine {
    /// The parser's output so far goes on; the answer's reader may fail (its
    /// limit), after which the rest goes on as it is.
    fn forward(&mut self, out: &mut Output) -> Result<(), Error> {
        let mut forwarded = Ok(());
        while let Some(event) = self.parsed.pop() {
            match &mut self.answer {
                Some(answer) if forwarded.is_ok() => forwarded = answer.push(event, out),
                _ => out.push(event),
            }
        }
        forwarded
    }
}

impl NaturalToolUseMachine {
    /// A reply that fails keeps everything before the fault: the answer held
    /// goes out as it came.
    fn release_on_error(&mut self, outcome: &Result<(), Error>, out: &mut Output) {
        if let (Err(_), Some(answer)) = (outcome, &mut self.answer) {
            answer.release(out);
        }
    }
}

impl Machine for NaturalToolUseMachine {
    type In = Event;
    type Out = Event;

    fn push(&mut self, event: Event, out: &mut Output) -> Result<(), Error> {
        let pushed = self.parser.push(event, &mut self.parsed);
        let pushed = self.forward(out).and(pushed);
        self.release_on_error(&pushed, out);
        pushed
    }

    fn finish(&mut self, out: &mut Output) -> Result<(), Error> {
        let finished = self.parser.finish(&mut self.parsed);
        let finished = self.forward(out).and(finished);
        self.release_on_error(&finished, out);
        finished?;
        match &mut self.answer {
            Some(answer) => answer.finish(out),
            None => Ok(()),
        }
    }
}
