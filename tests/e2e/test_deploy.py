"""Deployment: the Dockerfiles follow the image rules, the compose files validate, the monitoring
files match the real metrics, and `pagoda serve` runs the way the images start it: configured
only through PAGODA_* environment variables, with the command line > environment > --config >
default. No Docker engine is needed: images are not built here (docs/deploy.md says so)."""
import json
import os
import re
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, free_port

DOCKER = ROOT / "docker"
DOCKERFILES = {"cuda": DOCKER / "Dockerfile.cuda", "cpu": DOCKER / "Dockerfile.cpu"}
COMPOSE_FILES = {"cuda": DOCKER / "docker-compose.yml", "cpu": DOCKER / "docker-compose.cpu.yml"}
HTTP_PORT, GRPC_PORT = 8000, 50051


# ---- the Dockerfile linter ------------------------------------------------------------------

def parse_dockerfile(text):
    """[(INSTRUCTION, arguments)] with comments dropped and continuation lines joined."""
    instructions, current = [], ""
    for raw in text.splitlines():
        line = raw.strip()
        if not current and (not line or line.startswith("#")):
            continue
        if current and line.startswith("#"):
            continue  # a comment inside a continued instruction
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        current += line
        keyword, _, args = current.strip().partition(" ")
        instructions.append((keyword.upper(), args.strip()))
        current = ""
    return instructions


def split_stages(instructions):
    """[(from_arguments, [instructions of the stage])]."""
    stages = []
    for keyword, args in instructions:
        if keyword == "FROM":
            stages.append((args, []))
        elif stages:
            stages[-1][1].append((keyword, args))
    return stages


def exec_form(args):
    """The JSON (exec) form of CMD/ENTRYPOINT arguments, or None for the shell form."""
    try:
        value = json.loads(args)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, list) else None


def lint_dockerfile(text):
    """The image rules of docs/deploy.md; returns a list of problems (empty when all hold)."""
    problems = []
    stages = split_stages(parse_dockerfile(text))
    if len(stages) < 2:
        problems.append("not multi-stage: build in one stage, ship the binary in another")
    for from_args, _ in stages:
        image = [w for w in from_args.split() if not w.startswith("--")][0]
        if "$" in image:
            problems.append(f"FROM {image}: the base image must be spelled out, not an ARG")
        elif "@sha256:" not in image:
            name, _, tag = image.rpartition(":")
            if not name or "/" in tag or tag in ("", "latest"):
                problems.append(f"FROM {image}: pin the base image to a tag other than latest")
    if not stages:
        return problems + ["no FROM"]
    build_runs = " ".join(a for _, body in stages[:-1] for k, a in body if k == "RUN")
    for script in ("scripts/setup.sh", "scripts/build.sh"):
        if script not in build_runs:
            problems.append(f"the build stage does not run {script} (the build CI runs)")
    final = stages[-1][1]

    def last(keyword):
        args = [a for k, a in final if k == keyword]
        return args[-1] if args else None

    user = last("USER")
    if user is None or user.split(":")[0] in ("root", "0"):
        problems.append("the final stage must switch to a non-root USER")
    healthcheck = last("HEALTHCHECK")
    if healthcheck is None or "/health" not in healthcheck or healthcheck.strip() == "NONE":
        problems.append("the final stage needs a HEALTHCHECK on /health")
    if exec_form(last("ENTRYPOINT") or "") != ["pagoda", "serve"]:
        problems.append('ENTRYPOINT must be ["pagoda", "serve"]')
    volumes = " ".join(a for k, a in final if k == "VOLUME")
    if "/models" not in volumes:
        problems.append("declare VOLUME /models for the mounted models")
    exposed = {p.split("/")[0] for k, a in final if k == "EXPOSE" for p in a.split()}
    for port in (HTTP_PORT, GRPC_PORT):
        if str(port) not in exposed:
            problems.append(f"EXPOSE {port}")
    env = " ".join(a for k, a in final if k == "ENV")
    if not re.search(r"\bPAGODA_HOST[= ]0\.0\.0\.0\b", env):
        problems.append("set PAGODA_HOST=0.0.0.0: the binary listens on 127.0.0.1 by default")
    return problems


