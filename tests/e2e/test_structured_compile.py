"""Structured-output compiles run off the thread that received the request (issue 30): other
requests on that thread go on meanwhile, and a client that leaves while its constraint compiles
never reaches the engine. The server has one HTTP thread, so any wait on it would show."""
import json
import socket
import threading
import time

import pytest


def large_schema(tag):
    """A schema whose first compile takes a while on the default model's vocabulary."""
    return {"type": "object", "title": tag, "properties": {
        f"field_{i}": ({"type": "string", "maxLength": 8 + i % 50} if i % 3 == 0 else
                       {"enum": [f"v{i}_{j}" for j in range(10)]} if i % 3 == 1 else
                       {"type": "integer", "minimum": i, "maximum": 10 * i + 9})
        for i in range(150)}}


@pytest.fixture(scope="module")
def one_thread_server(start_server):
    return start_server("--max-model-len", "512", "--http-threads", "1",
                        "--served-model-name", "m")


def finished_requests(server):
    return sum(value for (name, _), value in server.samples().items()
               if name == "pagoda:request_success_total")


def completion(schema):
    return {"model": "m", "prompt": "N:", "max_tokens": 1, "guided_json": schema}


def test_other_requests_are_answered_while_a_schema_compiles(one_thread_server):
    server = one_thread_server
    done = {}

    def constrained():
        start = time.monotonic()
        done["status"], done["body"] = server.post_json(
            "/v1/completions", completion(large_schema(f"busy-{time.time_ns()}")))
        done["seconds"] = time.monotonic() - start
        done["at"] = time.monotonic()

    thread = threading.Thread(target=constrained)
    thread.start()
    time.sleep(0.1)  # the request is in, its compile under way
    answers = []
    while thread.is_alive() and len(answers) < 20:
        start = time.monotonic()
        status, body = server.post_json("/v1/completions", {
            "model": "m", "prompt": "Hi", "max_tokens": 2, "temperature": 0})
        assert status == 200, body
        answers.append((start, time.monotonic()))
    thread.join()
    assert done["status"] == 200, done["body"]
    assert done["seconds"] > 0.5, f"the compile took {done['seconds']:.2f} s: too fast to tell"
    # Several plain requests came and went on the one HTTP thread while the compile ran.
    during = [a for a in answers if a[1] < done["at"] - 0.05]
    assert len(during) >= 2, (answers, done)
    assert max(end - start for start, end in during) < done["seconds"] / 2, (answers, done)


def test_a_client_that_leaves_while_compiling_never_reaches_the_engine(one_thread_server):
    server = one_thread_server
    schema = large_schema(f"left-{time.time_ns()}")
    before = finished_requests(server)
    body = json.dumps(completion(schema)).encode()
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Type: application/json\r\nContent-Length: "
                     + str(len(body)).encode() + b"\r\n\r\n" + body)
        time.sleep(0.1)
    # The same schema again: it joins the compile still running (or finds it cached).
    status, answer = server.post_json("/v1/completions", completion(schema))
    assert status == 200, answer
    time.sleep(1.0)  # an aborted request's final output would be counted by now
    assert finished_requests(server) - before == 1
    # And the server goes on serving.
    status, answer = server.post_json("/v1/completions", completion(schema))
    assert status == 200, answer


COMPILE_COUNTERS = {
    "queries": "pagoda:structured_output_compile_cache_queries_total",
    "hits": "pagoda:structured_output_compile_cache_hits_total",
    "started": "pagoda:structured_output_compiles_started_total",
    "compiled": "pagoda:structured_output_compile_time_seconds_count",
    "queued": "pagoda:structured_output_compile_queue_depth",
    "running": "pagoda:structured_output_compiles_running",
}
OUTCOMES = ("ok", "invalid", "timeout", "queue_full", "cancelled", "shutdown")


