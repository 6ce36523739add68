"""`pagoda serve` through the official OpenAI client: every endpoint, streaming exactly as OpenAI
does it, greedy outputs against transformers' reference ids, n > 1, stop strings across token
boundaries, logprobs shapes, usage against /tokenize, echo, and /metrics through promtool."""
import asyncio
import json
import shutil
import subprocess
import time

import httpx
import pytest

from conftest import ROOT, async_client_for

GREEDY = json.loads((ROOT / "tests" / "data" / "forward" / "smollm2_greedy.json").read_text())
# Reference cases whose first 8 greedy steps have no near tie (either token would be right there).
ORACLE_CASES = [c for c in GREEDY["cases"]
                if c["kind"] == "text" and min(c["top1_top2_gap"][:8]) > 0.05
                and not set(c["greedy_ids"][:8]) & {0, 1, 2}][:3]


def sse_events(response):
    """The data payloads of a raw SSE response, checking the framing on the way."""
    body = response.text
    assert body.endswith("\n\n"), body[-50:]
    events = []
    for block in body.split("\n\n")[:-1]:
        assert block.startswith("data: "), block
        events.append(block[len("data: "):])
    return events


def test_health_version_and_models(server, client, model_name):
    status, headers, body = server.get("/health")
    assert (status, body) == (200, b"")
    status, _, body = server.get("/version")
    assert status == 200 and json.loads(body)["version"]
    models = client.models.list()
    # One entry per --served-model-name, in order.
    assert [m.id for m in models.data] == [model_name, "SmolLM2-135M-Instruct"]
    assert models.data[0].max_model_len == 1024
    assert client.models.retrieve("SmolLM2-135M-Instruct").id == "SmolLM2-135M-Instruct"


@pytest.mark.parametrize("case", ORACLE_CASES, ids=lambda c: c["name"])
def test_greedy_completion_matches_transformers(server, client, model_name, case):
    completion = client.completions.create(model=model_name, prompt=case["prompt_ids"],
                                           max_tokens=8, temperature=0)
    status, expected = server.post_json("/detokenize", {"tokens": case["greedy_ids"][:8]})
    assert status == 200
    assert completion.choices[0].text == expected["prompt"]
    assert completion.choices[0].finish_reason == "length"
    assert completion.usage.prompt_tokens == case["n_prompt"]
    assert completion.usage.completion_tokens == 8


def test_chat_streamed_equals_non_streamed(client, model_name):
    messages = [{"role": "user", "content": "Name three colors."}]
    whole = client.chat.completions.create(model=model_name, messages=messages, max_tokens=16,
                                           temperature=0)
    chunks = list(client.chat.completions.create(
        model=model_name, messages=messages, max_tokens=16, temperature=0, stream=True,
        stream_options={"include_usage": True}))
    choice_chunks = [c for c in chunks if c.choices]
    assert choice_chunks[0].choices[0].delta.role == "assistant"
    assert all(c.choices[0].delta.role is None for c in choice_chunks[1:])
    # finish_reason only in the last choice chunk.
    assert [c.choices[0].finish_reason for c in choice_chunks[:-1]] == [None] * (len(choice_chunks) - 1)
    assert choice_chunks[-1].choices[0].finish_reason == whole.choices[0].finish_reason
    text = "".join(c.choices[0].delta.content or "" for c in choice_chunks)
    assert text == whole.choices[0].message.content and text
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    # (cached_tokens differs: the second request hits the first one's prefix cache.)
    counts = lambda u: (u.prompt_tokens, u.completion_tokens, u.total_tokens)
    assert counts(chunks[-1].usage) == counts(whole.usage)
    assert len({c.id for c in chunks}) == 1 and chunks[0].object == "chat.completion.chunk"


def test_completion_streamed_equals_non_streamed(client, model_name):
    kwargs = dict(model=model_name, prompt="The capital of France is", max_tokens=12,
                  temperature=0)
    whole = client.completions.create(**kwargs)
    chunks = list(client.completions.create(**kwargs, stream=True))
    assert "".join(c.choices[0].text for c in chunks) == whole.choices[0].text
    assert chunks[-1].choices[0].finish_reason == whole.choices[0].finish_reason


def test_raw_sse_framing(server, model_name):
    body = {"model": model_name, "messages": [{"role": "user", "content": "Hi"}],
            "max_tokens": 4, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    response = httpx.post(server.url("/v1/chat/completions"), json=body, timeout=60)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["transfer-encoding"] == "chunked"
    events = sse_events(response)
    assert events[-1] == "[DONE]"
    final = json.loads(events[-2])
    assert final["choices"] == [] and final["usage"]["completion_tokens"] == 4
    first = json.loads(events[0])
    assert first["choices"][0]["delta"]["role"] == "assistant"
    # As OpenAI sends them: with include_usage, every chunk before the last has "usage": null;
    # every chunk names the server build in system_fingerprint.
    chunks = [json.loads(e) for e in events[:-1]]
    assert all("usage" in c and c["usage"] is None for c in chunks[:-1])
    assert {c["system_fingerprint"] for c in chunks} == {fingerprint(server)}


def fingerprint(server):
    _, _, body = server.get("/version")
    return "pagoda-" + json.loads(body)["version"]


@pytest.mark.parametrize("path,body", [
    ("/v1/completions", {"prompt": "Hello", "max_tokens": 2}),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2})])
