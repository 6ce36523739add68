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
