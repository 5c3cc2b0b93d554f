//! Server tools on the Chat Completions wire: its one, web search, asked for
//! by the request's `web_search_options` ⇄ a canonical
//! [`ServerTool::WebSearch`]. Pure.
//!
//! Only OpenAI's search models (`gpt-4o-search-preview`, …) search; others
//! refuse the field or leave it unread. `user_location` is typed;
//! `search_context_size` stays in the object as it came, which goes back as it
//! came unless the typed location was changed.

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::provider::Kind;
use crate::provider::server_tool::{Fit, fit, lacking};
use crate::{Error, NativeTool, ServerTool, UserLocation, WebSearch};

/// This wire's name, in [`NativeTool::wire`].
const WIRE: &str = Kind::OpenAiChat.name();

/// A request's `web_search_options` → web search, keeping the object.
pub(crate) fn decode(options: Value) -> Result<ServerTool, Error> {
    let Value::Object(options) = options else {
        return Err(Error::InvalidRequest(
            "web_search_options: expected an object".into(),
        ));
    };
    Ok(ServerTool::WebSearch(WebSearch {
        user_location: location(&options),
        native: Some(NativeTool::new(WIRE, options)),
        ..WebSearch::default()
    }))
}

/// `user_location.approximate`, if it reads as a location.
fn location(options: &Map<String, Value>) -> Option<UserLocation> {
    let approximate = options.get("user_location")?.get("approximate")?;
    UserLocation::deserialize(approximate).ok()
}

/// The request's server tools → `web_search_options`: the first web
/// search's (the object its client wrote, as it came unless its location
/// was changed; else `{"user_location": …}` or `{}`). Code execution and
/// other wires' own tools are refused ([`Error::InvalidRequest`]): this wire
/// has none.
pub(crate) fn lower(tools: &[ServerTool]) -> Result<Option<Value>, Error> {
    if let Some(lacked) = tools
        .iter()
        .find(|tool| fit(Kind::OpenAiChat, tool) == Fit::Lacks)
    {
        return Err(lacking(Kind::OpenAiChat, lacked));
    }
    let Some(tool @ ServerTool::WebSearch(search)) = tools.first() else {
        return Ok(None);
    };
    let native = tool.native_of(WIRE);
    if let Some(native) = native
        && decode(Value::Object(native.tool.clone())).ok().as_ref() == Some(tool)
    {
        return Ok(Some(Value::Object(native.tool.clone())));
    }
    let mut options = native.map(|native| native.tool.clone()).unwrap_or_default();
    match &search.user_location {
        Some(location) => {
            let approximate = serde_json::to_value(location).unwrap_or_default();
            let location = serde_json::json!({"type": "approximate", "approximate": approximate});
            options.insert("user_location".into(), location);
        }
        None => {
            options.shift_remove("user_location");
        }
    }
    Ok(Some(Value::Object(options)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CodeExecution;
    use serde_json::json;

    #[test]
    fn web_search_options_come_back_as_they_came() {
        let sent = json!({"search_context_size": "low",
            "user_location": {"type": "approximate", "approximate": {"country": "GB", "city": "London"}}});
        let tool = decode(sent.clone()).unwrap();
        let ServerTool::WebSearch(search) = &tool else {
            panic!("web search")
        };
        assert_eq!(
            search.user_location.as_ref().unwrap().city.as_deref(),
            Some("London")
        );
        assert_eq!(lower(&[tool]).unwrap(), Some(sent));
        assert!(decode(json!("high")).is_err());
    }

    #[test]
    fn another_wires_search_keeps_its_location_and_code_execution_is_refused() {
        let search = ServerTool::WebSearch(WebSearch {
            max_uses: Some(3),
            user_location: Some(UserLocation {
                country: Some("FR".into()),
                ..UserLocation::default()
            }),
            ..WebSearch::default()
        });
        assert_eq!(
            lower(std::slice::from_ref(&search)).unwrap(),
            Some(
                json!({"user_location": {"type": "approximate", "approximate": {"country": "FR"}}})
            )
        );
        let plain = ServerTool::WebSearch(WebSearch::default());
        assert_eq!(lower(&[plain]).unwrap(), Some(json!({})));
        let code = ServerTool::CodeExecution(CodeExecution::default());
        assert!(lower(&[search, code]).is_err());
        assert_eq!(lower(&[]).unwrap(), None);
    }
}