def test_system_fingerprint_on_bodies_and_chunks(server, model_name, path, body):
    body = {"model": model_name, "temperature": 0, **body}
    whole = httpx.post(server.url(path), json=body, timeout=60).json()
    assert whole["system_fingerprint"] == fingerprint(server)
    events = sse_events(httpx.post(server.url(path), json={**body, "stream": True}, timeout=60))
    assert all(json.loads(e)["system_fingerprint"] == fingerprint(server) for e in events[:-1])


def test_no_usage_chunk_without_include_usage(server, model_name):
    body = {"model": model_name, "prompt": "Hello", "max_tokens": 3, "temperature": 0,
            "stream": True}
    events = sse_events(httpx.post(server.url("/v1/completions"), json=body, timeout=60))
    assert events[-1] == "[DONE]"
    assert all(json.loads(e)["choices"] for e in events[:-1])
    assert not any("usage" in json.loads(e) for e in events[:-1])


def test_n_samples(client, model_name):
    completion = client.completions.create(model=model_name, prompt="Once upon a time", n=3,
                                           max_tokens=6, temperature=1.0, seed=7,
                                           extra_body={"ignore_eos": True})
    assert sorted(c.index for c in completion.choices) == [0, 1, 2]
    assert [c.finish_reason for c in completion.choices] == ["length"] * 3
    assert completion.usage.completion_tokens == 18
    # Each sample draws its own tokens (seed + index, as vLLM does), so they differ.
    assert len({c.text for c in completion.choices}) > 1
    # Streamed: each choice gets its role first and exactly one finish_reason.
    chunks = list(client.chat.completions.create(
        model=model_name, messages=[{"role": "user", "content": "Hi"}], n=2, max_tokens=5,
        temperature=0.8, seed=3, stream=True))
    for index in (0, 1):
        mine = [c.choices[0] for c in chunks if c.choices and c.choices[0].index == index]
        assert mine[0].delta.role == "assistant"
        assert sum(1 for c in mine if c.finish_reason) == 1 and mine[-1].finish_reason


def test_multiple_prompts(client, model_name):
    completion = client.completions.create(model=model_name, prompt=["The", "Hello"],
                                           max_tokens=4, temperature=0)
    assert sorted(c.index for c in completion.choices) == [0, 1]
    single = client.completions.create(model=model_name, prompt="Hello", max_tokens=4,
                                       temperature=0)
    assert [c.text for c in completion.choices if c.index == 1] == [single.choices[0].text]


@pytest.mark.parametrize("stream", [False, True])
def test_stop_string_across_token_boundaries(client, model_name, stream):
    prompt = "Once upon a time,"
    plain = client.completions.create(model=model_name, prompt=prompt, max_tokens=10,
                                      temperature=0).choices[0].text
    # " the city of Nova Haven" is several tokens; the stop string starts inside " city" and
    # ends inside " Nova".
    assert "city of Nova" in plain, plain
    stop = "ity of No"
    expected = plain[:plain.index(stop)]
    kwargs = dict(model=model_name, prompt=prompt, max_tokens=10, temperature=0, stop=[stop])
    if stream:
        chunks = list(client.completions.create(**kwargs, stream=True))
        text = "".join(c.choices[0].text for c in chunks)
        finish = chunks[-1].choices[0].finish_reason
    else:
        choice = client.completions.create(**kwargs).choices[0]
        text, finish = choice.text, choice.finish_reason
    assert (text, finish) == (expected, "stop")


def test_completion_logprobs_shape(client, model_name):
    completion = client.completions.create(model=model_name, prompt="The capital of France is",
                                           max_tokens=5, temperature=0, logprobs=2)
    lp = completion.choices[0].logprobs
    n = completion.usage.completion_tokens
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset) == n
    assert "".join(lp.tokens) == completion.choices[0].text
    for token, logprob, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
        assert 2 <= len(top) <= 3 and logprob <= 0
        # Greedy: the sampled token is the most likely one.
        assert logprob == pytest.approx(max(top.values()), abs=1e-4)
    assert lp.text_offset == sorted(lp.text_offset)


def test_chat_logprobs_shape(client, model_name):
    completion = client.chat.completions.create(
        model=model_name, messages=[{"role": "user", "content": "Hi"}], max_tokens=4,
        temperature=0, logprobs=True, top_logprobs=3)
    content = completion.choices[0].logprobs.content
    assert len(content) == completion.usage.completion_tokens
    assert any(item.bytes for item in content)
    for item in content:
        assert len(item.top_logprobs) == 3 and item.logprob <= 0
        assert item.top_logprobs[0].logprob >= item.top_logprobs[-1].logprob
        # `bytes` spells the token; for ASCII tokens that is the token itself.
        if all(b < 128 for b in item.bytes):
            assert bytes(item.bytes).decode() == item.token


