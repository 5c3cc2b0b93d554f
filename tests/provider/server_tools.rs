//! Server tools (web search, code execution, a wire's own) across the wires:
//! a client's tool objects come back byte for byte on their own wire, by
//! example and by property; the typed kinds are lowered to each wire's own
//! tool; what a wire lacks is refused by its lowering.

use lmstack::provider::{anthropic, gemini, openai_chat};
use lmstack::{ChatRequest, CodeExecution, Error, ServerTool, ToolChoice, UserLocation, WebSearch};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// What Claude Code sends for its WebSearch tool (its system prompt shortened).
const CLAUDE_CODE_WEB_SEARCH: &str = r#"{"model":"claude-sonnet-4-5","max_tokens":32000,"system":[{"type":"text","text":"You are Claude Code.","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"Perform a web search for the query: tokio 1.45 release notes"}],"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":8}],"stream":true}"#;

fn decode_anthropic(body: &str) -> ChatRequest {
    anthropic::decode_request(body.as_bytes()).unwrap()
}

fn to_anthropic(request: &ChatRequest) -> Result<Value, Error> {
    anthropic::lower(request, &anthropic::LowerOptions::default())
}

fn to_gemini(request: &ChatRequest) -> Result<Value, Error> {
    gemini::lower(request, &gemini::LowerOptions::default())
}

fn to_openai(request: &ChatRequest) -> Result<Value, Error> {
    openai_chat::lower(request, &openai_chat::LowerOptions::default())
}

#[test]
fn claude_codes_web_search_request_comes_back_byte_for_byte() {
    let request = decode_anthropic(CLAUDE_CODE_WEB_SEARCH);
    let [ServerTool::WebSearch(search)] = request.options.server_tools.as_slice() else {
        panic!("{:?}", request.options)
    };
    assert_eq!(search.max_uses, Some(8));
    assert!(request.options.tools.is_empty());
    let body = to_anthropic(&request).unwrap();
    assert_eq!(
        body["tools"].to_string(),
        r#"[{"type":"web_search_20250305","name":"web_search","max_uses":8}]"#
    );
    let sent: Value = serde_json::from_str(CLAUDE_CODE_WEB_SEARCH).unwrap();
    assert_eq!(body, sent);
}

/// A request of every kind of server tool an Anthropic client may send.
fn every_kind() -> ChatRequest {
    decode_anthropic(
        r#"{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"Hi"}],
        "tools":[
            {"type":"web_search_20250305","name":"web_search","max_uses":3,"allowed_domains":["docs.rs"],
             "user_location":{"type":"approximate","city":"Lyon","country":"FR"}},
            {"type":"code_execution_20250825","name":"code_execution"},
            {"type":"web_fetch_20250910","name":"web_fetch","max_uses":2}]}"#,
    )
}

#[test]
fn another_wire_gets_its_own_tools_and_refuses_what_it_lacks() {
    let mut request = every_kind();
    // The Anthropic-only tool is refused by every other wire's lowering …
    let error = to_gemini(&request).unwrap_err().to_string();
    assert!(
        error.contains("`web_fetch` (`anthropic`) has no equivalent"),
        "{error}"
    );
    assert!(to_openai(&request).is_err());
    // … which a gateway drops first (tests/server).
    request.options.server_tools.pop();
    let gemini = to_gemini(&request).unwrap();
    assert_eq!(
        gemini["tools"],
        json!([{"googleSearch": {}}, {"codeExecution": {}}])
    );
    let error = to_openai(&request).unwrap_err().to_string();
    assert!(error.contains("`code_execution`"), "{error}");
    request.options.server_tools.pop();
    let openai = to_openai(&request).unwrap();
    assert_eq!(
        openai["web_search_options"],
        json!({"user_location": {"type": "approximate",
            "approximate": {"city": "Lyon", "country": "FR"}}})
    );
}

#[test]
fn a_choice_of_a_server_tool_is_left_to_the_model_where_choices_name_functions() {
    let mut request = every_kind();
    request.options.server_tools.truncate(2);
    request.options.tool_choice = Some(ToolChoice::Tool("web_search".into()));
    assert_eq!(
        to_anthropic(&request).unwrap()["tool_choice"],
        json!({"type": "tool", "name": "web_search"})
    );
    let gemini = to_gemini(&request).unwrap();
    assert!(gemini.get("toolConfig").is_none(), "{gemini}");
    request.options.tool_choice = Some(ToolChoice::Required);
    assert!(to_gemini(&request).unwrap().get("toolConfig").is_none());
    request.options.server_tools.truncate(1);
    assert!(to_openai(&request).unwrap().get("tool_choice").is_none());
}

#[test]
fn openai_web_search_options_come_back_as_they_came_and_cross_to_anthropic() {
    let body = json!({"model": "gpt-4o-search-preview", "messages": [{"role": "user", "content": "Hi"}],
        "web_search_options": {"search_context_size": "high",
            "user_location": {"type": "approximate", "approximate": {"country": "JP"}}}});
    let request = openai_chat::decode_request(body.to_string().as_bytes()).unwrap();
    assert_eq!(to_openai(&request).unwrap(), body);
    assert_eq!(
        to_anthropic(&request).unwrap()["tools"],
        json!([{"type": anthropic::WEB_SEARCH_TYPE, "name": "web_search",
            "user_location": {"type": "approximate", "country": "JP"}}])
    );
}

