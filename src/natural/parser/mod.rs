//! The natural tool use parser: model text with `<tool_call>`-style markup →
//! tool calls, in one linear pass, streaming or not.
//!
//! This module is the parser's public face, its configuration. The work is
//! done below it: the scanner ([`ParserMachine`], `machine.rs`) finds markup in
//! the text and hands each block to its dialect's reader (`block.rs`,
//! `json_block.rs`, `xml_block.rs`, `protocol.rs`, `response.rs`); `calls.rs`
//! numbers, checks (with `tools.rs`) and hands out the calls by the
//! [`OnInvalid`] policy; `emit.rs` shapes the output.

mod block;
mod call_list;
mod calls;
mod emit;
mod harmony;
mod incremental;
mod json_block;
mod llama_json;
mod machine;
mod mistral;
mod protocol;
mod pythonic;
mod response;
mod special;
mod token_call;
mod tools;
mod xml_block;

use std::sync::Arc;

use self::calls::Calls;
use self::tools::ToolTable;
use super::dialect::Dialect;
use super::history::HistoryReader;
use crate::message::{Event, Joiner, Message};
use crate::schema::SchemaCache;
use crate::service::{Machine, MachineFactory, Output};
use crate::{ChatRequest, Error, ToolChoice, ToolSpec};

pub use self::calls::OnInvalid;
pub use self::incremental::IncrementalParser;
pub use self::machine::ParserMachine;

/// The natural tool use parser: turns `<tool_call>`-style text from the model
/// into tool calls. It is the configuration (a [`MachineFactory`]) and a tower
/// [`Layer`](tower::Layer) itself; [`parse`](NaturalToolUseParser::parse) (a
/// whole text), [`incremental`](NaturalToolUseParser::incremental) (text fed
/// piece by piece) and [`machine`](NaturalToolUseParser::machine) use it
/// directly.
///
/// Streaming: text before, between and after calls goes out at once, except the
/// shortest tail that could still begin a marker; a call's arguments go out as
/// `tool_call_delta`s as they arrive; `<think>…</think>` goes out as reasoning
/// (tool syntax in it is not a call); a tag inside a code fence opened in the
/// prose is text; whitespace between and after call blocks is dropped, so that
/// consecutive calls form one `tool_calls` message. Names match the request's tools case-insensitively (the tool's
/// own spelling is used) and arguments are checked against the tool's JSON Schema
/// (validators are compiled once and shared by clones). With no tools in the
/// request, any name goes and nothing is checked. Call ids are `call_N`, numbered
/// after the calls already in the conversation.
///
/// ```
/// use lmstack::natural::NaturalToolUseParser;
/// use lmstack::{Message, ToolCall, ToolSpec};
/// use serde_json::json;
///
/// let tools = [ToolSpec::new("get_weather", "", json!({"type": "object"}))];
/// let text = "Let me check.\n<tool_call name=\"get_weather\">\n{\"city\": \"Paris\"}\n</tool_call>";
/// let messages = NaturalToolUseParser::new().parse(text, &tools).unwrap();
/// assert_eq!(messages, vec![
///     Message::assistant("Let me check.\n"),
///     Message::tool_calls(vec![ToolCall::new("call_1", "get_weather", json!({"city": "Paris"}))]),
/// ]);
/// ```
#[derive(Clone, Debug)]
pub struct NaturalToolUseParser {
    dialect: Dialect,
    on_invalid: OnInvalid,
    call_limit: usize,
    code_fences: bool,
    transcript: bool,
    schemas: Arc<SchemaCache>,
}

impl Default for NaturalToolUseParser {
    fn default() -> Self {
        Self::new()
    }
}

impl NaturalToolUseParser {
    /// All four XML dialects, bad calls kept as text, 8 MiB per call, code fences
    /// respected.
    pub fn new() -> Self {
        NaturalToolUseParser {
            dialect: Dialect::Auto,
            on_invalid: OnInvalid::Text,
            call_limit: 8 << 20,
            code_fences: true,
            transcript: false,
            schemas: Arc::default(),
        }
    }

    /// Which dialect to read.
    pub fn dialect(mut self, dialect: Dialect) -> Self {
        self.dialect = dialect;
        self
    }

    /// What to do with calls that cannot be accepted.
    pub fn on_invalid(mut self, policy: OnInvalid) -> Self {
        self.on_invalid = policy;
        self
    }

    /// The most bytes one tool-call block may take; past it the reply fails
    /// with [`Error::LimitExceeded`], before any fault found further on in the
    /// block, however the text is cut.
    pub fn call_limit(mut self, bytes: usize) -> Self {
        self.call_limit = bytes;
        self
    }

    /// Whether tags inside a markdown code fence opened in the prose are text
    /// (on by default).
    pub fn code_fences(mut self, respected: bool) -> Self {
        self.code_fences = respected;
        self
    }

    /// Transcript mode (off by default): reads text written in the
    /// transformer's format back — `<tool_response>` blocks become `tool_results`
    /// messages and the ids written in calls are kept. Off for model replies, so
    /// that a model cannot forge tool results or choose call ids; see
    /// [`read_history`](NaturalToolUseParser::read_history) for whole histories.
    pub fn transcript(mut self, on: bool) -> Self {
        self.transcript = on;
        self
    }

