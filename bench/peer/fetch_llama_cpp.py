#!/usr/bin/env python3
"""Downloads the llama-cpp-python sdist (which vendors a full llama.cpp tree) from PyPI.

Usage: fetch_llama_cpp.py VERSION CACHE_DIR  -> prints the path of the verified archive.
The URL and sha256 come from the PyPI simple index in its JSON form (PEP 691). An archive already
in CACHE_DIR (scripts/fetch_models.py keeps the same file in .cache/downloads) is reused when its
sha256 matches the index. Standard library only; nothing is installed.
"""
import hashlib
import json
import os
import shutil
import sys
import urllib.error
import urllib.request

INDEX = "https://pypi.org/simple/llama-cpp-python/"


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fail(message):
    print(f"fetch_llama_cpp: error: {message}", file=sys.stderr)
    sys.exit(1)


def main():
    if len(sys.argv) != 3:
        fail("usage: fetch_llama_cpp.py VERSION CACHE_DIR")
    version, cache = sys.argv[1], sys.argv[2]
    filename = f"llama_cpp_python-{version}.tar.gz"
    request = urllib.request.Request(INDEX, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            index = json.load(r)
    except (urllib.error.URLError, OSError) as e:
        fail(f"cannot reach PyPI ({e}); the machine must reach pypi.org")
    entry = next((f for f in index["files"] if f["filename"] == filename), None)
    if entry is None:
        fail(f"PyPI has no file {filename}")
    url, want = entry["url"], entry["hashes"]["sha256"]
    os.makedirs(cache, exist_ok=True)
    dest = os.path.join(cache, filename)
    if os.path.exists(dest) and sha256_of(dest) == want:
        print(dest)
        return
    print(f"fetch_llama_cpp: downloading {filename}", file=sys.stderr, flush=True)
    part = dest + ".part"
    try:
        with urllib.request.urlopen(url, timeout=300) as r, open(part, "wb") as out:
            shutil.copyfileobj(r, out, 1 << 20)
    except (urllib.error.URLError, OSError) as e:
        fail(f"download of {url} failed ({e})")
    got = sha256_of(part)
    if got != want:
        os.remove(part)
        fail(f"{filename}: sha256 {got} does not match PyPI's {want}")
    os.replace(part, dest)
    print(dest)


if __name__ == "__main__":
    main()
