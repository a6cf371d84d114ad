#!/usr/bin/python3
"""twin.py - attograd's models written in PyTorch, module for module.

GPT(config) has the same parameters under the same names as attograd's
tiny GPT and attn-only models, so its state_dict keys are the tensor names
of an attograd checkpoint.  GPT.from_checkpoint() builds a model from an
attograd file and save_checkpoint() writes one attograd can load (--init,
eval, sample, info).  The forward pass follows attograd operation by
operation (masked_fill with -inf, then scale by 1/sqrt(head_dim), softmax,
dropout), which is what tests/parity.py checks.

Checkpoints are safetensors files.  load_file()/save_file() below read and
write them with the standard library and torch alone; where the safetensors
package is installed, safetensors.torch.load_file/save_file do the same for
the tensors.  Run as a script for a demo: load a checkpoint and continue
training it with torch.optim.AdamW on the same text.
"""
import json
import math
import os
import struct
import sys
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

CKPT_FORMAT = "attograd/1"

# ---- safetensors -----------------------------------------------------------
# u64 little-endian header length N, N bytes of JSON {name: {"dtype", "shape",
# "data_offsets": [begin, end)}, "__metadata__": {str: str}}, then the data.
# torch 1.13 has no uint64, so U64 tensors (attograd's generator state) are
# read as int64 holding the same 64 bits.

_DTYPES = {"F32": torch.float32, "F64": torch.float64, "F16": torch.float16, "BF16": torch.bfloat16,
           "I32": torch.int32, "I64": torch.int64, "U64": torch.int64, "U8": torch.uint8}
DTYPE_NAMES = {torch.float32: "F32", torch.float64: "F64", torch.float16: "F16", torch.bfloat16: "BF16",
               torch.int32: "I32", torch.int64: "I64", torch.uint8: "U8"}


def raw_bytes(t):
    """A contiguous tensor's little-endian bytes (numpy has no bfloat16, so
    16-bit floats go through an int16 view of the same bits)."""
    if not t.numel():
        return b""
    return (t.view(torch.int16) if t.element_size() == 2 and t.is_floating_point() else t).numpy().tobytes()


def load_file(path):
    """(state_dict, metadata) of a safetensors file; tensors in file order."""
    with open(path, "rb") as f:
        buf = f.read()
    if len(buf) < 8:
        raise ValueError(f"{path}: shorter than the 8-byte header length")
    (n,) = struct.unpack_from("<Q", buf, 0)
    if 8 + n > len(buf):
        raise ValueError(f"{path}: header length {n} runs past the end of the file")
    header = json.loads(buf[8:8 + n].decode("utf-8"))
    metadata = header.pop("__metadata__", {}) or {}
    data = memoryview(buf)[8 + n:]
    tensors = {}
    for name, e in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        begin, end = e["data_offsets"]
        dtype = _DTYPES[e["dtype"]]
        if end > begin:
            # a fresh copy: aligned, writable, independent of the file buffer
            t = torch.frombuffer(bytearray(data[begin:end]), dtype=dtype)
        else:
            t = torch.empty(0, dtype=dtype)
        tensors[name] = t.reshape(e["shape"])
    return tensors, metadata


def save_file(tensors, path, metadata=None):
    """Write tensors (name -> tensor, in order) and string metadata atomically."""
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        if t.dtype not in DTYPE_NAMES:
            raise ValueError(f"tensor {name}: dtype {t.dtype} has no safetensors name here")
        blob = raw_bytes(t)
        header[name] = {"dtype": DTYPE_NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-(8 + len(text)) % 8)       # 8 + N a multiple of 8
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


# ---- the model -----------------------------------------------------------

@dataclass
class GPTConfig:
    vocab_size: int
    n_layer: int = 2
    n_head: int = 4
    d_model: int = 64
    context_length: int = 64
    qkv_bias: bool = False
    dropout: float = 0.0
    arch: str = "gpt"            # "gpt" or "attn-only"


