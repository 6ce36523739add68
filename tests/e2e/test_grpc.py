"""The gRPC API end to end: a grpcio client whose stubs are generated from proto/ at test time,
against the real `pagoda serve` on the default model (the same server as the HTTP tests)."""
import asyncio
import importlib
import importlib.resources
import json
import signal
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import grpc
import pytest

ROOT = Path(__file__).resolve().parents[2]
PROTO_ROOT = ROOT / "proto"
PROMPT = "The capital of France is"
SERVICE = "pagoda.v1.InferenceService"


@pytest.fixture(scope="session")
def pb(tmp_path_factory):
    """Python modules generated from proto/pagoda/v1/*.proto by grpcio-tools, as a user would."""
    from grpc_tools import protoc
    out = tmp_path_factory.mktemp("grpc_stubs")
    well_known = importlib.resources.files("grpc_tools") / "_proto"
    protos = sorted(str(p.relative_to(PROTO_ROOT)) for p in (PROTO_ROOT / "pagoda/v1").glob("*.proto"))
    rc = protoc.main(["grpc_tools.protoc", f"-I{PROTO_ROOT}", f"-I{well_known}",
                      f"--python_out={out}", f"--grpc_python_out={out}", *protos])
    assert rc == 0, "protoc failed on proto/pagoda/v1"
    sys.path.insert(0, str(out))
    try:
        return SimpleNamespace(
            chat=importlib.import_module("pagoda.v1.chat_pb2"),
            gen=importlib.import_module("pagoda.v1.generate_pb2"),
            tok=importlib.import_module("pagoda.v1.tokenize_pb2"),
            info=importlib.import_module("pagoda.v1.model_info_pb2"),
            svc=importlib.import_module("pagoda.v1.inference_service_pb2"),
            svc_grpc=importlib.import_module("pagoda.v1.inference_service_pb2_grpc"))
    finally:
        sys.path.remove(str(out))


def open_stub(pb, target):
    channel = grpc.insecure_channel(target)
    grpc.channel_ready_future(channel).result(timeout=30)
    return channel, pb.svc_grpc.InferenceServiceStub(channel)


@pytest.fixture(scope="session")
def stub(pb, server):
    channel, stub = open_stub(pb, server.grpc_target)
    yield stub
    channel.close()


def text_request(pb, text=PROMPT, max_tokens=8, temperature=0.0, **fields):
    return pb.gen.GenerateRequest(text=text, sampling=pb.gen.SamplingParams(temperature=temperature),
                                  stopping=pb.gen.StoppingCriteria(max_tokens=max_tokens), **fields)


def chat_request(pb, content, max_tokens=8, **fields):
    chat = pb.chat.ChatInput(messages=[pb.chat.ChatMessage(role="user", content=content)])
    return pb.gen.GenerateRequest(chat=chat, sampling=pb.gen.SamplingParams(temperature=0.0),
                                  stopping=pb.gen.StoppingCriteria(max_tokens=max_tokens), **fields)


def ids_and_text(messages):
    messages = list(messages)
    return [i for m in messages for i in m.token_ids], "".join(m.text for m in messages)


def rpc_error(call):
    with pytest.raises(grpc.RpcError) as info:
        result = call()
        if not isinstance(result, (bytes, str)) and hasattr(result, "__iter__"):
            list(result)
    return info.value


def wait_idle(stub, pb, timeout=10.0):
    """Polls GetLoad until nothing runs or waits and no KV block is in use; returns the load."""
    deadline = time.monotonic() + timeout
    while True:
        load = stub.GetLoad(pb.info.GetLoadRequest())
        if load.num_running_requests == 0 and load.num_waiting_requests == 0 and load.kv_cache_usage == 0:
            return load
        assert time.monotonic() < deadline, f"the engine is not idle: {load}"
        time.sleep(0.02)


# ---- streaming and unary calls ------------------------------------------------------------------

def test_generate_streams_deltas_then_usage_and_timings(stub, pb):
    messages = list(stub.Generate(text_request(pb, request_id="stream-1")))
    assert len(messages) >= 2, "a streamed generation arrives in several messages"
    assert all(m.request_id == "stream-1" and m.index == 0 for m in messages)
    *deltas, last = messages
    assert all(m.finish_reason == pb.gen.FINISH_REASON_UNSPECIFIED for m in deltas)
    assert not any(m.HasField("usage") for m in deltas)
    assert last.finish_reason in (pb.gen.FINISH_REASON_LENGTH, pb.gen.FINISH_REASON_STOP)
    ids, text = ids_and_text(messages)
    assert last.usage.completion_tokens == len(ids) <= 8
    prompt_ids = stub.Tokenize(pb.tok.TokenizeRequest(text=PROMPT)).token_ids
    assert last.usage.prompt_tokens == len(prompt_ids)
    t = last.timings
    assert 0 <= t.queue_seconds <= t.time_to_first_token_seconds <= t.end_to_end_seconds < 60
    assert stub.Detokenize(pb.tok.DetokenizeRequest(token_ids=ids)).text == text


def test_token_id_input_generates_like_the_same_text(stub, pb):
    prompt_ids = list(stub.Tokenize(pb.tok.TokenizeRequest(text=PROMPT)).token_ids)
    from_text = ids_and_text(stub.Generate(text_request(pb)))
    from_ids = ids_and_text(stub.Generate(pb.gen.GenerateRequest(
        token_ids=pb.gen.TokenIds(ids=prompt_ids), sampling=pb.gen.SamplingParams(temperature=0.0),
        stopping=pb.gen.StoppingCriteria(max_tokens=8))))
    assert from_ids == from_text


