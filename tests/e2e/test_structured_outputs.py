"""Structured outputs end to end: the real server on the default model, driven by the official
openai client (and gRPC). Every JSON output is checked with the `jsonschema` package against the
schema it was generated for (tests/e2e/structured/schemas.json, made by make_schemas.py)."""
import asyncio
import json
import re
import time
from pathlib import Path

import jsonschema
import pytest

from conftest import async_client_for

SCHEMAS = json.loads((Path(__file__).parent / "structured" / "schemas.json").read_text())
PROMPT = "Fill in a realistic example record as JSON."
# Concurrent requests in flight: the engine batches them, so the suite stays quick.
CONCURRENCY = 16


def validator(schema):
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def violations(schema, text):
    """Why `text` is not an instance of `schema` (empty when it is)."""
    try:
        instance = json.loads(text)
    except json.JSONDecodeError as e:
        return [f"not JSON ({e})"]
    return [e.message for e in validator(schema).iter_errors(instance)]


async def generate(client, model_name, schema, i, greedy, stream):
    """(text, finish_reason) of one chat completion with `schema` as its response_format."""
    args = dict(model=model_name, messages=[{"role": "user", "content": PROMPT}],
                max_tokens=500, response_format={"type": "json_schema", "json_schema": {
                    "name": f"record_{i}", "schema": schema, "strict": True}})
    args.update(temperature=0.0) if greedy else args.update(temperature=1.0, seed=i)
    if not stream:
        response = await client.chat.completions.create(**args)
        choice = response.choices[0]
        return choice.message.content, choice.finish_reason
    text, finish = "", None
    async for chunk in await client.chat.completions.create(stream=True, **args):
        for choice in chunk.choices:
            text += choice.delta.content or ""
            finish = choice.finish_reason or finish
    return text, finish


def test_schemas_are_varied():
    assert len(SCHEMAS) >= 200
    text = json.dumps(SCHEMAS)
    for keyword in ['"anyOf"', '"$ref"', '"enum"', '"pattern"', '"format"', '"minItems"',
                    '"maxItems"', '"required"', '"$defs"']:
        assert text.count(keyword) >= 20, keyword
    nested = [s for s in SCHEMAS if any(p.get("type") == "object"
                                        for p in s["properties"].values())]
    assert len(nested) >= 20


def test_every_output_validates_against_its_schema(server, model_name):
    """Each schema once, in turn greedy or sampled, streamed or not (a quarter each)."""
    async def run_all():
        client = async_client_for(server)
        gate = asyncio.Semaphore(CONCURRENCY)

        async def one(i, schema):
            greedy, stream = i % 2 == 0, (i // 2) % 2 == 0
            async with gate:
                text, finish = await generate(client, model_name, schema, i, greedy, stream)
            return i, greedy, stream, text, finish
        return await asyncio.gather(*(one(i, s) for i, s in enumerate(SCHEMAS)))

    failures = []
    for i, greedy, stream, text, finish in asyncio.run(run_all()):
        problems = violations(SCHEMAS[i], text)
        if finish != "stop":
            problems.append(f"finish_reason {finish!r}")
        if problems:
            mode = f"{'greedy' if greedy else 'sampled'}, {'streamed' if stream else 'whole'}"
            failures.append(f"schema {i} ({mode}): {problems}: {text!r}")
    assert not failures, f"{len(failures)} of {len(SCHEMAS)} outputs failed:\n" + \
        "\n".join(failures[:20])


def test_parse_with_a_pydantic_model(client, model_name):
    from typing import Literal

    from pydantic import BaseModel, Field

    class City(BaseModel):
        name: str = Field(max_length=20)
        country: str = Field(max_length=20)
        population: int = Field(ge=0, le=50_000_000)
        size: Literal["small", "medium", "large"]

    completion = client.beta.chat.completions.parse(
        model=model_name, messages=[{"role": "user", "content": "Describe Paris as JSON."}],
        response_format=City, max_tokens=120, temperature=0.0)
    message = completion.choices[0].message
    assert completion.choices[0].finish_reason == "stop"
    assert isinstance(message.parsed, City), message.content
    assert message.parsed.size in ("small", "medium", "large")


def test_json_object_mode(client, model_name):
    response = client.chat.completions.create(
        model=model_name, messages=[{"role": "user", "content": "A JSON object about a dog."}],
        response_format={"type": "json_object"}, max_tokens=200, temperature=0.0)
    text = response.choices[0].message.content
    if response.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(text), dict)
    else:  # cut by max_tokens: still a prefix of an object
        assert text.startswith("{")


