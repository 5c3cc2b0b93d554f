//! The function layer over the natural tool use parser: a text-only model's
//! `<tool_call>` text is run, and a call the parser marks invalid is answered so
//! that the model can fix it.

#![cfg(feature = "function")]

use std::convert::Infallible;

use lmstack::function::{FunctionCallLayer, Tool, ToolLoopLayer, ToolRegistry};
use lmstack::natural::NaturalToolUseParser;
use lmstack::testing::{Chunking, ScriptedModel, collect_both};
use lmstack::{ChatRequest, Message};
use schemars::JsonSchema;
use serde::Deserialize;
use tower::ServiceBuilder;

#[derive(Deserialize, JsonSchema)]
struct Add {
    a: i64,
    b: i64,
}

#[tokio::test]
async fn a_text_only_model_fixes_its_call_after_a_schema_error() {
    for chunking in [
        Chunking::Whole,
        Chunking::Bytes(1),
        Chunking::Random { seed: 3, max: 7 },
    ] {
        let make = || {
            let add = Tool::typed("add", "Adds two integers", |args: Add| async move {
                Ok::<_, Infallible>((args.a + args.b).to_string())
            });
            let model = ScriptedModel::new()
                .chunking(chunking)
                .reply("<tool_call name=\"add\">\n{\"a\": \"two\", \"b\": 3}\n</tool_call>")
                .reply("<tool_call name=\"add\">\n{\"a\": 2, \"b\": 3}\n</tool_call>")
                .reply("2 + 3 = 5.");
            ServiceBuilder::new()
                .layer(ToolLoopLayer::new())
                .layer(FunctionCallLayer::new(ToolRegistry::new([add]).unwrap()))
                .layer(NaturalToolUseParser::new())
                .service(model)
        };
        let request = ChatRequest::new(vec![Message::user("2 + 3?")]);
        let (whole, streamed) = collect_both(make, request).await.unwrap();
        assert_eq!(whole, streamed, "{chunking:?}");

        let results: Vec<_> = whole.iter().flat_map(Message::results).collect();
        assert_eq!(results.len(), 2, "{whole:?}");
        assert!(results[0].is_error);
        let error = results[0].text_content();
        assert!(
            error.contains("`/a`") && error.contains("JSON Schema:\n{"),
            "{error}"
        );
        assert!(!results[1].is_error);
        assert_eq!(results[1].text_content(), "5");
        assert_eq!(whole.last(), Some(&Message::assistant("2 + 3 = 5.")));
    }
}