def test_same_greedy_request_over_http_and_grpc_is_identical(stub, pb, server, model_name):
    """Chat through the shared validator on both transports: same text, and the same token at
    every position (its exact vocabulary bytes, which name one id in a byte-level BPE)."""
    content = "Name three colors."
    status, body = server.post_json("/v1/chat/completions", {
        "model": model_name, "messages": [{"role": "user", "content": content}],
        "max_tokens": 12, "temperature": 0, "logprobs": True, "top_logprobs": 0})
    assert status == 200, body
    http_text = body["choices"][0]["message"]["content"]
    http_tokens = body["choices"][0]["logprobs"]["content"]

    messages = list(stub.Generate(chat_request(pb, content, max_tokens=12, logprobs=0)))
    ids, text = ids_and_text(messages)
    logprobs = [lp for m in messages for lp in m.logprobs]
    assert text == http_text
    assert len(ids) == body["usage"]["completion_tokens"] == messages[-1].usage.completion_tokens
    assert [lp.token_id for lp in logprobs] == ids
    # HTTP lists the tokens whose text is part of the content (the EOS that stops is not).
    assert [bytes(t["bytes"]) for t in http_tokens] == [lp.token_bytes for lp in logprobs][:len(http_tokens)]
    assert len(http_tokens) >= len(ids) - 1
    for h, g in zip(http_tokens, logprobs):
        assert h["logprob"] == pytest.approx(g.logprob, abs=1e-4)


def test_logprobs_and_top_logprobs(stub, pb):
    messages = list(stub.Generate(text_request(pb, max_tokens=6, logprobs=3)))
    for m in messages:
        assert len(m.logprobs) == len(m.token_ids)
        for token_id, lp in zip(m.token_ids, m.logprobs):
            assert lp.token_id == token_id and lp.logprob <= 0
            assert len(lp.top_logprobs) == 3
            tops = [t.logprob for t in lp.top_logprobs]
            assert tops == sorted(tops, reverse=True)
            # Greedy: the sampled token is the most likely one.
            assert lp.top_logprobs[0].token_id == token_id
    assert not any(m.logprobs for m in stub.Generate(text_request(pb, max_tokens=3)))


def test_prompt_logprobs(stub, pb, server, model_name):
    ids = [504, 3458, 314, 4649, 314, 253, 2103, 28, 1458, 29]  # token-id input
    messages = list(stub.Generate(pb.gen.GenerateRequest(
        token_ids=pb.gen.TokenIds(ids=ids), sampling=pb.gen.SamplingParams(temperature=0.0),
        stopping=pb.gen.StoppingCriteria(max_tokens=2), prompt_logprobs=2)))
    first = messages[0].prompt_logprobs
    assert [lp.token_id for lp in first] == ids[1:]
    assert all(len(lp.top_logprobs) == 2 for lp in first)
    assert not any(m.prompt_logprobs for m in messages[1:])
    # The same numbers as HTTP's echo with logprobs.
    status, out = server.post_json("/v1/completions", {
        "model": model_name, "prompt": ids, "max_tokens": 1, "echo": True, "logprobs": 0,
        "temperature": 0})
    assert status == 200
    http = out["choices"][0]["logprobs"]["token_logprobs"][1:len(ids)]
    assert [lp.logprob for lp in first] == pytest.approx(http, abs=1e-5)
    with pytest.raises(grpc.RpcError) as e:
        list(stub.Generate(pb.gen.GenerateRequest(
            chat=pb.chat.ChatInput(messages=[pb.chat.ChatMessage(role="user", content="Hi")]),
            prompt_logprobs=1)))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_stop_string_ends_the_stream(stub, pb):
    _, free_text = ids_and_text(stub.Generate(text_request(pb, max_tokens=12)))
    words = free_text.split()
    assert len(words) >= 3, free_text
    stop = words[2]
    messages = list(stub.Generate(pb.gen.GenerateRequest(
        text=PROMPT, sampling=pb.gen.SamplingParams(temperature=0.0),
        stopping=pb.gen.StoppingCriteria(max_tokens=12, stop=[stop]))))
    _, text = ids_and_text(messages)
    assert messages[-1].finish_reason == pb.gen.FINISH_REASON_STOP
    assert messages[-1].stop_string == stop
    assert stop not in text and free_text.startswith(text)


def test_n_samples_each_end_with_their_own_final_message(stub, pb):
    request = pb.gen.GenerateRequest(text=PROMPT, sampling=pb.gen.SamplingParams(temperature=1.0, seed=7, n=2),
                                     stopping=pb.gen.StoppingCriteria(max_tokens=5, ignore_eos=True))
    messages = list(stub.Generate(request))
    for index in (0, 1):
        mine = [m for m in messages if m.index == index]
        assert mine and mine[-1].finish_reason == pb.gen.FINISH_REASON_LENGTH
        assert sum(len(m.token_ids) for m in mine) == 5 == mine[-1].usage.completion_tokens
    # Seeded: the same request draws the same tokens again.
    again = list(stub.Generate(request))
    for index in (0, 1):
        assert ids_and_text([m for m in again if m.index == index]) == \
            ids_and_text([m for m in messages if m.index == index])