class MultiHeadAttention(nn.Module):
    """Causal self-attention over n_head heads of d_model/n_head dims."""

    def __init__(self, d_model, n_head, context_length, qkv_bias, dropout):
        super().__init__()
        if d_model % n_head:
            raise ValueError(f"d_model {d_model} is not divisible by {n_head} heads")
        self.n_head, self.head_dim = n_head, d_model // n_head
        self.W_query = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.W_key = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.W_value = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.out_proj = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)
        # 1 above the diagonal: key j > query i is the future
        mask = torch.triu(torch.ones(context_length, context_length, dtype=torch.bool), diagonal=1)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x):
        B, T, d = x.shape
        H, hd = self.n_head, self.head_dim
        q = self.W_query(x).view(B, T, H, hd).transpose(1, 2)      # [B,H,T,hd]
        k = self.W_key(x).view(B, T, H, hd).transpose(1, 2)
        v = self.W_value(x).view(B, T, H, hd).transpose(1, 2)
        scores = q @ k.transpose(2, 3)                               # [B,H,T,T]
        scores = scores.masked_fill(self.mask[:T, :T], float("-inf"))
        # attograd multiplies by the float32 of 1/sqrt(hd) rather than dividing
        scores = scores * (1.0 / math.sqrt(hd))
        w = self.dropout(torch.softmax(scores, dim=-1))
        y = (w @ v).transpose(1, 2).reshape(B, T, d)                 # heads merged
        return self.out_proj(y)


class MLP(nn.Module):
    def __init__(self, d_model):
        super().__init__()
        self.fc1 = nn.Linear(d_model, 4 * d_model)
        self.fc2 = nn.Linear(4 * d_model, d_model)
        self.gelu = nn.GELU()           # exact: x * Phi(x)

    def forward(self, x):
        return self.fc2(self.gelu(self.fc1(x)))


class Block(nn.Module):
    """gpt: pre-norm attention and MLP; attn-only: x + attn(x), nothing else."""

    def __init__(self, cfg):
        super().__init__()
        self.gpt = cfg.arch == "gpt"
        if self.gpt:
            self.norm1 = nn.LayerNorm(cfg.d_model, eps=1e-5)
        self.attn = MultiHeadAttention(cfg.d_model, cfg.n_head, cfg.context_length, cfg.qkv_bias, cfg.dropout)
        if self.gpt:
            self.norm2 = nn.LayerNorm(cfg.d_model, eps=1e-5)
            self.mlp = MLP(cfg.d_model)
            self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x):
        if not self.gpt:
            return x + self.attn(x)
        x = x + self.drop(self.attn(self.norm1(x)))
        return x + self.drop(self.mlp(self.norm2(x)))


class GPT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        if cfg.arch not in ("gpt", "attn-only"):
            raise ValueError(f"arch {cfg.arch!r} is not gpt or attn-only")
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.context_length, cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        if cfg.arch == "gpt":
            self.final_norm = nn.LayerNorm(cfg.d_model, eps=1e-5)
        self.out_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.init_weights()

    def init_weights(self, generator=None):
        """attograd's scheme: N(0, 0.02) weights, zero biases, unit norm gains."""
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith(".bias"):
                    p.zero_()
                elif "norm" in name:
                    p.fill_(1.0)
                else:
                    p.normal_(0.0, 0.02, generator=generator)

    def forward(self, ids, targets=None):
        """ids [B,T] -> logits [B,T,V]; with targets, also the mean cross-entropy."""
        T = ids.shape[1]
        if T > self.cfg.context_length:
            raise ValueError(f"{T} tokens but the model's context is {self.cfg.context_length}")
        x = self.drop(self.tok_emb(ids) + self.pos_emb(torch.arange(T, device=ids.device)))
        for block in self.blocks:
            x = block(x)
        if self.cfg.arch == "gpt":
            x = self.final_norm(x)
        logits = self.out_head(x)
        if targets is None:
            return logits
        return logits, F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

    @classmethod
    def from_checkpoint(cls, path):
        """A model with an attograd checkpoint's config and weights.  The
        checkpoint's metadata (vocab, data, step, ...) is in model.metadata."""
        tensors, meta = load_file(path)
        if meta.get("format") != CKPT_FORMAT:
            raise ValueError(f"{path}: not an attograd checkpoint (format {meta.get('format')!r})")
        cfg = GPTConfig(vocab_size=int(meta["vocab_size"]), n_layer=int(meta["n_layer"]),
                        n_head=int(meta["n_head"]), d_model=int(meta["d_model"]),
                        context_length=int(meta["context_length"]), qkv_bias=meta["qkv_bias"] == "true",
                        dropout=float(meta["dropout"]), arch=meta["arch"])
        model = cls(cfg)
        # a run's checkpoint also holds optim.m.*, optim.v.* and state.rng
        weights = {k: v for k, v in tensors.items() if not k.startswith(("optim.", "state."))}
        model.load_state_dict(weights, strict=True)
        model.metadata = meta
        return model


def vocab_of(meta):
    """The byte list of a checkpoint's vocabulary: token id -> byte value."""
    return json.loads(meta["vocab"])