#[test]
fn code_execution_from_another_wire_asks_anthropic_for_its_beta() {
    use lmstack::provider::{Provider, ProviderConfig};
    let mut request = ChatRequest::new(vec![lmstack::Message::user("2+2?")]).model("m");
    request
        .options
        .server_tools
        .push(ServerTool::CodeExecution(CodeExecution::default()));
    let provider = Provider::new(ProviderConfig::<anthropic::Messages>::new(
        "http://127.0.0.1:1/v1",
    ))
    .unwrap();
    let sent = provider.http_request(request).unwrap();
    assert_eq!(
        sent.headers()["anthropic-beta"],
        anthropic::CODE_EXECUTION_BETA
    );
}

// ---------------------------------------------------------------------------
// Properties

/// Any JSON value a tool field may hold, small.
fn field_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<u32>().prop_map(Value::from),
        "[a-z.]{0,8}".prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
        prop::collection::vec("[a-z]{1,6}\\.com", 0..3).prop_map(Value::from),
        Just(json!({"type": "approximate", "city": "Oslo", "timezone": "Europe/Oslo"})),
        Just(json!({"type": "ephemeral", "ttl": "1h"})),
    ]
}

/// Any server tool an Anthropic client may write: a known or unknown
/// type and version, its name, any fields (typed ones with right or wrong
/// types), in any order after `type` and `name`.
fn anthropic_tool() -> impl Strategy<Value = Value> {
    let kind = prop_oneof![
        Just("web_search_20250305"),
        Just("web_search_20260209"),
        Just("code_execution_20250825"),
        Just("code_execution_20250522"),
        Just("web_fetch_20250910"),
        Just("bash_20250124"),
        Just("text_editor_20250728"),
        Just("memory_20250818"),
        Just("tool_search_tool_regex_20251119"),
    ];
    let key = prop_oneof![
        Just("max_uses".to_owned()),
        Just("allowed_domains".to_owned()),
        Just("blocked_domains".to_owned()),
        Just("user_location".to_owned()),
        Just("cache_control".to_owned()),
        "x_[a-z]{1,5}",
    ];
    (
        kind,
        "[a-z_]{1,12}",
        prop::collection::vec((key, field_value()), 0..5),
    )
        .prop_map(|(kind, name, fields)| {
            let mut tool = Map::new();
            tool.insert("type".into(), kind.into());
            tool.insert("name".into(), name.into());
            tool.extend(fields);
            Value::Object(tool)
        })
}

/// Any typed server tool, as a caller builds it.
fn portable_tool() -> impl Strategy<Value = ServerTool> {
    let domains = prop::option::of(prop::collection::vec("[a-z]{1,6}\\.org", 0..3));
    let text = || prop::option::of("[A-Za-z ]{1,10}");
    let location = prop::option::of((text(), text(), text(), text()).prop_map(
        |(city, region, country, timezone)| UserLocation {
            city,
            region,
            country,
            timezone,
        },
    ));
    prop_oneof![
        (
            prop::option::of(any::<u32>()),
            domains.clone(),
            domains,
            location
        )
            .prop_map(
                |(max_uses, allowed_domains, blocked_domains, user_location)| {
                    ServerTool::WebSearch(WebSearch {
                        max_uses,
                        allowed_domains,
                        blocked_domains,
                        user_location,
                        native: None,
                    })
                }
            ),
        Just(ServerTool::CodeExecution(CodeExecution::default())),
    ]
}

proptest! {
    #![proptest_config(crate::regressions::beside(ProptestConfig::with_cases(128)))]

    #[test]
    fn any_server_tool_list_comes_back_byte_for_byte_on_its_own_wire(
        tools in prop::collection::vec(anthropic_tool(), 1..5),
    ) {
        let body = json!({"max_tokens": 8, "messages": [{"role": "user", "content": "Hi"}],
            "tools": tools});
        let request = decode_anthropic(&body.to_string());
        prop_assert_eq!(request.options.server_tools.len(), tools.len());
        let lowered = to_anthropic(&request).unwrap();
        prop_assert_eq!(lowered["tools"].to_string(), Value::from(tools).to_string());
        // And again, through the canonical JSON (a transcript, a store).
        let stored: ChatRequest = serde_json::from_str(&serde_json::to_string(&request).unwrap()).unwrap();
        prop_assert_eq!(&stored, &request);
    }

    #[test]
    fn typed_tools_keep_their_options_through_the_anthropic_wire(
        tools in prop::collection::vec(portable_tool(), 0..4),
    ) {
        let mut request = ChatRequest::new(vec![lmstack::Message::user("Hi")]);
        request.options.server_tools = tools.clone();
        let body = to_anthropic(&request).unwrap();
        let back = decode_anthropic(&body.to_string());
        let portable: Vec<ServerTool> =
            back.options.server_tools.iter().filter_map(ServerTool::portable).collect();
        prop_assert_eq!(portable, tools);
        // The decoded tools lower to the same body again.
        prop_assert_eq!(to_anthropic(&back).unwrap()["tools"].clone(), body["tools"].clone());
    }
}