def test_tokenize_and_detokenize_match_http(stub, pb, server):
    response = stub.Tokenize(pb.tok.TokenizeRequest(text="Hello, gRPC world!", return_token_strs=True))
    status, body = server.post_json("/tokenize", {"prompt": "Hello, gRPC world!", "return_token_strs": True})
    assert status == 200
    assert list(response.token_ids) == body["tokens"]
    assert list(response.token_strs) == body["token_strs"]
    assert response.max_model_len == body["max_model_len"]
    text = stub.Detokenize(pb.tok.DetokenizeRequest(token_ids=response.token_ids)).text
    assert text == "Hello, gRPC world!"
    chat = pb.chat.ChatInput(messages=[pb.chat.ChatMessage(role="user", content="Hi")])
    status, body = server.post_json("/tokenize", {"messages": [{"role": "user", "content": "Hi"}]})
    assert list(stub.Tokenize(pb.tok.TokenizeRequest(chat=chat)).token_ids) == body["tokens"]


def test_model_info(stub, pb, model_name):
    info = stub.GetModelInfo(pb.info.GetModelInfoRequest())
    assert info.name == model_name
    assert list(info.served_names) == ["smollm2", "SmolLM2-135M-Instruct"]
    assert info.architecture == "llama"
    assert info.max_model_len == 1024  # the shared server's --max-model-len
    assert info.vocab_size == 49152
    assert info.has_chat_template
    assert info.root.endswith("SmolLM2-135M-Instruct.Q4_1.gguf")


# ---- cancellation, deadlines, abort -------------------------------------------------------------

def long_request(pb, request_id=None, max_tokens=400):
    return pb.gen.GenerateRequest(request_id=request_id or "", text=PROMPT,
                                  sampling=pb.gen.SamplingParams(temperature=0.0),
                                  stopping=pb.gen.StoppingCriteria(max_tokens=max_tokens, ignore_eos=True))


def test_cancel_mid_stream_frees_the_kv_blocks(stub, pb):
    wait_idle(stub, pb)
    call = stub.Generate(long_request(pb))
    first = next(call)
    assert first.token_ids
    try:
        # The engine publishes its gauges after the step that produced the first token.
        deadline = time.monotonic() + 5
        while True:
            busy = stub.GetLoad(pb.info.GetLoadRequest())
            if busy.num_running_requests == 1 and busy.kv_cache_usage > 0:
                break
            assert time.monotonic() < deadline, f"the request never showed as running: {busy}"
            time.sleep(0.005)
    finally:
        call.cancel()
    error = rpc_error(lambda: call)
    assert error.code() == grpc.StatusCode.CANCELLED
    cancelled_at = time.monotonic()
    wait_idle(stub, pb, timeout=5)
    # Freed within a step or so (a decode step of the 135M model takes milliseconds), not after
    # the 400 tokens the request asked for.
    assert time.monotonic() - cancelled_at < 2


def test_deadline_expires_and_frees_the_kv_blocks(stub, pb):
    wait_idle(stub, pb)
    started = time.monotonic()
    error = rpc_error(lambda: stub.Generate(long_request(pb), timeout=0.5))
    assert error.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert time.monotonic() - started < 5
    wait_idle(stub, pb, timeout=5)


def test_abort_by_request_id(stub, pb):
    call = stub.Generate(long_request(pb, request_id="abort-me"))
    assert next(call).request_id == "abort-me"
    # A second call may not reuse a live id.
    error = rpc_error(lambda: stub.Generate(long_request(pb, request_id="abort-me", max_tokens=2)))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and "already in flight" in error.details()
    stub.Abort(pb.svc.AbortRequest(request_id="abort-me"))
    rest = list(call)
    assert rest[-1].finish_reason == pb.gen.FINISH_REASON_ABORT
    wait_idle(stub, pb, timeout=5)
    # The id leaves the registry when the call's end reaches the server (gRPC's OnDone), a moment
    # after the client has read the final status: poll briefly rather than race it.
    deadline = time.monotonic() + 5
    while True:
        try:
            stub.Abort(pb.svc.AbortRequest(request_id="abort-me"))
        except grpc.RpcError as error:
            assert error.code() == grpc.StatusCode.NOT_FOUND
            break
        assert time.monotonic() < deadline, "the id stayed in flight after its call ended"
        time.sleep(0.01)


# ---- bad input ----------------------------------------------------------------------------------

@pytest.mark.parametrize("request_fields, http_body, param", [
    ({"sampling": {"temperature": 5.0}}, {"temperature": 5}, "temperature"),
    ({"sampling": {"top_p": 0.0}}, {"top_p": 0}, "top_p"),
    ({"stopping": {"max_tokens": 5000}}, {"max_tokens": 5000}, "max_tokens"),
    ({"logprobs": 21}, {"logprobs": 21}, "logprobs"),
    ({"sampling": {"logit_bias": {-4: 1.0}}}, {"logit_bias": {"-4": 1.0}}, "logit_bias"),
    ({"stopping": {"stop_token_ids": [49152]}}, {"stop_token_ids": [49152]}, "stop_token_ids"),
])
def test_invalid_argument_with_the_http_message(stub, pb, server, model_name, request_fields, http_body, param):
    from google.protobuf import json_format
    request = pb.gen.GenerateRequest(text=PROMPT)
    json_format.ParseDict(request_fields, request)
    error = rpc_error(lambda: stub.Generate(request))
    status, body = server.post_json("/v1/completions", {"model": model_name, "prompt": PROMPT, **http_body})
    assert status == 400
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details() == body["error"]["message"]
    assert body["error"]["param"] == param


