//! A typed tool: its JSON Schema comes from the argument type, the function layer
//! checks and runs the model's calls, and the tool loop feeds the results back.
//!
//! Run with `cargo run --example typed_tool`.

use std::convert::Infallible;

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

async fn weather(query: WeatherQuery) -> Result<Json<Weather>, Infallible> {
    let celsius = 18.0;
    let temperature = match query.unit {
        Unit::Celsius => celsius,
        Unit::Fahrenheit => celsius * 9.0 / 5.0 + 32.0,
    };
    Ok(Json(Weather {
        city: query.city,
        temperature,
        unit: query.unit,
        sky: "clear",
    }))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lmstack::Error> {
    let tool = Tool::typed("weather", "Current weather in a city", weather);
    println!("The schema the model sees:\n{:#}\n", tool.spec().parameters);

    // The model calls the tool twice — once with an argument of the wrong type,
    // which the function layer answers with an error quoting the schema — then
    // answers. A real provider adapter would take the scripted model's place.
    let model = ScriptedModel::new()
        .reply_messages(vec![Message::tool_calls(vec![
            ToolCall::new(
                "call_1",
                "weather",
                json!({"city": "Paris", "unit": "fahrenheit"}),
            ),
            ToolCall::new("call_2", "weather", json!({"city": 75001})),
        ])])
        .reply("It is 64.4°F and clear in Paris.");
    let stack = ServiceBuilder::new()
        .layer(ToolLoopLayer::new())
        .layer(FunctionCallLayer::new(ToolRegistry::new([tool])?))
        .service(model);

    let request = ChatRequest::new(vec![Message::user("How warm is it in Paris, in °F?")]);
    for message in stack.oneshot(request).await?.collect().await? {
        println!(
            "{}",
            serde_json::to_string(&message).expect("messages serialise")
        );
    }
    Ok(())
}
