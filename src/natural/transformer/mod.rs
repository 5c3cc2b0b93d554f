//! The natural tool use transformer: tool calls and their results → text, for
//! models without native tool calling. The reverse of the parser.

mod call_writer;
mod python_literal;
mod turn;

use std::collections::HashSet;

use serde_json::Value;

pub(crate) use self::call_writer::write_example;
use self::call_writer::{write_calls, writes_ids};
use self::turn::{Style, Turn};
use super::dialect::Dialect;
use super::markers::SEPARATOR;
use super::metadata::{TOOL_CALL_IDS_KEY, TOOL_METADATA_KEY, extras};
use super::result_text::{interleave, write_result};
use crate::message::{MultimodalMessage, TextMessage, ToolAggregateMessage};
use crate::service::{Machine, MachineFactory, Output};
use crate::{
    ChatRequest, ContentBlock, Error, Event, Joiner, Message, Metadata, Role, TextDelta, ToolCall,
    ToolCallDelta, ToolResult,
};

/// The stage name in errors.
const STAGE: &str = "natural tool use transformer";

/// Where the transformer writes a turn's results.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Consolidation {
    /// The calls in an assistant message (after the turn's text), the results
    /// in a user message after it, text after them in a new assistant message
    /// (the default).
    #[default]
    Split,
    /// The whole turn in one message: text, each call directly followed by its
    /// response, text; pairs separated by `---` lines.
    Single,
}

impl Consolidation {
    /// The CLI name: `split` or `single`.
    pub fn name(self) -> &'static str {
        match self {
            Consolidation::Split => "split",
            Consolidation::Single => "single",
        }
    }
}

impl std::fmt::Display for Consolidation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Consolidation {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        match name {
            "split" => Ok(Consolidation::Split),
            "single" => Ok(Consolidation::Single),
            _ => Err(format!(
                "unknown consolidation `{name}`; the transformer writes: split, single"
            )),
        }
    }
}