def test_other_invalid_inputs(stub, pb):
    cases = [
        pb.gen.GenerateRequest(),  # no input
        pb.gen.GenerateRequest(token_ids=pb.gen.TokenIds(ids=[1, 49152])),
        pb.gen.GenerateRequest(token_ids=pb.gen.TokenIds(ids=[])),
        pb.gen.GenerateRequest(text=""),
        pb.gen.GenerateRequest(text=PROMPT, request_id="x" * 129),
        pb.gen.GenerateRequest(chat=pb.chat.ChatInput()),
        pb.gen.GenerateRequest(chat=pb.chat.ChatInput(messages=[pb.chat.ChatMessage(role="robot", content="hi")])),
    ]
    for request in cases:
        error = rpc_error(lambda: stub.Generate(request))
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, request
        assert error.details()
    error = rpc_error(lambda: stub.Detokenize(pb.tok.DetokenizeRequest(token_ids=[-1])))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    error = rpc_error(lambda: stub.Tokenize(pb.tok.TokenizeRequest()))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT


def metric(samples, name, **labels):
    """The sum of `name`'s samples whose labels include `labels`."""
    return sum(v for (n, l), v in samples.items() if n == name and set(labels.items()) <= l)


def test_requests_count_in_the_http_metrics(stub, pb, server):
    """A gRPC Generate lands in /metrics as an HTTP request does: its latencies in the
    histograms, its finish reason, its tokens; a refused one under its HTTP status."""
    wait_idle(stub, pb)
    before = server.samples()
    *_, last = stub.Generate(text_request(pb, max_tokens=4))
    error = rpc_error(lambda: stub.Generate(text_request(pb, text=PROMPT, request_id="x" * 129)))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    wait_idle(stub, pb)
    after = server.samples()

    def delta(name, **labels):
        return metric(after, name, **labels) - metric(before, name, **labels)

    for histogram in ("e2e_request_latency_seconds", "time_to_first_token_seconds",
                      "request_queue_time_seconds", "request_generation_tokens"):
        assert delta(f"pagoda:{histogram}_count") == 1, histogram
    reason = "length" if last.finish_reason == pb.gen.FINISH_REASON_LENGTH else "stop"
    assert delta("pagoda:request_success_total", finished_reason=reason) == 1
    assert delta("pagoda:request_success_total") == 1
    assert delta("pagoda:generation_tokens_total") == last.usage.completion_tokens
    assert delta("pagoda:prompt_tokens_total") == last.usage.prompt_tokens
    assert delta("pagoda:request_rejected_total", status_code="400") == 1


def test_cancelled_calls_count_as_aborts(stub, pb, server):
    """Calls cancelled mid-stream are counted once each, under finished_reason="abort", with
    their prompt and generated tokens, as HTTP clients that disconnect are."""
    wait_idle(stub, pb)
    before = server.samples()
    prompts = [[2000 + 40 * i + j for j in range(16)] for i in range(5)]
    for ids in prompts:
        call = stub.Generate(pb.gen.GenerateRequest(
            token_ids=pb.gen.TokenIds(ids=ids), sampling=pb.gen.SamplingParams(temperature=0.0),
            stopping=pb.gen.StoppingCriteria(max_tokens=400, ignore_eos=True)))
        assert next(call).token_ids
        call.cancel()
    wait_idle(stub, pb)

    def delta(samples, name, **labels):
        return metric(samples, name, **labels) - metric(before, name, **labels)

    deadline = time.monotonic() + 10
    while delta(after := server.samples(), "pagoda:request_success_total") < len(prompts):
        assert time.monotonic() < deadline, "the cancelled calls were not all counted"
        time.sleep(0.05)
    assert delta(after, "pagoda:request_success_total", finished_reason="abort") == len(prompts)
    assert delta(after, "pagoda:request_success_total") == len(prompts)
    assert delta(after, "pagoda:e2e_request_latency_seconds_count") == len(prompts)
    assert delta(after, "pagoda:prompt_tokens_total") == 16 * len(prompts)
    generated = delta(after, "pagoda:generation_tokens_total")
    assert generated >= len(prompts)
    assert delta(after, "pagoda:request_generation_tokens_sum") == generated


def test_unknown_model_is_not_found(stub, pb):
    error = rpc_error(lambda: stub.Generate(text_request(pb, model="no-such-model")))
    assert error.code() == grpc.StatusCode.NOT_FOUND and "no-such-model" in error.details()
    error = rpc_error(lambda: stub.Tokenize(pb.tok.TokenizeRequest(text="a", model="no-such-model")))
    assert error.code() == grpc.StatusCode.NOT_FOUND


