#!/usr/bin/python3
"""bench_torch.py - the configurations of tests/bench_train.c trained in PyTorch:
the same model, loss, clipping and optimizer, timed step by step on random tokens.

Usage: bench_torch.py [--threads N] [--precision fp32|bf16|both]
                      [--settings passive,omp1,...] [--coretype auto|library|NAME]
                      [toy|small|medium]...
Prints, per config and precision, the median ms/step of PyTorch at its best:

  * OpenBLAS (Debian's torch does its fp32 matrix multiplies in it) runs the
    kernels tests/bench_blas.sh finds fastest on this CPU (--coretype auto),
    or the library's own choice (library), or the named OPENBLAS_CORETYPE.
  * Threads: torch runs OpenMP threads for its own loops and OpenBLAS runs its
    own threads for the matrix multiplies.  With OpenMP's default waiting
    (spinning) they take the cores from each other.  Each setting below runs in
    its own process (the variables must be set before torch loads), all configs
    under each, and the faster setting counts, per config and precision:
      passive  OMP_WAIT_POLICY=PASSIVE, N OpenMP threads, N OpenBLAS threads
      omp1     1 OpenMP thread, N OpenBLAS threads
      spin     N OpenMP threads with the default waiting, N OpenBLAS threads
               (torch as installed; not tried unless named)
  * bf16: the forward pass under torch.autocast("cpu", dtype=torch.bfloat16),
    the loss in float32, with oneDNN capped at ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16
    (without the cap, Debian's torch 1.13 has died of SIGILL on a CPU with AMX).  A
    crashed run is reported as "crashed signal N" and the rest go on.

Output lines "config NAME precision P ms/step X setting S ..." (or "... crashed
signal N" / "... failed exit N") are what tests/bench.sh reads.
"""
import os
import statistics
import subprocess
import sys
import time

# name: (arch, V, T, d, heads, layers, B, optimizer, warmup, timed steps)
CONFIGS = {
    "toy": ("attn-only", 65, 32, 64, 4, 1, 16, "sgd", 5, 200),
    "small": ("gpt", 65, 64, 128, 4, 4, 12, "adamw", 2, 30),
    "medium": ("gpt", 65, 256, 384, 6, 6, 16, "adamw", 1, 5),
}
SETTINGS = ("passive", "omp1", "spin")
BF16_ISA_CAP = "AVX512_CORE_BF16"
HERE = os.path.dirname(os.path.abspath(__file__))


def setting_env(setting, threads, precision, coretype):
    """The environment a worker process starts with."""
    env = dict(os.environ)
    for k in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "GOMP_SPINCOUNT",
              "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"):
        env.pop(k, None)
    env["OPENBLAS_NUM_THREADS"] = str(threads)
    if setting == "passive":
        env["OMP_WAIT_POLICY"] = "PASSIVE"
        env["OMP_NUM_THREADS"] = str(threads)
    elif setting == "omp1":
        env["OMP_NUM_THREADS"] = "1"
    else:
        env["OMP_NUM_THREADS"] = str(threads)
    if coretype is None:
        env.pop("OPENBLAS_CORETYPE", None)
    else:
        env["OPENBLAS_CORETYPE"] = coretype
    if precision == "bf16":
        env["ONEDNN_MAX_CPU_ISA"] = BF16_ISA_CAP
    return env


def describe(setting, threads):
    omp = 1 if setting == "omp1" else threads
    wait = {"passive": ", OMP_WAIT_POLICY=PASSIVE", "omp1": "", "spin": ", OpenMP's default waiting"}[setting]
    return f"{omp} OpenMP thread{'s' if omp != 1 else ''}{wait}, {threads} OpenBLAS thread{'s' if threads != 1 else ''}"