/// Rewrites tool calls and their results as text, for models without native
/// tool calling: `tool_aggregate` messages (and `tool_calls` / `tool_results`
/// messages) become calls in the chosen dialect and `<tool_response>` blocks.
///
/// ```text
/// <tool_call name="get_weather" id="call_1">
/// {
///   "location": "San Francisco, CA"
/// }
/// </tool_call>
/// <tool_response name="get_weather" id="call_1">
/// 18°C and sunny
/// </tool_response>
/// ```
///
/// **Roles and consolidation** ([`Consolidation`]). A call is what the model
/// wrote, a result what came back. In the **split** form (the default) the calls
/// go into an assistant message and the results into a user message after it: a
/// turn `assistant text + aggregate(s) + assistant text` becomes `assistant
/// (text, then the calls)`, `user (the results)`, `assistant (the text after)`,
/// the same shape as native tool calling with the `tool` role read as `user`, so
/// whatever alternation of roles a provider demands of native histories holds
/// for the rendered one too. Several calls of one aggregate, and their results,
/// are separated by a line `---`; the i-th result answers the i-th call.
///
/// In the **single** form a turn — assistant text, aggregates (and `tool_calls`
/// / `tool_results` messages) in a row — is one message: the texts in order,
/// each call directly followed by its response, pairs separated by `---` lines
/// (separate `tool_calls` and `tool_results` messages: in the order they come).
/// Its role, as specified: `user` when it holds a response (tool results are
/// attributed to the user), else `assistant` (calls without responses, text);
/// read back, the text beside calls is the assistant's again. Its text is
/// handed out when the turn ends (at another kind of message or event, or the
/// end), so a streamed reply's text comes whole then; the split form streams
/// text at once.
///
/// ```text
/// I'll check the weather.
/// <tool_call name="get_weather" id="call_1">
/// {
///   "location": "San Francisco, CA"
/// }
/// </tool_call>
/// <tool_response name="get_weather" id="call_1">
/// 18°C and sunny
/// </tool_response>
/// ---
/// <tool_call name="get_time" id="call_2">
/// …
/// It is 18°C and sunny.
/// ```
///
/// **Dialects** ([`Dialect::RENDERED`]). Tagged (above), Hermes, or a model
/// family's own call form (`[TOOL_CALLS]F[ARGS]{…}`, `[f(a=1)]`, …); several
/// calls are joined as the family joins them, a call the form cannot carry
/// faithfully is written tagged, and results are always `<tool_response>`
/// blocks (Hermes: its JSON form).
///
/// **Ids.** [`call_ids(false)`](NaturalToolUseTransformer::call_ids) writes calls
/// and responses without their `id` (`<tool_call name="F">`; no `"id"` in
/// Hermes), as a model writes them; each message then keeps the call id of its
/// blocks, in order, under [`TOOL_CALL_IDS_KEY`]. Forms without a place for ids
/// always do so.
///
/// **Results.** Text as plain text; a result that is compact JSON of an object or
/// array as pretty JSON; an error result carries `is_error="true"`. Image,
/// document and audio blocks cannot live in text: each leaves a placeholder line
/// (`[image 1: image/png]`, `[audio 2: audio/wav]`) and travels as a content block of the same user
/// message, right after its line (the message is then `multimodal`).
///
/// **Metadata.** A message built from several sources takes each key from the
/// first source that has it (`Metadata::merge_missing`, earliest first). In the
/// split form the results message carries the aggregate's metadata whole, so
/// every source's metadata, generation ids included, survives in full in one
/// message; in the single form, a message whose merged metadata is not exactly
/// its one aggregate's keeps each aggregate's own under
/// [`TOOL_AGGREGATES_KEY`](super::TOOL_AGGREGATES_KEY). Call and result metadata, `provider_executed` and
/// `invalid` are kept under the key [`TOOL_METADATA_KEY`] of the message
/// holding the results.
///
/// **Errors.** A result without its call (in an aggregate, or a `tool_results`
/// message whose call never came), or a call of an aggregate without its result,
/// is [`Error::ToolPairing`], naming the message and the call id.
///
/// The parser reads both forms back in transcript mode
/// ([`NaturalToolUseParser::read_history`](super::NaturalToolUseParser::read_history)),
/// so `read_history(render(x)) == x`.
///
/// ```
/// use lmstack::natural::{Consolidation, NaturalToolUseTransformer};
/// use lmstack::{Message, Role, ToolCall, ToolResult};
/// use serde_json::json;
///
/// let history = vec![
///     Message::user("Weather in Paris?"),
///     Message::tool_aggregate(
///         vec![ToolCall::new("call_1", "get_weather", json!({"city": "Paris"}))],
///         vec![ToolResult::text("call_1", "get_weather", "18°C")],
///     ),
/// ];
/// let rendered = NaturalToolUseTransformer::new().render(history.clone()).unwrap();
/// assert_eq!(rendered[1], Message::assistant(
///     "<tool_call name=\"get_weather\" id=\"call_1\">\n{\n  \"city\": \"Paris\"\n}\n</tool_call>",
/// ));
/// assert_eq!(rendered[2], Message::user(
///     "<tool_response name=\"get_weather\" id=\"call_1\">\n18°C\n</tool_response>",
/// ));
///
/// let single = NaturalToolUseTransformer::new()
///     .consolidation(Consolidation::Single)
///     .call_ids(false)
///     .render(history)
///     .unwrap();
/// assert_eq!(single[1].as_text().unwrap(), "<tool_call name=\"get_weather\">\n{\n  \"city\": \"Paris\"\n}\n</tool_call>\n\
///     <tool_response name=\"get_weather\">\n18°C\n</tool_response>");
/// assert_eq!(single[1].role(), Role::User);
/// ```
#[derive(Clone, Debug)]
pub struct NaturalToolUseTransformer {
    dialect: Dialect,
    call_limit: usize,
    consolidation: Consolidation,
    call_ids: bool,
}

impl Default for NaturalToolUseTransformer {
    fn default() -> Self {
        Self::new()
    }
}

impl NaturalToolUseTransformer {
    /// The tagged dialect, the split form, ids written; streamed call deltas
    /// gathered up to 8 MiB.
    pub fn new() -> Self {
        NaturalToolUseTransformer {
            dialect: Dialect::Tagged,
            call_limit: 8 << 20,
            consolidation: Consolidation::Split,
            call_ids: true,
        }
    }

    /// Which dialect to write: `Tagged` (the default), `Hermes` (for
    /// Qwen-family models) or a model family's own call form (see
    /// [`Dialect::RENDERED`]); any other dialect is written as
    /// [`Dialect::rendered_as`] says.
    pub fn dialect(mut self, dialect: Dialect) -> Self {
        self.dialect = dialect.rendered_as();
        self
    }