def test_api_key_queue_limit_and_drain(start_server, pb):
    """A server with an API key and room for one request: UNAUTHENTICATED, RESOURCE_EXHAUSTED,
    then UNAVAILABLE (and health NOT_SERVING) while it drains on SIGTERM."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    server = start_server("--max-model-len", "512", "--api-key", "sesame",
                          "--max-num-seqs", "1", "--max-waiting-requests", "0")
    channel, stub = open_stub(pb, server.grpc_target)
    health = health_pb2_grpc.HealthStub(channel)
    good = [("authorization", "Bearer sesame")]
    try:
        for metadata in (None, [("authorization", "Bearer wrong")], [("authorization", "sesame")]):
            error = rpc_error(lambda: stub.GetModelInfo(pb.info.GetModelInfoRequest(), metadata=metadata))
            assert error.code() == grpc.StatusCode.UNAUTHENTICATED
            error = rpc_error(lambda: stub.Generate(text_request(pb), metadata=metadata))
            assert error.code() == grpc.StatusCode.UNAUTHENTICATED
        assert stub.GetModelInfo(pb.info.GetModelInfoRequest(), metadata=good).name
        # Health stays open, as /health does.
        assert health.Check(health_pb2.HealthCheckRequest(service=SERVICE)).status == \
            health_pb2.HealthCheckResponse.SERVING

        # n = 2 needs two places; the server has one.
        request = pb.gen.GenerateRequest(text=PROMPT, sampling=pb.gen.SamplingParams(n=2),
                                         stopping=pb.gen.StoppingCriteria(max_tokens=2))
        error = rpc_error(lambda: stub.Generate(request, metadata=good))
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "queue is full" in error.details()

        # A stream in flight when SIGTERM comes finishes; new calls are refused meanwhile.
        call = stub.Generate(long_request(pb, max_tokens=96), metadata=good)
        first = next(call)
        server.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        while health.Check(health_pb2.HealthCheckRequest()).status == health_pb2.HealthCheckResponse.SERVING:
            assert time.monotonic() < deadline, "health never said NOT_SERVING"
            time.sleep(0.01)
        error = rpc_error(lambda: stub.Generate(text_request(pb), metadata=good))
        assert error.code() == grpc.StatusCode.UNAVAILABLE and "shutting down" in error.details()
        rest = list(call)
        assert rest[-1].finish_reason == pb.gen.FINISH_REASON_LENGTH
        assert len(first.token_ids) + sum(len(m.token_ids) for m in rest) == 96
        assert server.stop() == 0
    finally:
        channel.close()


# ---- many streams at once -----------------------------------------------------------------------

def test_64_concurrent_streams(server, pb, stub):
    async def one(aio_stub, i):
        request = pb.gen.GenerateRequest(
            request_id=f"many-{i}", text=f"{PROMPT} {i}", sampling=pb.gen.SamplingParams(temperature=0.0),
            stopping=pb.gen.StoppingCriteria(max_tokens=8, ignore_eos=True))
        return [m async for m in aio_stub.Generate(request)]

    async def run_all():
        async with grpc.aio.insecure_channel(server.grpc_target) as channel:
            aio_stub = pb.svc_grpc.InferenceServiceStub(channel)
            return await asyncio.gather(*(one(aio_stub, i) for i in range(64)))

    def num_threads():
        return len(list(Path(f"/proc/{server.proc.pid}/task").iterdir()))

    idle_threads = num_threads()
    peak_threads = idle_threads
    sampling = True

    def sample():
        nonlocal peak_threads
        while sampling:
            peak_threads = max(peak_threads, num_threads())
            time.sleep(0.005)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        results = asyncio.run(run_all())
    finally:
        sampling = False
        sampler.join()
    print(f"server threads: {idle_threads} idle, {peak_threads} at most with 64 streams")
    assert len(results) == 64
    for i, messages in enumerate(results):
        assert {m.request_id for m in messages} == {f"many-{i}"}
        assert messages[-1].finish_reason == pb.gen.FINISH_REASON_LENGTH
        assert sum(len(m.token_ids) for m in messages) == 8 == messages[-1].usage.completion_tokens
    # No thread per stream: gRPC's pollers and callback pool do not grow with the streams.
    assert peak_threads - idle_threads < 16
    wait_idle(stub, pb)


# ---- health and reflection ----------------------------------------------------------------------

def test_health_and_reflection(server, stub, pb):
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    from grpc_reflection.v1alpha.proto_reflection_descriptor_database import \
        ProtoReflectionDescriptorDatabase
    with grpc.insecure_channel(server.grpc_target) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for service in ("", SERVICE):
            response = health.Check(health_pb2.HealthCheckRequest(service=service))
            assert response.status == health_pb2.HealthCheckResponse.SERVING
        error = rpc_error(lambda: health.Check(health_pb2.HealthCheckRequest(service="no.Such")))
        assert error.code() == grpc.StatusCode.NOT_FOUND

        database = ProtoReflectionDescriptorDatabase(channel)
        services = set(database.get_services())
        assert {SERVICE, "grpc.health.v1.Health"} <= services
        # The descriptors come with it, so generic clients (grpcurl) can build requests.
        from google.protobuf.descriptor_pool import DescriptorPool
        pool = DescriptorPool(database)
        methods = {m.name for m in pool.FindServiceByName(SERVICE).methods}
        assert methods == {"Generate", "Tokenize", "Detokenize", "GetModelInfo", "GetLoad", "Abort"}


class ReflectionDatabase:
    """A descriptor database fed by one server reflection service, as grpcurl keeps one. The
    messages are grpcio-reflection's v1alpha classes for either version: v1 and v1alpha carry
    the same messages (same fields and numbers) under different package names, so this also
    checks the server's v1 against a definition it did not write."""

    def __init__(self, channel, service):
        from grpc_reflection.v1alpha import reflection_pb2
        self._pb = reflection_pb2
        self._call = channel.stream_stream(
            f"/{service}/ServerReflectionInfo",
            request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
            response_deserializer=reflection_pb2.ServerReflectionResponse.FromString)
        self._files = {}

    def _ask(self, **request):
        responses = list(self._call(iter([self._pb.ServerReflectionRequest(**request)]), timeout=30))
        assert len(responses) == 1
        return responses[0]

    def services(self):
        return [s.name for s in self._ask(list_services="").list_services_response.service]

    def _add_files(self, response):
        from google.protobuf.descriptor_pb2 import FileDescriptorProto
        if response.HasField("error_response"):
            raise KeyError(response.error_response.error_message)
        files = [FileDescriptorProto.FromString(raw)
                 for raw in response.file_descriptor_response.file_descriptor_proto]
        for f in files:
            self._files.setdefault(f.name, f)
        return files[0]

    # The two lookups google.protobuf's DescriptorPool makes of a database.
    def FindFileByName(self, name):
        if name not in self._files:
            self._add_files(self._ask(file_by_filename=name))
        return self._files[name]

    def FindFileContainingSymbol(self, symbol):
        return self._add_files(self._ask(file_containing_symbol=symbol))


