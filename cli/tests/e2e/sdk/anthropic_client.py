"""The official Anthropic Python SDK as a client of `lmstack serve`.

Usage: anthropic_client.py SCENARIO BASE_URL [MODEL]. Prints one JSON object: what
the scenario saw, for tests/e2e/sdk_clients.rs to check. Exits non-zero when the SDK
raises something the scenario did not expect.
"""

import json
import sys

import anthropic
import pydantic

scenario, base = sys.argv[1], sys.argv[2]
model = sys.argv[3] if len(sys.argv) > 3 else "lmstack-demo"
client = anthropic.Anthropic(base_url=base, api_key="test-token", max_retries=0)
user = [{"role": "user", "content": "What is the weather in Paris?"}]
weather = {
    "name": "get_weather",
    "description": "The weather in a city",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


class City(pydantic.BaseModel):
    name: str
    country: str
    population: int


asked = [{"role": "user", "content": "Which is the largest city of France?"}]


def text_of(message):
    return "".join(block.text for block in message.content if block.type == "text")


if scenario == "chat":
    reply = client.messages.create(model=model, max_tokens=256, messages=user)
    print(json.dumps({"content": text_of(reply), "stop_reason": reply.stop_reason,
                      "usage": reply.usage.model_dump()}))
elif scenario == "stream":
    with client.messages.stream(model=model, max_tokens=256, messages=user) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    print(json.dumps({"content": text, "stop_reason": final.stop_reason,
                      "final": text_of(final)}))
elif scenario == "tools":
    first = client.messages.create(model=model, max_tokens=256, messages=user,
                                   tools=[weather])
    call = next(block for block in first.content if block.type == "tool_use")
    history = user + [
        {"role": "assistant", "content": [block.model_dump(exclude_none=True)
                                          for block in first.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id,
                                      "content": "18°C and sunny in " + call.input["city"]}]},
    ]
    second = client.messages.create(model=model, max_tokens=256, messages=history,
                                    tools=[weather])
    print(json.dumps({"stop_reason": first.stop_reason,
                      "call": {"id": call.id, "name": call.name, "arguments": call.input},
                      "answer": text_of(second)}))
elif scenario == "structured":
    # The SDK's structured output (a pydantic model as `output_format`, sent as
    # `output_config.format`), whole (`parse`) and through its streaming
    # helper, and a schema of the client's own in `output_config`; then replies
    # that break the schema, whole and streamed: each must raise.
    seen = {}
    reply = client.messages.parse(model=model, max_tokens=256, messages=asked,
                                  output_format=City)
    seen["parsed"] = reply.parsed_output.model_dump()
    with client.messages.stream(model=model, max_tokens=256, messages=asked,
                                output_format=City) as stream:
        final = stream.get_final_message()
    seen["streamed"] = final.parsed_output.model_dump()
    schema = {"type": "object", "additionalProperties": False,
              "required": ["name", "country", "population"],
              "properties": {"name": {"type": "string"}, "country": {"type": "string"},
                             "population": {"type": "integer"}}}
    raw = client.messages.create(model=model, max_tokens=256, messages=asked,
                                 output_config={"format": {"type": "json_schema",
                                                           "schema": schema}})
    seen["raw"] = json.loads(text_of(raw))
    try:
        client.messages.parse(model=model, max_tokens=256, messages=asked, output_format=City)
    except anthropic.APIStatusError as error:
        seen["broken"] = [type(error).__name__, error.status_code, error.message]
    try:
        with client.messages.stream(model=model, max_tokens=256, messages=asked,
                                    output_format=City) as stream:
            stream.get_final_message()
    except anthropic.APIError as error:
        seen["broken_stream"] = [type(error).__name__, error.message]
    print(json.dumps(seen))
elif scenario == "errors":
    seen = {}
    try:
        client.messages.create(model="no-such-model", max_tokens=5, messages=user)
    except anthropic.NotFoundError as error:
        seen["unknown_model"] = [type(error).__name__, error.status_code]
    try:
        client.messages.create(model=model, max_tokens=5,
                               messages=[{"role": "user", "content": [{"type": "image"}]}])
    except anthropic.BadRequestError as error:
        seen["bad_request"] = [type(error).__name__, error.status_code, error.message]
    try:
        anthropic.Anthropic(base_url=base, api_key="wrong", max_retries=0) \
            .messages.create(model=model, max_tokens=5, messages=user)
    except anthropic.AuthenticationError as error:
        seen["wrong_token"] = [type(error).__name__, error.status_code]
    print(json.dumps(seen))
else:
    sys.exit("unknown scenario " + scenario)
