"""What the random-weight GGUF writers (make_1b_ggufs.py, make_q4_k_m_gguf.py) share: a Llama
model's llama.* metadata and a tokenizer's tokenizer.* keys copied from another GGUF."""
import sys

import gguf


def tokenizer_source(path, tool):
    """The GGUF at `path`, read for its tokenizer.* keys; `tool` names the caller in errors."""
    reader = gguf.GGUFReader(path)
    if "tokenizer.ggml.tokens" not in reader.fields:
        sys.exit(f"{tool}: {path} has no tokenizer.ggml.tokens")
    return reader


def token_count(reader):
    return len(reader.fields["tokenizer.ggml.tokens"].data)


def copy_tokenizer(reader, writer):
    for key, field in reader.fields.items():
        if key.startswith("tokenizer."):
            vtype = field.types[0]
            sub = field.types[1] if vtype == gguf.GGUFValueType.ARRAY else None
            writer.add_key_value(key, field.contents(), vtype, sub_type=sub)


def add_llama_metadata(writer, *, context_length, hidden, layers, intermediate, heads, kv_heads,
                       head_dim, rope_theta, rms_eps, vocab, file_type, head_lengths=False):
    """llama.* keys in llama.cpp's convert order; `head_lengths` adds attention.key_length and
    value_length (= head_dim, what a reader assumes without them)."""
    writer.add_context_length(context_length)
    writer.add_embedding_length(hidden)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(intermediate)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_dimension_count(head_dim)
    if head_lengths:
        writer.add_key_length(head_dim)
        writer.add_value_length(head_dim)
    writer.add_rope_freq_base(rope_theta)
    writer.add_layer_norm_rms_eps(rms_eps)
    writer.add_vocab_size(vocab)
    writer.add_file_type(file_type)
