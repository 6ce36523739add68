#!/usr/bin/env python3
"""How faithful is transformers' GGUF conversion of Gemma 3's tokenizer (the reference of
expected/gemma3.jsonl)? This rebuilds the SentencePiece model the GGUF was converted from (its
pieces, scores and piece types; BPE with byte fallback, no dummy prefix, whitespace kept) and
encodes the tokenizer corpus with the `sentencepiece` library itself, then lists where the two
disagree. A developer check, never run in CI:

    .venv-dev/bin/python tests/golden/tokenizer/compare_gemma3_sentencepiece.py

Result with sentencepiece 0.2.3 / transformers 5.23.0: 8 of 2,290 samples differ, all of them runs
of more than 31 spaces. SentencePiece (and llama.cpp) take Gemma's user-defined 31-space piece
whole, longest match first; the conversion has no such added token (the file spells those pieces
with real spaces, the conversion respells them with "▁") and reaches space runs through pairwise
merges, which cut a 40-space run as 16 + 24 spaces instead of 31 + 9. Pagoda follows the
conversion, as the golden data does.
"""
import json
import os
import sys

import gguf
import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2 as pb

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, HERE)
from make_golden import read_corpus  # noqa: E402

GGUF = os.path.join(ROOT, "models", "gemma-3-270m", "gemma-3-270m-q4_k_m.gguf")
GOLDEN = os.path.join(ROOT, "tests", "data", "tokenizer", "expected", "gemma3.jsonl")
PIECE_TYPES = {1: pb.ModelProto.SentencePiece.NORMAL, 2: pb.ModelProto.SentencePiece.UNKNOWN,
               3: pb.ModelProto.SentencePiece.CONTROL, 4: pb.ModelProto.SentencePiece.USER_DEFINED,
               5: pb.ModelProto.SentencePiece.UNUSED, 6: pb.ModelProto.SentencePiece.BYTE}


def array(reader, key, convert):
    field = reader.fields[key]
    return [convert(field.parts[i]) for i in field.data]


def sentencepiece_model():
    reader = gguf.GGUFReader(GGUF)
    tokens = array(reader, "tokenizer.ggml.tokens", lambda p: bytes(p).decode("utf-8"))
    scores = array(reader, "tokenizer.ggml.scores", lambda p: float(p[0]))
    types = array(reader, "tokenizer.ggml.token_type", lambda p: int(p[0]))
    unk = int(reader.fields["tokenizer.ggml.unknown_token_id"].parts[-1][0])
    model = pb.ModelProto()
    for index, (token, score, kind) in enumerate(zip(tokens, scores, types)):
        piece = model.pieces.add()
        # llama.cpp's converter wrote the space runs with real spaces; SentencePiece spells "▁".
        piece.piece = "\u2581" * len(token) if token and not token.strip(" ") else token
        piece.score = score
        piece.type = pb.ModelProto.SentencePiece.UNKNOWN if index == unk else PIECE_TYPES[kind]
    model.trainer_spec.model_type = pb.TrainerSpec.BPE
    model.trainer_spec.byte_fallback = True
    model.trainer_spec.split_by_whitespace = False
    model.trainer_spec.unk_id = unk
    model.trainer_spec.bos_id = int(reader.fields["tokenizer.ggml.bos_token_id"].parts[-1][0])
    model.trainer_spec.eos_id = int(reader.fields["tokenizer.ggml.eos_token_id"].parts[-1][0])
    model.trainer_spec.pad_id = int(reader.fields["tokenizer.ggml.padding_token_id"].parts[-1][0])
    model.normalizer_spec.name = "identity"
    model.normalizer_spec.add_dummy_prefix = False
    model.normalizer_spec.remove_extra_whitespaces = False
    model.normalizer_spec.escape_whitespaces = True
    return spm.SentencePieceProcessor(model_proto=model.SerializeToString())


def main():
    sp = sentencepiece_model()
    with open(GOLDEN, encoding="utf-8") as f:
        golden = {r["i"]: r for r in map(json.loads, list(f)[1:]) if "i" in r}
    samples = read_corpus()
    differ = 0
    for index, text in enumerate(samples):
        # Control tokens stay text in sentencepiece's encode: compare with encode_special_tokens.
        want = golden[index].get("ids_plain", golden[index]["ids"])
        got = sp.encode(text)
        if got != want:
            differ += 1
            print(f"#{index} {text[:60]!r}\n  sentencepiece {got[:12]}\n  conversion    {want[:12]}")
    print(f"{differ} of {len(samples)} samples differ")


if __name__ == "__main__":
    main()