@pytest.mark.parametrize("reflection", ["grpc.reflection.v1.ServerReflection",
                                        "grpc.reflection.v1alpha.ServerReflection"])
def test_reflection_describes_every_service(server, reflection):
    """Both reflection versions list every service, each describes with its methods, and Health
    and GetModelInfo can be called from the reflected descriptors alone."""
    from google.protobuf.descriptor_pool import DescriptorPool
    from google.protobuf.message_factory import GetMessageClass
    expected = {
        SERVICE: {"Generate", "Tokenize", "Detokenize", "GetModelInfo", "GetLoad", "Abort"},
        "grpc.health.v1.Health": {"Check", "Watch"},
        "grpc.reflection.v1.ServerReflection": {"ServerReflectionInfo"},
        "grpc.reflection.v1alpha.ServerReflection": {"ServerReflectionInfo"},
    }
    with grpc.insecure_channel(server.grpc_target) as channel:
        database = ReflectionDatabase(channel, reflection)
        services = database.services()
        assert sorted(services) == sorted(expected)
        pool = DescriptorPool(database)
        for name in services:
            described = pool.FindServiceByName(name)
            assert {m.name for m in described.methods} == expected[name], name
        with pytest.raises(KeyError):
            database.FindFileContainingSymbol("no.such.Service")

        def call(service_name, method, **fields):
            descriptor = pool.FindServiceByName(service_name).methods_by_name[method]
            request_class = GetMessageClass(descriptor.input_type)
            response_class = GetMessageClass(descriptor.output_type)
            stub = channel.unary_unary(f"/{service_name}/{method}",
                                       request_serializer=request_class.SerializeToString,
                                       response_deserializer=response_class.FromString)
            return descriptor, stub(request_class(**fields), timeout=30)

        for service in ("", SERVICE):
            descriptor, response = call("grpc.health.v1.Health", "Check", service=service)
            status = descriptor.output_type.fields_by_name["status"].enum_type
            assert status.values_by_number[response.status].name == "SERVING"
        _, info = call(SERVICE, "GetModelInfo")
        assert info.name and info.max_model_len == 1024


# Reasoning and traces over gRPC: the same server setup as tests/e2e/test_reasoning_trace.py.
THINKING_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}")


@pytest.fixture(scope="module")
def thinking(start_server, tmp_path_factory):
    folder = tmp_path_factory.mktemp("grpc_thinking")
    (folder / "t.jinja").write_text(THINKING_TEMPLATE)
    server = start_server("--max-model-len", "512", "--chat-template", folder / "t.jinja",
                          "--reasoning-parser", "think", "--trace-file", folder / "trace.jsonl")
    return SimpleNamespace(server=server, trace=folder / "trace.jsonl")


def thinking_request(pb, request_id, **fields):
    chat = pb.chat.ChatInput(messages=[pb.chat.ChatMessage(role="user", content="What is 3+4?")])
    return pb.gen.GenerateRequest(
        request_id=request_id, chat=chat, sampling=pb.gen.SamplingParams(temperature=0.0),
        stopping=pb.gen.StoppingCriteria(max_tokens=16, ignore_eos=True), **fields)


def test_reasoning_text_and_budget_match_http(pb, thinking):
    channel, stub = open_stub(pb, thinking.server.grpc_target)
    with channel:
        reasoning, text, final = "", "", None
        for message in stub.Generate(thinking_request(pb, "think-1", max_reasoning_tokens=4),
                                     timeout=60):
            reasoning += message.reasoning_text
            text += message.text
            if message.finish_reason:
                final = message
    status, body = thinking.server.post_json("/v1/chat/completions", {
        "messages": [{"role": "user", "content": "What is 3+4?"}], "temperature": 0,
        "max_tokens": 16, "ignore_eos": True, "max_reasoning_tokens": 4})
    assert status == 200
    message = body["choices"][0]["message"]
    assert reasoning == message["reasoning_content"]
    assert text == message["content"]
    assert final.usage.reasoning_tokens == \
        body["usage"]["completion_tokens_details"]["reasoning_tokens"]
    assert final.usage.reasoning_tokens > 4  # the budget plus the forced end tag


