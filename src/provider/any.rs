//! Any wire, chosen at run time by its [`Kind`]: [`Lowering`], the options of
//! how requests are written that more than one wire takes; [`WithWire`], work
//! written once for every wire and run over the one a `Kind` names
//! ([`Kind::with_wire`]); and [`AnyProvider`], one type for the provider of any
//! wire.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::SystemTime;

use tower::Service;

use super::kind::Kind;
use super::media::ToolResultMedia;
use super::service::{Provider, ReadBody};
use super::traced::Traced;
use super::transport::{HttpRequest, HttpResponse, HttpTransport};
use super::wire::Wire;
use crate::service::ReplyFuture;
use crate::{ChatRequest, Error, Reply};

#[cfg(feature = "anthropic")]
use super::anthropic::{self, Messages};
#[cfg(feature = "gemini")]
use super::gemini::{self, GenerateContent};
#[cfg(feature = "openai")]
use super::openai_chat::{self, ChatCompletions, MaxTokensField};
#[cfg(feature = "openai-responses")]
use super::openai_responses::{self, Responses};

/// How requests are written, in the options more than one wire takes; each
/// wire takes what applies to it and keeps its defaults for the rest.
///
/// ```
/// use lmstack::provider::{Lowering, ToolResultMedia};
///
/// let mut lowering = Lowering::default();
/// lowering.tool_result_media = Some(ToolResultMedia::Reject);
/// lowering.max_completion_tokens = true;
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Lowering {
    /// What to do with images, documents and audio in tool results; `None`
    /// for the wire's default (inject for OpenAI Chat, native for OpenAI
    /// Responses and Anthropic, by model for Gemini).
    pub tool_result_media: Option<ToolResultMedia>,
    /// Send the token limit as `max_completion_tokens` (OpenAI's reasoning
    /// models); the other wires have one name for it.
    pub max_completion_tokens: bool,
}

/// Work written once for every wire — generic over the [`Wire`] — and run over
/// the one a [`Kind`] names, chosen at run time, by [`Kind::with_wire`].
///
/// ```
/// use lmstack::provider::{Kind, Lowering, WithWire, Wire};
/// use lmstack::{ChatRequest, Message};
///
/// /// The body a request is sent with, over any wire.
/// struct Lower(ChatRequest);
///
/// impl WithWire for Lower {
///     type Output = Result<serde_json::Value, lmstack::Error>;
///
///     fn run<W: Wire>(self, wire: W) -> Self::Output {
///         wire.lower(&self.0)
///     }
/// }
///
/// let mut request = ChatRequest::new(vec![Message::user("Hi")]);
/// request.options.model = Some("gpt-4o".into());
/// let body = Kind::OpenAiChat.with_wire(Lowering::default(), Lower(request))??;
/// assert_eq!(body["messages"][0]["role"], "user");
/// # Ok::<(), lmstack::Error>(())
/// ```
pub trait WithWire {
    /// What the work gives.
    type Output;

    /// Does the work over `wire`.
    fn run<W: Wire>(self, wire: W) -> Self::Output;
}

impl Kind {
    /// Runs `job` over this kind's wire, its requests written as `lowering`
    /// says; [`Error::InvalidRequest`] when lmstack was built without the
    /// wire's feature (`openai`, `openai-responses`, `anthropic`, `gemini`).
    pub fn with_wire<J: WithWire>(self, lowering: Lowering, job: J) -> Result<J::Output, Error> {
        dispatch(self, lowering, Public(job))
    }
}

/// The provider of any wire, chosen at run time: one type — to store, to
/// return, to put under layers — whatever [`Kind`] a configuration names. It
/// is the `Service` of the provider it holds, and builds the same requests
/// ([`http_request`](Self::http_request)).
///
/// Build it from a configuration
/// (`lmstack::config::ModelConfig::provider`), or from a provider of a known
/// wire with `From`:
///
/// ```
/// use lmstack::provider::{AnyProvider, Kind};
/// use lmstack::provider::openai_chat::{OpenAi, OpenAiConfig};
/// use lmstack::{ChatRequest, Message};
///
/// let config = OpenAiConfig::new("http://127.0.0.1:8080/v1").model("qwen3-8b");
/// let provider = AnyProvider::from(OpenAi::new(config)?);
/// assert_eq!(provider.kind(), Kind::OpenAiChat);
/// let request = provider.http_request(ChatRequest::new(vec![Message::user("Hi")]))?;
/// assert_eq!(request.uri(), "http://127.0.0.1:8080/v1/chat/completions");
/// # Ok::<(), lmstack::Error>(())
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum AnyProvider<T = HttpTransport> {
    /// OpenAI Chat Completions and compatible servers.
    #[cfg(feature = "openai")]
    OpenAiChat(Provider<ChatCompletions, T>),
    /// OpenAI Responses.
    #[cfg(feature = "openai-responses")]
    OpenAiResponses(Provider<Responses, T>),
    /// Anthropic Messages.
    #[cfg(feature = "anthropic")]
    Anthropic(Provider<Messages, T>),
    /// Google Gemini's `generateContent`.
    #[cfg(feature = "gemini")]
    Gemini(Provider<GenerateContent, T>),
}