    /// Where results go: `Split` (the default) or `Single` (see the type's
    /// documentation).
    pub fn consolidation(mut self, consolidation: Consolidation) -> Self {
        self.consolidation = consolidation;
        self
    }

    /// Whether calls and responses carry their call's `id` (on by default).
    /// Off, they are written as a model would write them, in every dialect, and
    /// the ids are kept under [`TOOL_CALL_IDS_KEY`] of each message, so that
    /// `read_history` gives them back. A family's form without a place for ids
    /// (all but tagged, Hermes and Mistral) is always written so.
    pub fn call_ids(mut self, written: bool) -> Self {
        self.call_ids = written;
        self
    }

    /// The most bytes of streamed tool-call deltas gathered before a call is
    /// written; past it the reply fails with [`Error::LimitExceeded`].
    pub fn call_limit(mut self, bytes: usize) -> Self {
        self.call_limit = bytes;
        self
    }

    /// The dialect it writes.
    pub(crate) fn written(&self) -> Dialect {
        self.dialect
    }

    /// A state machine for one reply (see [`Machine`]); `known_calls` are the ids
    /// of the calls made before it, which its `tool_results` may answer.
    pub fn machine<I>(&self, known_calls: I) -> TransformerMachine
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        let known: HashSet<String> = known_calls.into_iter().map(Into::into).collect();
        TransformerMachine {
            numbered: known.len(),
            style: Style {
                dialect: self.dialect,
                ids: self.call_ids && writes_ids(self.dialect),
            },
            consolidation: self.consolidation,
            call_limit: self.call_limit,
            position: 0,
            known,
            held: None,
            turn: None,
            run: None,
            deltas: None,
        }
    }

    /// Rewrites a whole history: the same machine, fed every message.
    pub fn render(&self, messages: Vec<Message>) -> Result<Vec<Message>, Error> {
        let mut machine = self.machine(Vec::<String>::new());
        let mut out = Output::new();
        for message in messages {
            machine.push(Event::message(message), &mut out)?;
        }
        machine.finish(&mut out)?;
        Ok(Joiner::join(out.drain()))
    }
}

crate::service::factory_layer!(NaturalToolUseTransformer);

impl MachineFactory for NaturalToolUseTransformer {
    type Machine = TransformerMachine;

    fn start(&self, request: &mut ChatRequest) -> Result<TransformerMachine, Error> {
        let known = request.messages.iter().flat_map(Message::calls);
        Ok(self.machine(known.map(|call| call.id.clone())))
    }
}

/// The transformer's state machine for one reply or history: messages and
/// events in, the same with calls and results written as text out.
///
/// Streamed tool-call deltas are gathered until their run ends and then written
/// like a `tool_calls` message, and in the single form streamed text joins the
/// turn as a text message would, so both modes give the same messages. Events
/// of other kinds pass through.
#[derive(Debug)]
pub struct TransformerMachine {
    style: Style,
    consolidation: Consolidation,
    call_limit: usize,
    /// The position of the next input message, for errors.
    position: usize,
    /// Ids of the calls seen so far.
    known: HashSet<String>,
    /// How many calls the conversation holds before the next one written
    /// (Kimi K2's ids number them).
    numbered: usize,
    /// An assistant message that calls may still be appended to (split form).
    held: Option<Message>,
    /// The turn being written (single form).
    turn: Option<Turn>,
    /// The assistant text run being streamed: `Some(true)` when calls written
    /// after it need a newline first.
    run: Option<bool>,
    /// Streamed call deltas, and their size.
    deltas: Option<(Joiner, usize)>,
}

impl Machine for TransformerMachine {
    type In = Event;
    type Out = Event;

