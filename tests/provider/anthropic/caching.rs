//! Cache breakpoints and mid-conversation system messages: a Claude Code
//! shaped request (hand-made from its documented shape, see SOURCES.md) and
//! the requests recorded from the real client decode and lower back to
//! Anthropic unchanged, every `cache_control` with its TTL in its place; OpenAI
//! and Gemini get valid bodies without them.

#![cfg(feature = "anthropic")]

use lmstack::provider::anthropic::{LowerOptions, decode_request, lower};
use lmstack::provider::{gemini, openai_chat};
use lmstack::{CacheControl, CacheTtl, ChatRequest, ContentBlock, Message, Role, ToolSpec};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::common::fixture;

const CLAUDE_CODE: &str = "anthropic/hand-made/claude-code-request.json";

fn claude_code() -> (Value, ChatRequest) {
    let bytes = fixture(CLAUDE_CODE);
    let sent: Value = serde_json::from_slice(&bytes).unwrap();
    (sent, decode_request(&bytes).unwrap())
}

#[test]
fn a_claude_code_request_lowers_back_to_itself_breakpoints_and_system_message_in_place() {
    let (sent, request) = claude_code();
    let lowered = lower(&request, &LowerOptions::default()).unwrap();
    for (field, value) in sent.as_object().unwrap() {
        assert_eq!(&lowered[field], value, "field `{field}`");
    }
    assert_eq!(lowered, sent);
    assert_eq!(lowered["messages"][3]["role"], "system");
    assert_eq!(lowered.to_string().matches("cache_control").count(), 6);
}

/// Claude Code 2.1.328's own requests (`cli/tests/e2e/claude_code.rs` records
/// them): its first, and the one with `Read`'s result.
const RECORDED: [&str; 2] = [
    "anthropic/claude-code/first-request.json",
    "anthropic/claude-code/tool-result-request.json",
];

#[test]
fn the_real_claude_code_requests_lower_back_to_themselves() {
    for name in RECORDED {
        let bytes = fixture(name);
        let sent: Value = serde_json::from_slice(&bytes).unwrap();
        let request = decode_request(&bytes).unwrap();
        let lowered = lower(&request, &LowerOptions::default()).unwrap();
        for (field, value) in sent.as_object().unwrap() {
            assert_eq!(&lowered[field], value, "{name}: field `{field}`");
        }
        assert_eq!(lowered, sent, "{name}");
        assert_eq!(
            lowered["system"][1]["cache_control"],
            json!({"type": "ephemeral"})
        );
        assert_eq!(lowered["tools"][10]["defer_loading"], true, "{name}");
    }
}

#[test]
fn the_breakpoints_are_typed_where_the_client_put_them() {
    let (_, request) = claude_code();
    let hour = Some(CacheControl::with_ttl(CacheTtl::OneHour));
    let default = Some(CacheControl::default());
    let system: Vec<_> = request.messages[..3]
        .iter()
        .map(|message| message.metadata().cache_control())
        .collect();
    assert_eq!(system, vec![None, hour, default]);
    let tools = &request.options.tools;
    assert_eq!(tools[3].cache_control, hour);
    assert_eq!(tools[2].extra["defer_loading"], true);
    let results = request.messages[6].results();
    assert_eq!(
        results[0].content[1].cache_control(),
        Some(CacheControl::with_ttl(CacheTtl::FiveMinutes))
    );
    assert_eq!(
        request.messages[7],
        Message::system("The following deferred tools are now available via ToolSearch: WebFetch")
    );
    assert_eq!(request.messages[8].metadata().cache_control(), default);
    let Message::Multimodal(last) = &request.messages[9] else {
        panic!("{:?}", request.messages[9])
    };
    assert_eq!(last.content[0].cache_control(), default);
}

#[test]
fn openai_gets_the_system_message_in_place_and_no_breakpoint() {
    let (_, request) = claude_code();
    let body = openai_chat::lower(&request, &openai_chat::LowerOptions::default()).unwrap();
    let text = body.to_string();
    assert!(!text.contains("cache_control"), "{text}");
    assert!(!text.contains("defer_loading"), "{text}");
    let roles: Vec<&str> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|message| message["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        [
            "system",
            "system",
            "system",
            "user",
            "assistant",
            "tool",
            "user",
            "system",
            "assistant",
            "user"
        ],
        "the tool result's image follows it as a user message"
    );
}

