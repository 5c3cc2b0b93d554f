//! The session key of a request, for affinity.

use serde_json::Value;

use crate::{ChatRequest, SessionKey};

/// The session key of a request: the [`SessionKey`] in its
/// [`extensions`](ChatRequest::extensions) (the gateway sets one from the
/// agents' session headers), else the one clients commonly send in the body,
/// read from its `options.extra`: the first string among
///
/// 1. `prompt_cache_key` (OpenAI's key for prompt caching; Codex sends its
///    conversation id there),
/// 2. `metadata.user_id` (Anthropic's; Claude Code's holds its session id),
/// 3. `user` (OpenAI's end-user id).
///
/// `None` when the request has none of them. A key of another kind (a header
/// the application read) is given by a function of your own to
/// [`Deployments::session_key`](super::Deployments::session_key).
///
/// ```
/// use lmstack::ChatRequest;
/// use lmstack::deploy::common_session_key;
/// use serde_json::json;
///
/// let mut request = ChatRequest::new(vec![]);
/// assert_eq!(common_session_key(&request), None);
/// request.options.extra.insert("metadata".into(), json!({"user_id": "u-1"}));
/// assert_eq!(common_session_key(&request).as_deref(), Some("u-1"));
/// request.options.extra.insert("prompt_cache_key".into(), json!("thread-7"));
/// assert_eq!(common_session_key(&request).as_deref(), Some("thread-7"));
/// request.extensions.insert(lmstack::SessionKey::new("session-1"));
/// assert_eq!(common_session_key(&request).as_deref(), Some("session-1"));
/// ```
pub fn common_session_key(request: &ChatRequest) -> Option<String> {
    if let Some(key) = request.extensions.get::<SessionKey>() {
        return Some(key.as_str().to_owned());
    }
    let extra = &request.options.extra;
    let text = |value: Option<&Value>| value?.as_str().map(str::to_owned);
    text(extra.get("prompt_cache_key"))
        .or_else(|| text(extra.get("metadata")?.get("user_id")))
        .or_else(|| text(extra.get("user")))
}
