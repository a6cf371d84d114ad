#!/usr/bin/python3
"""parity.py - attograd against its PyTorch twin (tests/twin.py).

For each configuration (odd sizes, both architectures, qkv bias on and off):
  - a checkpoint written by the twin loads in attograd and evaluates to the
    twin's loss (relative 1e-5);
  - a model trained and saved by attograd loads in the twin and evaluates to
    the same loss on the train and validation windows (relative 1e-5);
  - one plain SGD step from the same --init checkpoint gives the same weights
    (per tensor, max |difference| / max |value| <= 1e-5), and the same update;
  - five AdamW steps with weight decay and gradient clipping give the same
    weights and first moments (1e-4).
Both sides run in float32.  Usage (from the repository root):

    /usr/bin/python3 tests/parity.py [--attograd build/attograd] [--text data/tiny.txt]

Ends with "N passed, N failed"; exit status 1 on any failure.
"""
import argparse
import math
import os
import re
import shlex
import subprocess
import sys
import tempfile

import torch

sys.dont_write_bytecode = True     # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import twin  # noqa: E402

CONFIGS = [
    # arch, n_layer, n_head, d_model, context, qkv_bias
    ("gpt", 2, 3, 21, 17, True),
    ("gpt", 1, 3, 15, 17, False),
    ("attn-only", 2, 3, 21, 17, True),
    ("attn-only", 3, 3, 9, 17, False),
]
SGD_LR, SGD_BATCH = 0.5, 5
# eps 1e-6 rather than 1e-8: AdamW divides by sqrt(v) + eps, so a gradient
# entry near 1e-8 (a saturated GELU unit) gets its float32 rounding error
# amplified to a few percent of lr; a larger eps bounds that amplification by
# 1/eps and leaves the comparison about the two implementations.
ADAMW = dict(lr=1e-2, weight_decay=0.1, clip=0.5, beta1=0.9, beta2=0.99, eps=1e-6, steps=5, batch=4)


class Checks:
    def __init__(self):
        self.passed = self.failed = 0

    def check(self, cond, what):
        if cond:
            self.passed += 1
            print(f"ok    {what}")
        else:
            self.failed += 1
            print(f"FAIL  {what}")
        sys.stdout.flush()
        return cond


def run(cmd):
    """(exit status, stdout + stderr) of an attograd command."""
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    return p.returncode, p.stdout


def eval_loss(ag, model_path, text, split):
    rc, out = run([ag, "eval", "--model", model_path, "--text", text, "--split", split])
    for line in out.splitlines():
        if rc == 0 and line.startswith("loss "):
            return float(line.split()[1])
    raise RuntimeError(f"attograd eval failed ({rc}): {out.strip()}")


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-30)


def tensor_rel(got, want):
    """max |got - want| / max |want|: the per-tensor relative difference."""
    scale = want.abs().max().item()
    diff = (got - want).abs().max().item()
    return diff / scale if scale > 0 else diff


def rich_init(model, seed):
    """Weights far from attograd's N(0, 0.02) start, with non-zero biases and
    gains that are not 1, so every parameter shapes the loss and its gradient."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            elif "norm" in name:
                p.copy_(1 + 0.2 * torch.randn(p.shape, generator=g))
            elif "emb" in name:
                p.copy_(0.5 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p.shape[1]))


def torch_loss_all(model, train, val):
    """`--split all`: the windows of each split, every token weighted equally."""
    T = model.cfg.context_length
    xs, ys = zip(twin.eval_windows(train, T), twin.eval_windows(val, T))
    model.eval()
    with torch.no_grad():
        return model(torch.cat(xs), torch.cat(ys))[1].item()


def clone(model):
    m = twin.GPT(model.cfg)
    m.load_state_dict(model.state_dict())
    return m


def zero_gradient(name):
    """The key projection's bias has a zero gradient by the math: it adds q . b
    to every score of a query's row, and softmax ignores a constant shift.  In
    float32 both sides get rounding noise (~1e-9) there, which AdamW's
    m / sqrt(v) turns into steps of +-lr with arbitrary signs, so the tensor
    is checked for a vanishing gradient instead of compared."""
    return name.endswith(".attn.W_key.bias")


def compare_weights(ck, name, got_path, want, start, tol, update_tol, skip_zero_grad):
    """Per tensor: weights within tol; and the update (new - start) within
    update_tol of the twin's, which a small learning rate could not hide."""
    got, _ = twin.load_file(got_path)
    want_sd, start_sd = want.state_dict(), start.state_dict()
    worst_w = worst_u = (0.0, "")
    for k, w in want_sd.items():
        if zero_gradient(k) and skip_zero_grad:
            continue
        worst_w = max(worst_w, (tensor_rel(got[k], w), k))
        du_want = w - start_sd[k]
        if not zero_gradient(k) and du_want.abs().max().item() > 0:
            worst_u = max(worst_u, (tensor_rel(got[k] - start_sd[k], du_want), k))
    ck.check(worst_w[0] <= tol, f"{name}: weights match, worst {worst_w[0]:.2e} ({worst_w[1]}) <= {tol:g}")
    ck.check(worst_u[0] <= update_tol,
             f"{name}: updates match, worst {worst_u[0]:.2e} ({worst_u[1]}) <= {update_tol:g}")
    return got


