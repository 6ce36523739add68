"""guidellm's requests against `pagoda serve` (issue 26, point 4). guidellm 0.8.1 itself needs
torch, which the test venv does not carry, so this test sends what its OpenAI HTTP backend sends,
as read from its source (guidellm/backends/openai/http.py and request_handlers.py): the
validation probe (GET /health), the model lookup (GET /v1/models, data[].id), and a benchmark
request for a fixed number of output tokens on each endpoint, streamed with
stream_options {include_usage, continuous_usage_stats}, "stop": null and "ignore_eos": true
(chat: max_completion_tokens and the user content as a list of text parts). guidellm reads the
text from the chunks and the token counts from the last chunk that has a usage object; those
must match what was asked. Its tokenizer is local (docs/api.md: --tokenizer a folder)."""
import json
import urllib.request

import pytest

OUTPUT_TOKENS = 6
STREAM_OPTIONS = {"include_usage": True, "continuous_usage_stats": True}


def stream(server, path, body):
    request = urllib.request.Request(server.url(path), data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    chunks = []
    with urllib.request.urlopen(request, timeout=120) as response:
        assert response.status == 200
        for line in response:
            line = line.strip()
            if line.startswith(b"data:") and line != b"data: [DONE]":
                chunks.append(json.loads(line[5:]))
    return chunks


def last_usage(chunks):
    usages = [c["usage"] for c in chunks if c.get("usage")]
    assert usages, "no chunk carried usage"
    return usages[-1]


@pytest.fixture(scope="module")
def model_id(server):
    status, _, _ = server.get("/health")
    assert status == 200
    status, _, raw = server.get("/v1/models")
    assert status == 200
    return [item["id"] for item in json.loads(raw)["data"]][0]


def test_text_completions_as_guidellm_sends_them(server, model_id):
    chunks = stream(server, "/v1/completions", {
        "model": model_id, "stream": True, "stream_options": STREAM_OPTIONS,
        "max_tokens": OUTPUT_TOKENS, "stop": None, "ignore_eos": True,
        "prompt": "The quick brown fox jumps over the lazy dog. Once upon a time"})
    text = "".join(c["choices"][0]["text"] for c in chunks if c["choices"])
    usage = last_usage(chunks)
    assert usage["completion_tokens"] == OUTPUT_TOKENS and usage["prompt_tokens"] > 0, usage
    assert text


def test_chat_completions_as_guidellm_sends_them(server, model_id):
    chunks = stream(server, "/v1/chat/completions", {
        "model": model_id, "stream": True, "stream_options": STREAM_OPTIONS,
        "max_completion_tokens": OUTPUT_TOKENS, "stop": None, "ignore_eos": True,
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": "Tell me a story about a fox."}]}]})
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    usage = last_usage(chunks)
    assert usage["completion_tokens"] == OUTPUT_TOKENS and usage["prompt_tokens"] > 0, usage
    assert text