/// Calls `$call` on the provider `$any` holds, bound to `$provider`, for
/// every wire built in.
macro_rules! each_wire {
    ($any:expr, $provider:ident => $call:expr) => {
        match $any {
            #[cfg(feature = "openai")]
            AnyProvider::OpenAiChat($provider) => $call,
            #[cfg(feature = "openai-responses")]
            AnyProvider::OpenAiResponses($provider) => $call,
            #[cfg(feature = "anthropic")]
            AnyProvider::Anthropic($provider) => $call,
            #[cfg(feature = "gemini")]
            AnyProvider::Gemini($provider) => $call,
        }
    };
}

impl<T> AnyProvider<T> {
    /// The wire it speaks.
    pub fn kind(&self) -> Kind {
        each_wire!(self, provider => provider.wire_kind())
    }

    /// The HTTP request `request` is sent as — body, endpoint, headers — as
    /// [`Provider::http_request`] builds it.
    pub fn http_request(&self, request: ChatRequest) -> Result<HttpRequest, Error> {
        each_wire!(self, provider => provider.http_request(request))
    }

    /// [`http_request`](Self::http_request), authorized at `now`.
    pub fn http_request_at(
        &self,
        request: ChatRequest,
        now: SystemTime,
    ) -> Result<HttpRequest, Error> {
        each_wire!(self, provider => provider.http_request_at(request, now))
    }
}

impl<T> AnyProvider<T>
where
    T: Service<HttpRequest, Response = HttpResponse, Error = Error> + Clone + Send + Sync + 'static,
    T::Future: Send,
{
    /// Sends a client's request `body`, written in this provider's wire, to
    /// the endpoint of `head` (its model and mode), with the provider's key
    /// and headers: [`Provider::forward`].
    pub fn forward(
        &self,
        head: &ChatRequest,
        body: bytes::Bytes,
    ) -> futures::future::BoxFuture<'static, Result<HttpResponse, Error>> {
        each_wire!(self, provider => Box::pin(provider.forward(head, body)))
    }
}

impl<T> super::TokenCounter for AnyProvider<T>
where
    T: Service<HttpRequest, Response = HttpResponse, Error = Error> + Clone + Send + Sync + 'static,
    T::Future: Send,
{
    fn count_tokens(
        &self,
        request: ChatRequest,
    ) -> futures::future::BoxFuture<'static, Result<u64, Error>> {
        each_wire!(self, provider => Box::pin(provider.count_tokens(request)))
    }
}

impl<W: Wire, T> Provider<W, T> {
    /// `W::KIND`, read through a value (for [`AnyProvider::kind`]).
    fn wire_kind(&self) -> Kind {
        W::KIND
    }
}

impl<W: Known, T> From<Provider<W, T>> for AnyProvider<T> {
    fn from(provider: Provider<W, T>) -> Self {
        W::wrap(provider)
    }
}

impl<T> Service<ChatRequest> for AnyProvider<T>
where
    T: Service<HttpRequest, Response = HttpResponse, Error = Error>,
{
    type Response = Reply;
    type Error = Error;
    type Future = AnyFuture<T::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        each_wire!(self, provider => provider.poll_ready(cx))
    }

    fn call(&mut self, request: ChatRequest) -> Self::Future {
        let wire = match self {
            #[cfg(feature = "openai")]
            AnyProvider::OpenAiChat(provider) => WireFutures::OpenAiChat {
                future: provider.call(request),
            },
            #[cfg(feature = "openai-responses")]
            AnyProvider::OpenAiResponses(provider) => WireFutures::OpenAiResponses {
                future: provider.call(request),
            },
            #[cfg(feature = "anthropic")]
            AnyProvider::Anthropic(provider) => WireFutures::Anthropic {
                future: provider.call(request),
            },
            #[cfg(feature = "gemini")]
            AnyProvider::Gemini(provider) => WireFutures::Gemini {
                future: provider.call(request),
            },
        };
        AnyFuture { wire }
    }
}

