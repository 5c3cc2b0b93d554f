//! The `NaturalToolUse` layer: makes a model without native tool calling
//! tool-capable.

use super::format::RenderDialect;
use super::parser::{NaturalToolUseParser, ParserMachine};
use super::prompt;
use super::transformer::NaturalToolUseTransformer;
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
///   against the request's tools.
///
/// Placed under the function layer, it makes the whole tool loop work with a
/// text-only model:
///
/// ```
/// use lmstack::function::{FunctionCallLayer, Tool, ToolLoopLayer, ToolRegistry};
/// use lmstack::natural::NaturalToolUse;
/// use lmstack::testing::ScriptedModel;
/// use lmstack::{ChatRequest, Message};
/// use tower::{ServiceBuilder, ServiceExt};
///
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Add { a: i64, b: i64 }
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let add = Tool::typed("add", "Adds two integers", |args: Add| async move {
///     Ok::<_, std::convert::Infallible>((args.a + args.b).to_string())
/// });
/// let model = ScriptedModel::new()
///     .reply("<tool_call name=\"add\">\n{\"a\": 2, \"b\": 3}\n</tool_call>")
///     .reply("2 + 3 = 5.");
/// let stack = ServiceBuilder::new()
///     .layer(ToolLoopLayer::new())
///     .layer(FunctionCallLayer::new(ToolRegistry::new([add])?))
///     .layer(NaturalToolUse::new())
///     .service(model.clone());
/// let messages = stack.oneshot(ChatRequest::new(vec![Message::user("2 + 3?")])).await?.collect().await?;
/// assert_eq!(messages.last(), Some(&Message::assistant("2 + 3 = 5.")));
///
/// // What the model saw in round two: no native tools, the call and its result as text.
/// let second = &model.requests()[1];
/// assert!(second.options.tools.is_empty());
/// assert!(second.messages[0].as_text().unwrap().contains("## add"));
/// assert!(second.messages[3].as_text().unwrap().starts_with("<tool_response name=\"add\""));
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

    /// The dialect the history and the prompt's examples are written in:
    /// `Tagged` (the default) or `Hermes` (for Qwen-family models).
    pub fn dialect(mut self, dialect: RenderDialect) -> Self {
        self.transformer = self.transformer.dialect(dialect);
        self
    }

    /// Replaces the transformer (its dialect and limits).
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
        self.parser.machine(&tools, id_base)
    }
}
