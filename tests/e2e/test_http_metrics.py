"""/metrics counts every request that ends, however it ends: 30 streams whose clients vanish
mid-stream and 10 long prompts whose clients leave before the first token all appear, exactly,
under finished_reason="abort", in the latency and token histograms, and in the prompt and
generation token counters."""
import asyncio
import json
import time

M = "smollm2"
NUM_MID_STREAM = 30
NUM_PREFILLS = 10
SHORT_PROMPT_TOKENS = 12
LONG_PROMPT_TOKENS = 800


def metric(samples, name, **labels):
    """The sum of `name`'s samples whose labels include `labels`."""
    return sum(v for (n, l), v in samples.items() if n == name and set(labels.items()) <= l)


async def stream_and_leave(port, prompt_ids, events_before_leaving):
    """Streams a completion of token ids, reads until `events_before_leaving` data events have
    come (0: only the response header), then resets the connection. Returns the events read."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    body = json.dumps({"model": M, "prompt": prompt_ids, "max_tokens": 200, "ignore_eos": True,
                       "temperature": 0, "stream": True}).encode()
    writer.write(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    await writer.drain()
    received = b""
    while b"\r\n\r\n" not in received or received.count(b"data: ") < events_before_leaving:
        chunk = await asyncio.wait_for(reader.read(65536), 60)
        assert chunk, "the server closed the stream"
        received += chunk
    assert received.startswith(b"HTTP/1.1 200"), received[:200]
    writer.transport.abort()  # a reset, as when a client process dies
    return received.count(b"data: ")


def wait_for(server, condition, what, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        samples = server.samples()
        if condition(samples):
            return samples
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_vanished_clients_are_counted_exactly(start_server):
    # A small token budget per step keeps each 800-token prefill several steps long, so its
    # client is gone (and the request aborted) long before a first token could exist.
    server = start_server("--served-model-name", M, "--max-model-len", "1024",
                          "--max-num-batched-tokens", "128")
    before = server.samples()

    def delta(samples, name, **labels):
        return metric(samples, name, **labels) - metric(before, name, **labels)

    # Distinct prompts, so no request finds another's blocks in the prefix cache.
    short = [[1000 + 50 * i + j for j in range(SHORT_PROMPT_TOKENS)] for i in range(NUM_MID_STREAM)]
    long = [[3000 + 1000 * i + j for j in range(LONG_PROMPT_TOKENS)] for i in range(NUM_PREFILLS)]

    async def mid_stream():
        return await asyncio.gather(*(stream_and_leave(server.port, ids, 3) for ids in short))

    async def during_prefill():
        return await asyncio.gather(*(stream_and_leave(server.port, ids, 0) for ids in long))

    assert all(n >= 3 for n in asyncio.run(mid_stream()))
    assert asyncio.run(during_prefill()) == [0] * NUM_PREFILLS, "a first token came too soon"

    total = NUM_MID_STREAM + NUM_PREFILLS
    after = wait_for(server, lambda s: delta(s, "pagoda:request_success_total") >= total and
                     metric(s, "pagoda:num_requests_running") == 0 and
                     metric(s, "pagoda:num_requests_waiting") == 0,
                     "every request to be counted")
    time.sleep(0.5)  # anything counted twice would show up by now
    assert server.samples() == after

    assert delta(after, "pagoda:request_success_total", finished_reason="abort") == total
    assert delta(after, "pagoda:request_success_total") == total
    for histogram in ("e2e_request_latency_seconds", "request_prompt_tokens",
                      "request_generation_tokens"):
        assert delta(after, f"pagoda:{histogram}_count") == total, histogram
    # Only the streams that got tokens have a time to first token and a decode time.
    assert delta(after, "pagoda:time_to_first_token_seconds_count") == NUM_MID_STREAM
    assert delta(after, "pagoda:request_decode_time_seconds_count") == NUM_MID_STREAM

    prompt_tokens = NUM_MID_STREAM * SHORT_PROMPT_TOKENS + NUM_PREFILLS * LONG_PROMPT_TOKENS
    assert delta(after, "pagoda:prompt_tokens_total") == prompt_tokens
    assert delta(after, "pagoda:request_prompt_tokens_sum") == prompt_tokens
    # The engine's count of generated tokens and the requests' own agree; each stream read at
    # least 3 events (one token each) before it left.
    generated = delta(after, "pagoda:generation_tokens_total")
    assert delta(after, "pagoda:request_generation_tokens_sum") == generated
    assert generated >= 3 * NUM_MID_STREAM
    # The abandoned prefills generated nothing: their generation-token observations sit in the
    # lowest bucket (le="1") together with none of the streams (which all had >= 3 tokens).
    assert delta(after, "pagoda:request_generation_tokens_bucket", le="1") == NUM_PREFILLS
