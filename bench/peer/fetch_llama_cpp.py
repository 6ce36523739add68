#!/usr/bin/env python3
"""Downloads the llama-cpp-python sdist (which vendors a full llama.cpp tree) from PyPI.

Usage: fetch_llama_cpp.py VERSION CACHE_DIR  -> prints the path of the verified archive.
The URL and sha256 come from the PyPI simple index (scripts/fetch_models.py, which keeps the same
file in .cache/downloads for the test vocabularies); an archive already in CACHE_DIR is reused
when its sha256 matches the index. Standard library only; nothing is installed.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from fetch_models import distribution_url, download, fail  # noqa: E402


def main():
    if len(sys.argv) != 3:
        fail("usage: fetch_llama_cpp.py VERSION CACHE_DIR")
    version, cache = sys.argv[1], sys.argv[2]
    filename = f"llama_cpp_python-{version}.tar.gz"
    url, sha256 = distribution_url("llama-cpp-python", filename)
    os.makedirs(cache, exist_ok=True)
    dest = os.path.join(cache, filename)
    download(url, sha256, dest)
    print(dest)


if __name__ == "__main__":
    main()
