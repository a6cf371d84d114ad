#!/usr/bin/env python3
"""ckpt_corpus.py - broken variants of a good attograd checkpoint, for
tests/cli_checkpoint.sh.

    python3 tests/ckpt_corpus.py GOOD.safetensors OUTDIR > manifest

GOOD must be a run checkpoint attograd wrote with AdamW (weights, optim.m.*,
optim.v.*, state.rng).  Each case is written to OUTDIR/<name>.safetensors
and listed on stdout as "<name>\t<substring>": the substring the one-line
error must contain, or "OK" for the control files that must load (the
good file taken apart and put back together by this script, and its
weights-only form).  Standard library only: json and struct are an
implementation of the format independent of attograd's.
"""
import json
import math
import os
import struct
import sys

F32 = struct.Struct("<f")


def read(path):
    """(raw bytes, header length, metadata dict, [name, dtype, shape, bytes] in offset order)."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack_from("<Q", raw, 0)
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__")
    data = raw[8 + n:]
    entries = [[k, e["dtype"], list(e["shape"]), data[e["data_offsets"][0]:e["data_offsets"][1]]]
               for k, e in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0])]
    return raw, n, meta, entries


def frame(header_text, data=b""):
    """Length + header padded with spaces to 8 + N = 0 mod 8 + data."""
    h = header_text.encode("utf-8") if isinstance(header_text, str) else header_text
    h += b" " * (-(8 + len(h)) % 8)
    return struct.pack("<Q", len(h)) + h + data


def entry_json(name, dtype, shape, begin, end):
    return (json.dumps(name) + ":" + json.dumps({"dtype": dtype, "shape": shape, "data_offsets": [begin, end]},
                                                separators=(",", ":")))


def build(meta, entries, extra_json="", offsets=None, meta_json=None):
    """A file from metadata and entries laid out one after another; offsets
    (a list of (begin, end)) overrides the layout, extra_json is appended
    inside the top-level object verbatim, meta_json replaces the metadata text."""
    parts = ['"__metadata__":' + (meta_json if meta_json is not None else json.dumps(meta, separators=(",", ":")))]
    data, pos = b"", 0
    for i, (name, dtype, shape, blob) in enumerate(entries):
        begin, end = offsets[i] if offsets else (pos, pos + len(blob))
        parts.append(entry_json(name, dtype, shape, begin, end))
        data += blob
        pos += len(blob)
    return frame("{" + ",".join(parts) + extra_json + "}", data)


def with_meta(meta, **changes):
    m = dict(meta)
    for k, v in changes.items():
        if v is None:
            m.pop(k, None)
        else:
            m[k] = v
    return m


def replace(entries, name, dtype=None, shape=None, blob=None):
    out = []
    for e in entries:
        if e[0] == name:
            e = [name, dtype or e[1], shape if shape is not None else e[2], blob if blob is not None else e[3]]
        out.append(e)
    return out


def main():
    src, outdir = sys.argv[1], sys.argv[2]
    os.makedirs(outdir, exist_ok=True)
    raw, n, meta, entries = read(src)
    blob = {e[0]: e[3] for e in entries}
    shape = {e[0]: e[2] for e in entries}
    V, d = shape["tok_emb.weight"]
    cases = []

    def case(name, content, expect):
        with open(os.path.join(outdir, name + ".safetensors"), "wb") as f:
            f.write(content)
        cases.append((name, expect))

    weights = [e for e in entries if not e[0].startswith(("optim.", "state."))]
    wmeta = with_meta(meta, optimizer=None, optim_step=None)

    # controls: rebuilt here, they must load, so every case below fails for its own reason
    case("ok_rebuilt", build(meta, entries), "OK")
    case("ok_weights_only", build(wmeta, weights), "OK")

    # truncated at each boundary: inside the length, after it, inside and at
    # the end of the JSON, after every tensor but the last, one byte short
    for cut in (0, 4, 7):
        case(f"trunc_at_{cut}", raw[:cut], "shorter than the 8-byte header length")
    for cut in (8, 8 + n // 2, 8 + n - 1):
        case(f"trunc_at_{cut}", raw[:cut], "runs past the end of the file")
    pos = 8 + n
    case(f"trunc_at_{pos}_no_data", raw[:pos], "past the end of the data buffer")
    for name_, _, _, b in entries[:-1]:
        pos += len(b)
        case(f"trunc_after_{name_}", raw[:pos], "past the end of the data buffer")
    case("trunc_last_byte", raw[:-1], "past the end of the data buffer")

    # flipped bytes
    def flip(offset, mask):
        b = bytearray(raw)
        b[offset] ^= mask
        return bytes(b)

    case("flip_length_top_bit", flip(7, 0x80), "exceeds the limit")
    case("flip_open_brace", flip(8, 0x20), "header is not a JSON object")   # '{' -> '['
    case("flip_quote", flip(9, 0x01), "bad JSON in header at byte")         # '"' -> '#'
    case("flip_high_bit", flip(10, 0x80), "not valid UTF-8")
    at = raw.index(b'"F32"', 8) + 3                                          # "F32" -> "F33"
    case("flip_dtype_digit", flip(at, 0x01), "unknown dtype")

    # the length field
    case("len_huge", struct.pack("<Q", 2**64 - 1) + raw[8:], "exceeds the limit")
    case("len_past_end", struct.pack("<Q", len(raw)) + raw[8:], "runs past the end of the file")
    case("len_zero", struct.pack("<Q", 0) + raw[8:], "header length is 0")

    # JSON
    good = build(meta, entries)
    (gn,) = struct.unpack_from("<Q", good, 0)
    text = good[8:8 + gn].rstrip(b" ")
    case("json_trailing_comma", frame(text[:-1] + b",}", good[8 + gn:]), "bad JSON in header")
    case("json_unclosed", frame(text[:-1], good[8 + gn:]), "bad JSON in header")
    case("json_array", frame(b"[]"), "header is not a JSON object")
    case("json_meta_number", build(meta, entries, meta_json=json.dumps(meta)[:-1] + ',"extra":5}'),
         "metadata value for key")

    # names, dtypes, shapes
    t0 = entries[0]
    case("dup_tensor_name", build(meta, entries, extra_json="," + entry_json(t0[0], "F32", t0[2], 0, len(t0[3]))),
         "duplicate tensor name")
    case("dup_meta_key", build(meta, entries, meta_json=json.dumps(meta)[:-1] + ',"step":"0"}'),
         "duplicate metadata key")
    case("unknown_dtype", build(meta, replace(entries, "tok_emb.weight", dtype="F8_E4M3")), "unknown dtype")
    # weights in other float types are converted on load (F32 -> F64 -> F32
    # and F32 -> F16 -> F32 here are exact for these values); integers are not weights
    floats = struct.unpack(f"<{V * d}f", blob["tok_emb.weight"])
    f64 = struct.pack(f"<{V * d}d", *floats)
    case("ok_dtype_f64", build(meta, replace(entries, "tok_emb.weight", dtype="F64", blob=f64)), "OK")
    f16 = struct.pack(f"<{V * d}e", *floats)
    case("ok_dtype_f16", build(meta, replace(entries, "tok_emb.weight", dtype="F16", blob=f16)), "OK")
    bf16 = b"".join(F32.pack(x)[2:] for x in floats)
    case("ok_dtype_bf16", build(meta, replace(entries, "tok_emb.weight", dtype="BF16", blob=bf16)), "OK")
    big = bytearray(f64)
    struct.pack_into("<d", big, 8, -1e39)
    case("dtype_f64_overflow", build(meta, replace(entries, "tok_emb.weight", dtype="F64", blob=bytes(big))),
         "tensor \"tok_emb.weight\": F64 value -1e+39 (element 1) is too large for F32")
    case("dtype_i32", build(meta, replace(entries, "tok_emb.weight", dtype="I32")),
         "'tok_emb.weight' has dtype I32, expected a floating-point type")
    case("dtype_moment_f16", build(meta, replace(entries, "optim.m.tok_emb.weight", dtype="F16", blob=f16)),
         "'optim.m.tok_emb.weight' has dtype F16, expected F32")
    case("pickle_zip", b"PK\x03\x04\x14\x00\x00\x00\x08\x00" + raw[10:],
         "not a safetensors file (this looks like a PyTorch pickle: save with safetensors)")
    case("shape_transposed", build(meta, replace(entries, "tok_emb.weight", shape=[d, V])),
         f"'tok_emb.weight' has shape [{d},{V}], the config needs [{V},{d}]")
    case("shape_vs_bytes", build(meta, replace(entries, "tok_emb.weight", shape=[V, d + 1])),
         "shape and dtype need")
    case("missing_weight", build(meta, [e for e in entries if e[0] != "out_head.weight"]),
         "tensor 'out_head.weight' is missing")
    case("missing_moment", build(meta, [e for e in entries if e[0] != "optim.v.out_head.weight"]),
         "tensor 'optim.v.out_head.weight' is missing")
    case("missing_weight_weights_only", build(wmeta, [e for e in weights if e[0] != "tok_emb.weight"]),
         "tensor 'tok_emb.weight' is missing")
    case("extra_tensor", build(meta, entries + [["extra.weight", "F32", [1], F32.pack(1.0)]]),
         "unknown tensor 'extra.weight'")
    case("extra_tensor_weights_only", build(wmeta, weights + [["blocks.9.attn.W_key.weight", "F32", [1],
                                                                   F32.pack(1.0)]]),
         "unknown tensor 'blocks.9.attn.W_key.weight'")

    # offsets
    spans, pos = [], 0
    for e in entries:
        spans.append([pos, pos + len(e[3])])
        pos += len(e[3])
    ov = [list(s) for s in spans]
    ov[1] = [ov[1][0] - 4, ov[1][1] - 4]
    case("offsets_overlap", build(meta, entries, offsets=ov), "overlap the previous tensor")
    gap = [list(s) for s in spans]
    for s in gap[1:]:
        s[0] += 4
        s[1] += 4
    gapped = [list(e) for e in entries]
    gapped[0][3] = gapped[0][3] + b"\0\0\0\0"
    case("offsets_gap", build(meta, gapped, offsets=gap), "gap in the data buffer")
    case("offsets_reversed", build(meta, entries, offsets=[[s[1], s[0]] if i == 2 else s for i, s in enumerate(spans)]),
         "data_offsets begin")
    case("trailing_bytes", good + b"\0" * 8, "trailing bytes after the last tensor")

    # values
    def poke(name, value, dtype="<f"):
        b = bytearray(blob[name])
        struct.pack_into(dtype, b, 0, value)
        return bytes(b)

    case("nan_in_weight", build(meta, replace(entries, "tok_emb.weight", blob=poke("tok_emb.weight", math.nan))),
         "data contains NaN or Inf")
    case("inf_in_moment", build(meta, replace(entries, "optim.v.out_head.weight",
                                              blob=poke("optim.v.out_head.weight", math.inf))),
         "data contains NaN or Inf")
    rng = blob["state.rng"]
    case("rng_even_stream", build(meta, replace(entries, "state.rng", blob=poke("state.rng", 2, "<8xQ"))),
         "invalid generator")
    case("rng_wrong_shape", build(meta, replace(entries, "state.rng", shape=[3], blob=rng[:24])),
         "'state.rng' must be U64 [4]")

    # metadata
    def meta_case(name, expect, base=None, ents=None, **changes):
        case(name, build(with_meta(base or meta, **changes), ents or entries), expect)

    # metadata values are JSON, spaces or not, words bare or quoted; keys the
    # tensors determine may be left out (PyTorch files), n_head excepted
    meta_case("ok_meta_no_format", "OK", format=None)
    meta_case("ok_meta_format_pt", "OK", format="pt")
    meta_case("ok_meta_json_spaces", "OK", vocab=json.dumps(json.loads(meta["vocab"])), arch=json.dumps(meta["arch"]),
              n_layer=" %s " % meta["n_layer"], step="3.0")
    meta_case("ok_meta_inferred", "OK", vocab_size=None, d_model=None, context_length=None, n_layer=None,
              arch=None, qkv_bias=None, dropout=None, step=None, optimizer=None, optim_step=None, base=wmeta,
              ents=weights)
    meta_case("meta_format_v2", "metadata format is 'attograd/2'", format="attograd/2")
    meta_case("meta_arch_unknown", "metadata arch is rnn", arch="rnn")
    meta_case("meta_arch_other", "unknown tensor 'blocks.0.norm1.weight' (not part of the attn-only model",
              arch="attn-only")
    meta_case("meta_n_layer_zero", "metadata n_layer = 0 is out of range", n_layer="0")
    meta_case("meta_n_layer_more", f"tensor 'blocks.{meta['n_layer']}.", base=wmeta, ents=weights,
              n_layer=str(int(meta["n_layer"]) + 1))
    meta_case("meta_vocab_size_big", "metadata vocab_size = 300 is out of range", vocab_size="300")
    meta_case("meta_n_head_missing", "the file does not say how many heads: pass --heads", n_head=None)
    case("meta_no_metadata", build({}, weights), "the file does not say how many heads: pass --heads")
    meta_case("meta_n_head_divide", f"metadata n_head {d + 1} does not divide d_model {d}", n_head=str(d + 1))
    meta_case("meta_d_model_word", "metadata d_model = 'eight' is not an integer", d_model="eight")
    meta_case("meta_context_huge", "metadata context_length = 100000 is out of range", context_length="100000")
    ctx = int(meta["context_length"])
    meta_case("meta_context_other", f"'pos_emb.weight' has shape [{ctx},{d}], the config needs [{ctx + 1},{d}]",
              context_length=str(ctx + 1))
    meta_case("meta_step_negative", "metadata step = -1 is out of range", step="-1")
    meta_case("meta_qkv_bias_yes", "metadata qkv_bias is yes", qkv_bias="yes")
    meta_case("meta_qkv_bias_true", "tensor 'blocks.0.attn.W_query.bias' is missing", qkv_bias="true")
    meta_case("meta_dropout_one", "metadata dropout is 1 ", dropout="1")
    meta_case("meta_dropout_nan", "metadata dropout is nan", dropout="nan")
    meta_case("meta_data_empty", "metadata data is empty", data="")
    meta_case("meta_data_unknown", "metadata data: unknown task 'parity'", data="parity")
    meta_case("meta_step_fraction", "metadata step = '2.5' is not an integer", step="2.5")
    # a number of more than 63 characters is a number all the same: an
    # integer too large, not "not an integer"; and 10 written long is 10
    meta_case("meta_step_80_digits", "metadata step = " + "9" * 40 + "... is out of range", step="9" * 80)
    meta_case("ok_meta_long_numbers", "OK", n_layer=meta["n_layer"] + "." + "0" * 70,
              dropout="0." + "0" * 70)
    vocab = json.loads(meta["vocab"])
    meta_case("meta_vocab_unsorted", f"metadata vocab entry 1 ({vocab[-2]}) is not above the one before ({vocab[-1]})",
              vocab=json.dumps(vocab[::-1]))
    meta_case("meta_vocab_short", f"metadata vocab lists {len(vocab) - 1} bytes but the model has {len(vocab)} tokens",
              vocab=json.dumps(vocab[:-1]))
    meta_case("meta_vocab_byte", "metadata vocab entry 0 is not a byte value", vocab=json.dumps([256] + vocab[1:]))
    meta_case("meta_vocab_string", "metadata vocab is not a JSON list", vocab="abc")
    meta_case("ok_meta_vocab_exponents", "OK", vocab="[" + ",".join("%.2fe%+d" % (v / 10, 1) for v in vocab) + "]")
    meta_case("meta_vocab_no_comma", "metadata vocab expected ',' or ']' after entry 0",
              vocab="[%d %d]" % (vocab[0], vocab[1]))
    meta_case("meta_vocab_after", "metadata vocab has bytes after the closing ']'", vocab=json.dumps(vocab) + " x")
    meta_case("meta_vocab_bare_exponent", "metadata vocab entry 0 is not a byte value 0..255",
              vocab="[%de]" % vocab[0])
    meta_case("meta_optimizer_unknown", "metadata optimizer is rmsprop", optimizer="rmsprop")
    meta_case("meta_optim_step_missing", "metadata 'optim_step' is missing", optim_step=None)
    # a run takes one optimizer step per training step: a state whose count
    # is another is no run's (resumed, AdamW's bias correction would be off)
    step = int(meta["step"])
    meta_case("meta_optim_step_more", f"metadata optim_step = {step + 2} contradicts step = {step}",
              optim_step=str(step + 2))
    meta_case("meta_optim_step_zero", f"metadata optim_step = 0 contradicts step = {step}", optim_step="0")

    for name, expect in cases:
        print(f"{name}\t{expect}")

    # files as other programs write them: weights only, no metadata, read
    # with the flags that say what the file does not (--heads, --text), and
    # files a resume cannot take ->
    # OUTDIR/foreign.manifest, "<name>\t<command line>\t<expect>": in the
    # command line FILE stands for the file, TEXT for the training text and
    # OTHER for a text of other bytes; expect is "OK" (loads), "OK:<substring>"
    # (loads, saying so on stderr) or the substring of its one-line error
    foreign = []

    def fcase(name, ents, line, expect, fmeta=None):
        with open(os.path.join(outdir, name + ".safetensors"), "wb") as f:
            f.write(build(fmeta or {}, ents))
        foreign.append((name, line, expect))

    H = int(meta["n_head"])
    drop = lambda *names: [e for e in weights if e[0] not in names]
    ev = f"eval --model FILE --heads {H} --text TEXT"
    fcase("foreign_ok", weights, ev, "OK")
    fcase("foreign_tied_head", drop("out_head.weight"), ev,
          "OK:has no out_head.weight: using tok_emb.weight for it (tied weights)")
    fcase("foreign_tied_emb", drop("tok_emb.weight"), ev,
          "OK:has no tok_emb.weight: using out_head.weight for it (tied weights)")
    fcase("foreign_heads_divide", weights, f"eval --model FILE --heads {d + 1} --text TEXT",
          f"--heads {d + 1} does not divide d_model {d}")
    fcase("foreign_other_text", weights, f"eval --model FILE --heads {H} --text OTHER",
          f"the model has {V} tokens but")
    fcase("foreign_text_no_vocab", weights, f"info FILE --heads {H}",
          "the file does not say its vocabulary", {"data": "text"})
    fcase("foreign_no_pos_emb", drop("pos_emb.weight"), ev,
          "no metadata context_length and no 2-D tensor 'pos_emb.weight' to take it from")
    fcase("foreign_vocab_300", replace(weights, "tok_emb.weight", shape=[300, d], blob=b"\0" * (4 * 300 * d)), ev,
          "tensor 'tok_emb.weight' gives vocab_size = 300, out of range [1, 256]")
    fcase("foreign_no_blocks", [e for e in weights if not e[0].startswith("blocks.")], ev,
          "no metadata n_layer, and no tensors 'blocks.N.attn.W_query.weight'")
    # resuming needs the run's state and settings: a file without them is
    # refused by train --resume (info and eval read it)
    fcase("resume_weights_only", weights, "train --resume FILE --steps 9",
          "holds weights only, no optimizer state to resume (use --init", wmeta)
    fcase("resume_no_lr", entries, "train --resume FILE --steps 9",
          "metadata 'lr' is missing, so the run cannot be resumed", with_meta(meta, lr=None))
    fcase("resume_optim_step_other", entries, "train --resume FILE --steps 9",
          f"metadata optim_step = 1 contradicts step = {step} (a run takes one optimizer step per training step)",
          with_meta(meta, optim_step="1"))
    fcase("init_optim_step_other", entries, "train --init FILE --text TEXT --steps 1",
          f"metadata optim_step = 1 contradicts step = {step}", with_meta(meta, optim_step="1"))
    fcase("resume_no_text_path", entries, "train --resume FILE --steps 9",
          "was trained on a text file it does not name: give it with --text FILE", with_meta(meta, text_path=None))
    with open(os.path.join(outdir, "foreign.manifest"), "w") as f:
        for name, line, expect in foreign:
            f.write(f"{name}\t{line}\t{expect}\n")


if __name__ == "__main__":
    main()
