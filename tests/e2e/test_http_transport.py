"""The HTTP transport of `pagoda serve`: /health while loading, keep-alive and pipelining, HEAD,
slow clients (408), idle timeouts, the API key, --config files, a full queue (429), and a
client that disconnects while its request is generated."""
import http.client
import json
import os
import socket
import time

import openai
import pytest

from conftest import launch_server

M = "smollm2"


def read_response(reader):
    """Reads one HTTP/1.1 response with a Content-Length body from `sock.makefile("rb")`; b""
    when the server closed the connection first."""
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        line = reader.readline()
        if not line:
            return head
        head += line
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return head + reader.read(length)


def test_health_is_503_until_the_model_has_loaded(pagoda_bin, tmp_path):
    # The chat template is read from a FIFO, so loading waits until the test writes it: the
    # server must already listen and say 503 meanwhile.
    fifo = tmp_path / "template.fifo"
    os.mkfifo(fifo)
    server = launch_server(pagoda_bin, "--chat-template", fifo, wait_ready=False)
    try:
        for path in ("/health", "/v1/models"):
            status, headers, body = server.get(path)
            assert status == 503 and headers["Retry-After"], (path, body)
            assert json.loads(body)["error"]["code"] == 503
        assert server.get("/version")[0] == 200
        with open(fifo, "w") as f:
            f.write("{% for m in messages %}{{ m['content'] }}{% endfor %}")
        deadline = time.monotonic() + 30
        while server.get("/health")[0] != 200:
            assert time.monotonic() < deadline, server.log()
            time.sleep(0.05)
        assert "still loading" in server.log() or "loading" in server.log()
    finally:
        assert server.stop() == 0


def test_keep_alive_reuses_one_connection(server):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.request("GET", "/health")
    resp = conn.getresponse()
    resp.read()
    first_socket = conn.sock
    body = json.dumps({"model": M, "prompt": "Hi", "max_tokens": 2, "temperature": 0})
    conn.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200 and json.loads(resp.read())["usage"]["completion_tokens"] == 2
    conn.request("GET", "/v1/models")
    resp = conn.getresponse()
    assert resp.status == 200 and json.loads(resp.read())["data"]
    assert conn.sock is first_socket  # never reconnected
    conn.close()


def test_pipelined_requests_are_answered_in_order(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n"
                     b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
                     b"GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n")
        reader = sock.makefile("rb")
        assert b'"version"' in read_response(reader)
        assert read_response(reader).startswith(b"HTTP/1.1 200")
        assert read_response(reader).startswith(b"HTTP/1.1 404")


def test_head_has_headers_but_no_body(server):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.request("HEAD", "/v1/models")
    resp = conn.getresponse()
    assert resp.status == 200 and int(resp.headers["Content-Length"]) > 0
    assert resp.read() == b""
    conn.close()


@pytest.fixture(scope="module")
def impatient_server(start_server):
    return start_server("--max-model-len", "512", "--http-header-timeout", "1",
                        "--http-keep-alive-timeout", "1", "--served-model-name", M)


def test_slow_loris_headers_get_408(impatient_server):
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", impatient_server.port)) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
        sock.settimeout(0.3)
        response = b""
        # One header line every 0.3 s: the header as a whole is due within 1 s.
        for i in range(20):
            try:
                sock.sendall(b"X-Slow-%d: y\r\n" % i)
                chunk = sock.recv(65536)
                if not chunk:
                    break
                response += chunk
                if b"\r\n\r\n" in response and b"}" in response:
                    break
            except socket.timeout:
                continue
            except (BrokenPipeError, ConnectionResetError):
                break
    assert response.startswith(b"HTTP/1.1 408"), response
    error = json.loads(response.split(b"\r\n\r\n", 1)[1])["error"]
    assert error["code"] == 408 and "header" in error["message"]
    assert time.monotonic() - started < 5
    # Everyone else was served all along.
    assert impatient_server.get("/health")[0] == 200


def test_silent_and_idle_connections_are_closed(impatient_server):
    with socket.create_connection(("127.0.0.1", impatient_server.port)) as silent:
        silent.settimeout(5)
        assert silent.recv(100) == b""  # closed after the 1 s header timeout, no response
    with socket.create_connection(("127.0.0.1", impatient_server.port), timeout=5) as idle:
        idle.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_response(idle.makefile("rb")).startswith(b"HTTP/1.1 200")
        started = time.monotonic()
        assert idle.recv(100) == b""  # the 1 s keep-alive timeout
        assert time.monotonic() - started < 4


def test_api_key(start_server):
    server = start_server("--api-key", "s3cret", "--served-model-name", M, "--max-model-len", "512")
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"},
                    {"Authorization": "Bearer s3cret-and-more"}):
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        conn.request("GET", "/v1/models", headers=headers)
        resp = conn.getresponse()
        error = json.loads(resp.read())["error"]
        assert resp.status == 401 and error["code"] == 401, headers
        assert error["type"] == "authentication_error"
        conn.close()
    # The right key, through the official client; /health and /metrics stay open as in vLLM.
    client = openai.OpenAI(base_url=server.url("/v1"), api_key="s3cret", max_retries=0)
    assert client.completions.create(model=M, prompt="Hi", max_tokens=2).usage.completion_tokens == 2
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=server.url("/v1"), api_key="nope", max_retries=0).models.list()
    assert server.get("/health")[0] == 200 and server.get("/metrics")[0] == 200


