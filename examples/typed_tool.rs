//! A typed tool: its JSON Schema comes from the argument type, the function layer
//! checks and runs the model's calls, and the tool loop feeds the results back.
//!
//! Run with `cargo run --example typed_tool`; its tests run with `cargo test`.

use lmstack::function::{FunctionCallLayer, Json, Tool, ToolLoopLayer, ToolRegistry};
use lmstack::testing::ScriptedModel;
use lmstack::{ChatRequest, Message, ToolCall};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tower::{ServiceBuilder, ServiceExt};

/// Where, and in which unit.
#[derive(Deserialize, JsonSchema)]
struct WeatherQuery {
    /// The city, for example "Paris".
    city: String,
    /// The unit of the temperature.
    #[serde(default)]
    unit: Unit,
}

#[derive(Default, Deserialize, JsonSchema, Serialize)]
#[serde(rename_all = "snake_case")]
enum Unit {
    #[default]
    Celsius,
    Fahrenheit,
}

/// What the tool returns, as JSON.
#[derive(Serialize)]
struct Weather {
    city: String,
    temperature: f64,
    unit: Unit,
    sky: &'static str,
}

async fn weather(query: WeatherQuery) -> Json<Weather> {
    let celsius = 18.0;
    let temperature = match query.unit {
        Unit::Celsius => celsius,
        Unit::Fahrenheit => celsius * 9.0 / 5.0 + 32.0,
    };
    Json(Weather {
        city: query.city,
        temperature,
        unit: query.unit,
        sky: "clear",
    })
}

/// The model calls the tool twice — once with an argument of the wrong type,
/// which the function layer answers with an error quoting the schema — then
/// answers. A real provider adapter would take the scripted model's place.
fn model() -> ScriptedModel {
    ScriptedModel::new()
        .reply_messages(vec![Message::tool_calls(vec![
            ToolCall::new(
                "call_1",
                "weather",
                json!({"city": "Paris", "unit": "fahrenheit"}),
            ),
            ToolCall::new("call_2", "weather", json!({"city": 75001})),
        ])])
        .reply("It is 64.4°F and clear in Paris.")
}

/// Runs the question through ToolLoop → FunctionCall(`tool`) → `model`.
async fn conversation(tool: Tool, model: ScriptedModel) -> Result<Vec<Message>, lmstack::Error> {
    let stack = ServiceBuilder::new()
        .layer(ToolLoopLayer::new())
        .layer(FunctionCallLayer::new(ToolRegistry::new([tool])?))
        .service(model);
    let request = ChatRequest::new(vec![Message::user("How warm is it in Paris, in °F?")]);
    stack.oneshot(request).await?.collect().await
}

fn weather_tool() -> Tool {
    Tool::typed("weather", "Current weather in a city", weather)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lmstack::Error> {
    let tool = weather_tool();
    println!("The schema the model sees:\n{:#}\n", tool.spec().parameters);
    for message in conversation(tool, model()).await? {
        println!(
            "{}",
            serde_json::to_string(&message).expect("messages serialise")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_comes_from_the_argument_type() {
        let schema = weather_tool().spec().parameters.clone();
        assert_eq!(schema["required"], json!(["city"]), "`unit` has a default");
        assert_eq!(schema["properties"]["city"]["type"], "string");
        assert_eq!(
            schema["properties"]["city"]["description"],
            "The city, for example \"Paris\"."
        );
        assert_eq!(
            schema["properties"]["unit"]["enum"],
            json!(["celsius", "fahrenheit"])
        );
    }

    #[tokio::test]
    async fn a_good_call_runs_and_a_bad_one_is_answered_with_the_schema() {
        let model = model();
        let messages = conversation(weather_tool(), model.clone()).await.unwrap();
        let results = messages[0].results();
        assert_eq!(results.len(), 2, "{messages:?}");
        assert!(!results[0].is_error);
        let weather: serde_json::Value = serde_json::from_str(&results[0].text_content()).unwrap();
        assert_eq!(
            weather,
            json!({"city": "Paris", "temperature": 64.4, "unit": "fahrenheit", "sky": "clear"})
        );
        assert!(results[1].is_error);
        let told = results[1].text_content();
        assert!(
            told.contains("Call `weather` again with arguments that match its JSON Schema"),
            "{told}"
        );
        assert!(
            told.contains(&weather_tool().spec().parameters.to_string()),
            "{told}"
        );
        assert_eq!(
            messages.last().and_then(Message::as_text),
            Some("It is 64.4°F and clear in Paris.")
        );
        // The second round's request carried both results back to the model.
        let requests = model.requests();
        assert_eq!(requests.len(), 2);
        assert_eq!(requests[1].messages.last(), Some(&messages[0]));
    }
}