@pytest.mark.parametrize("field,value,check", [
    ("guided_choice", ["sunny", "rainy", "snowy"], lambda t: t in ("sunny", "rainy", "snowy")),
    ("guided_regex", r"[0-9]{3}-[0-9]{4}", lambda t: re.fullmatch(r"[0-9]{3}-[0-9]{4}", t)),
    ("guided_grammar", 'root ::= "(" [0-9]+ ("+" [0-9]+)* ")"',
     lambda t: re.fullmatch(r"\([0-9]+(\+[0-9]+)*\)", t)),
    ("guided_json", {"type": "object", "properties": {"ok": {"type": "boolean"}},
                     "required": ["ok"]}, lambda t: isinstance(json.loads(t)["ok"], bool)),
])
@pytest.mark.parametrize("stream", [False, True])
def test_vllm_guided_fields_on_completions(client, model_name, field, value, check, stream):
    args = dict(model=model_name, prompt="The answer:", max_tokens=40, temperature=0.8, seed=3,
                extra_body={field: value})
    if stream:
        text, finish = "", None
        for chunk in client.completions.create(stream=True, **args):
            for choice in chunk.choices:
                text += choice.text
                finish = choice.finish_reason or finish
    else:
        choice = client.completions.create(**args).choices[0]
        text, finish = choice.text, choice.finish_reason
    assert finish == "stop", text
    assert check(text), text


def test_structured_outputs_object_on_chat(client, model_name):
    response = client.chat.completions.create(
        model=model_name, messages=[{"role": "user", "content": "Pick a colour."}],
        max_tokens=20, temperature=0.0,
        extra_body={"structured_outputs": {"choice": ["red", "green", "blue"]}})
    assert response.choices[0].message.content in ("red", "green", "blue")
    assert response.choices[0].finish_reason == "stop"


def test_max_tokens_before_the_end_is_length(client, model_name):
    response = client.completions.create(model=model_name, prompt="Digits:", max_tokens=3,
                                         extra_body={"guided_regex": "[0-9]{40}"})
    choice = response.choices[0]
    assert choice.finish_reason == "length"
    assert re.fullmatch(r"[0-9]+", choice.text), choice.text


def deep_schema(depth):
    schema = {"type": "string", "maxLength": 3}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}, "required": ["a"]}
    return schema