#[test]
fn gemini_gets_a_later_system_message_as_a_marked_user_note_and_no_breakpoint() {
    let (_, request) = claude_code();
    let body = gemini::lower(&request, &gemini::LowerOptions::default()).unwrap();
    let text = body.to_string();
    assert!(!text.contains("cache_control"), "{text}");
    assert!(!text.contains("defer_loading"), "{text}");
    assert_eq!(
        body["systemInstruction"]["parts"].as_array().unwrap().len(),
        3
    );
    let note = format!(
        "{}The following deferred tools are now available via ToolSearch: WebFetch{}",
        gemini::SYSTEM_NOTE_START,
        gemini::SYSTEM_NOTE_END
    );
    let contents = body["contents"].as_array().unwrap();
    let at = contents
        .iter()
        .position(|content| {
            content["parts"]
                .as_array()
                .unwrap()
                .iter()
                .any(|part| part["text"] == note.as_str())
        })
        .expect("the note");
    assert_eq!(contents[at]["role"], "user");
    assert!(
        at > 0 && at + 1 < contents.len(),
        "in its place, not first nor last"
    );
}

#[test]
fn a_bad_cache_control_is_refused_naming_its_place() {
    let body = json!({"max_tokens": 1, "messages": [{"role": "user", "content": [
        {"type": "text", "text": "x", "cache_control": {"type": "ephemeral", "ttl": "2h"}}]}]});
    let error = decode_request(body.to_string().as_bytes()).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("messages[0].content[0].cache_control: "),
        "{error}"
    );
}

fn cache() -> impl Strategy<Value = Option<CacheControl>> {
    prop_oneof![
        Just(None),
        Just(Some(CacheControl::default())),
        Just(Some(CacheControl::with_ttl(CacheTtl::FiveMinutes))),
        Just(Some(CacheControl::with_ttl(CacheTtl::OneHour))),
    ]
}

/// A message that lowers to one block (or a string) and decodes back to itself.
fn message() -> impl Strategy<Value = Message> {
    let text = "[a-z]{1,8}";
    (0..4usize, text, cache()).prop_map(|(kind, text, cache)| match kind {
        0 => {
            let mut message = Message::system(text);
            message.metadata_mut().set_cache_control(cache);
            message
        }
        1 => Message::multimodal(
            Role::User,
            vec![ContentBlock::text(text).with_cache_control(cache)],
        ),
        2 => {
            let mut message = Message::assistant(text);
            message.metadata_mut().set_cache_control(cache);
            message
        }
        _ => Message::multimodal(
            Role::User,
            vec![
                ContentBlock::image_url(format!("https://x/{text}.png")).with_cache_control(cache),
            ],
        ),
    })
}

proptest! {
    /// decode(lower(x)) keeps every breakpoint of x, with its TTL, in its
    /// place, and every system message where it stood.
    #[test]
    fn lowering_then_decoding_keeps_the_breakpoints(
        leading in proptest::collection::vec(cache(), 0..3),
        messages in proptest::collection::vec(message(), 1..8),
        tools in proptest::collection::vec(cache(), 0..3),
    ) {
        let mut history: Vec<Message> = leading
            .iter()
            .enumerate()
            .map(|(i, cache)| {
                let mut message = Message::system(format!("s{i}"));
                message.metadata_mut().set_cache_control(*cache);
                message
            })
            .collect();
        // The conversation starts with the user: a system message right
        // after the leading ones would join them.
        history.push(Message::user("start"));
        history.extend(messages);
        let mut request = ChatRequest::new(history).model("m");
        request.options.max_tokens = Some(16);
        for (i, cache) in tools.iter().enumerate() {
            let mut tool = ToolSpec::new(format!("t{i}"), "", json!({"type": "object"}));
            tool.cache_control = *cache;
            request.options.tools.push(tool);
        }
        let body = lower(&request, &LowerOptions::default()).unwrap();
        let back = decode_request(body.to_string().as_bytes()).unwrap();
        let breakpoints = |request: &ChatRequest| -> Vec<Option<CacheControl>> {
            let blocks = request.messages.iter().flat_map(|message| match message {
                Message::Multimodal(m) => m.content.iter().map(ContentBlock::cache_control).collect(),
                other => vec![other.metadata().cache_control()],
            });
            blocks.chain(request.options.tools.iter().map(|tool| tool.cache_control)).collect()
        };
        prop_assert_eq!(breakpoints(&back), breakpoints(&request));
        let roles = |request: &ChatRequest| -> Vec<Role> {
            request.messages.iter().map(Message::role).collect()
        };
        prop_assert_eq!(roles(&back), roles(&request));
    }
}