def test_config_file_with_flag_override(start_server, tmp_path):
    config = tmp_path / "serve.yaml"
    config.write_text("served_model_name: [from-config]\nmax-model-len: 256\n"
                      "max_num_seqs: 4\ndisable-log-requests: true\n")
    server = start_server("--config", config, "--max-model-len", "300")
    status, _, body = server.get("/v1/models")
    model = json.loads(body)["data"][0]
    assert (model["id"], model["max_model_len"]) == ("from-config", 300)
    server.post_json("/v1/completions", {"model": "from-config", "prompt": "Hi", "max_tokens": 1})
    assert "POST /v1/completions" not in server.log()  # disable-log-requests from the file


@pytest.mark.parametrize("content,message", [
    ("max_num_seqz: 4\n", "max_num_seqz"), ("max-num-seqs: many\n", "max-num-seqs"),
    ("- a list\n", "mapping"), ("port: [1\n", "YAML")])
def test_bad_config_file_is_a_clear_startup_error(run_pagoda, tmp_path, content, message):
    config = tmp_path / "bad.yaml"
    config.write_text(content)
    proc = run_pagoda("serve", "--config", config, "--port", "0")
    assert proc.returncode == 1 and "pagoda: error:" in proc.stderr and message in proc.stderr


def test_bad_flags_are_startup_errors(run_pagoda, tmp_path):
    proc = run_pagoda("serve", tmp_path / "missing.gguf", "--port", "0")
    assert proc.returncode == 1 and "missing.gguf" in proc.stderr
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    proc = run_pagoda("serve", "--port", busy.getsockname()[1])
    busy.close()
    assert proc.returncode == 1 and "cannot listen" in proc.stderr


def test_full_queue_gets_429_with_retry_after(start_server):
    server = start_server("--max-num-seqs", "1", "--max-waiting-requests", "0",
                          "--served-model-name", M, "--max-model-len", "512")
    client = openai.OpenAI(base_url=server.url("/v1"), api_key="x", max_retries=0)
    stream = client.completions.create(model=M, prompt="Once", max_tokens=300, stream=True,
                                       extra_body={"ignore_eos": True})
    next(iter(stream))  # the one slot is taken
    status, body = server.post_json("/v1/completions", {"model": M, "prompt": "Hi", "max_tokens": 2})
    assert status == 429 and body["error"]["type"] == "rate_limit_error"
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.request("POST", "/v1/completions", body=json.dumps({"model": M, "prompt": "Hi"}),
                 headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 429 and resp.headers["Retry-After"] == "1"
    conn.close()
    stream.close()  # disconnects: the slot frees within a step
    deadline = time.monotonic() + 10
    while True:
        status, body = server.post_json("/v1/completions", {"model": M, "prompt": "Hi",
                                                            "max_tokens": 2})
        if status == 200:
            break
        assert status == 429 and time.monotonic() < deadline
        time.sleep(0.05)


def test_disconnect_while_waiting_for_a_non_streamed_body_aborts_it(start_server):
    server = start_server("--served-model-name", M, "--max-model-len", "1024")
    body = json.dumps({"model": M, "prompt": "Once", "max_tokens": 900, "ignore_eos": True})
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(body), body.encode()))
        deadline = time.monotonic() + 10
        while server.metric("pagoda:num_requests_running") < 1:
            assert time.monotonic() < deadline
            time.sleep(0.02)
    # Closed without reading: the server notices through its pending read and aborts.
    deadline = time.monotonic() + 10
    while server.metric("pagoda:num_requests_running") > 0 or \
            server.metric("pagoda:kv_cache_usage_perc") > 0:
        assert time.monotonic() < deadline, "the abandoned request kept running"
        time.sleep(0.02)
    time.sleep(0.1)
    assert "499" in server.log() and "client disconnected" in server.log()


def test_expect_100_continue_and_chunked_request_bodies(server):
    body = json.dumps({"model": M, "prompt": "Hi", "max_tokens": 2, "temperature": 0}).encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                     b"\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(body))
        reader = sock.makefile("rb")
        assert reader.readline() == b"HTTP/1.1 100 Continue\r\n" and reader.readline() == b"\r\n"
        sock.sendall(body)
        response = read_response(reader)
        assert response.startswith(b"HTTP/1.1 200"), response
        expected = json.loads(response.split(b"\r\n\r\n", 1)[1])["choices"][0]["text"]
    # The same request with a chunked body.
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.request("POST", "/v1/completions", body=iter([body[:10], body[10:]]),
                 headers={"Content-Type": "application/json"}, encode_chunked=True)
    resp = conn.getresponse()
    assert resp.status == 200 and json.loads(resp.read())["choices"][0]["text"] == expected
    conn.close()


def test_http_1_0_client_gets_a_stream_ended_by_close(server):
    body = json.dumps({"model": M, "prompt": "Hi", "max_tokens": 3, "stream": True}).encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(b"POST /v1/completions HTTP/1.0\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, events = data.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.0 200") and b"chunked" not in head.lower()
    assert events.startswith(b"data: {") and events.endswith(b"data: [DONE]\n\n")