    /// A parser state machine for one reply, with `tools` (see
    /// [`Machine`]); `id_base` calls came before in the conversation.
    pub fn machine(&self, tools: &[ToolSpec], id_base: usize) -> Result<ParserMachine, Error> {
        self.machine_for(tools, None, id_base)
    }

    /// A parser state machine for one reply to a request with `tools` and
    /// `choice`: a call the choice does not allow (any call under `none`) is
    /// invalid, of kind [`NotAllowed`](crate::InvalidCallKind::NotAllowed).
    pub fn machine_for(
        &self,
        tools: &[ToolSpec],
        choice: Option<&ToolChoice>,
        id_base: usize,
    ) -> Result<ParserMachine, Error> {
        Ok(ParserMachine::new(
            ToolTable::new(tools, choice, &self.schemas)?,
            self.dialect,
            self.code_fences,
            self.transcript,
            Calls::new(id_base, self.call_limit, self.on_invalid, self.transcript),
        ))
    }

    /// A parse of one reply with `tools` that takes the text piece by piece as
    /// it streams in and gives the events of each piece at once
    /// ([`IncrementalParser`], which has the example): the parser without a
    /// tower stack, for text from any source.
    pub fn incremental(&self, tools: &[ToolSpec]) -> Result<IncrementalParser, Error> {
        Ok(IncrementalParser::new(self.machine(tools, 0)?))
    }

    /// Reads a whole history written in the transformer's format (by
    /// [`NaturalToolUseTransformer::render`](super::NaturalToolUseTransformer::render),
    /// or by hand) back into canonical messages: every assistant and user text
    /// is parsed in [transcript mode](NaturalToolUseParser::transcript), media
    /// blocks go back in place of their placeholders, and each run of calls
    /// followed by the results that answer them becomes a `tool_aggregate` (a
    /// result without an id answers the call in its place, as Qwen chat
    /// templates write them). A message of the single form (calls each followed
    /// by its response) gives back its texts and aggregates in order; the ids
    /// and per-aggregate metadata the transformer kept in metadata are put back.
    /// Other messages stay as they are.
    ///
    /// ```
    /// use lmstack::natural::{NaturalToolUseParser, NaturalToolUseTransformer};
    /// use lmstack::{Message, ToolCall, ToolResult};
    /// use serde_json::json;
    ///
    /// let history = vec![
    ///     Message::user("Weather in Paris?"),
    ///     Message::tool_aggregate(
    ///         vec![ToolCall::new("toolu_1", "get_weather", json!({"city": "Paris"}))],
    ///         vec![ToolResult::text("toolu_1", "get_weather", "18°C")],
    ///     ),
    ///     Message::assistant("It is 18°C."),
    /// ];
    /// let text = NaturalToolUseTransformer::new().render(history.clone()).unwrap();
    /// let read = NaturalToolUseParser::new().read_history(text, &[]).unwrap();
    /// assert_eq!(read, history);
    /// ```
    pub fn read_history(
        &self,
        messages: Vec<Message>,
        tools: &[ToolSpec],
    ) -> Result<Vec<Message>, Error> {
        let mut reader = self.history_reader(tools);
        let mut out = Output::new();
        for message in messages {
            reader.push(message, &mut out)?;
        }
        reader.finish(&mut out)?;
        Ok(out.drain().collect())
    }

    /// Reads a history as [`read_history`](NaturalToolUseParser::read_history)
    /// does, one message at a time: a [`Machine`] whose output is the messages
    /// read, each as soon as the messages after it cannot change it.
    pub fn history_reader(&self, tools: &[ToolSpec]) -> HistoryReader {
        HistoryReader::new(self.clone().transcript(true), tools.to_vec())
    }

    /// Parses a whole text into messages: its text, reasoning and `tool_calls`
    /// (see the example above), checked against `tools` (none: any call goes
    /// unchecked). Fails, without the messages before, where the parser layer's
    /// reply fails: under [`OnInvalid::Error`], or past the
    /// [`call_limit`](Self::call_limit).
    pub fn parse(&self, text: &str, tools: &[ToolSpec]) -> Result<Vec<Message>, Error> {
        let mut machine = self.machine(tools, 0)?;
        let mut out = Output::new();
        machine.push(Event::message(Message::assistant(text)), &mut out)?;
        machine.finish(&mut out)?;
        Ok(Joiner::join(out.drain()))
    }
}

/// The example of docs/parser.md, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/parser.md")]
struct ParserGuideDoctests;

crate::service::factory_layer!(NaturalToolUseParser);

impl MachineFactory for NaturalToolUseParser {
    type Machine = ParserMachine;

    fn start(&self, request: &mut ChatRequest) -> Result<ParserMachine, Error> {
        let id_base = request.messages.iter().map(|m| m.calls().len()).sum();
        let options = &request.options;
        self.machine_for(&options.tools, options.tool_choice.as_ref(), id_base)
    }
}
