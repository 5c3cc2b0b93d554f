"""The official OpenAI Python SDK as a client of `lmstack serve`.

Usage: openai_client.py SCENARIO BASE_URL [MODEL]. Prints one JSON object: what
the scenario saw, for tests/e2e/sdk_clients.rs to check. Exits non-zero when the SDK
raises something the scenario did not expect.
"""

import json
import sys

import openai
import pydantic

scenario, base = sys.argv[1], sys.argv[2]
model = sys.argv[3] if len(sys.argv) > 3 else "lmstack-demo"
client = openai.OpenAI(base_url=base + "/v1", api_key="test-token", max_retries=0)
user = [{"role": "user", "content": "What is the weather in Paris?"}]
weather = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


class City(pydantic.BaseModel):
    name: str
    country: str
    population: int


asked = [{"role": "user", "content": "Which is the largest city of France?"}]

if scenario == "chat":
    reply = client.chat.completions.create(model=model, messages=user)
    choice = reply.choices[0]
    print(json.dumps({"content": choice.message.content,
                      "finish_reason": choice.finish_reason,
                      "usage": reply.usage.model_dump() if reply.usage else None}))
elif scenario == "stream":
    stream = client.chat.completions.create(
        model=model, messages=user, stream=True,
        stream_options={"include_usage": True})
    text, finish, usage = "", None, None
    for chunk in stream:
        if chunk.usage:
            usage = chunk.usage.model_dump()
        for choice in chunk.choices:
            text += choice.delta.content or ""
            finish = choice.finish_reason or finish
    print(json.dumps({"content": text, "finish_reason": finish, "usage": usage}))
elif scenario == "tools":
    # The model calls the client's tool; the client runs it and sends the result.
    first = client.chat.completions.create(model=model, messages=user, tools=[weather])
    message = first.choices[0].message
    call = message.tool_calls[0]
    history = user + [message.model_dump(exclude_none=True), {
        "role": "tool", "tool_call_id": call.id,
        "content": "18°C and sunny in " + json.loads(call.function.arguments)["city"]}]
    second = client.chat.completions.create(model=model, messages=history, tools=[weather])
    print(json.dumps({"finish_reason": first.choices[0].finish_reason,
                      "call": {"id": call.id, "name": call.function.name,
                               "arguments": json.loads(call.function.arguments)},
                      "answer": second.choices[0].message.content}))
elif scenario == "natural":
    # A text-only model (llama.cpp) given tools by the gateway: the grammar
    # (argv[4], passed through in extra_body) makes it write a call as text,
    # which the gateway hands the client as a native tool call.
    add = {"type": "function", "function": {
        "name": "add", "description": "Adds two whole numbers",
        "parameters": {"type": "object", "required": ["a", "b"], "properties": {
            "a": {"type": "integer"}, "b": {"type": "integer"}}}}}
    asked = [{"role": "system", "content": "When you have a tool's result, answer in words."},
             {"role": "user", "content": "What is 2 + 3?"}]
    first = client.chat.completions.create(
        model=model, messages=asked, tools=[add], temperature=0, max_tokens=64,
        extra_body={"grammar": sys.argv[4], "seed": 42})
    message = first.choices[0].message
    call = message.tool_calls[0]
    arguments = json.loads(call.function.arguments)
    history = asked + [message.model_dump(exclude_none=True), {
        "role": "tool", "tool_call_id": call.id,
        "content": str(arguments["a"] + arguments["b"])}]
    second = client.chat.completions.create(
        model=model, messages=history, tools=[add], temperature=0, max_tokens=64,
        extra_body={"seed": 42})
    print(json.dumps({"finish_reason": first.choices[0].finish_reason,
                      "call": {"name": call.function.name, "arguments": arguments},
                      "answer": second.choices[0].message.content,
                      "answer_calls": len(second.choices[0].message.tool_calls or [])}))
elif scenario == "structured":
    # The SDK's structured output (a pydantic model as `response_format`),
    # whole (`parse`) and through its streaming helper; then, the same twice
    # against replies that break the schema: each must raise, not parse prose.
    seen = {}
    reply = client.chat.completions.parse(model=model, messages=asked, response_format=City)
    seen["parsed"] = reply.choices[0].message.parsed.model_dump()
    with client.chat.completions.stream(model=model, messages=asked,
                                        response_format=City) as stream:
        final = stream.get_final_completion()
    seen["streamed"] = final.choices[0].message.parsed.model_dump()
    try:
        client.chat.completions.parse(model=model, messages=asked, response_format=City)
    except openai.APIStatusError as error:
        seen["broken"] = [type(error).__name__, error.status_code, error.message]
    try:
        with client.chat.completions.stream(model=model, messages=asked,
                                            response_format=City) as stream:
            stream.get_final_completion()
    except openai.APIError as error:
        seen["broken_stream"] = [type(error).__name__, error.message]
    print(json.dumps(seen))
elif scenario == "responses":
    # The Responses API: a tool round trip, the streaming helper, a
    # conversation continued by `previous_response_id`, and typed errors.
    seen = {}
    tool = {"type": "function", "name": "get_weather", "description": "The weather in a city",
            "parameters": weather["function"]["parameters"]}
    question = "What is the weather in Paris?"
    first = client.responses.create(model=model, input=question, tools=[tool])
    call = next(item for item in first.output if item.type == "function_call")
    result = {"type": "function_call_output", "call_id": call.call_id,
              "output": "18°C and sunny in " + json.loads(call.arguments)["city"]}
    second = client.responses.create(model=model, tools=[tool], input=[
        {"role": "user", "content": question},
        *[item.model_dump(exclude_none=True) for item in first.output], result])
    seen["call"] = {"name": call.name, "arguments": json.loads(call.arguments)}
    seen["answer"] = second.output_text
    with client.responses.stream(model=model, input="Say hello.") as stream:
        deltas = [event.delta for event in stream if event.type == "response.output_text.delta"]
        final = stream.get_final_response()
    seen["streamed"] = ["".join(deltas), final.output_text, final.status]
    remember = client.responses.create(model=model, input="Remember: the code is 42.")
    recall = client.responses.create(model=model, input="What is the code?",
                                     previous_response_id=remember.id)
    seen["recalled"] = recall.output_text
    try:
        client.responses.create(model="no-such-model", input="Hi")
    except openai.NotFoundError as error:
        seen["unknown_model"] = [type(error).__name__, error.status_code]
    try:
        client.responses.create(model=model, input="Hi", previous_response_id="resp_unknown")
    except openai.BadRequestError as error:
        seen["unknown_previous"] = [type(error).__name__, error.status_code, error.code]
    print(json.dumps(seen))
elif scenario == "errors":
    seen = {}
    try:
        client.chat.completions.create(model="no-such-model", messages=user)
    except openai.NotFoundError as error:
        seen["unknown_model"] = [type(error).__name__, error.status_code]
    try:
        client.chat.completions.create(model=model, messages=[{"role": "user"}])
    except openai.BadRequestError as error:
        seen["bad_request"] = [type(error).__name__, error.status_code, error.message]
    try:
        openai.OpenAI(base_url=base + "/v1", api_key="wrong", max_retries=0) \
            .chat.completions.create(model=model, messages=user)
    except openai.AuthenticationError as error:
        seen["wrong_token"] = [type(error).__name__, error.status_code]
    print(json.dumps(seen))
else:
    sys.exit("unknown scenario " + scenario)
