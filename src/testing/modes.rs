//! Checks that a stack gives the same reply in both modes.

use tower::{Service, ServiceExt};

use super::chunking::Chunking;
use crate::{ChatRequest, Error, Event, Joiner, Message, Reply};

/// Runs `request` once in non-streaming and once in streaming mode, each time on a
/// fresh service from `make`, and returns both replies as messages
/// `(non_streaming, streaming)`. A layer whose core is shared between the modes
/// gives equal lists.
pub async fn collect_both<S, F>(
    mut make: F,
    request: ChatRequest,
) -> Result<(Vec<Message>, Vec<Message>), Error>
where
    F: FnMut() -> S,
    S: Service<ChatRequest, Response = Reply>,
    S::Error: Into<Error>,
{
    let mut run = async |stream: bool| -> Result<Vec<Message>, Error> {
        let reply = make()
            .oneshot(mode(&request, stream))
            .await
            .map_err(Into::into)?;
        reply.collect().await
    };
    let whole = run(false).await?;
    let streamed = run(true).await?;
    Ok((whole, streamed))
}

/// The cuts [`assert_modes_agree`] streams with.
const CHUNKINGS: [Chunking; 5] = [
    Chunking::Whole,
    Chunking::Bytes(1),
    Chunking::Bytes(3),
    Chunking::Chars,
    Chunking::Random { seed: 25, max: 7 },
];

/// Checks the non-streaming contract of the stack `make` builds, and panics with
/// what differs: `request` is run once non-streaming and once streaming for each
/// of several [`Chunking`]s (`make` gets the cut to give its
/// [`ScriptedModel`](super::ScriptedModel); a fresh stack each time). The
/// non-streaming reply must be ready ([`Reply::is_ready`]) and its events must
/// be the streamed events joined ([`Joiner::join_events`]; a tool call an error
/// cut off marked so, [`Joiner::break_off`]): the same `message`,
/// `usage` and `finish` events in the same places, and the same error, if one
/// ends the reply. Returns the messages both modes agree on, and that error.
///
/// Run it on your own layers: it catches, for one, a plain tower layer that
/// answers with `Reply::from_stream` (use [`Reply::map_events`] or
/// [`Reply::inspect`], which keep the form), or that rewrites deltas but not
/// the `message` events of the non-streaming form.
///
/// ```
/// use lmstack::testing::{ScriptedModel, assert_modes_agree};
/// use lmstack::{ChatRequest, Message, Reply};
/// use tower::util::MapResponseLayer;
/// use tower::Layer;
///
/// # futures::executor::block_on(async {
/// // A layer that drops usage events, built the way that keeps the form.
/// let layer = MapResponseLayer::new(|reply: Reply| reply.filter_map_events(|event| {
///     (!matches!(event, lmstack::Event::Usage(_))).then_some(event)
/// }));
/// let make = |chunking| layer.layer(ScriptedModel::new().chunking(chunking).reply("Hello"));
/// let (messages, error) = assert_modes_agree(make, ChatRequest::new(vec![Message::user("hi")])).await;
/// assert_eq!(messages, vec![Message::assistant("Hello")]);
/// assert!(error.is_none());
/// # });
/// ```
pub async fn assert_modes_agree<S, F>(
    mut make: F,
    request: ChatRequest,
) -> (Vec<Message>, Option<Error>)
where
    F: FnMut(Chunking) -> S,
    S: Service<ChatRequest, Response = Reply>,
    S::Error: Into<Error>,
{
    let whole = match make(Chunking::Whole).oneshot(mode(&request, false)).await {
        Ok(reply) => {
            assert!(
                reply.is_ready(),
                "the non-streaming reply is not ready (in memory): a layer answered a \
                 non-streaming request with a streaming reply (`Reply::from_stream`?); \
                 rewrite a reply with `Reply::map_events`, `inspect` or `on_end`, which \
                 keep its form"
            );
            read(reply).await
        }
        Err(error) => Outcome::failed(error.into()),
    };
    for chunking in CHUNKINGS {
        let streamed = match make(chunking).oneshot(mode(&request, true)).await {
            Ok(reply) => read(reply).await,
            Err(error) => Outcome::failed(error.into()),
        };
        let joined = joined(streamed.events, streamed.error.is_some());
        assert!(
            whole.events == joined,
            "the non-streaming reply's events differ from the streamed ones ({chunking:?}) \
             joined:\n  non-streaming:\n{}\n  streamed, joined:\n{}",
            lines(&whole.events),
            lines(&joined),
        );
        let (ours, theirs) = (shown(&whole.error), shown(&streamed.error));
        assert!(
            ours == theirs,
            "the modes end differently ({chunking:?}): non-streaming {ours}, streaming {theirs}"
        );
    }
    (Joiner::join(whole.events), whole.error)
}

/// What a reply held: its events, and the error that ended it.
struct Outcome {
    events: Vec<Event>,
    error: Option<Error>,
}

impl Outcome {
    /// A call that failed: no event, its error.
    fn failed(error: Error) -> Self {
        Outcome {
            events: Vec::new(),
            error: Some(error),
        }
    }
}

/// The non-streaming form of `events`, as [`Complete`](crate::service::Complete)
/// makes it of a stream that ends there, or that breaks there.
pub(crate) fn joined(events: Vec<Event>, broken: bool) -> Vec<Event> {
    let mut joiner = Joiner::new();
    events.into_iter().for_each(|event| joiner.push(event));
    if broken {
        joiner.break_off();
    }
    joiner.finish_events()
}

/// Reads a reply to its end or its first error.
async fn read(mut reply: Reply) -> Outcome {
    use futures::StreamExt;
    let mut events = Vec::new();
    while let Some(item) = reply.next().await {
        match item {
            Ok(event) => events.push(event),
            Err(error) => {
                return Outcome {
                    events,
                    error: Some(error),
                };
            }
        }
    }
    Outcome {
        events,
        error: None,
    }
}

/// `request` in the given mode.
fn mode(request: &ChatRequest, stream: bool) -> ChatRequest {
    let mut request = request.clone();
    request.options.stream = stream;
    request
}

/// Events as JSON lines, for a failure's message.
fn lines(events: &[Event]) -> String {
    events
        .iter()
        .map(|event| format!("    {}\n", serde_json::to_string(event).unwrap_or_default()))
        .collect()
}

/// An ending, for a failure's message.
fn shown(error: &Option<Error>) -> String {
    error.as_ref().map_or_else(
        || "without error".to_owned(),
        |error| format!("with `{error}`"),
    )
}
