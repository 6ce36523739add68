"""What the random-weight GGUF writers (make_1b_ggufs.py, make_q4_k_m_gguf.py) share: a Llama
model's tensors and llama.* metadata, and a tokenizer's tokenizer.* keys copied from another
GGUF."""
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


def llama_tensors(*, hidden, intermediate, layers, heads, kv_heads, head_dim, vocab, tied):
    """(name, numpy shape, role, layer) in llama.cpp's file order; a weight [out, in] is ggml
    ne = [in, out], norms are 1-D. role: embed, norm, q, k, v, o, gate, up, down or output;
    layer is None outside the blocks."""
    q, kv = heads * head_dim, kv_heads * head_dim
    yield "token_embd.weight", (vocab, hidden), "embed", None
    for i in range(layers):
        yield f"blk.{i}.attn_norm.weight", (hidden,), "norm", i
        yield f"blk.{i}.attn_q.weight", (q, hidden), "q", i
        yield f"blk.{i}.attn_k.weight", (kv, hidden), "k", i
        yield f"blk.{i}.attn_v.weight", (kv, hidden), "v", i
        yield f"blk.{i}.attn_output.weight", (hidden, q), "o", i
        yield f"blk.{i}.ffn_norm.weight", (hidden,), "norm", i
        yield f"blk.{i}.ffn_gate.weight", (intermediate, hidden), "gate", i
        yield f"blk.{i}.ffn_up.weight", (intermediate, hidden), "up", i
        yield f"blk.{i}.ffn_down.weight", (hidden, intermediate), "down", i
    yield "output_norm.weight", (hidden,), "norm", None
    if not tied:
        yield "output.weight", (vocab, hidden), "output", None