def probe_coretype(threads):
    """Runs tests/bench_blas.sh; returns (coretype or None, its report lines)."""
    try:
        p = subprocess.run(["sh", os.path.join(HERE, "bench_blas.sh"), str(threads)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except OSError as e:
        return None, [f"OpenBLAS core type: not probed ({e}); the library's own choice"]
    report = p.stderr.rstrip("\n").split("\n") if p.stderr.strip() else []
    core = p.stdout.strip()
    if p.returncode != 0 or not core:
        report.append("OpenBLAS core type: not chosen; OPENBLAS_CORETYPE unset (the library, if any, chooses)")
        return None, report
    return core, report


def run_worker(setting, threads, precision, coretype, names):
    """One process: every config under one setting.  Returns (info line, {name: fields},
    how it ended: None or "crashed signal N" / "failed exit N")."""
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", setting, "--threads", str(threads),
           "--precision", precision] + names
    p = subprocess.run(cmd, env=setting_env(setting, threads, precision, coretype),
                       stdout=subprocess.PIPE, text=True)
    info, rows = "", {}
    for line in p.stdout.splitlines():
        w = line.split()
        if w[:1] == ["worker"]:
            info = line
        elif w[:1] == ["config"] and len(w) > 1:
            rows[w[1]] = dict(zip(w[2::2], w[3::2]))
    end = None
    if p.returncode < 0:
        end = f"crashed signal {-p.returncode}"
    elif p.returncode != 0:
        end = f"failed exit {p.returncode}"
    return info, rows, end


def driver(argv):
    threads, precisions, settings, coretype, names = 2, ["fp32"], ["passive", "omp1"], "auto", []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("--threads", "--precision", "--settings", "--coretype") and i + 1 < len(argv):
            v = argv[i + 1]
            if a == "--threads":
                threads = int(v) if v.isdigit() else 0
            elif a == "--precision":
                if v not in ("fp32", "bf16", "both"):
                    sys.exit(f"bench_torch.py: --precision is fp32, bf16 or both, not '{v}'")
                precisions = ["fp32", "bf16"] if v == "both" else [v]
            elif a == "--settings":
                settings = v.split(",")
                for s in settings:
                    if s not in SETTINGS:
                        sys.exit(f"bench_torch.py: '{s}' is not a setting ({', '.join(SETTINGS)})")
            else:
                coretype = v
            i += 2
            continue
        if a not in CONFIGS:
            sys.exit(f"bench_torch.py: '{a}' is not a config (toy, small, medium) or an option; see the top of the file")
        names.append(a)
        i += 1
    if threads < 1:
        sys.exit("bench_torch.py: --threads must be >= 1")
    names = names or list(CONFIGS)

    if coretype == "auto":
        coretype, report = probe_coretype(threads)
        for line in report:
            print(line)
    elif coretype == "library":
        coretype = None
    print(f"OPENBLAS_CORETYPE for torch: {coretype or '(unset: the library chooses)'}")
    for s in settings:
        print(f"setting {s}: {describe(s, threads)}")
    if "bf16" in precisions:
        print(f'bf16: forward under torch.autocast("cpu", dtype=torch.bfloat16), loss in float32, '
              f"ONEDNN_MAX_CPU_ISA={BF16_ISA_CAP}")
    sys.stdout.flush()

    for prec in precisions:
        results = {}
        for s in settings:
            info, rows, end = run_worker(s, threads, prec, coretype, names)
            if info:
                print(info.replace("worker ", f"ran {prec} {s}: ", 1))
            for n in names:
                if n in rows:
                    results[(n, s)] = rows[n]
                    print(f"tried config {n} precision {prec} setting {s} ms/step {rows[n]['ms/step']}")
                else:
                    results[(n, s)] = end or "no result"
                    print(f"tried config {n} precision {prec} setting {s} {results[(n, s)]}")
            sys.stdout.flush()
        for n in names:
            ok = [(float(results[(n, s)]["ms/step"]), s) for s in settings if isinstance(results[(n, s)], dict)]
            if not ok:
                print(f"config {n:<6} precision {prec} {results[(n, settings[0])]}")
                continue
            ms, s = min(ok)
            r = results[(n, s)]
            others = ",".join(f"{o}:{float(results[(n, o)]['ms/step']):.3f}" if isinstance(results[(n, o)], dict)
                              else f"{o}:{results[(n, o)].replace(' ', '-')}" for o in settings if o != s)
            print(f"config {n:<6} precision {prec} ms/step {ms:9.3f} setting {s} params {r['params']} "
                  f"loss {r['loss']} others {others or '-'}")
        sys.stdout.flush()
    return 0


if __name__ == "__main__" and "--worker" not in sys.argv[1:]:
    sys.exit(driver(sys.argv[1:]))

# From here on: a worker, started by driver() with its setting's environment
# (bench_torch.py --worker SETTING --threads N --precision P configs...).
import ctypes  # noqa: E402
import math  # noqa: E402

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


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


def openblas_info():
    """The OpenBLAS this process loaded (through torch): (path, core name, threads)."""
    with open("/proc/self/maps") as f:
        paths = {line.split()[-1] for line in f if "openblas" in line.rsplit("/", 1)[-1]}
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)
            lib.openblas_get_corename.restype = ctypes.c_char_p
            return path, lib.openblas_get_corename().decode(), lib.openblas_get_num_threads()
        except (OSError, AttributeError):
            continue
    return None, None, None


def run(name, precision):
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
        if precision == "bf16":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                logits = m(x)
        else:
            logits = m(x)
        loss = F.cross_entropy(logits.float().view(-1, V), y.view(-1))
        opt.zero_grad(set_to_none=False)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        t1 = time.perf_counter()
        if s >= warmup:
            times.append(1e3 * (t1 - t0))
    n_params = sum(p.numel() for p in m.parameters())
    print(f"config {name} params {n_params} ms/step {statistics.median(times):.3f} loss {loss.item():.3f} "
          f"logits {str(logits.dtype).replace('torch.', '')}", flush=True)


def worker(argv):
    setting, threads, precision = argv[1], int(argv[3]), argv[5]
    torch.set_num_threads(1 if setting == "omp1" else threads)
    path, core, blas_threads = openblas_info()
    env = " ".join(f"{k}={os.environ[k]}" for k in ("OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                                                     "OMP_WAIT_POLICY", "ONEDNN_MAX_CPU_ISA") if k in os.environ)
    print(f"worker torch {torch.__version__}, {torch.get_num_threads()} OpenMP thread{'s' if torch.get_num_threads() != 1 else ''}, "
          f"OpenBLAS {'core ' + core + ', ' + str(blas_threads) + ' threads (' + os.path.basename(path) + ')' if core else 'not loaded'}; "
          f"{env}", flush=True)
    for name in argv[6:]:
        run(name, precision)


if __name__ == "__main__":
    worker(sys.argv[1:])