RECURSIVE = {"$defs": {"node": {"type": "object", "properties": {
    "value": {"type": "integer"}, "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}},
    "required": ["value", "next"]}}, "$ref": "#/$defs/node"}

# (what, request fields): each must answer 400 naming a problem, or 200 within its bounds.
HOSTILE = [
    ("deep nesting", {"guided_json": deep_schema(200)}),
    ("recursive $ref", {"guided_json": RECURSIVE}),
    ("self-referencing $ref", {"guided_json": {"$ref": "#"}}),
    ("dangling $ref", {"guided_json": {"$ref": "#/$defs/missing"}}),
    ("remote $ref", {"guided_json": {"$ref": "https://example.com/schema.json"}}),
    ("huge enum", {"guided_json": {"enum": [f"value{i}" for i in range(100_000)]}}),
    ("many enums", {"guided_json": {"type": "object", "properties": {
        f"p{i}": {"enum": list(range(300))} for i in range(40)}}}),
    ("huge maxLength", {"guided_json": {"type": "string", "maxLength": 10**9}}),
    ("huge minItems", {"guided_json": {"type": "array", "minItems": 10**6}}),
    ("minimum above maximum", {"guided_json": {"type": "integer", "minimum": 10, "maximum": 1}}),
    ("minItems above maxItems", {"guided_json": {"type": "array", "minItems": 5, "maxItems": 2}}),
    ("unknown type", {"guided_json": {"type": "banana"}}),
    ("schema not JSON", {"guided_json": "{\"type\": "}),
    ("schema a number", {"guided_json": 42}),
    ("empty enum", {"guided_json": {"enum": []}}),
    ("contradictory allOf", {"guided_json": {"allOf": [{"type": "string"}, {"type": "integer"}]}}),
    ("huge schema", {"guided_json": {"type": "object", "properties": {
        f"property_{i}": {"type": "string", "description": "x" * 100} for i in range(3000)}}}),
    ("nested quantifiers", {"guided_regex": "(a+)+$"}),
    ("ambiguous alternation", {"guided_regex": "(a|a)*b"}),
    ("repeated wildcard groups", {"guided_regex": "(.*a){20}"}),
    ("huge repetition", {"guided_regex": "a{100000}"}),
    ("nested repetitions", {"guided_regex": "((a{500}){500}){500}"}),
    ("backreference", {"guided_regex": r"(a)\1"}),
    ("lookahead", {"guided_regex": "(?=a)a"}),
    ("unclosed class", {"guided_regex": "[a-"}),
    ("long alternation", {"guided_regex": "|".join(f"w{i}" for i in range(20_000))}),
    ("left recursion", {"guided_grammar": 'root ::= root "a" | "a"'}),
    ("undefined rule", {"guided_grammar": "root ::= missing"}),
    ("no root rule", {"guided_grammar": 'start ::= "a"'}),
    ("grammar garbage", {"guided_grammar": "::= ::= |||"}),
    ("empty grammar", {"guided_grammar": ""}),
    ("many choices", {"guided_choice": [f"c{i}" for i in range(50_000)]}),
]


def test_hostile_constraints_answer_400_or_finish_and_the_server_keeps_serving(server,
                                                                                 model_name):
    assert len(HOSTILE) >= 30
    slow = []
    for what, fields in HOSTILE:
        start = time.monotonic()
        status, body = server.post_json("/v1/completions", {
            "model": model_name, "prompt": "Output:", "max_tokens": 24, **fields}, timeout=60)
        elapsed = time.monotonic() - start
        if elapsed > 15:
            slow.append(f"{what}: {elapsed:.1f} s")
        if status == 400:
            error = body["error"]
            print(what, "->", error["param"], error["message"])
            assert error["type"] == "invalid_request_error", (what, body)
            # The field's name; or none where the body itself is refused before its fields are
            # read (nesting past the JSON parser's own depth limit), or where the engine ended a
            # constraint that compiled but allows no token at all.
            param = error["param"] or ""
            assert param.startswith(tuple(fields)) or (not param and (
                "nests" in error["message"] or "cannot be completed" in error["message"])), \
                (what, body)
            assert len(error["message"]) > 10, (what, body)
        else:
            assert status == 200, (what, status, body)
            print(what, "->", body["choices"][0]["finish_reason"], repr(body["choices"][0]["text"]))
            assert body["choices"][0]["finish_reason"] in ("stop", "length"), (what, body)
    assert not slow, slow
    # Still serving, and no blocks held.
    status, body = server.post_json("/v1/completions", {
        "model": model_name, "prompt": "Hi", "max_tokens": 4, "guided_choice": ["ok"]})
    assert status == 200 and body["choices"][0]["text"] == "ok", body
    assert server.get("/health")[0] == 200


def test_a_bad_schema_is_a_400_naming_the_parameter(client, model_name):
    import openai
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(
            model=model_name, messages=[{"role": "user", "content": "x"}], max_tokens=5,
            response_format={"type": "json_schema", "json_schema": {
                "name": "bad", "schema": {"type": "object",
                                          "properties": {"a": {"$ref": "#/$defs/nope"}}}}})
    assert e.value.body["param"] == "response_format.json_schema.schema"
    assert "json_schema" in e.value.body["message"]


def test_a_repeated_schema_compiles_once(server, model_name):
    """A large schema's compile is paid by its first request only."""
    schema = {"type": "object", "title": f"large-{time.time_ns()}", "properties": {
        f"field_{i}": ({"type": "string", "maxLength": 8 + i % 50} if i % 3 == 0 else
                       {"enum": [f"v{i}_{j}" for j in range(10)]} if i % 3 == 1 else
                       {"type": "integer", "minimum": i, "maximum": 10 * i + 9})
        for i in range(150)}}
    timings = []
    for _ in range(3):
        start = time.monotonic()
        status, body = server.post_json("/v1/completions", {
            "model": model_name, "prompt": "N:", "max_tokens": 1, "guided_json": schema})
        timings.append(time.monotonic() - start)
        assert status == 200, body
    assert max(timings[1:]) < timings[0] / 2, timings


# ---- reasoning: the constraint starts after the thinking span ---------------------------------

THINKING_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}")


@pytest.fixture(scope="module")
def thinking_server(start_server, tmp_path_factory):
    template = tmp_path_factory.mktemp("structured") / "thinking.jinja"
    template.write_text(THINKING_TEMPLATE)
    return start_server("--max-model-len", "512", "--chat-template", template,
                        "--reasoning-parser", "think", "--grpc-port", "0")


