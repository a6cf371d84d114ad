#!/usr/bin/env python3
"""make_st_corpus.py - writes the seed files in tests/corpus/safetensors/.

They seed the safetensors fuzzer and are loaded by tests/test_safetensors.c:
every ok_* file must load and every bad_* file must be refused.  They are
made here with Python's own json and struct modules, independently of the C
writer.  Standard library only; run from the repository root:

    python3 tests/make_st_corpus.py
"""
import json
import math
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "safetensors")
PACK = {"F32": "<f", "F64": "<d", "I32": "<i", "I64": "<q", "U64": "<Q", "U8": "<B", "F16": "<e"}


def pack(dtype, v):
    if dtype == "BF16":     # a float32's upper 16 bits (the values below are exact)
        return struct.pack("<f", v)[2:]
    return struct.pack(PACK[dtype], v)


def raw_file(header_bytes, data=b"", pad=True):
    """Length + header (+ spaces so that 8 + N is a multiple of 8) + data."""
    if pad:
        header_bytes += b" " * (-(8 + len(header_bytes)) % 8)
    return struct.pack("<Q", len(header_bytes)) + header_bytes + data


def build(tensors, metadata=None, pad=True, **dump_args):
    """tensors: list of (name, dtype, shape, values); offsets laid out in order."""
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, values in tensors:
        blob = b"".join(pack(dtype, v) for v in values)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    text = json.dumps(header, separators=dump_args.pop("separators", (",", ":")), **dump_args)
    return raw_file(text.encode("utf-8"), data, pad)


def entry(dtype, shape, begin, end):
    return '{"dtype":"%s","shape":%s,"data_offsets":[%d,%d]}' % (dtype, json.dumps(shape), begin, end)


def hand(text, data=b""):
    return raw_file(text.encode("utf-8"), data)