/// The provider's reply future, named for whichever wire: [`AnyProvider`]'s
/// future, over the transport's future `F`.
type WireFuture<F, W> = Traced<ReplyFuture<F, ReadBody<<W as Wire>::Lifter>>>;

/// Each wire's future, or [`Absent`] for a wire not built in.
#[cfg(feature = "openai")]
type OpenAiFuture<F> = WireFuture<F, ChatCompletions>;
#[cfg(not(feature = "openai"))]
type OpenAiFuture<F> = Absent<F>;
#[cfg(feature = "openai-responses")]
type ResponsesFuture<F> = WireFuture<F, Responses>;
#[cfg(not(feature = "openai-responses"))]
type ResponsesFuture<F> = Absent<F>;
#[cfg(feature = "anthropic")]
type AnthropicFuture<F> = WireFuture<F, Messages>;
#[cfg(not(feature = "anthropic"))]
type AnthropicFuture<F> = Absent<F>;
#[cfg(feature = "gemini")]
type GeminiFuture<F> = WireFuture<F, GenerateContent>;
#[cfg(not(feature = "gemini"))]
type GeminiFuture<F> = Absent<F>;

pin_project_lite::pin_project! {
    /// The future of an [`AnyProvider`]'s call: the future of the provider it
    /// holds.
    pub struct AnyFuture<F> {
        #[pin]
        wire: WireFutures<F>,
    }
}

pin_project_lite::pin_project! {
    /// The future of each wire's provider (every variant is there, as the
    /// macro needs; a wire not built in holds a future that cannot exist).
    #[project = WireFuturesProjection]
    #[cfg_attr(
        not(all(feature = "openai", feature = "openai-responses", feature = "anthropic", feature = "gemini")),
        allow(dead_code)
    )]
    enum WireFutures<F> {
        OpenAiChat { #[pin] future: OpenAiFuture<F> },
        OpenAiResponses { #[pin] future: ResponsesFuture<F> },
        Anthropic { #[pin] future: AnthropicFuture<F> },
        Gemini { #[pin] future: GeminiFuture<F> },
    }
}

/// The future of a wire not built in: a type without values.
#[cfg(not(all(
    feature = "openai",
    feature = "openai-responses",
    feature = "anthropic",
    feature = "gemini"
)))]
struct Absent<F>(
    std::convert::Infallible,
    std::marker::PhantomData<fn() -> F>,
);

#[cfg(not(all(
    feature = "openai",
    feature = "openai-responses",
    feature = "anthropic",
    feature = "gemini"
)))]
impl<F> Future for Absent<F> {
    type Output = Result<Reply, Error>;

    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.0 {}
    }
}

impl<F> Future for AnyFuture<F>
where
    F: Future<Output = Result<HttpResponse, Error>>,
{
    type Output = Result<Reply, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().wire.project() {
            WireFuturesProjection::OpenAiChat { future } => future.poll(cx),
            WireFuturesProjection::OpenAiResponses { future } => future.poll(cx),
            WireFuturesProjection::Anthropic { future } => future.poll(cx),
            WireFuturesProjection::Gemini { future } => future.poll(cx),
        }
    }
}

/// The wires built in, each with its options made of a [`Lowering`] and its
/// place in [`AnyProvider`]. Sealed: only lmstack's wires are known.
pub(crate) trait Known: Wire {
    /// The wire's options, as `lowering` says.
    fn lowered(lowering: Lowering) -> Self;
    /// Its provider, as an [`AnyProvider`].
    fn wrap<T>(provider: Provider<Self, T>) -> AnyProvider<T>;
}

#[cfg(feature = "openai")]
impl Known for ChatCompletions {
    fn lowered(lowering: Lowering) -> Self {
        let defaults = openai_chat::LowerOptions::default();
        ChatCompletions {
            lowering: openai_chat::LowerOptions {
                tool_result_media: lowering
                    .tool_result_media
                    .unwrap_or(defaults.tool_result_media),
                max_tokens_field: if lowering.max_completion_tokens {
                    MaxTokensField::MaxCompletionTokens
                } else {
                    defaults.max_tokens_field
                },
                ..defaults
            },
        }
    }

    fn wrap<T>(provider: Provider<Self, T>) -> AnyProvider<T> {
        AnyProvider::OpenAiChat(provider)
    }
}

#[cfg(feature = "openai-responses")]
impl Known for Responses {
    fn lowered(lowering: Lowering) -> Self {
        let defaults = openai_responses::LowerOptions::default();
        Responses {
            lowering: openai_responses::LowerOptions {
                tool_result_media: lowering
                    .tool_result_media
                    .unwrap_or(defaults.tool_result_media),
                ..defaults
            },
        }
    }