def check_vanishing(ck, name, tensors, prefix=""):
    """Tensors with a zero gradient by the math stay below 1e-5 of the largest
    entry among the others (in attograd's file: updates or moments)."""
    keys = [k for k in tensors if zero_gradient(k)]
    if not keys:
        return
    small = max(tensors[k].abs().max().item() for k in keys)
    big = max(v.abs().max().item() for k, v in tensors.items() if not zero_gradient(k))
    ck.check(small <= 1e-5 * big, f"{name}: {prefix}W_key.bias (zero gradient) stays at {small:.1e} vs {big:.1e}")


def sgd_twin(model, train):
    """One step of plain SGD on the first --order sequential batch."""
    T = model.cfg.context_length
    x, y = twin.sequential_batch(train, 0, SGD_BATCH, T)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=SGD_LR, momentum=0, weight_decay=0)
    _, loss = model(x, y)
    opt.zero_grad()
    loss.backward()
    opt.step()


def adamw_twin(model, train):
    """attograd's AdamW: decoupled decay on matrices only, global-norm clip.
    Returns the gradient norms before clipping and the optimizer."""
    a, T = ADAMW, model.cfg.context_length
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a["weight_decay"]},
                             {"params": rest, "weight_decay": 0.0}],
                            lr=a["lr"], betas=(a["beta1"], a["beta2"]), eps=a["eps"])
    norms = []
    model.train()
    for step in range(a["steps"]):
        x, y = twin.sequential_batch(train, step, a["batch"], T)
        _, loss = model(x, y)
        opt.zero_grad()
        loss.backward()
        norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), a["clip"]).item())
        opt.step()
    return norms, opt


def parity(ck, ag, text, work, cfg_tuple, seed):
    arch, L, H, d, T, bias = cfg_tuple
    tag = f"{arch} L{L} H{H} d{d} T{T} qkv_bias={'on' if bias else 'off'}"
    tokens, vocab = twin.load_text(text)
    train, val = twin.split(tokens)
    cfg = twin.GPTConfig(vocab_size=len(vocab), n_layer=L, n_head=H, d_model=d, context_length=T,
                         qkv_bias=bias, arch=arch)

    # 1. twin -> attograd: a checkpoint written by the twin, evaluated by both
    start = twin.GPT(cfg)
    rich_init(start, seed)
    init = os.path.join(work, "init.safetensors")
    twin.save_checkpoint(start, init, "text", vocab, 0)
    back, meta = twin.load_file(init)
    same = list(back) == list(start.state_dict()) and all(torch.equal(back[k], v) for k, v in start.state_dict().items())
    ck.check(same and meta["format"] == twin.CKPT_FORMAT and meta["arch"] == arch,
             f"{tag}: twin save_file/load_file round trip is exact")
    rc, out = run([ag, "info", init])
    ck.check(rc == 0, f"{tag}: attograd info loads the twin's checkpoint" + ("" if rc == 0 else f": {out.strip()}"))
    want = torch_loss_all(start, train, val)
    got = eval_loss(ag, init, text, "all")
    ck.check(rel(got, want) <= 1e-5, f"{tag}: twin checkpoint, eval all: attograd {got:.6f} torch {want:.6f}")

    # 2. attograd -> twin: a model attograd trained and saved (with its run state)
    trained = os.path.join(work, "trained.safetensors")
    rc, out = run([ag, "train", "--text", text, "--arch", arch, "--layers", str(L), "--heads", str(H),
                   "--d-model", str(d), "--context", str(T)] + (["--qkv-bias"] if bias else []) +
                  ["--optimizer", "adamw", "--lr", "1e-2", "--steps", "20", "--batch", "8", "--seed", str(seed),
                   "--eval-every", "0", "--quiet", "--save", trained])
    if not ck.check(rc == 0, f"{tag}: attograd train --save" + ("" if rc == 0 else f": {out.strip()}")):
        return
    m = twin.GPT.from_checkpoint(trained)
    ck.check(m.cfg == cfg, f"{tag}: twin reads the config from attograd's metadata ({m.cfg})")
    for split_name, toks in (("val", val), ("train", train)):
        want = twin.evaluate(m, toks)
        got = eval_loss(ag, trained, text, split_name)
        ck.check(rel(got, want) <= 1e-5,
                 f"{tag}: attograd checkpoint, eval {split_name}: attograd {got:.6f} torch {want:.6f}")

    # 3. one SGD step from the same --init
    out_sgd = os.path.join(work, "sgd.safetensors")
    rc, out = run([ag, "train", "--init", init, "--text", text, "--optimizer", "sgd", "--lr", str(SGD_LR),
                   "--momentum", "0", "--weight-decay", "0", "--clip", "0", "--order", "sequential",
                   "--steps", "1", "--batch", str(SGD_BATCH), "--eval-every", "0", "--quiet", "--save", out_sgd])
    if ck.check(rc == 0, f"{tag}: attograd sgd step" + ("" if rc == 0 else f": {out.strip()}")):
        m = clone(start)
        sgd_twin(m, train)
        got = compare_weights(ck, f"{tag}: sgd 1 step", out_sgd, m, start, 1e-5, 1e-4, False)
        update = {k: got[k] - v for k, v in start.state_dict().items()}
        check_vanishing(ck, f"{tag}: sgd 1 step", update, "update of ")

    # 4. five AdamW steps with weight decay and clipping
    a = ADAMW
    out_adamw = os.path.join(work, "adamw.safetensors")
    rc, out = run([ag, "train", "--init", init, "--text", text, "--optimizer", "adamw", "--lr", str(a["lr"]),
                   "--weight-decay", str(a["weight_decay"]), "--clip", str(a["clip"]), "--beta1", str(a["beta1"]),
                   "--beta2", str(a["beta2"]), "--eps", str(a["eps"]), "--order", "sequential",
                   "--steps", str(a["steps"]), "--batch", str(a["batch"]), "--eval-every", "0", "--quiet",
                   "--save", out_adamw])
    if ck.check(rc == 0, f"{tag}: attograd adamw steps" + ("" if rc == 0 else f": {out.strip()}")):
        m = clone(start)
        norms, opt = adamw_twin(m, train)
        ck.check(min(norms) > a["clip"],
                 f"{tag}: adamw: clipping is active at every step (norms {min(norms):.3g}..{max(norms):.3g})")
        got = compare_weights(ck, f"{tag}: adamw {a['steps']} steps", out_adamw, m, start, 1e-4, 1e-3, True)
        worst = (0.0, "")
        for name, p in m.named_parameters():
            if not zero_gradient(name):
                worst = max(worst, (tensor_rel(got["optim.m." + name], opt.state[p]["exp_avg"]), name))
        ck.check(worst[0] <= 1e-4, f"{tag}: adamw first moments match, worst {worst[0]:.2e} ({worst[1]})")
        moments = {k[len("optim.m."):]: v for k, v in got.items() if k.startswith("optim.m.")}
        check_vanishing(ck, f"{tag}: adamw", moments, "first moment of ")