def main():
    os.makedirs(OUT, exist_ok=True)
    f32x2 = struct.pack("<2f", 1.0, 2.0)
    files = {
        "ok_basic": build([("w", "F32", [2, 3], [0.5 * i - 1 for i in range(6)]), ("b", "U8", [3], [1, 2, 3])],
                          {"format": "pt"}),
        "ok_all_dtypes": build([
            ("f32", "F32", [2], [1.5, -0.0]), ("f64", "F64", [], [math.pi]),
            ("i32", "I32", [3], [-1, 0, 2**31 - 1]), ("i64", "I64", [1, 2], [-2**63, 2**63 - 1]),
            ("u64", "U64", [1], [2**64 - 1]), ("u8", "U8", [1, 1, 1], [255]), ("empty", "F32", [0, 4], [])]),
        "ok_escapes": build([("caf\u00e9 \U0001D11E \"q\" \\ \n", "F32", [1], [3.0])],
                            {"k\u00e9y": "va\"l\\ue\t\u2603"}, ensure_ascii=True),
        "ok_raw_utf8": build([("\u4e2d\u6587", "I32", [2], [1, 2])], {"\u00e9": "\U0001F600"}, ensure_ascii=False),
        "ok_empty": build([]),
        "ok_pretty_unpadded": build([("a", "F64", [2], [1.0, 2.0])], {"x": "y"}, pad=False, indent=2,
                                    separators=(", ", ": ")),
        "ok_tiny_model": build([
            ("wte", "F32", [8, 4], [0.01 * i for i in range(32)]),
            ("wpe", "F32", [4, 4], [-0.01 * i for i in range(16)]),
            ("h.0.attn.c_attn.weight", "F32", [4, 12], [0.001 * i for i in range(48)]),
            ("step", "I64", [], [100])], {"format": "pt", "n_layer": "1"}),
        "ok_half": build([("h", "F16", [2, 2], [1.0, -0.5, 65504.0, 2.0**-24]),
                          ("b", "BF16", [3], [1.0, -2.0**100, 0.15625])], {"format": "pt"}),
        "bad_inf_f16": hand('{"a":' + entry("F16", [2], 0, 4) + "}", struct.pack("<2e", 1.0, float("inf"))),
        "bad_nan_bf16": hand('{"a":' + entry("BF16", [1], 0, 2) + "}", b"\xc1\x7f"),
        "bad_pickle_zip": b"PK\x03\x04\x14\x00\x00\x00\x08\x00\x00\x00!\x00archive/data.pklFB\x1b\x00",
        "bad_pickle_legacy": b"\x80\x02\x8a\x0alq\xfc\x9cF\xf9 j\xa8P\x19.\x80\x02M\xe9\x03.",
        "bad_short": b"\x10\x00\x00\x00\x00",
        "bad_zero_len": struct.pack("<Q", 0) + b"{}",
        "bad_huge_len": struct.pack("<Q", 2**63) + b"{}      ",
        "bad_len_past_end": struct.pack("<Q", 100) + b"{}      ",
        "bad_json_syntax": hand('{"a" ' + entry("F32", [2], 0, 8) + "}", f32x2),
        "bad_json_trailing_comma": hand('{"a":' + entry("F32", [2], 0, 8) + ",}", f32x2),
        "bad_utf8": raw_file(b'{"\xff":' + entry("F32", [2], 0, 8).encode() + b"}", f32x2),
        "bad_top_array": hand("[1, 2, 3]"),
        "bad_dup_name": hand('{"a":' + entry("F32", [2], 0, 8) + ',"a":' + entry("F32", [2], 0, 8) + "}", f32x2),
        "bad_dup_meta": hand('{"__metadata__":{"k":"1","k":"2"}}'),
        "bad_dtype_f17": hand('{"a":' + entry("F17", [2], 0, 8) + "}", f32x2),
        "bad_size_mismatch": hand('{"a":' + entry("F32", [3], 0, 8) + "}", f32x2),
        "bad_overlap": hand('{"a":' + entry("F32", [2], 0, 8) + ',"b":' + entry("U8", [4], 4, 8) + "}", f32x2),
        "bad_gap": hand('{"a":' + entry("F32", [1], 0, 4) + ',"b":' + entry("U8", [2], 6, 8) + "}", f32x2),
        "bad_trailing": hand('{"a":' + entry("F32", [1], 0, 4) + "}", f32x2),
        "bad_end_before_begin": hand('{"a":' + entry("F32", [0], 8, 0) + "}", f32x2),
        "bad_nan_f32": hand('{"a":' + entry("F32", [2], 0, 8) + "}", struct.pack("<2f", 1.0, float("nan"))),
        "bad_inf_f64": hand('{"a":' + entry("F64", [1], 0, 8) + "}", struct.pack("<d", float("-inf"))),
        "bad_meta_nonstring": hand('{"__metadata__":{"epoch":3}}'),
        "bad_negative_dim": hand('{"a":' + entry("F32", [-2], 0, 8) + "}", f32x2),
        "bad_too_many_dims": hand('{"a":' + entry("F32", [1] * 8 + [2], 0, 8) + "}", f32x2),
        "bad_missing_field": hand('{"a":{"dtype":"F32","shape":[2]}}', f32x2),
        "bad_extra_field": hand('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":0}}', f32x2),
        "bad_lone_surrogate": hand('{"\\ud800":' + entry("F32", [2], 0, 8) + "}", f32x2),
        "bad_shape_overflow": hand('{"a":' + entry("F32", [2**32, 2**32], 0, 8) + "}", f32x2),
    }
    for old in os.listdir(OUT):
        if old.endswith(".safetensors"):
            os.remove(os.path.join(OUT, old))
    for name, blob in files.items():
        with open(os.path.join(OUT, name + ".safetensors"), "wb") as fp:
            fp.write(blob)
    print("%d files in %s" % (len(files), OUT))


if __name__ == "__main__":
    main()
