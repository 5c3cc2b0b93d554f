//! A request fitted to the wire of the upstream that takes it: the options of
//! the client's wire carried over under the upstream's names (or dropped), the
//! tools' fields and server tools it has no place for dropped, and one warning
//! naming what was lost. It runs once per upstream the request goes to — a
//! model of several deployments of different wires fits each attempt to its
//! own, and a fallback to another model refits the client's request — so it is
//! a layer ([`FitLayer`]) in front of each upstream, reading the client's wire
//! from the request's [`extensions`](crate::ChatRequest::extensions)
//! ([`OptionsWire`], which the gateway sets).

use std::sync::Arc;
use std::task::{Context, Poll};

use tower::{Layer, Service};

use super::extras::{carry, dropped_tool_fields};
use crate::ChatRequest;
use crate::provider::Kind;
use crate::provider::server_tool::drop_unfit;

/// The wire whose names a request's provider-specific options
/// (`options.extra`, the tools' fields) are written in: the gateway sets the
/// client's format; a [`Fit`] sets its upstream's once it has fitted them.
/// A request without one is not fitted.
///
/// ```
/// use lmstack::ChatRequest;
/// use lmstack::provider::Kind;
/// use lmstack::server::OptionsWire;
///
/// let mut request = ChatRequest::new(vec![]);
/// request.extensions.insert(OptionsWire(Kind::OpenAiChat));
/// # let _ = request;
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OptionsWire(pub Kind);

/// Marks a request whose options were fitted to its [`OptionsWire`] already
/// (by the gateway, for a model of one wire): a `Fit` for that wire leaves it.
#[derive(Clone, Copy, Debug)]
struct Fitted;

/// Fits each request to the upstream wire `kind` ([`Fit`]); `model` names the
/// model served in the warning.
///
/// ```
/// use lmstack::provider::Kind;
/// use lmstack::server::FitLayer;
/// use lmstack::testing::ScriptedModel;
/// use tower::Layer;
///
/// let upstream = FitLayer::new(Kind::Anthropic, "claude").layer(ScriptedModel::new());
/// # let _ = upstream;
/// ```
#[derive(Clone, Debug)]
pub struct FitLayer {
    kind: Kind,
    model: Arc<str>,
}

impl FitLayer {
    /// Fits requests to wire `kind`, for the model named `model`.
    pub fn new(kind: Kind, model: &str) -> Self {
        FitLayer {
            kind,
            model: model.into(),
        }
    }
}

impl<S> Layer<S> for FitLayer {
    type Service = Fit<S>;

    fn layer(&self, inner: S) -> Fit<S> {
        Fit {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service of [`FitLayer`]: each request whose [`OptionsWire`] is another
/// wire's (or is not fitted yet) has its options fitted to the upstream's
/// wire, with a warning naming what was dropped, before `inner` takes it.
#[derive(Clone, Debug)]
pub struct Fit<S> {
    inner: S,
    layer: FitLayer,
}

impl<S: Service<ChatRequest>> Service<ChatRequest> for Fit<S> {
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: ChatRequest) -> S::Future {
        fit(&mut request, self.layer.kind, &self.layer.model);
        self.inner.call(request)
    }
}

/// Fits `request` to the upstream named `provider` of the model `model`,
/// when that names a wire (a stack of several wires fits each deployment's
/// requests itself).
pub(super) fn fit_to_named(request: &mut ChatRequest, provider: &str, model: &str) {
    if let Ok(kind) = provider.parse() {
        fit(request, kind, model);
    }
}

/// Fits `request`'s options to an upstream of wire `upstream` serving the
/// model `model`, warning of what was dropped; nothing for a request without
/// an [`OptionsWire`] or fitted to this wire already.
fn fit(request: &mut ChatRequest, upstream: Kind, model: &str) {
    let Some(&OptionsWire(from)) = request.extensions.get::<OptionsWire>() else {
        return;
    };
    if from == upstream && request.extensions.get::<Fitted>().is_some() {
        return;
    }
    let mut dropped = carry(&mut request.options.extra, from, Some(upstream));
    dropped.extend(dropped_tool_fields(
        &request.options.tools,
        from,
        Some(upstream),
    ));
    if !upstream.takes_cache_breakpoints() && request.has_cache_breakpoints() {
        dropped.push("cache_control breakpoints".to_owned());
    }
    dropped.extend(drop_unfit(&mut request.options, upstream));
    if !dropped.is_empty() {
        tracing::warn!(
            "options the `{}` upstream of `{model}` does not take were dropped: {}",
            upstream.name(),
            dropped.join(", ")
        );
    }
    request.extensions.insert(OptionsWire(upstream));
    request.extensions.insert(Fitted);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::Message;

    fn from_openai() -> ChatRequest {
        let mut request = ChatRequest::new(vec![Message::user("hi")]);
        let extra = &mut request.options.extra;
        extra.insert("seed".into(), json!(7));
        extra.insert("top_p".into(), json!(0.5));
        request.extensions.insert(OptionsWire(Kind::OpenAiChat));
        request
    }

    #[test]
    fn a_request_is_fitted_once_to_each_wire_it_goes_to() {
        let mut request = from_openai();
        fit(&mut request, Kind::Anthropic, "claude");
        assert_eq!(
            request.options.extra,
            json!({"top_p": 0.5}).as_object().cloned().unwrap()
        );
        assert_eq!(
            request.extensions.get(),
            Some(&OptionsWire(Kind::Anthropic))
        );
        // Fitted to Anthropic's names already: a second fit changes nothing.
        let fitted = request.options.extra.clone();
        fit(&mut request, Kind::Anthropic, "claude");
        assert_eq!(request.options.extra, fitted);
    }

    #[test]
    fn the_same_wire_keeps_its_options_and_a_request_of_no_wire_is_left() {
        let mut request = from_openai();
        let extra = request.options.extra.clone();
        fit(&mut request, Kind::OpenAiChat, "gpt");
        assert_eq!(request.options.extra, extra);
        let mut plain = from_openai();
        plain.extensions.clear();
        fit(&mut plain, Kind::Anthropic, "claude");
        assert_eq!(plain.options.extra, extra);
    }
}
