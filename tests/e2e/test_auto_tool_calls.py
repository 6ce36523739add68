"""tool_choice "auto" on a server with --enable-auto-tool-choice --tool-call-parser hermes.

The default model does not write tool calls by itself, so a regex constraint (structured_outputs)
makes it write exactly one hermes-format call after some text: what the parser then makes of it
is the thing under test, whole and streamed, through the official openai client."""
import json

import pytest

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}]
# Text, then one call in the hermes format (Qwen 2.5 / 3 write the same).
FORCED_OUTPUT = ('Let me look\\.\\n<tool_call>\\n\\{"name": "get_weather", "arguments": '
                 '\\{"city": "(Paris|Rome)"\\}\\}\\n</tool_call>')


@pytest.fixture(scope="module")
def tool_server(start_server):
    return start_server("--max-model-len", "512", "--enable-auto-tool-choice",
                        "--tool-call-parser", "hermes")


@pytest.fixture(scope="module")
def tool_client(tool_server):
    import openai
    return openai.OpenAI(base_url=tool_server.url("/v1"), api_key="unused", max_retries=0)


def model_of(server):
    status, _, body = server.get("/v1/models")
    assert status == 200
    return json.loads(body)["data"][0]["id"]


def request(server, **extra):
    return dict(model=model_of(server), tools=TOOLS, max_tokens=200, temperature=0.0,
                messages=[{"role": "user", "content": "Weather in Paris?"}],
                extra_body={"structured_outputs": {"regex": FORCED_OUTPUT}}, **extra)


def test_auto_calls_come_back_as_tool_calls(tool_server, tool_client):
    choice = tool_client.chat.completions.create(**request(tool_server)).choices[0]
    assert choice.finish_reason == "tool_calls", choice
    assert choice.message.content == "Let me look.\n"
    [call] = choice.message.tool_calls
    assert call.id.startswith("call_") and call.type == "function"
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments)["city"] in ("Paris", "Rome")


def test_streamed_auto_calls_reassemble_to_the_same_call(tool_server, tool_client):
    whole = tool_client.chat.completions.create(**request(tool_server)).choices[0]
    content, calls, finish = "", {}, None
    for chunk in tool_client.chat.completions.create(stream=True, **request(tool_server)):
        for choice in chunk.choices:
            content += choice.delta.content or ""
            # A half-arrived "<tool_call>" never leaks into the content.
            assert "<tool" not in content, content
            for d in choice.delta.tool_calls or []:
                call = calls.setdefault(d.index, {"name": "", "arguments": ""})
                call["name"] += d.function.name or ""
                call["arguments"] += d.function.arguments or ""
            finish = choice.finish_reason or finish
    assert finish == "tool_calls"
    assert content == whole.message.content
    assert [(c["name"], json.loads(c["arguments"])) for c in calls.values()] == \
        [(c.function.name, json.loads(c.function.arguments)) for c in whole.message.tool_calls]


def test_streamed_auto_calls_carry_every_tokens_logprobs(tool_server, tool_client):
    """As on the plain streaming path: each token's logprob comes in a chunk, also while the text
    is held back or goes out as a call; joined they are the unstreamed logprobs."""
    args = request(tool_server, logprobs=True, top_logprobs=2)
    whole = tool_client.chat.completions.create(**args).choices[0]
    assert whole.finish_reason == "tool_calls"
    expected = [(e.token, round(e.logprob, 4)) for e in whole.logprobs.content]
    assert len(expected) == tool_client.chat.completions.create(
        **args).usage.completion_tokens
    joined, call_chunks_with_logprobs = [], 0
    for chunk in tool_client.chat.completions.create(stream=True, **args):
        for choice in chunk.choices:
            if choice.logprobs is None:
                continue
            for e in choice.logprobs.content:
                assert len(e.top_logprobs) == 2, e
                joined.append((e.token, round(e.logprob, 4)))
            call_chunks_with_logprobs += bool(choice.delta.tool_calls)
    assert joined == expected
    assert call_chunks_with_logprobs == 1


def test_without_tools_the_output_stays_text(tool_server, tool_client):
    args = request(tool_server)
    del args["tools"]
    choice = tool_client.chat.completions.create(**args).choices[0]
    assert choice.finish_reason == "stop"
    assert "<tool_call>" in choice.message.content
    assert not choice.message.tool_calls


def test_the_flags_go_together(pagoda_bin):
    import subprocess
    out = subprocess.run([pagoda_bin, "serve", "--enable-auto-tool-choice", "x.gguf"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "--tool-call-parser" in out.stderr
    out = subprocess.run([pagoda_bin, "serve", "--enable-auto-tool-choice", "--tool-call-parser",
                          "nope", "x.gguf"], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "hermes, llama3_json, mistral" in out.stderr
