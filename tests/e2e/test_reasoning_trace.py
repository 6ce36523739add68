"""Reasoning output, reasoning budgets and reasoning traces end to end: the real server on the
default model with a chat template that opens a thinking span (as DeepSeek-R1's and Qwen3's do),
`--reasoning-parser think`, and a JSONL trace file."""
import json
import time

import pytest

# SmolLM2's ChatML with the assistant turn opened inside a thinking span.
THINKING_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}")

MESSAGES = [{"role": "user", "content": "What is 12 times 7? Think step by step."}]


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("traces")


@pytest.fixture(scope="module")
def thinking_server(start_server, trace_dir):
    template = trace_dir / "thinking.jinja"
    template.write_text(THINKING_TEMPLATE)
    return start_server("--max-model-len", "512", "--chat-template", template,
                        "--reasoning-parser", "think", "--reasoning-effort-budgets", "3,6,9",
                        "--trace-file", trace_dir / "trace.jsonl", "--trace-top-n", "3")


def end_tag_tokens(server):
    status, body = server.post_json("/tokenize", {"prompt": "</think>",
                                                  "add_special_tokens": False})
    assert status == 200
    return body["count"]


def chat(server, headers=None, **fields):
    body = {"messages": MESSAGES, "temperature": 0, "max_tokens": 24, "ignore_eos": True, **fields}
    status, response = server.post_json("/v1/chat/completions", body, headers=headers)
    assert status == 200, response
    return response


def stream_chat(server, **fields):
    import urllib.request
    body = {"messages": MESSAGES, "temperature": 0, "max_tokens": 24, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True}, **fields}
    req = urllib.request.Request(server.url("/v1/chat/completions"),
                                 data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    reasoning, content, usage = "", "", None
    with urllib.request.urlopen(req, timeout=60) as resp:
        for raw in resp.read().decode().split("\n\n"):
            if not raw.startswith("data: ") or raw == "data: [DONE]":
                continue
            chunk = json.loads(raw[len("data: "):])
            if chunk.get("usage"):
                usage = chunk["usage"]
            for choice in chunk["choices"]:
                reasoning += choice["delta"].get("reasoning_content", "")
                content += choice["delta"].get("content", "") or ""
    return reasoning, content, usage


def test_budget_closes_the_span_and_the_answer_follows(thinking_server):
    response = chat(thinking_server, max_reasoning_tokens=5)
    message = response["choices"][0]["message"]
    assert message["reasoning_content"], response
    assert "</think>" not in message["reasoning_content"]
    assert "</think>" not in message["content"]
    assert message["content"].strip(), "the answer follows the forced end of the span"
    # The span's tokens: the 5 the model thought plus the forced end tag's.
    details = response["usage"]["completion_tokens_details"]
    assert details["reasoning_tokens"] == 5 + end_tag_tokens(thinking_server)
    assert response["usage"]["completion_tokens"] == 24


def test_streamed_reasoning_equals_the_whole_response(thinking_server):
    whole = chat(thinking_server, max_reasoning_tokens=5)["choices"][0]["message"]
    reasoning, content, usage = stream_chat(thinking_server, max_reasoning_tokens=5)
    assert reasoning == whole["reasoning_content"]
    assert content == whole["content"]
    assert usage["completion_tokens_details"]["reasoning_tokens"] == \
        5 + end_tag_tokens(thinking_server)


def test_reasoning_effort_maps_to_the_configured_budgets(thinking_server):
    tag = end_tag_tokens(thinking_server)
    for effort, budget in [("low", 3), ("medium", 6), ("high", 9)]:
        usage = chat(thinking_server, reasoning_effort=effort)["usage"]
        assert usage["completion_tokens_details"]["reasoning_tokens"] == budget + tag, effort


def test_split_matches_the_raw_completion_of_the_same_prompt(thinking_server):
    # The oracle: the same prompt ids through /v1/completions, which keeps the raw text.
    status, tokenized = thinking_server.post_json(
        "/tokenize", {"messages": MESSAGES, "add_generation_prompt": True})
    assert status == 200
    status, raw = thinking_server.post_json(
        "/v1/completions", {"prompt": tokenized["tokens"], "temperature": 0, "max_tokens": 24,
                            "ignore_eos": True})
    assert status == 200
    raw_text = raw["choices"][0]["text"]
    response = chat(thinking_server)
    message = response["choices"][0]["message"]
    reasoning, _, content = raw_text.partition("</think>")
    assert (message["reasoning_content"] or "") == reasoning
    assert message["content"] == content
    assert raw["usage"]["completion_tokens"] == response["usage"]["completion_tokens"]
    if "</think>" not in raw_text:
        assert response["usage"]["completion_tokens_details"]["reasoning_tokens"] == 24


def test_models_that_do_not_think_refuse_budgets(server):
    status, body = server.post_json("/v1/chat/completions",
                                    {"messages": MESSAGES, "max_reasoning_tokens": 4})
    assert status == 400
    assert body["error"]["param"] == "max_reasoning_tokens"


def read_events(path, request_id, want_finished=True, timeout=5.0):
    """The trace events of `request_id`, once its `finished` event is on disk."""
    deadline = time.monotonic() + timeout
    while True:
        events = []
        for line in path.read_text().splitlines():
            event = json.loads(line)  # every line is one JSON object
            if event["request_id"] == request_id:
                events.append(event)
        if not want_finished or (events and events[-1]["event"] == "finished"):
            return events
        if time.monotonic() > deadline:
            raise AssertionError(f"no finished event for {request_id}: {events}")
        time.sleep(0.05)


def test_header_traces_a_request_and_the_file_tells_its_life(thinking_server, trace_dir):
    response = chat(thinking_server, headers={"X-Pagoda-Trace": "1"}, max_reasoning_tokens=4)
    events = read_events(trace_dir / "trace.jsonl", response["id"])
    kinds = [e["event"] for e in events]
    assert kinds[:3] == ["admitted", "reasoning_start", "scheduled"], kinds
    assert kinds[-1] == "finished"
    tokens = [e for e in events if e["event"] == "token"]
    assert len(tokens) == response["usage"]["completion_tokens"]
    assert [t["index"] for t in tokens] == list(range(len(tokens)))
    for t in tokens:
        assert len(t["top"]) == 3 and t["logprob"] <= 0 and t["batch_size"] >= 1
    end = next(e for e in events if e["event"] == "reasoning_end")
    assert end["forced"] is True
    assert end["num_reasoning_tokens"] == 4 + end_tag_tokens(thinking_server)
    finished = events[-1]
    assert finished["finish_reason"] == "length"
    assert finished["num_output_tokens"] == 24
    assert finished["time_to_first_token"] > 0
    # No prompt text and no headers in the trace: only ids, counts and output tokens.
    text = (trace_dir / "trace.jsonl").read_text()
    assert "12 times 7" not in text


def test_untraced_requests_leave_no_events(thinking_server, trace_dir):
    response = chat(thinking_server, max_tokens=4)
    time.sleep(0.2)  # past the writer's interval
    assert read_events(trace_dir / "trace.jsonl", response["id"], want_finished=False) == []


def test_body_field_traces_too_and_metrics_count_events(thinking_server, trace_dir):
    response = chat(thinking_server, trace=True, max_tokens=4)
    assert read_events(trace_dir / "trace.jsonl", response["id"])
    assert thinking_server.metric("pagoda:trace_events_written_total") > 0
    assert thinking_server.metric("pagoda:trace_events_dropped_total") == 0
    assert thinking_server.metric("pagoda:trace_engine_seconds_total") > 0