    fn push(&mut self, event: Event, out: &mut Output) -> Result<(), Error> {
        if let Event::ToolCallDelta(delta) = event {
            return self.gather(delta);
        }
        self.end_deltas(out)?;
        match event {
            Event::TextDelta(delta) if self.consolidation == Consolidation::Single => {
                let turn = self.turn.get_or_insert_with(Turn::default);
                turn.delta(&delta.text, &delta.metadata);
            }
            Event::TextDelta(delta) => {
                self.release(out);
                if !delta.text.is_empty() {
                    self.run = Some(!delta.text.ends_with('\n'));
                } else if !delta.metadata.is_empty() {
                    self.run.get_or_insert(false);
                }
                out.push(Event::TextDelta(delta));
            }
            Event::Message { message } => {
                self.message(message, out)?;
                self.position += 1;
            }
            other => {
                self.release(out);
                self.run = None;
                out.push(other);
            }
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut Output) -> Result<(), Error> {
        self.end_deltas(out)?;
        self.release(out);
        Ok(())
    }
}

impl TransformerMachine {
    fn message(&mut self, message: Message, out: &mut Output) -> Result<(), Error> {
        let single = self.consolidation == Consolidation::Single;
        let style = self.style;
        match message {
            Message::ToolAggregate(aggregate) => {
                let ToolAggregateMessage {
                    calls,
                    results,
                    metadata,
                } = aggregate;
                let results = self.pair(&calls, results)?;
                let first = self.remember(&calls);
                if single {
                    self.turn().pairs(&calls, &results, metadata, style, first);
                } else {
                    self.split_aggregate(&calls, &results, metadata, first, out);
                }
            }
            Message::ToolCalls(message) => {
                let first = self.remember(&message.calls);
                if single {
                    self.turn()
                        .calls(&message.calls, message.metadata, style, first);
                } else {
                    let mut metadata = message.metadata;
                    if let Some(extras) = extras(&message.calls, &[]) {
                        metadata.insert(TOOL_METADATA_KEY, extras);
                    }
                    self.append_calls(&message.calls, metadata, first, out);
                }
            }
            Message::ToolResults(message) => {
                if let Some(result) = message
                    .results
                    .iter()
                    .find(|r| !self.known.contains(&r.call_id))
                {
                    return Err(self.unpaired(&result.call_id, "a result whose call never came"));
                }
                if single {
                    self.turn()
                        .results(&message.results, message.metadata, style);
                } else {
                    self.results(&message.results, message.metadata, out);
                }
            }
            Message::Text(TextMessage {
                role: Role::Assistant,
                ..
            })
            | Message::Multimodal(MultimodalMessage {
                role: Role::Assistant,
                ..
            }) => self.hold(message, out),
            other => {
                self.release(out);
                self.run = None;
                out.push(Event::message(other));
            }
        }
        Ok(())
    }

    /// An aggregate in the split form: the calls appended to the assistant
    /// text, the results in a user message.
    fn split_aggregate(
        &mut self,
        calls: &[ToolCall],
        results: &[ToolResult],
        mut metadata: Metadata,
        first: usize,
        out: &mut Output,
    ) {
        self.append_calls(calls, metadata.clone(), first, out);
        if let Some(extras) = extras(calls, results) {
            metadata.insert(TOOL_METADATA_KEY, extras);
        }
        self.results(results, metadata, out);
    }

    /// An assistant message: held for the calls that may follow (split form),
    /// joined to the turn when it already holds tool blocks, or opening a new
    /// turn (single form).
    fn hold(&mut self, message: Message, out: &mut Output) {
        if self.consolidation == Consolidation::Single
            && let Some(turn) = self.turn.as_mut().filter(|turn| turn.has_tools())
        {
            turn.say(&message);
            return;
        }
        self.release(out);
        self.run = None;
        match self.consolidation {
            Consolidation::Split => self.held = Some(message),
            Consolidation::Single => self.turn = Some(Turn::opened_by(message)),
        }
    }

    /// The turn being written, opened when there is none.
    fn turn(&mut self) -> &mut Turn {
        self.turn.get_or_insert_with(Turn::default)
    }

    /// Notes the ids of calls, which later `tool_results` may answer, and
    /// numbers them: the number of the first in the conversation.
    fn remember(&mut self, calls: &[ToolCall]) -> usize {
        self.known.extend(calls.iter().map(|call| call.id.clone()));
        let first = self.numbered;
        self.numbered += calls.len();
        first
    }

    /// Orders an aggregate's results by its calls, or names the first that has
    /// no partner.
    fn pair(
        &self,
        calls: &[ToolCall],
        mut results: Vec<ToolResult>,
    ) -> Result<Vec<ToolResult>, Error> {
        let mut ordered = Vec::with_capacity(calls.len());
        for call in calls {
            let Some(at) = results.iter().position(|r| r.call_id == call.id) else {
                return Err(self.unpaired(&call.id, "a call without its result"));
            };
            ordered.push(results.remove(at));
        }
        match results.first() {
            Some(result) => Err(self.unpaired(&result.call_id, "a result without its call")),
            None => Ok(ordered),
        }
    }