def save_checkpoint(model, path, data, vocab, step):
    """Write model as a weights-only attograd checkpoint (what --init, eval,
    sample and info read).  data: "text" or a task name; vocab: the byte
    values of token ids 0..V-1 (increasing); step: steps trained so far."""
    c = model.cfg
    if len(vocab) != c.vocab_size or list(vocab) != sorted(set(vocab)):
        raise ValueError(f"vocab must list {c.vocab_size} increasing byte values")
    meta = {"format": CKPT_FORMAT, "arch": c.arch, "vocab_size": c.vocab_size, "n_layer": c.n_layer,
            "n_head": c.n_head, "d_model": c.d_model, "context_length": c.context_length,
            "qkv_bias": "true" if c.qkv_bias else "false", "dropout": repr(float(c.dropout)),
            "step": int(step), "data": data, "vocab": "[" + ",".join(str(int(b)) for b in vocab) + "]"}
    tensors = {k: v.detach().to(torch.float32) for k, v in model.state_dict().items()}
    save_file(tensors, path, meta)


# ---- text, as attograd cuts it ------------------------------------------

def load_text(path, vocab=None):
    """(token ids as int64, vocab).  vocab: sorted distinct bytes of the file
    unless given (e.g. a checkpoint's); token id = index in it."""
    with open(path, "rb") as f:
        raw = f.read()
    if vocab is None:
        vocab = sorted(set(raw))
    index = {b: i for i, b in enumerate(vocab)}
    missing = set(raw) - index.keys()
    if missing:
        raise ValueError(f"{path}: byte {min(missing)} is not in the vocabulary")
    return torch.tensor([index[b] for b in raw], dtype=torch.long), list(vocab)


def split(tokens):
    """(train, val): the first n - n/10 tokens train, the rest validate."""
    n_train = len(tokens) - len(tokens) // 10
    return tokens[:n_train], tokens[n_train:]


def eval_windows(tokens, T):
    """x, y of every window s = 0, T, 2T, ... with s + T + 1 <= len(tokens)."""
    starts = range(0, len(tokens) - T, T)
    x = torch.stack([tokens[s:s + T] for s in starts])
    y = torch.stack([tokens[s + 1:s + T + 1] for s in starts])
    return x, y


def sequential_batch(train, step, B, T):
    """--order sequential: row b of step k starts at ((k*B + b)*T) mod (n_train - T)."""
    m = len(train) - T
    starts = [((step * B + b) * T) % m for b in range(B)]
    x = torch.stack([train[s:s + T] for s in starts])
    y = torch.stack([train[s + 1:s + T + 1] for s in starts])
    return x, y


def random_batch(train, B, T, generator=None):
    m = len(train) - T
    starts = torch.randint(0, m, (B,), generator=generator).tolist()
    x = torch.stack([train[s:s + T] for s in starts])
    y = torch.stack([train[s + 1:s + T + 1] for s in starts])
    return x, y


@torch.no_grad()
def evaluate(model, tokens):
    """Mean next-token loss over a split's windows (what `attograd eval` prints)."""
    model.eval()
    x, y = eval_windows(tokens, model.cfg.context_length)
    _, loss = model(x, y)
    return loss.item()


# ---- demo: continue an attograd run in PyTorch ----------------------------

def main(argv):
    if len(argv) < 3:
        print("usage: twin.py MODEL.safetensors TEXT [STEPS] [OUT.safetensors]", file=sys.stderr)
        return 2
    model = GPT.from_checkpoint(argv[1])
    tokens, vocab = load_text(argv[2], vocab_of(model.metadata))
    train, val = split(tokens)
    steps = int(argv[3]) if len(argv) > 3 else 50
    print(f"loaded {argv[1]}: {model.cfg}, step {model.metadata['step']}")
    print(f"val loss {evaluate(model, val):.4f}")
    # decay matrices only, as attograd does
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                             {"params": no_decay, "weight_decay": 0.0}], lr=3e-3)
    gen = torch.Generator().manual_seed(1)
    T = model.cfg.context_length
    for step in range(steps):
        model.train()
        x, y = random_batch(train, 32, T, gen)
        _, loss = model(x, y)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if (step + 1) % 10 == 0 or step + 1 == steps:
            print(f"step {step + 1}/{steps} | loss {loss.item():.4f}")
    print(f"val loss {evaluate(model, val):.4f}")
    if len(argv) > 4:
        save_checkpoint(model, argv[4], "text", vocab, int(model.metadata["step"]) + steps)
        # the validation split, as printed above (a file the checkpoint does not name is scored whole)
        print(f"saved {argv[4]} (attograd eval --model {argv[4]} --text {argv[2]} --split val)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