@pytest.mark.parametrize("kind", sorted(DOCKERFILES))
def test_dockerfile_follows_the_image_rules(kind):
    assert lint_dockerfile(DOCKERFILES[kind].read_text()) == []


def test_the_linter_catches_each_broken_rule():
    bad = "FROM debian:latest\nRUN make\nUSER root\nCMD pagoda\n"
    problems = "\n".join(lint_dockerfile(bad))
    for expected in ("multi-stage", "latest", "scripts/setup.sh", "scripts/build.sh", "non-root",
                     "HEALTHCHECK", "ENTRYPOINT", "VOLUME", "EXPOSE 8000", "EXPOSE 50051",
                     "PAGODA_HOST"):
        assert expected in problems, f"{expected!r} not reported in:\n{problems}"
    assert "pin" in "\n".join(lint_dockerfile("FROM ubuntu AS b\nFROM ${BASE}\n"))


def test_cuda_image_builds_on_devel_and_ships_on_runtime_of_one_cuda_version():
    froms = [args.split()[0] for args, _ in split_stages(parse_dockerfile(
        DOCKERFILES["cuda"].read_text()))]
    versions = [re.fullmatch(r"nvidia/cuda:(\d+\.\d+\.\d+)-(devel|runtime)-ubuntu[\d.]+", f)
                for f in froms]
    assert all(versions), froms
    assert [m.group(2) for m in versions] == ["devel", "runtime"]
    assert len({m.group(1) for m in versions}) == 1, "devel and runtime CUDA versions differ"


@pytest.mark.parametrize("kind", sorted(DOCKERFILES))
def test_image_files_exist_and_context_leaves_out_builds_and_models(kind):
    text = DOCKERFILES[kind].read_text()
    for path in re.findall(r"(?<![\w/])(?:scripts|docker)/[\w.-]+", text):
        assert (ROOT / path).is_file(), path
    ignored = (DOCKERFILES[kind].parent / (DOCKERFILES[kind].name + ".dockerignore")).read_text()
    for pattern in ("build*/", "models/", ".venv/"):
        assert pattern in ignored.splitlines()


# ---- the serve flags as environment variables ------------------------------------------------

@pytest.fixture(scope="module")
def serve_env_names(run_pagoda):
    """{flag: env name} from `pagoda serve --help`, which lists each option's variable."""
    proc = run_pagoda("serve", "--help")
    assert proc.returncode == 0, proc.stderr
    names = {}
    for line in proc.stdout.splitlines():
        flag = re.match(r"\s+(--[a-z0-9-]+|model)\b", line)
        if flag and flag.group(1) not in ("--help",):
            env = re.search(r"\(Env:\s*(\w+)\)", line)
            names[flag.group(1)] = env.group(1) if env else None
    assert "--port" in names and "--max-num-seqs" in names, proc.stdout
    return names


def test_every_serve_flag_has_its_environment_variable(serve_env_names):
    for flag, env in serve_env_names.items():
        expected = "PAGODA_" + flag.lstrip("-").upper().replace("-", "_")
        assert env == expected, f"{flag}: {env!r}, expected {expected}"