def test_trace_metadata_traces_the_request(pb, thinking):
    channel, stub = open_stub(pb, thinking.server.grpc_target)
    with channel:
        for _ in stub.Generate(thinking_request(pb, "traced-1"), timeout=60,
                               metadata=[("x-pagoda-trace", "1")]):
            pass
        for _ in stub.Generate(thinking_request(pb, "untraced-1"), timeout=60):
            pass
    deadline = time.monotonic() + 5
    while True:
        events = [json.loads(line) for line in thinking.trace.read_text().splitlines()]
        traced = [e["event"] for e in events if e["request_id"] == "traced-1"]
        if traced and traced[-1] == "finished":
            break
        assert time.monotonic() < deadline, traced
        time.sleep(0.05)
    assert traced[0] == "admitted" and traced.count("token") == 16
    assert not any(e["request_id"] == "untraced-1" for e in events)


# ---- tool calls and structured outputs --------------------------------------------------------

WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "maxLength": 20},
        "unit": {"enum": ["celsius", "fahrenheit"]}}, "required": ["city", "unit"]}}}
NOW_TOOL = {"type": "function", "function": {"name": "now", "parameters": {
    "type": "object", "properties": {}, "additionalProperties": False}}}


def tool_request(pb, tool_choice, request_id="", parallel=None, **fields):
    from google.protobuf import struct_pb2
    tools = []
    for tool in (WEATHER_TOOL, NOW_TOOL):
        s = struct_pb2.Struct()
        s.update(tool)
        tools.append(s)
    chat = pb.chat.ChatInput(messages=[pb.chat.ChatMessage(role="user", content="Weather in Oslo?")],
                             tools=tools, tool_choice=tool_choice)
    if parallel is not None:
        chat.parallel_tool_calls = parallel
    return pb.gen.GenerateRequest(request_id=request_id, chat=chat,
                                  sampling=pb.gen.SamplingParams(temperature=0.0),
                                  stopping=pb.gen.StoppingCriteria(max_tokens=80), **fields)


@pytest.mark.parametrize("choice, http_choice", [
    ({"function_name": "get_weather"}, {"type": "function", "function": {"name": "get_weather"}}),
    ({"mode": "required"}, "required"),
])
def test_forced_tool_calls_as_over_http(stub, pb, server, model_name, choice, http_choice):
    messages = list(stub.Generate(tool_request(pb, pb.chat.ToolChoice(**choice)), timeout=60))
    last = messages[-1]
    assert last.finish_reason == pb.gen.FINISH_REASON_TOOL_CALLS
    assert all(not m.tool_calls for m in messages[:-1])
    assert not last.HasField("content")
    # The text streams the model's own output; the calls were read from all of it.
    assert "".join(m.text for m in messages).strip().startswith(("{", "["))
    status, body = server.post_json("/v1/chat/completions", {
        "model": model_name, "temperature": 0, "max_tokens": 80, "tools": [WEATHER_TOOL, NOW_TOOL],
        "tool_choice": http_choice,
        "messages": [{"role": "user", "content": "Weather in Oslo?"}]})
    assert status == 200, body
    http_calls = body["choices"][0]["message"]["tool_calls"]
    assert [(c.function_name, json.loads(c.function_arguments)) for c in last.tool_calls] == \
        [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in http_calls]
    assert all(c.id.startswith("call_") for c in last.tool_calls)


def test_forced_tool_call_refusals(stub, pb):
    error = rpc_error(lambda: stub.Generate(
        tool_request(pb, pb.chat.ToolChoice(function_name="missing")), timeout=30))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "missing" in error.details()
    error = rpc_error(lambda: stub.Generate(
        tool_request(pb, pb.chat.ToolChoice(mode="sometimes")), timeout=30))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "tool_choice" in error.details()


def test_one_call_without_parallel_tool_calls(stub, pb):
    last = list(stub.Generate(tool_request(pb, pb.chat.ToolChoice(mode="required"),
                                           parallel=False), timeout=60))[-1]
    assert last.finish_reason == pb.gen.FINISH_REASON_TOOL_CALLS
    assert len(last.tool_calls) == 1


AUTO_OUTPUT = ('Let me look\\.\\n<tool_call>\\n\\{"name": "get_weather", "arguments": '
               '\\{"city": "(Oslo|Rome)", "unit": "celsius"\\}\\}\\n</tool_call>')


def test_auto_tool_calls_with_the_servers_parser(pb, start_server):
    """tool_choice auto on a server with --tool-call-parser: the parser reads the calls (a regex
    makes the default model write one hermes call after some text), as over HTTP."""
    tool_server = start_server("--max-model-len", "512", "--enable-auto-tool-choice",
                               "--tool-call-parser", "hermes")
    channel, tool_stub = open_stub(pb, tool_server.grpc_target)
    with channel:
        request = tool_request(pb, pb.chat.ToolChoice(mode="auto"),
                               structured_output=pb.gen.StructuredOutput(regex=AUTO_OUTPUT))
        messages = list(tool_stub.Generate(request, timeout=60))
        # Unset tool_choice with tools is "auto" too.
        request.chat.ClearField("tool_choice")
        unset = list(tool_stub.Generate(request, timeout=60))
    for stream in (messages, unset):
        last = stream[-1]
        assert last.finish_reason == pb.gen.FINISH_REASON_TOOL_CALLS
        assert last.content == "Let me look.\n"
        [call] = last.tool_calls
        assert call.function_name == "get_weather"
        assert json.loads(call.function_arguments)["city"] in ("Oslo", "Rome")
        assert "<tool_call>" in "".join(m.text for m in stream)


