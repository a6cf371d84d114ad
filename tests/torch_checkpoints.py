#!/usr/bin/python3
"""torch_checkpoints.py - checkpoints as a PyTorch user writes them, loaded by attograd.

The models are the twin's (tests/twin.py); the files are written here with
json and struct, the way a few lines of user code (or the safetensors
package) write a state_dict: Python's default json.dumps (with spaces), no
attograd metadata, half-precision and double tensors, tied embeddings, and
torch.save pickles.  For each, attograd must either evaluate the model to
the loss PyTorch computes for the same weights (relative 1e-5) or refuse it
with one line naming the problem (exit 2).  Usage (from the repository root):

    /usr/bin/python3 tests/torch_checkpoints.py [--attograd build/attograd] [--text data/tiny.txt]

Ends with "N passed, N failed"; exit status 1 on any failure.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

import torch

sys.dont_write_bytecode = True     # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parity  # noqa: E402
import twin  # noqa: E402

PICKLE_MSG = "not a safetensors file (this looks like a PyTorch pickle: save with safetensors)"


def write_safetensors(path, tensors, metadata=None):
    """A state_dict as safetensors with Python's default json.dumps (spaces
    after ',' and ':'), tensors in any of the dtypes above, no padding."""
    header, blobs, offset = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, t in tensors.items():
        t = t.detach().contiguous()
        blob = twin.raw_bytes(t)
        header[name] = {"dtype": twin.DTYPE_NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header).encode("utf-8")
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


class Suite(parity.Checks):
    def __init__(self, ag, text, work):
        super().__init__()
        self.ag, self.text, self.work = ag, text, work
        tokens, self.vocab = twin.load_text(text)
        self.train, self.val = twin.split(tokens)

    def path(self, name):
        return os.path.join(self.work, name)

    def loads_as(self, what, path, model, extra=(), want_stderr=None):
        """attograd eval --split all of the file equals the twin's loss for model."""
        rc, out, err = run([self.ag, "eval", "--model", path, "--text", self.text, "--split", "all", *extra])
        got = next((float(line.split()[1]) for line in out.splitlines() if line.startswith("loss ")), None)
        want = parity.torch_loss_all(model, self.train, self.val)
        self.check(rc == 0 and got is not None and parity.rel(got, want) <= 1e-5,
                   f"{what}: attograd eval {got} torch {want:.6f}" + ("" if rc == 0 else f" (exit {rc}: {err.strip()})"))
        if want_stderr is not None:
            self.check(want_stderr in err, f"{what}: stderr says '{want_stderr}' ({err.strip()})")

    def refuses(self, what, cmd, want):
        """Exit 2, one line on stderr containing want, nothing on stdout."""
        rc, out, err = run([self.ag, *cmd])
        self.check(rc == 2 and err.count("\n") == 1 and want in err and out == "",
                   f"{what}: exit {rc}, one line with '{want}' (got {err.strip()!r}{', stdout ' + repr(out[:80]) if out else ''})")


def model_of(cfg, seed):
    m = twin.GPT(cfg)
    parity.rich_init(m, seed)
    return m