def env_for_server(**settings):
    """The test environment without PAGODA_* variables, plus `settings` (PAGODA_ prefixed)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAGODA_")}
    env.update({f"PAGODA_{k.upper()}": str(v) for k, v in settings.items()})
    return env


class EnvServer:
    """`pagoda serve ARGS` started with configuration from `env`; stopped on exit."""

    def __init__(self, pagoda_bin, env, args=(), tmp_path=None):
        self.port = int(env["PAGODA_PORT"])
        self.log_path = tmp_path / f"serve-{self.port}.log"
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen([str(pagoda_bin), "serve", *map(str, args)], env=env,
                                     stdout=self.log, stderr=subprocess.STDOUT)

    def get(self, path):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return None, b""

    def wait_healthy(self, timeout=120):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.get("/health")[0] == 200:
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        pytest.fail(f"/health never answered 200:\n{self.log_path.read_text()}")

    def model(self):
        status, body = self.get("/v1/models")
        assert status == 200, body
        card = json.loads(body)["data"][0]
        return card["id"], card["max_model_len"]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def test_serve_configured_only_by_environment_then_a_flag_overrides_it(pagoda_bin, default_model,
                                                                        tmp_path):
    env = env_for_server(port=free_port(), grpc_port=free_port(), host="127.0.0.1",
                         model=default_model, max_model_len=512, served_model_name="from-env")
    # Exactly what the image's ENTRYPOINT runs: `pagoda serve` and no arguments.
    with EnvServer(pagoda_bin, env, tmp_path=tmp_path) as server:
        server.wait_healthy()
        assert server.model() == ("from-env", 512)
        assert server.get("/metrics")[0] == 200
    env["PAGODA_PORT"] = str(free_port())
    env["PAGODA_GRPC_PORT"] = "0"
    with EnvServer(pagoda_bin, env, ["--max-model-len", 300, "--served-model-name", "from-flag"],
                   tmp_path=tmp_path) as server:
        server.wait_healthy()
        assert server.model() == ("from-flag", 300)


def test_environment_overrides_the_config_file_and_the_file_overrides_defaults(
        pagoda_bin, default_model, tmp_path):
    config = tmp_path / "serve.yaml"
    config.write_text("served-model-name: [from-config]\nmax_model_len: 256\n")
    env = env_for_server(port=free_port(), grpc_port=0, host="127.0.0.1", model=default_model,
                         served_model_name="from-env", config=config)
    with EnvServer(pagoda_bin, env, tmp_path=tmp_path) as server:
        server.wait_healthy()
        # The name from the environment, the length (set nowhere else) from the file.
        assert server.model() == ("from-env", 256)


def test_bad_environment_value_is_a_startup_error(pagoda_bin):
    env = env_for_server(max_num_seqs="many")
    proc = subprocess.run([str(pagoda_bin), "serve", "--port", "0"], env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode != 0
    assert "max-num-seqs" in proc.stderr + proc.stdout and "many" in proc.stderr + proc.stdout


# ---- the health check and the runtime packages the images use ---------------------------------

def test_image_healthcheck_script_follows_health(pagoda_bin, default_model, tmp_path):
    script = DOCKER / "healthcheck.sh"

    def check(port, path="/health"):
        env = {**os.environ, "PAGODA_PORT": str(port)}
        return subprocess.run(["bash", str(script), path], env=env, timeout=30).returncode

    env = env_for_server(port=free_port(), grpc_port=0, host="127.0.0.1", model=default_model,
                         max_model_len=256)
    with EnvServer(pagoda_bin, env, tmp_path=tmp_path) as server:
        server.wait_healthy()
        assert check(server.port) == 0
        assert check(server.port, "/no-such-path") == 1  # 404 is not healthy
    assert check(server.port) == 1  # nothing listens any more


def test_runtime_packages_cover_the_binary(pagoda_bin):
    proc = subprocess.run(["bash", str(DOCKER / "runtime-packages.sh"), str(pagoda_bin)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    packages = proc.stdout.split()
    assert packages, "no packages"
    for prefix in ("libyaml-cpp", "libstdc++", "libpcre2-8", "libutf8proc", "libfmt"):
        assert any(p.startswith(prefix) for p in packages), (prefix, packages)
    for package in packages:
        state = subprocess.run(["dpkg-query", "-W", "-f=${Status}", package], capture_output=True,
                               text=True)
        assert "install ok installed" in state.stdout, package
    not_elf = subprocess.run(["bash", str(DOCKER / "runtime-packages.sh"), str(DOCKER / "healthcheck.sh")],
                             capture_output=True, text=True, timeout=60)
    assert not_elf.returncode != 0


# ---- compose files and monitoring ------------------------------------------------------------

def compose(*args, files):
    cmd = ["docker-compose"] + [a for f in files for a in ("-f", str(f))] + list(args)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COMPOSE_PROJECT_NAME": "pagoda-test"})


@pytest.mark.parametrize("kind", sorted(COMPOSE_FILES))
def test_compose_file_validates(kind):
    proc = compose("config", "-q", files=[COMPOSE_FILES[kind]])
    assert proc.returncode == 0, proc.stderr


def test_compose_validation_rejects_a_broken_file(tmp_path):
    broken = tmp_path / "docker-compose.yml"
    broken.write_text("services:\n  pagoda:\n    image: pagoda:cpu\n    restart: sometimes\n"
                      "    ports: 8000\n")
    assert compose("config", "-q", files=[broken]).returncode != 0


@pytest.mark.parametrize("kind", sorted(COMPOSE_FILES))
def test_compose_service_is_ready_for_orchestration(kind, serve_env_names):
    proc = compose("config", files=[COMPOSE_FILES[kind]])
    assert proc.returncode == 0, proc.stderr
    services = yaml.safe_load(proc.stdout)["services"]
    pagoda = services["pagoda"]
    assert pagoda["build"]["dockerfile"] == f"docker/{DOCKERFILES[kind].name}"
    assert {p["target"] for p in pagoda["ports"]} == {HTTP_PORT, GRPC_PORT}
    assert pagoda["restart"] == "unless-stopped"
    assert "/health" in pagoda["healthcheck"]["test"]
    assert pagoda["logging"]["driver"] == "json-file"
    assert {"max-size", "max-file"} <= set(pagoda["logging"]["options"])
    assert any(v.split(":")[1] == "/models" for v in pagoda["volumes"])
    devices = pagoda.get("deploy", {}).get("resources", {}).get("reservations", {}).get("devices")
    if kind == "cuda":
        assert devices and devices[0]["driver"] == "nvidia" and "gpu" in devices[0]["capabilities"]
    else:
        assert not devices
    known = set(serve_env_names.values())
    for name in pagoda["environment"]:
        assert name in known, f"{name} is not a `pagoda serve` variable"
    assert pagoda["environment"]["PAGODA_MODEL"].startswith("/models/")
    for name in ("prometheus", "grafana"):
        assert services[name]["profiles"] == ["monitoring"]
        assert ":" in services[name]["image"] and not services[name]["image"].endswith(":latest")


def test_prometheus_config_is_valid_and_scrapes_pagoda():
    config = DOCKER / "prometheus" / "prometheus.yml"
    proc = subprocess.run(["promtool", "check", "config", str(config)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    jobs = yaml.safe_load(config.read_text())["scrape_configs"]
    targets = [t for job in jobs for sc in job["static_configs"] for t in sc["targets"]]
    assert f"pagoda:{HTTP_PORT}" in targets


def test_grafana_dashboard_uses_real_metrics_and_the_provisioned_datasource(server):
    dashboard = json.loads((DOCKER / "grafana" / "pagoda-dashboard.json").read_text())
    datasource = yaml.safe_load(
        (DOCKER / "grafana" / "provisioning" / "datasources" / "prometheus.yml").read_text())
    uid = datasource["datasources"][0]["uid"]
    status, _, body = server.get("/metrics")
    assert status == 200
    exported = set(re.findall(r"^# TYPE (\S+) ", body.decode(), flags=re.M))
    titles = " ".join(p["title"].lower() for p in dashboard["panels"])
    for topic in ("first token", "inter-token", "throughput", "kv", "queue"):
        assert topic in titles
    queried = set()
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == uid
        for target in panel["targets"]:
            for name in re.findall(r"pagoda:[A-Za-z0-9_]+", target["expr"]):
                family = re.sub(r"_(bucket|sum|count)$", "", name)
                assert family in exported, f"{panel['title']}: {name} is not in /metrics"
                queried.add(family)
    for family in ("pagoda:time_to_first_token_seconds", "pagoda:inter_token_latency_seconds",
                   "pagoda:generation_tokens_total", "pagoda:kv_cache_usage_perc",
                   "pagoda:num_requests_waiting"):
        assert family in queried