def compile_counters(server):
    samples = server.samples()
    counters = {key: value for (name, _), value in samples.items()
                for key, metric in COMPILE_COUNTERS.items() if name == metric}
    for (name, labels), value in samples.items():
        if name == "pagoda:structured_output_compiles_finished_total":
            counters[dict(labels)["outcome"]] = value
        elif name == "pagoda:request_rejected_total" and dict(labels)["status_code"] == "400":
            counters["rejected_400"] = value
    counters.setdefault("rejected_400", 0)
    counters["engine_finished"] = sum(value for (name, _), value in samples.items()
                                      if name == "pagoda:request_success_total")
    return counters


def wait_compiles_idle(server, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        counters = compile_counters(server)
        if counters["queued"] == 0 and counters["running"] == 0:
            return counters
        assert time.monotonic() < deadline, counters
        time.sleep(0.05)


def test_compile_metrics_move_exactly_as_the_requests_predict(one_thread_server):
    """Each constrained request is one cache query; one the cache does not answer starts a wait
    that ends under one outcome; each compile a worker runs is one compile-time observation."""
    server = one_thread_server
    tag = time.time_ns()
    schema = {"type": "object", "title": f"metrics-{tag}",
              "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    bad_regex = {"model": "m", "prompt": "N:", "max_tokens": 1, "guided_regex": f"(x{tag}"}
    # A count over the 1024 repetitions a schema may ask for: refused before compiling.
    too_long = {"type": "string", "title": f"long-{tag}", "maxLength": 5000}
    large = large_schema(f"metrics-left-{tag}")
    for i, (name, prop) in enumerate(large["properties"].items()):
        if "enum" in prop:
            prop["enum"] = [f"{value}_{tag}" for value in prop["enum"]]
    expected = {key: 0 for key in [*COMPILE_COUNTERS, *OUTCOMES, "rejected_400", "engine_finished"]}
    base = wait_compiles_idle(server)

    def check(step, **moves):
        for key, move in moves.items():
            expected[key] += move
        now = compile_counters(server)
        got = {key: now[key] - base[key] for key in expected}
        assert got == expected, step

    status, body = server.post_json("/v1/completions", completion(schema))
    assert status == 200, body
    check("a new schema", queries=1, started=1, ok=1, compiled=1, engine_finished=1)
    status, body = server.post_json("/v1/completions", {**completion(schema), "n": 2})
    assert status == 200, body
    check("the same schema, n=2: one lookup", queries=1, hits=1, engine_finished=2)
    status, body = server.post_json("/v1/completions", bad_regex)
    assert status == 400, body
    check("a bad regex", queries=1, started=1, invalid=1, compiled=1, rejected_400=1)
    status, body = server.post_json("/v1/completions", bad_regex)
    assert status == 400, body
    check("the bad regex again: a cached error", queries=1, hits=1, rejected_400=1)
    status, body = server.post_json("/v1/completions", completion(too_long))
    assert status == 400 and "1024" in body["error"]["message"], body
    check("over a limit: no compile", queries=1, started=1, invalid=1, rejected_400=1)

    body = json.dumps(completion(large)).encode()
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Type: application/json\r\nContent-Length: "
                     + str(len(body)).encode() + b"\r\n\r\n" + body)
        deadline = time.monotonic() + 10
        while compile_counters(server)["running"] == 0:  # its compile is under way
            assert time.monotonic() < deadline
            time.sleep(0.01)
    deadline = time.monotonic() + 10
    while compile_counters(server)["cancelled"] - base["cancelled"] == 0:
        assert time.monotonic() < deadline, "the wait of a client that left was not counted"
        time.sleep(0.01)
    wait_compiles_idle(server)
    check("a client left during its compile, which still ran to the cache",
          queries=1, started=1, cancelled=1, compiled=1)
    status, answer = server.post_json("/v1/completions", completion(large))
    assert status == 200, answer
    check("its schema again: cached", queries=1, hits=1, engine_finished=1)