def twin_script(ck, ag, text, work):
    """tests/twin.py run as a script prints a validation loss and suggests an
    attograd eval command for the checkpoint it saves: that command must
    print the same loss."""
    start, out_path = os.path.join(work, "script.st"), os.path.join(work, "script_out.st")
    rc, out = run([ag, "train", "--text", text, "--d-model", "16", "--heads", "2", "--layers", "1",
                   "--context", "16", "--steps", "20", "--quiet", "--save", start])
    if not ck.check(rc == 0, "twin.py script: attograd train" + ("" if rc == 0 else f": {out.strip()}")):
        return
    here = os.path.dirname(os.path.abspath(__file__))
    p = subprocess.run([sys.executable, os.path.join(here, "twin.py"), start, text, "5", out_path],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    losses = [float(line.split()[2]) for line in p.stdout.splitlines() if line.startswith("val loss ")]
    suggested = re.search(r"\((attograd eval [^)]*)\)", p.stdout)
    if not ck.check(p.returncode == 0 and losses and suggested,
                    f"twin.py script runs and suggests an eval command: {p.stdout.strip()[-300:]}"):
        return
    rc, out = run([ag] + shlex.split(suggested.group(1))[1:])
    got = [float(line.split()[1]) for line in out.splitlines() if rc == 0 and line.startswith("loss ")]
    ck.check(got and abs(got[0] - losses[-1]) <= 1.5e-4,
             f"twin.py's suggested '{suggested.group(1)}' reproduces its val loss {losses[-1]:.4f}: "
             f"{got[0] if got else out.strip()}")


def command_line(description):
    """--attograd and --text, defaulting to the build and data/tiny.txt; torch on one thread."""
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--attograd", default=os.path.join(here, "..", "build", "attograd"))
    ap.add_argument("--text", default=os.path.join(here, "..", "data", "tiny.txt"))
    torch.set_num_threads(1)
    return ap.parse_args()


def main():
    args = command_line("attograd against its PyTorch twin")
    ck = Checks()
    with tempfile.TemporaryDirectory(prefix="attograd-parity-") as work:
        for i, cfg in enumerate(CONFIGS):
            try:
                parity(ck, args.attograd, args.text, work, cfg, 100 + i)
            except Exception as e:  # one broken configuration must not hide the others
                ck.check(False, f"{cfg}: {type(e).__name__}: {e}")
        twin_script(ck, args.attograd, args.text, work)
    print(f"{ck.passed} passed, {ck.failed} failed")
    return 1 if ck.failed else 0


if __name__ == "__main__":
    sys.exit(main())
