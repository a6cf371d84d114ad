#!/usr/bin/python3
"""bench_torch.py - the configurations of tests/bench_train.c trained in PyTorch:
the same model, loss, clipping and optimizer, timed step by step on random tokens.
Usage: bench_torch.py [--threads N] [toy|small|medium]...  Prints the median ms/step.
"""
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# name: (arch, V, T, d, heads, layers, B, optimizer, warmup, timed steps)
CONFIGS = {
    "toy": ("attn-only", 65, 32, 64, 4, 1, 16, "sgd", 5, 200),
    "small": ("gpt", 65, 64, 128, 4, 4, 12, "adamw", 2, 30),
    "medium": ("gpt", 65, 256, 384, 6, 6, 16, "adamw", 1, 5),
}


class MHA(nn.Module):
    """Causal self-attention as attograd computes it: mask with -inf, then scale."""

    def __init__(self, d, n_head):
        super().__init__()
        self.h = n_head
        self.W_query = nn.Linear(d, d, bias=False)
        self.W_key = nn.Linear(d, d, bias=False)
        self.W_value = nn.Linear(d, d, bias=False)
        self.out_proj = nn.Linear(d, d)

    def forward(self, x):
        B, T, d = x.shape
        hd = d // self.h
        q, k, v = (w(x).view(B, T, self.h, hd).transpose(1, 2) for w in (self.W_query, self.W_key, self.W_value))
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
        s = (q @ k.transpose(2, 3)).masked_fill(mask, float("-inf")) / math.sqrt(hd)
        y = torch.softmax(s, dim=-1) @ v
        return self.out_proj(y.transpose(1, 2).reshape(B, T, d))


class Block(nn.Module):
    def __init__(self, d, n_head, gpt):
        super().__init__()
        self.gpt = gpt
        self.attn = MHA(d, n_head)
        if gpt:
            self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        if not self.gpt:
            return x + self.attn(x)
        x = x + self.attn(self.norm1(x))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class Model(nn.Module):
    def __init__(self, arch, V, T, d, n_head, n_layer):
        super().__init__()
        gpt = arch == "gpt"
        self.tok_emb, self.pos_emb = nn.Embedding(V, d), nn.Embedding(T, d)
        self.blocks = nn.ModuleList(Block(d, n_head, gpt) for _ in range(n_layer))
        self.final_norm = nn.LayerNorm(d) if gpt else nn.Identity()
        self.out_head = nn.Linear(d, V, bias=False)
        for name, p in self.named_parameters():
            if name.endswith(".bias"):
                nn.init.zeros_(p)
            elif "norm" in name:
                nn.init.ones_(p)
            else:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, ids):
        x = self.tok_emb(ids) + self.pos_emb(torch.arange(ids.shape[1]))
        for b in self.blocks:
            x = b(x)
        return self.out_head(self.final_norm(x))


def run(name):
    arch, V, T, d, H, L, B, optim, warmup, steps = CONFIGS[name]
    torch.manual_seed(1)
    m = Model(arch, V, T, d, H, L)
    if optim == "sgd":
        opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    else:
        opt = torch.optim.AdamW(m.parameters(), lr=3e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    times = []
    for s in range(warmup + steps):
        x, y = torch.randint(0, V, (B, T)), torch.randint(0, V, (B, T))
        t0 = time.perf_counter()
        loss = F.cross_entropy(m(x).view(-1, V), y.view(-1))
        opt.zero_grad(set_to_none=False)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        t1 = time.perf_counter()
        if s >= warmup:
            times.append(1e3 * (t1 - t0))
    n_params = sum(p.numel() for p in m.parameters())
    print(f"config {name:<6} params {n_params:9d}  ms/step {statistics.median(times):9.3f}  loss {loss.item():.3f}",
          flush=True)


def main(argv):
    threads, names = 2, []
    i = 0
    while i < len(argv):
        if argv[i] == "--threads" and i + 1 < len(argv):
            threads = int(argv[i + 1])
            i += 2
            continue
        if argv[i] not in CONFIGS:
            sys.exit(f"bench_torch.py: '{argv[i]}' is not a config (toy, small, medium) or --threads N")
        names.append(argv[i])
        i += 1
    torch.set_num_threads(threads)
    print(f"torch {torch.__version__}, float32, {torch.get_num_threads()} threads")
    for name in names or list(CONFIGS):
        run(name)


if __name__ == "__main__":
    main(sys.argv[1:])