@pytest.mark.parametrize("stream", [False, True])
def test_the_constraint_starts_after_the_reasoning_span(thinking_server, stream):
    import openai
    client = openai.OpenAI(base_url=thinking_server.url("/v1"), api_key="unused", max_retries=0)
    args = dict(model=thinking_server_model(thinking_server),
                messages=[{"role": "user", "content": "Is the sky blue?"}], max_tokens=60,
                temperature=0.0, extra_body={"guided_choice": ["yes", "no"],
                                             "max_reasoning_tokens": 6})
    if stream:
        reasoning = content = ""
        for chunk in client.chat.completions.create(stream=True, **args):
            for choice in chunk.choices:
                reasoning += getattr(choice.delta, "reasoning_content", None) or ""
                content += choice.delta.content or ""
    else:
        message = client.chat.completions.create(**args).choices[0].message
        reasoning, content = message.reasoning_content, message.content
    # The thinking span is free text (not "yes"/"no"), the answer after it is constrained.
    assert reasoning and reasoning.strip() not in ("yes", "no"), reasoning
    assert content.strip() in ("yes", "no"), (reasoning, content)


def thinking_server_model(server):
    status, _, body = server.get("/v1/models")
    assert status == 200
    return json.loads(body)["data"][0]["id"]


# ---- gRPC ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def grpc_stub(server, tmp_path_factory, pagoda_bin):
    from conftest import serve_has_grpc
    if not serve_has_grpc(pagoda_bin):
        pytest.skip("built without gRPC")
    import importlib.resources
    import sys

    import grpc
    from grpc_tools import protoc
    root = Path(__file__).resolve().parents[2] / "proto"
    out = tmp_path_factory.mktemp("structured_pb")
    well_known = importlib.resources.files("grpc_tools") / "_proto"
    protos = [str(p.relative_to(root)) for p in (root / "pagoda" / "v1").glob("*.proto")]
    assert protoc.main(["grpc_tools.protoc", f"-I{root}", f"-I{well_known}",
                        f"--python_out={out}", f"--grpc_python_out={out}", *protos]) == 0
    sys.path.insert(0, str(out))
    from pagoda.v1 import generate_pb2, inference_service_pb2_grpc
    channel = grpc.insecure_channel(server.grpc_target)
    return inference_service_pb2_grpc.InferenceServiceStub(channel), generate_pb2


def test_grpc_json_schema_and_bad_regex(grpc_stub):
    import grpc
    stub, pb = grpc_stub
    schema = {"type": "object", "properties": {"word": {"type": "string", "maxLength": 8},
                                               "n": {"type": "integer", "minimum": 1,
                                                     "maximum": 5}},
              "required": ["word", "n"], "additionalProperties": False}
    request = pb.GenerateRequest(
        text="A JSON record:", sampling=pb.SamplingParams(temperature=0.0),
        stopping=pb.StoppingCriteria(max_tokens=80),
        structured_output=pb.StructuredOutput(json_schema=json.dumps(schema)))
    messages = list(stub.Generate(request, timeout=60))
    text, finish = "".join(m.text for m in messages), messages[-1].finish_reason
    assert finish == pb.FINISH_REASON_STOP, text
    assert not violations(schema, text), text

    choice = pb.GenerateRequest(text="Pick:", stopping=pb.StoppingCriteria(max_tokens=8),
                                structured_output=pb.StructuredOutput(
                                    choice=pb.Choices(choices=["left", "right"])))
    text = "".join(m.text for m in stub.Generate(choice, timeout=60))
    assert text in ("left", "right")

    bad = pb.GenerateRequest(text="x", structured_output=pb.StructuredOutput(regex="[0-"))
    with pytest.raises(grpc.RpcError) as e:
        list(stub.Generate(bad, timeout=30))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "regex" in e.value.details()


# ---- forced tool calls: tool_choice "required" and a named function ----------------------------

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "maxLength": 20},
            "unit": {"enum": ["celsius", "fahrenheit"]}}, "required": ["city", "unit"]}}},
    {"type": "function", "function": {
        "name": "add", "description": "Adds two numbers",
        "parameters": {"type": "object", "properties": {
            "a": {"type": "integer", "minimum": 0, "maximum": 999},
            "b": {"type": "integer", "minimum": 0, "maximum": 999}}, "required": ["a", "b"]}}},
]
TOOL_SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}


def streamed_tool_calls(client, **args):
    """The tool calls of a streamed chat, reassembled from their deltas, and the finish reason."""
    calls, finish = {}, None
    for chunk in client.chat.completions.create(stream=True, **args):
        for choice in chunk.choices:
            assert not choice.delta.content, choice.delta
            for d in choice.delta.tool_calls or []:
                call = calls.setdefault(d.index, {"id": "", "name": "", "arguments": ""})
                call["id"] += d.id or ""
                call["name"] += d.function.name or ""
                call["arguments"] += d.function.arguments or ""
            finish = choice.finish_reason or finish
    return [calls[i] for i in sorted(calls)], finish