    fn unpaired(&self, call_id: &str, problem: &'static str) -> Error {
        Error::ToolPairing {
            stage: STAGE,
            message: self.position,
            call_id: call_id.to_owned(),
            problem,
        }
    }

    /// Appends calls, joined as the dialect joins several, to the assistant
    /// text; `first` is the first call's number in the conversation.
    fn append_calls(
        &mut self,
        calls: &[ToolCall],
        metadata: Metadata,
        first: usize,
        out: &mut Output,
    ) {
        let mut text = String::new();
        write_calls(&mut text, calls, self.style.dialect, self.style.ids, first);
        let metadata = self.with_ids(metadata, calls.iter().map(|call| &call.id));
        self.append(text, metadata, out);
    }

    /// `metadata` with the ids of the blocks written, when the text leaves them
    /// out.
    fn with_ids<'a>(
        &self,
        mut metadata: Metadata,
        ids: impl Iterator<Item = &'a String>,
    ) -> Metadata {
        if !self.style.ids {
            let ids = ids.map(|id| Value::String(id.clone())).collect();
            metadata.insert(TOOL_CALL_IDS_KEY, Value::Array(ids));
        }
        metadata
    }

    /// Adds assistant text: to the held message or the streamed run when there
    /// is one, on a line of its own.
    fn append(&mut self, text: String, metadata: Metadata, out: &mut Output) {
        match &mut self.held {
            Some(Message::Text(held)) => {
                push_line(&mut held.text, &text);
                held.metadata.merge_missing(&metadata);
            }
            Some(Message::Multimodal(held)) => {
                match held.content.last_mut() {
                    Some(ContentBlock::Text { text: last, .. }) => push_line(last, &text),
                    _ => held.content.push(ContentBlock::text(text)),
                }
                held.metadata.merge_missing(&metadata);
            }
            _ => {
                let text = match self.run {
                    Some(true) => format!("\n{text}"),
                    _ => text,
                };
                self.run = Some(true);
                out.push(Event::TextDelta(TextDelta { text, metadata }));
            }
        }
    }

    /// Writes results as a user message.
    fn results(&mut self, results: &[ToolResult], metadata: Metadata, out: &mut Output) {
        self.release(out);
        self.run = None;
        let mut text = String::new();
        let mut media = Vec::new();
        for (i, result) in results.iter().enumerate() {
            if i > 0 {
                text.push_str(SEPARATOR);
            }
            write_result(
                &mut text,
                result,
                self.style.dialect,
                self.style.ids,
                &mut media,
            );
        }
        let metadata = self.with_ids(metadata, results.iter().map(|r| &r.call_id));
        let message = if media.is_empty() {
            Message::Text(TextMessage {
                role: Role::User,
                text,
                metadata,
            })
        } else {
            Message::Multimodal(MultimodalMessage {
                role: Role::User,
                content: interleave(&text, media),
                metadata,
            })
        };
        out.push(Event::message(message));
    }

    /// Hands out the held assistant message, or the turn being written.
    fn release(&mut self, out: &mut Output) {
        if let Some(message) = self.held.take() {
            out.push(Event::message(message));
        }
        if let Some(turn) = self.turn.take() {
            out.push(Event::message(turn.into_message()));
        }
    }

    fn gather(&mut self, delta: ToolCallDelta) -> Result<(), Error> {
        let (joiner, size) = self.deltas.get_or_insert_with(Default::default);
        *size += delta.arguments_delta.len();
        if *size > self.call_limit {
            return Err(Error::LimitExceeded {
                stage: STAGE,
                what: "streamed tool calls",
                limit: self.call_limit,
            });
        }
        joiner.push(Event::from(delta));
        Ok(())
    }

    /// The run of streamed call deltas ended: writes its calls.
    fn end_deltas(&mut self, out: &mut Output) -> Result<(), Error> {
        if let Some((joiner, _)) = self.deltas.take() {
            for message in joiner.finish() {
                self.message(message, out)?;
            }
            self.position += 1;
        }
        Ok(())
    }
}

/// Appends `text` on a line of its own.
fn push_line(to: &mut String, text: &str) {
    if !to.is_empty() && !to.ends_with('\n') {
        to.push('\n');
    }
    to.push_str(text);
}