def main():
    args = parity.command_line("PyTorch-written checkpoints in attograd")
    with tempfile.TemporaryDirectory(prefix="attograd-torch-") as work:
        s = Suite(args.attograd, args.text, work)
        V = len(s.vocab)
        gpt = twin.GPTConfig(vocab_size=V, n_layer=2, n_head=3, d_model=21, context_length=17, qkv_bias=True)
        small = twin.GPTConfig(vocab_size=V, n_layer=1, n_head=3, d_model=9, context_length=17, arch="attn-only")
        m = model_of(gpt, 1)
        sd = m.state_dict()

        # 11. attograd's metadata, every value written with json.dumps: lists
        # with spaces, words quoted, numbers as JSON
        config = {"format": twin.CKPT_FORMAT, "arch": "gpt", "vocab_size": V, "n_layer": 2, "n_head": 3,
                  "d_model": 21, "context_length": 17, "qkv_bias": True, "dropout": 0.0, "step": 0,
                  "data": "text", "vocab": s.vocab}
        p = s.path("json.safetensors")
        write_safetensors(p, sd, {k: json.dumps(v) for k, v in config.items()})
        s.loads_as("json.dumps metadata ('[10, 32, ...]', '\"gpt\"', 'true')", p, m)

        # 12. a bare state_dict: the tensors give the config, --heads the heads,
        # --text the vocabulary
        bare = s.path("bare.safetensors")
        write_safetensors(bare, sd)
        s.loads_as("state_dict without metadata, --heads 3", bare, m, ["--heads", "3"])
        s.refuses("state_dict without metadata, no --heads", ["eval", "--model", bare, "--text", s.text],
                  "the file does not say how many heads: pass --heads")
        rc, out, err = run([s.ag, "sample", "--model", bare])
        s.check(rc == 2 and err.count("\n") == 1 and "pass --heads" in err and "pass --task NAME or --text FILE" in err,
                f"sample of a bare state_dict names every missing piece in one line ({err.strip()!r})")
        rc, out, err = run([s.ag, "info", bare, "--heads", "3"])
        s.check(rc == 0 and "arch gpt, vocab %d, 2 layers, 3 heads, d_model 21, context 17, qkv_bias true" % V in out
                and "unknown data" in out and "step unknown" in out, f"info --heads 3 of a bare state_dict ({out[:300]!r} {err.strip()})")
        s.refuses("info of a bare state_dict without --heads", ["info", bare], "the file does not say how many heads")
        s.refuses("--heads that contradicts the metadata", ["eval", "--model", p, "--text", s.text, "--heads", "7"],
                  "--heads 7 contradicts the file's metadata n_head 3")
        rc, out, err = run([s.ag, "sample", "--model", bare, "--heads", "3", "--text", s.text, "--prompt", "The ",
                            "--tokens", "30", "--seed", "4"])
        s.check(rc == 0 and out.startswith("The ") and len(out) > 30 and set(out.encode()) <= set(s.vocab),
                f"sample from a bare state_dict with --heads and --text ({out[:60]!r} {err.strip()})")
        # a tensor missing or of another shape is named, with both shapes
        short = dict(sd)
        short["blocks.1.attn.W_key.weight"] = sd["blocks.1.attn.W_key.weight"][:, :7]
        write_safetensors(s.path("short.safetensors"), short)
        s.refuses("a state_dict with a mis-shaped tensor", ["eval", "--model", s.path("short.safetensors"), "--text",
                  s.text, "--heads", "3"], "tensor 'blocks.1.attn.W_key.weight' has shape [21,7], the config needs [21,21]")
        write_safetensors(s.path("less.safetensors"), {k: v for k, v in sd.items() if k != "blocks.0.mlp.fc2.bias"})
        s.refuses("a state_dict missing a tensor", ["eval", "--model", s.path("less.safetensors"), "--text", s.text,
                  "--heads", "3"], "tensor 'blocks.0.mlp.fc2.bias' is missing")
        # a wrapped model's state_dict (DistributedDataParallel's "module.",
        # torch.compile's "_orig_mod."): the missing tensor is named with the
        # one the file has, and its prefix
        wrapper = torch.nn.Module()
        wrapper.module = m
        ddp = s.path("ddp.safetensors")
        write_safetensors(ddp, wrapper.state_dict())
        s.refuses("a DistributedDataParallel state_dict", ["eval", "--model", ddp, "--text", s.text, "--heads", "3"],
                  "no 2-D tensor 'tok_emb.weight' to take it from (the file has 'module.tok_emb.weight': "
                  "its names begin with 'module.', which attograd's do not)")
        compiled = s.path("compiled.safetensors")
        write_safetensors(compiled, {"_orig_mod." + k: v for k, v in sd.items()},
                          {k: json.dumps(v) for k, v in config.items()})
        s.refuses("a torch.compile state_dict with attograd's metadata", ["info", compiled],
                  "tensor 'tok_emb.weight' is missing (the file has '_orig_mod.tok_emb.weight': "
                  "its names begin with '_orig_mod.', which attograd's do not)")
        # training from a bare state_dict: --heads says what the file does not
        tuned = s.path("tuned.safetensors")
        rc, out, err = run([s.ag, "train", "--init", bare, "--heads", "3", "--text", s.text, "--steps", "2",
                            "--save", tuned])
        rc2, info, _ = run([s.ag, "info", tuned])
        s.check(rc == 0 and rc2 == 0 and "2 layers, 3 heads, d_model 21" in info,
                f"train --init of a bare state_dict with --heads 3 ({err.strip()!r} {info[:200]!r})")
        s.check("initialized from %s at step unknown\n" % bare in out and "step -" not in out,
                f"train --init of a bare state_dict says its step is unknown ({out[:600]!r})")
        s.refuses("train --init of a bare state_dict without --heads",
                  ["train", "--init", bare, "--text", s.text, "--steps", "1"],
                  "the file does not say how many heads: pass --heads")
        s.refuses("train --init with a --heads that contradicts the metadata",
                  ["train", "--init", p, "--text", s.text, "--heads", "7", "--steps", "1"],
                  "--heads 7 contradicts the file's metadata n_head 3")
        # the safetensors package's own convention: metadata {"format": "pt"}
        ms = model_of(small, 2)
        pt = s.path("pt.safetensors")
        write_safetensors(pt, ms.state_dict(), {"format": "pt"})
        s.loads_as("attn-only without qkv bias, metadata {format: pt}", pt, ms, ["--heads", "3"])
        # one key present is used, the rest inferred
        nh = s.path("nhead.safetensors")
        write_safetensors(nh, ms.state_dict(), {"n_head": json.dumps(3)})
        s.loads_as("only n_head in the metadata", nh, ms)
        # a task model: what is inferred equals what attograd's metadata says
        task = twin.GPTConfig(vocab_size=3, n_layer=1, n_head=2, d_model=8, context_length=11)
        mt = model_of(task, 3)
        full, tbare = s.path("sort_full.safetensors"), s.path("sort_bare.safetensors")
        twin.save_checkpoint(mt, full, "sort", [ord(c) for c in "012"], 0)
        write_safetensors(tbare, mt.state_dict())
        r_full = run([s.ag, "eval", "--model", full])
        r_bare = run([s.ag, "eval", "--model", tbare, "--task", "sort", "--heads", "2"])
        s.check(r_full[0] == 0 and r_bare[0] == 0 and r_bare[1] == r_full[1] and "accuracy" in r_bare[1],
                f"sort state_dict with --task sort --heads 2 evaluates as with full metadata ({r_bare[1]!r} vs {r_full[1]!r} {r_bare[2].strip()})")

        # 13. half precision and double, converted on load (exactly: the
        # reference is the twin with the same rounded weights in float32)
        for dtype in (torch.float16, torch.bfloat16, torch.float64):
            name = twin.DTYPE_NAMES[dtype]
            p = s.path(f"{name}.safetensors")
            rounded = {k: v.to(dtype) for k, v in sd.items()}
            write_safetensors(p, rounded, {"n_head": "3"})
            ref = twin.GPT(gpt)
            ref.load_state_dict({k: v.float() for k, v in rounded.items()})
            s.loads_as(f"{name} weights (model.to({dtype}))", p, ref)
        big = {k: v.double() for k, v in sd.items()}
        big["blocks.0.mlp.fc1.weight"][0, 1] = 1e39
        p = s.path("f64_big.safetensors")
        write_safetensors(p, big, {"n_head": "3"})
        s.refuses("F64 beyond float's range", ["eval", "--model", p, "--text", s.text],
                  '"blocks.0.mlp.fc1.weight": F64 value 1e+39 (element 1) is too large for F32')
        # tied embeddings stored once, under either name
        mtied = model_of(gpt, 4)
        mtied.out_head.weight = mtied.tok_emb.weight
        for keep, drop in (("tok_emb.weight", "out_head.weight"), ("out_head.weight", "tok_emb.weight")):
            p = s.path(f"tied_{keep}.safetensors")
            write_safetensors(p, {k: v for k, v in mtied.state_dict().items() if k != drop}, {"format": "pt"})
            s.loads_as(f"tied weights stored as {keep} only", p, mtied, ["--heads", "3"],
                       f"has no {drop}: using {keep} for it (tied weights)")
        # torch.save instead of safetensors: zip archive and the legacy pickle
        for legacy in (False, True):
            p = s.path(f"model{'_legacy' if legacy else ''}.pt")
            torch.save(sd, p, _use_new_zipfile_serialization=not legacy)
            for cmd in (["info", p], ["eval", "--model", p, "--text", s.text]):
                s.refuses(f"torch.save ({'legacy' if legacy else 'zip'}) file, {cmd[0]}", cmd, PICKLE_MSG)
    print(f"{s.passed} passed, {s.failed} failed")
    return 1 if s.failed else 0


if __name__ == "__main__":
    sys.exit(main())