@pytest.mark.parametrize("tool_choice", [
    "required", {"type": "function", "function": {"name": "add"}}])
def test_forced_tool_calls_whole_and_streamed(client, model_name, tool_choice):
    args = dict(model=model_name, tools=TOOLS, tool_choice=tool_choice, max_tokens=120,
                temperature=0.0,
                messages=[{"role": "user", "content": "What is 12 plus 30?"}])
    response = client.chat.completions.create(**args)
    choice = response.choices[0]
    assert choice.finish_reason == "tool_calls", choice
    assert choice.message.content is None
    calls = [{"id": c.id, "name": c.function.name, "arguments": c.function.arguments}
             for c in choice.message.tool_calls]
    assert calls
    for call in calls:
        assert call["id"].startswith("call_")
        assert not violations(TOOL_SCHEMAS[call["name"]], call["arguments"]), call
    if isinstance(tool_choice, dict):
        assert [c["name"] for c in calls] == ["add"]
    # Streamed, the deltas reassemble to the same calls (greedy: the same tokens).
    streamed, finish = streamed_tool_calls(client, **args)
    assert finish == "tool_calls"
    assert [(c["name"], json.loads(c["arguments"])) for c in streamed] == \
        [(c["name"], json.loads(c["arguments"])) for c in calls]


@pytest.mark.parametrize("tool_choice", [
    "required", {"type": "function", "function": {"name": "add"}}])
def test_forced_tool_call_arguments_stream_in_pieces(client, model_name, tool_choice):
    """As OpenAI streams calls: a call's id and name first, then its arguments in fragments."""
    args = dict(model=model_name, tools=TOOLS, tool_choice=tool_choice, max_tokens=120,
                temperature=0.0,
                messages=[{"role": "user", "content": "What is 12 plus 30?"}])
    headers, fragments, finish = {}, {}, None
    for chunk in client.chat.completions.create(stream=True, **args):
        for choice in chunk.choices:
            assert not choice.delta.content, choice.delta
            for d in choice.delta.tool_calls or []:
                if d.id:
                    assert d.index not in headers, "a second header for one call"
                    assert d.type == "function" and d.function.name, d
                    assert not d.function.arguments, d
                    headers[d.index] = d.function.name
                    fragments[d.index] = []
                else:
                    assert d.index in headers, "arguments before the call's name"
                    assert not d.function.name, d
                    fragments[d.index].append(d.function.arguments)
            finish = choice.finish_reason or finish
    assert finish == "tool_calls"
    assert headers and all(len(f) > 1 for f in fragments.values()), fragments
    whole = client.chat.completions.create(**args).choices[0].message.tool_calls
    assert [(headers[i], json.loads("".join(fragments[i]))) for i in sorted(headers)] == \
        [(c.function.name, json.loads(c.function.arguments)) for c in whole]


def test_streamed_forced_tool_calls_carry_every_tokens_logprobs(client, model_name):
    args = dict(model=model_name, tools=TOOLS, tool_choice="required", max_tokens=120,
                temperature=0.0, logprobs=True, top_logprobs=1,
                messages=[{"role": "user", "content": "What is 12 plus 30?"}])
    whole = client.chat.completions.create(**args).choices[0]
    expected = [(e.token, round(e.logprob, 4)) for e in whole.logprobs.content]
    joined = []
    for chunk in client.chat.completions.create(stream=True, **args):
        for choice in chunk.choices:
            if choice.logprobs is not None:
                joined += [(e.token, round(e.logprob, 4)) for e in choice.logprobs.content]
    assert expected and joined == expected


def test_tool_round_trip_with_a_forced_call(client, model_name):
    """The call goes back as an assistant tool_calls message with the tool's answer."""
    first = client.chat.completions.create(
        model=model_name, tools=TOOLS, max_tokens=80, temperature=0.0,
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        messages=[{"role": "user", "content": "Weather in Paris?"}])
    call = first.choices[0].message.tool_calls[0]
    second = client.chat.completions.create(
        model=model_name, tools=TOOLS, max_tokens=16, temperature=0.0, tool_choice="none",
        messages=[{"role": "user", "content": "Weather in Paris?"},
                  {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
                  {"role": "tool", "tool_call_id": call.id, "content": "18 C, sunny"}])
    assert second.choices[0].finish_reason in ("stop", "length")
    assert second.choices[0].message.tool_calls is None