def test_usage_matches_tokenize(server, client, model_name):
    prompt = "Counting tokens: one, two, three."
    completion = client.completions.create(model=model_name, prompt=prompt, max_tokens=3,
                                           temperature=0)
    status, tokenized = server.post_json("/tokenize", {"model": model_name, "prompt": prompt})
    assert status == 200 and tokenized["count"] == len(tokenized["tokens"])
    assert completion.usage.prompt_tokens == tokenized["count"]
    assert completion.usage.total_tokens == tokenized["count"] + completion.usage.completion_tokens

    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi!"}]
    chat = client.chat.completions.create(model=model_name, messages=messages, max_tokens=3,
                                          temperature=0)
    status, tokenized = server.post_json("/tokenize", {"model": model_name, "messages": messages})
    assert status == 200 and chat.usage.prompt_tokens == tokenized["count"]


def test_tokenize_detokenize_round_trip(server, model_name):
    text = "Héllo, wörld! 你好"
    status, tokenized = server.post_json("/tokenize", {"prompt": text, "add_special_tokens": False,
                                                       "return_token_strs": True})
    assert status == 200 and len(tokenized["token_strs"]) == tokenized["count"] > 0
    status, detok = server.post_json("/detokenize", {"tokens": tokenized["tokens"]})
    assert (status, detok["prompt"]) == (200, text)


def test_echo(client, model_name):
    prompt = "The capital of France is"
    plain = client.completions.create(model=model_name, prompt=prompt, max_tokens=4,
                                      temperature=0).choices[0].text
    echoed = client.completions.create(model=model_name, prompt=prompt, max_tokens=4,
                                       temperature=0, echo=True).choices[0].text
    assert echoed == prompt + plain


def test_unknown_fields_are_ignored(server, model_name):
    status, body = server.post_json("/v1/completions", {
        "model": model_name, "prompt": "Hi", "max_tokens": 2, "temperature": 0,
        "some_future_field": {"nested": [1, 2]}, "user": "me"})
    assert status == 200 and body["usage"]["completion_tokens"] == 2


def test_async_client_concurrent_requests_match_sync(client, server, model_name):
    prompts = ["The", "Hello", "Once upon a time", "The capital of France is"]
    expected = [client.completions.create(model=model_name, prompt=p, max_tokens=8,
                                          temperature=0).choices[0].text for p in prompts]

    async def run():
        async_client = async_client_for(server)
        async with async_client:
            tasks = [async_client.completions.create(model=model_name, prompt=p, max_tokens=8,
                                                     temperature=0) for p in prompts * 2]
            return [r.choices[0].text for r in await asyncio.gather(*tasks)]

    assert asyncio.run(run()) == expected * 2


def test_metrics_pass_promtool(server, client, model_name):
    client.completions.create(model=model_name, prompt="Hi", max_tokens=2)
    status, headers, body = server.get("/metrics")
    assert status == 200 and headers["Content-Type"].startswith("text/plain; version=0.0.4")
    text = body.decode()
    for name in ("pagoda:num_requests_running", "pagoda:num_requests_waiting",
                 "pagoda:kv_cache_usage_perc", "pagoda:time_to_first_token_seconds_bucket",
                 "pagoda:e2e_request_latency_seconds_count", "pagoda:generation_tokens_total"):
        assert name in text, name
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: scripts/setup.sh installs Debian's prometheus package"
    # promtool parses the text (exit 1 on a format error), then lints it (exit 3). Its linter
    # objects to the colon of vLLM-style "pagoda:" names, which are valid metric names; the
    # same text with "pagoda_" must pass outright, so nothing else is wrong.
    check = subprocess.run([promtool, "check", "metrics"], input=body, capture_output=True)
    complaints = [l for l in check.stderr.decode().splitlines()
                  if "metric names should not contain ':'" not in l]
    assert check.returncode in (0, 3) and not complaints, check.stderr.decode()
    renamed = body.replace(b"pagoda:", b"pagoda_")
    check = subprocess.run([promtool, "check", "metrics"], input=renamed, capture_output=True)
    assert check.returncode == 0, check.stdout.decode() + check.stderr.decode()


def test_request_log_lines(server, client, model_name):
    completion = client.completions.create(model=model_name, prompt="Hi", max_tokens=2,
                                           temperature=0)
    # One line per finished request, with its id, status and token counts.
    for _ in range(50):
        if completion.id in server.log():
            break
        time.sleep(0.05)
    line = next(l for l in server.log().splitlines() if completion.id in l)
    assert "POST /v1/completions 200" in line and "completion_tokens=2" in line
