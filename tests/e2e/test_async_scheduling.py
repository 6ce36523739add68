"""Overlapped steps end to end: `pagoda serve --async-scheduling` on the default model answers
concurrent greedy and seeded requests exactly as the server without it does (text, finish
reason, token counts, stop strings and max_tokens included), and leaves no KV block in use."""
import concurrent.futures

import pytest

PROMPTS = [
    "Write one sentence about the sea.",
    "List three colours.",
    "What is the capital of Italy? Answer in a full sentence.",
    "Count from one to ten in words.",
    "Describe a cat in two sentences.",
    "Name a famous painter and one of their paintings.",
]


@pytest.fixture(scope="module")
def async_server(start_server):
    return start_server("--max-model-len", "1024", "--served-model-name", "smollm2",
                        "--step-time-target-ms", "0",
                        "--async-scheduling")


def complete(server, prompt, **fields):
    body = {"model": "smollm2", "max_tokens": 40, "temperature": 0,
            "messages": [{"role": "user", "content": prompt}], **fields}
    status, response = server.post_json("/v1/chat/completions", body)
    assert status == 200, response
    choice = response["choices"][0]
    usage = {k: response["usage"][k] for k in ("prompt_tokens", "completion_tokens")}
    return choice["message"]["content"], choice["finish_reason"], usage


def all_at_once(server, requests):
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(requests)) as pool:
        return list(pool.map(lambda r: complete(server, r[0], **r[1]), requests))


def test_answers_match_the_synchronous_server(server, async_server):
    # One request at a time: a lone request still overlaps its steps (each decode step is
    # launched with its input token in flight), and its batch has one row on both servers, so the
    # CPU's kernels round the same way and the answers must be identical.
    requests = [(p, {}) for p in PROMPTS]
    requests += [(p, {"temperature": 0.8, "seed": 7 + i}) for i, p in enumerate(PROMPTS[:3])]
    requests += [(PROMPTS[0], {"max_tokens": 5}), (PROMPTS[3], {"stop": [" five"]})]
    want = [complete(server, p, **f) for p, f in requests]
    got = [complete(async_server, p, **f) for p, f in requests]
    assert got == want
    # The requests that must end early did.
    assert want[-2][1] == "length" and want[-2][2]["completion_tokens"] == 5
    assert " five" not in want[-1][0]


def test_concurrent_requests_finish_whole_and_free_their_blocks(async_server):
    # Many at once (the batch composition, hence the last bits of the CPU's sums, differs from
    # the synchronous server's, so only the shape of each answer is compared).
    requests = [(p, {"max_tokens": 24, "ignore_eos": True}) for p in PROMPTS * 3]
    answers = all_at_once(async_server, requests)
    for text, finish, usage in answers:
        assert finish == "length" and usage["completion_tokens"] == 24 and text
    assert async_server.metric("pagoda:kv_cache_usage_perc") == 0
    assert async_server.metric("pagoda:num_requests_running") == 0
