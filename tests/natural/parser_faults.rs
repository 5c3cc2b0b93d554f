//! The parser's defences against hostile model text: a tool block never
//! closed, arguments nested 100 000 deep, a block past its limit — whole and
//! cut at random points, through the parser layer.

use lmstack::natural::{NaturalToolUseParser, OnInvalid};
use lmstack::testing::{Chunking, ScriptedModel, collect_both};
use lmstack::{ChatRequest, Error, InvalidCallKind, Message, ToolSpec};
use serde_json::json;

fn request() -> ChatRequest {
    let mut request = ChatRequest::new(vec![Message::user("Pay.")]);
    request.options.tools = vec![ToolSpec::new("pay", "Pays", json!({"type": "object"}))];
    request
}

/// The messages `parser` makes of `text`, checked to be the same whole, and
/// streamed in random pieces.
async fn parse(parser: &NaturalToolUseParser, text: &str) -> Result<Vec<Message>, Error> {
    let mut whole = None;
    for chunking in [
        Chunking::Whole,
        Chunking::Random { seed: 7, max: 13 },
        Chunking::Random { seed: 8, max: 4096 },
    ] {
        let model = ScriptedModel::new()
            .chunking(chunking)
            .reply(text)
            .reply(text);
        let (complete, streamed) =
            collect_both(|| tower::Layer::layer(parser, model.clone()), request()).await?;
        assert_eq!(complete, streamed, "{chunking:?}");
        if let Some(whole) = &whole {
            assert_eq!(&complete, whole, "{chunking:?}");
        }
        whole = Some(complete);
    }
    Ok(whole.unwrap())
}

#[tokio::test]
async fn an_unclosed_tool_block_is_a_truncated_call_with_its_text_kept() {
    let block = "<tool_call>\n{\"name\": \"pay\", \"arguments\": {\"amount\": 1";
    let text = format!("Paying now.{block}");
    for policy in [OnInvalid::Mark, OnInvalid::Text] {
        let parser = NaturalToolUseParser::new().on_invalid(policy);
        let messages = parse(&parser, &text).await.unwrap();
        assert_eq!(messages[0], Message::assistant("Paying now."));
        let calls = messages[1].calls();
        let invalid = calls[0].invalid.as_ref().expect("marked invalid");
        assert_eq!(invalid.kind, InvalidCallKind::Truncated, "{policy:?}");
        assert_eq!(invalid.raw.as_deref(), Some(block), "nothing is lost");
    }
}

#[tokio::test]
async fn arguments_nested_100k_deep_are_an_invalid_call_not_a_crash() {
    let depth = 100_000;
    let arguments = format!("{{\"a\": {}1{}}}", "[".repeat(depth), "]".repeat(depth));
    let block = format!("<tool_call>{{\"name\": \"pay\", \"arguments\": {arguments}}}</tool_call>");
    let parser = NaturalToolUseParser::new().on_invalid(OnInvalid::Mark);
    let messages = parse(&parser, &block).await.unwrap();
    let calls = messages[0].calls();
    assert_eq!(calls.len(), 1);
    let invalid = calls[0].invalid.as_ref().expect("marked invalid");
    assert_eq!(invalid.kind, InvalidCallKind::MalformedArguments);
    assert!(invalid.message.contains("recursion limit"), "{invalid:?}");
    assert_eq!(invalid.raw.as_deref(), Some(block.as_str()), "kept whole");
}

#[tokio::test]
async fn a_tool_block_past_its_limit_ends_the_reply_with_a_typed_error() {
    let block = format!(
        "<tool_call>{{\"name\": \"pay\", \"arguments\": {{\"memo\": \"{}\"}}}}</tool_call>",
        "x".repeat(10_000)
    );
    let parser = NaturalToolUseParser::new().call_limit(4096);
    let error = parse(&parser, &block).await.unwrap_err();
    assert!(
        matches!(error, Error::LimitExceeded { limit: 4096, .. }),
        "{error:?}"
    );
}