    fn wrap<T>(provider: Provider<Self, T>) -> AnyProvider<T> {
        AnyProvider::OpenAiResponses(provider)
    }
}

#[cfg(feature = "anthropic")]
impl Known for Messages {
    fn lowered(lowering: Lowering) -> Self {
        let defaults = anthropic::LowerOptions::default();
        Messages {
            lowering: anthropic::LowerOptions {
                tool_result_media: lowering
                    .tool_result_media
                    .unwrap_or(defaults.tool_result_media),
                ..defaults
            },
        }
    }

    fn wrap<T>(provider: Provider<Self, T>) -> AnyProvider<T> {
        AnyProvider::Anthropic(provider)
    }
}

#[cfg(feature = "gemini")]
impl Known for GenerateContent {
    fn lowered(lowering: Lowering) -> Self {
        GenerateContent {
            lowering: gemini::LowerOptions {
                tool_result_media: lowering.tool_result_media,
            },
        }
    }

    fn wrap<T>(provider: Provider<Self, T>) -> AnyProvider<T> {
        AnyProvider::Gemini(provider)
    }
}

/// Work over any [`Known`] wire: what [`WithWire`] is for the wires built in,
/// which can also become an [`AnyProvider`].
pub(crate) trait WithKnownWire {
    /// What the work gives.
    type Output;

    /// Does the work over `wire`.
    fn run<W: Known>(self, wire: W) -> Self::Output;
}

/// A public job, run as one over a known wire.
struct Public<J>(J);

impl<J: WithWire> WithKnownWire for Public<J> {
    type Output = J::Output;

    fn run<W: Known>(self, wire: W) -> J::Output {
        self.0.run(wire)
    }
}

/// The one place a [`Kind`] becomes its wire: runs `job` over the wire of
/// `kind`, written as `lowering` says, or says which feature it needs.
pub(crate) fn dispatch<J: WithKnownWire>(
    kind: Kind,
    lowering: Lowering,
    job: J,
) -> Result<J::Output, Error> {
    match kind {
        #[cfg(feature = "openai")]
        Kind::OpenAiChat => Ok(job.run(ChatCompletions::lowered(lowering))),
        #[cfg(feature = "openai-responses")]
        Kind::OpenAiResponses => Ok(job.run(Responses::lowered(lowering))),
        #[cfg(feature = "anthropic")]
        Kind::Anthropic => Ok(job.run(Messages::lowered(lowering))),
        #[cfg(feature = "gemini")]
        Kind::Gemini => Ok(job.run(GenerateContent::lowered(lowering))),
        #[allow(unreachable_patterns)] // every wire built in
        kind => Err(Error::InvalidRequest(format!(
            "provider `{kind}` is not built in: lmstack's feature `{kind}` is off"
        ))),
    }
}

#[cfg(all(
    test,
    feature = "openai",
    feature = "openai-responses",
    feature = "anthropic",
    feature = "gemini"
))]
mod tests {
    use super::*;

    /// The wire's kind and options, as a job sees them.
    struct Seen;

    impl WithWire for Seen {
        type Output = (Kind, String);

        fn run<W: Wire>(self, wire: W) -> (Kind, String) {
            (W::KIND, format!("{wire:?}"))
        }
    }

    #[test]
    fn every_kind_runs_over_its_own_wire_with_the_lowering_given() {
        for kind in Kind::ALL {
            let (seen, _) = kind.with_wire(Lowering::default(), Seen).unwrap();
            assert_eq!(seen, kind);
        }
        let lowering = Lowering {
            tool_result_media: Some(ToolResultMedia::Reject),
            max_completion_tokens: true,
        };
        let (_, openai) = Kind::OpenAiChat.with_wire(lowering, Seen).unwrap();
        assert!(openai.contains("Reject") && openai.contains("MaxCompletionTokens"));
        let (_, gemini) = Kind::Gemini.with_wire(lowering, Seen).unwrap();
        assert!(gemini.contains("Some(Reject)"), "{gemini}");
    }

    #[test]
    fn the_default_lowering_is_each_wires_default() {
        assert_eq!(
            ChatCompletions::lowered(Lowering::default()).lowering,
            openai_chat::LowerOptions::default()
        );
        let anthropic = Messages::lowered(Lowering::default()).lowering;
        assert_eq!(
            format!("{anthropic:?}"),
            format!("{:?}", anthropic::LowerOptions::default())
        );
        assert_eq!(
            GenerateContent::lowered(Lowering::default())
                .lowering
                .tool_result_media,
            None
        );
    }
}