def test_a_call_cancelled_while_its_schema_compiles_leaves_nothing_behind(stub, pb):
    """The compile runs off gRPC's threads; a call that ends meanwhile submits nothing and its
    request_id is free again."""
    schema = {"type": "object", "title": f"grpc-{time.time_ns()}", "properties": {
        f"f{i}": ({"type": "string", "maxLength": 8 + i % 50} if i % 2 else
                  {"enum": [f"v{i}_{j}" for j in range(10)]}) for i in range(150)}}
    request = text_request(pb, max_tokens=2, request_id="compiling-1",
                           structured_output=pb.gen.StructuredOutput(json_schema=json.dumps(schema)))
    error = rpc_error(lambda: stub.Generate(request, timeout=0.05))
    assert error.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    wait_idle(stub, pb, timeout=5)
    # The id is free again (the same request now finds the compile running or cached).
    deadline = time.monotonic() + 5
    while True:
        try:
            messages = list(stub.Generate(request, timeout=60))
            break
        except grpc.RpcError as e:
            assert "already in flight" in e.details() and time.monotonic() < deadline, e
            time.sleep(0.05)
    assert messages[-1].finish_reason in (pb.gen.FINISH_REASON_STOP, pb.gen.FINISH_REASON_LENGTH)


def test_abort_while_the_schema_compiles_ends_the_call_at_once(stub, pb):
    """Abort by request_id reaches a call whose request is still compiling its constraint: the
    call ends with FINISH_REASON_ABORT before the compile is done, and nothing is generated."""
    schema = {"type": "object", "title": f"abort-{time.time_ns()}", "properties": {
        f"f{i}": ({"type": "string", "maxLength": 8 + i % 50} if i % 2 else
                  {"enum": [f"v{i}_{j}" for j in range(10)]}) for i in range(150)}}
    request = text_request(pb, max_tokens=2, request_id="abort-compiling",
                           structured_output=pb.gen.StructuredOutput(json_schema=json.dumps(schema)))
    started = time.monotonic()
    call = stub.Generate(request, timeout=60)
    deadline = time.monotonic() + 5
    while True:  # Abort finds the id once the call has begun
        try:
            stub.Abort(pb.svc.AbortRequest(request_id="abort-compiling"))
            break
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.NOT_FOUND and time.monotonic() < deadline, e
            time.sleep(0.005)
    messages = list(call)
    aborted_after = time.monotonic() - started
    assert [m.finish_reason for m in messages] == [pb.gen.FINISH_REASON_ABORT]
    assert not messages[0].token_ids
    # The same schema again waits for the rest of the compile the aborted call started, which
    # had not ended when the call did.
    again = time.monotonic()
    list(stub.Generate(text_request(pb, max_tokens=1,
                                    structured_output=request.structured_output), timeout=60))
    assert time.monotonic() - again > aborted_after, aborted_after
    wait_idle(stub, pb, timeout=5)


def test_abort_while_compiling_ends_every_sample(stub, pb, server):
    """With n > 1, an Abort that comes while the constraint compiles gives each of the n samples
    its own final FINISH_REASON_ABORT message (as an abort in the engine does), and leaves
    nothing behind: the id is free again, the compile's wait is counted as cancelled, no
    request reached the engine."""
    schema = {"type": "object", "title": f"abort-n-{time.time_ns()}", "properties": {
        f"f{i}": ({"type": "string", "maxLength": 8 + i % 50} if i % 2 else
                  {"enum": [f"v{i}_{j}" for j in range(10)]}) for i in range(150)}}
    request = pb.gen.GenerateRequest(
        text=PROMPT, request_id="abort-compiling-n3",
        sampling=pb.gen.SamplingParams(temperature=1.0, seed=5, n=3),
        stopping=pb.gen.StoppingCriteria(max_tokens=2),
        structured_output=pb.gen.StructuredOutput(json_schema=json.dumps(schema)))
    cancelled = ("pagoda:structured_output_compiles_finished_total",
                 frozenset({("model_name", "smollm2"), ("outcome", "cancelled")}))
    finished = "pagoda:request_success_total"

    def engine_finished(samples):
        return sum(v for (name, _), v in samples.items() if name == finished)

    before = server.samples()
    call = stub.Generate(request, timeout=60)
    deadline = time.monotonic() + 5
    while True:  # Abort finds the id once the call has begun
        try:
            stub.Abort(pb.svc.AbortRequest(request_id="abort-compiling-n3"))
            break
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.NOT_FOUND and time.monotonic() < deadline, e
            time.sleep(0.005)
    messages = list(call)
    assert sorted(m.index for m in messages) == [0, 1, 2], messages
    assert all(m.finish_reason == pb.gen.FINISH_REASON_ABORT and not m.token_ids
               and m.request_id == "abort-compiling-n3" for m in messages), messages
    after = server.samples()
    assert after[cancelled] - before[cancelled] == 1
    # The id is free at once, and the same request (the compile now running or cached) runs
    # its three samples to the end.
    again = list(stub.Generate(request, timeout=60))
    for index in (0, 1, 2):
        mine = [m for m in again if m.index == index]
        assert mine and mine[-1].finish_reason in (pb.gen.FINISH_REASON_STOP,
                                                   pb.gen.FINISH_REASON_LENGTH), again
    wait_idle(stub, pb, timeout=5)
    # Only the second call's three samples reached the engine.
    assert engine_finished(server.samples()) - engine_finished(before) == 3
