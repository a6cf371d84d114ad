#!/bin/sh
# cli_models.sh - the commands that read a saved model, as a user watches
# them: a task model whose vocabulary or context does not fit its task is
# refused by eval, sample, attn and info (one line, exit 2, nothing written),
# and each task's own model is read back by every command that reads one;
# sample prints tokens as they are drawn, keeps them on Ctrl-C (exit 130,
# closing newline) and draws and names a seed when none is given; eval scores
# the file the model was trained on by its last tenth and any other file
# whole, and reports bits per byte, perplexity and the windows it used;
# info, sample and eval hold neither gradients nor the file's optimizer
# moments (their peak memory and the address space they need).
# Run from the repository root; ATTOGRAD overrides ./build/attograd.
# Option lists ($SMALL) are split into words on purpose.
# shellcheck disable=SC2086
AG=${ATTOGRAD:-./build/attograd}
TEXT=$(pwd)/data/tiny.txt
PY=python3
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3

passed=0; failed=0
check() {   # check STATUS MESSAGE
    if [ "$1" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $2"; fi
}
finish() { echo "$passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit; }

if [ ! -x "$AG" ]; then
    echo "cli_models: $AG not found (run make first)"
    check 1 "no binary"
    finish
fi
W=$(mktemp -d "${TMPDIR:-/tmp}/attograd-models.XXXXXX") || exit 1
trap 'rm -rf "$W"' EXIT
trap 'exit 1' INT TERM

SMALL="--d-model 16 --heads 2 --layers 1 --batch 8 --eval-every 0"
$AG train --task copy $SMALL --steps 3 --quiet --save "$W/copy.st" >/dev/null 2>&1 &&
    $AG train --task sort $SMALL --steps 3 --quiet --save "$W/sort.st" >/dev/null 2>&1 &&
    $AG train --text "$TEXT" $SMALL --context 16 --steps 20 --quiet --save "$W/text.st" >/dev/null 2>&1
check $? "train the fixture models"

# ---- 14: a task model that does not fit its task --------------------------------
# Rewritten with the standard library (tests/ckpt_corpus.py's reader and writer):
# a sort model (3 tokens) labeled copy (11), the same without metadata, a copy
# model whose vocabulary lists other bytes or one byte twice, and a copy model
# cut to a context of 10 (copy reads 16).
if ! $PY - "$W" <<'EOF'
import sys
sys.dont_write_bytecode = True
sys.path.insert(0, "tests")
from ckpt_corpus import build, read, with_meta
w = sys.argv[1]

def weights(path):
    _, _, meta, entries = read(path)
    keep = [e for e in entries if not e[0].startswith(("optim.", "state."))]
    return with_meta(meta, optimizer=None, optim_step=None), keep

def write(name, meta, entries):
    with open(f"{w}/{name}.st", "wb") as f:
        f.write(build(meta, entries))

meta, ents = weights(f"{w}/sort.st")
write("sort_as_copy", with_meta(meta, data="copy"), ents)
write("sort_bare", {}, ents)
meta, ents = weights(f"{w}/copy.st")
write("copy_other_bytes", with_meta(meta, vocab="[33,98,99,100,101,102,103,104,105,106,124]"), ents)
write("copy_repeated_byte", with_meta(meta, vocab="[97,98,99,100,101,102,103,104,105,97,124]"), ents)
d = dict((e[0], e[2]) for e in ents)["pos_emb.weight"][1]
cut = [[n, t, [10, d], b[:10 * d * 4]] if n == "pos_emb.weight" else [n, t, s, b] for n, t, s, b in ents]
write("copy_context_10", with_meta(meta, context_length="10"), cut)
EOF
then
    check 1 "could not write the misfit checkpoints"
fi
refuse() {  # refuse NAME WANT ARGS...: exit 2, one line with WANT, no output, no file written
    name=$1; want=$2; shift 2; cmd=$1
    $AG "$@" >"$W/out" 2>"$W/err"
    rc=$?
    [ $rc -eq 2 ] && [ "$(wc -l <"$W/err")" -eq 1 ] && [ ! -s "$W/out" ] && [ ! -e "$W/a.svg" ] &&
        grep -qF -- "$want" "$W/err" && ! grep -q "ag_embedding" "$W/err"
    check $? "$name: $cmd should refuse it with exit 2 and one line with '$want' (exit $rc: $(head -c 300 "$W/err"; head -c 100 "$W/out"))"
    rm -f "$W/a.svg"
}
misfit() {  # misfit NAME WANT: every command that reads a model refuses W/NAME.st
    refuse "$1" "$2" eval --model "$W/$1.st"
    refuse "$1" "$2" sample --model "$W/$1.st" --prompt 'abcdefgh|' --tokens 3
    refuse "$1" "$2" attn --model "$W/$1.st" --prompt 'abcdefgh|' --out "$W/a.svg"
    refuse "$1" "$2" info "$W/$1.st"
}
misfit sort_as_copy "its vocabulary (3 tokens) does not match task copy (11 tokens"
misfit copy_other_bytes "its vocabulary (11 tokens) does not match task copy"
misfit copy_repeated_byte "metadata vocab entry 9 (97) repeats an earlier entry"
misfit copy_context_10 "task copy needs a context of at least 16 tokens (got 10)"
# a file without metadata takes its task from --task, and must fit it as well
refuse sort_bare "its vocabulary (3 tokens) does not match task copy" eval --model "$W/sort_bare.st" --task copy --heads 2
refuse sort_bare "its vocabulary (3 tokens) does not match task copy" sample --model "$W/sort_bare.st" --task copy \
    --heads 2 --prompt 'abcdefgh|'

# ---- every task's own model is read back by every command ------------------------------
# add's tokens are 0-9, '+' and '=': its vocabulary, token id -> byte, does not
# increase as a text's does, and must load as it was saved.
for t in copy reverse sort add; do
    case $t in
        sort) prompt=210120 ;;
        add) prompt=37+13= ;;
        *) prompt='abcdefgh|' ;;
    esac
    $AG train --task $t $SMALL --steps 2 --quiet --save "$W/own_$t.st" >/dev/null 2>"$W/err"
    check $? "train --task $t --save: $(head -c 300 "$W/err")"
    for run in "eval --model $W/own_$t.st" "info $W/own_$t.st" \
               "sample --model $W/own_$t.st --prompt $prompt --temperature 0" \
               "attn --model $W/own_$t.st --prompt $prompt --out $W/own.svg" \
               "graph --model $W/own_$t.st --out $W/own.dot" \
               "train --resume $W/own_$t.st --steps 3 --quiet"; do
        $AG $run >/dev/null 2>"$W/err"
        check $? "$t: $run reads the model train saved: $(head -c 300 "$W/err")"
    done
done

# ---- 15: sample prints as it goes, stops cleanly, names its seed ---------------------
# A million tokens would take many minutes: the text must appear while the
# command runs, and a SIGINT must end it with what was printed kept.
: >"$W/stream"
env --default-signal=INT "$AG" sample --model "$W/text.st" --tokens 1000000 --threads 1 >>"$W/stream" 2>"$W/stream.err" &
pid=$!
i=0
while [ "$(wc -c <"$W/stream")" -lt 20 ] && [ $i -lt 300 ] && kill -0 $pid 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
running=1; kill -0 $pid 2>/dev/null || running=0
[ "$(wc -c <"$W/stream")" -ge 20 ] && [ $running -eq 1 ]
check $? "sample: tokens appear on stdout while it runs ($(wc -c <"$W/stream") bytes after $i tenths of a second)"
kill -INT $pid 2>/dev/null
i=0
while kill -0 $pid 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
if kill -0 $pid 2>/dev/null; then
    kill -9 $pid 2>/dev/null
    check 1 "sample: still running 10 s after SIGINT"
fi
wait $pid
rc=$?
n=$(sed -nE 's/.*interrupted after ([0-9]+) tokens.*/\1/p' "$W/stream.err")
bytes=$(wc -c <"$W/stream")
[ $rc -eq 130 ] && [ -n "$n" ] && [ "$(tail -c 1 "$W/stream" | od -An -c | tr -d ' ')" = '\n' ] &&
    [ "$bytes" -eq $((n + 2)) ]
check $? "sample: SIGINT exits 130 keeping every token drawn (the start token, $n tokens, a newline; got $bytes bytes, exit $rc: $(cat "$W/stream.err"))"

# without --seed: a new seed each call, said on stderr, and --seed repeats it
$AG sample --model "$W/text.st" --tokens 60 >"$W/s1" 2>"$W/e1"
$AG sample --model "$W/text.st" --tokens 60 >"$W/s2" 2>"$W/e2"
seed=$(sed -nE 's/^attograd sample: seed ([0-9]+) .*/\1/p' "$W/e1")
! cmp -s "$W/s1" "$W/s2"
check $? "sample: two calls without --seed give different text"
[ -n "$seed" ] && grep -q "seed [0-9]" "$W/e2"
check $? "sample: the seed used is named on stderr ($(cat "$W/e1"))"
$AG sample --model "$W/text.st" --tokens 60 --seed "${seed:-0}" >"$W/s3" 2>"$W/e3"
cmp -s "$W/s1" "$W/s3" && [ ! -s "$W/e3" ]
check $? "sample: --seed $seed repeats the first call's text exactly, with nothing on stderr"
$AG sample --model "$W/text.st" --tokens 20 --temperature 0 >"$W/g0" 2>"$W/e4"
[ ! -s "$W/e4" ]
check $? "sample: greedy sampling draws no seed ($(cat "$W/e4"))"
# --top-k and --seed given to greedy sampling change nothing: the same text,
# and one line on stderr says they have no effect (not silently dropped)
for extra in "--top-k 3 --seed 5" "--seed 5" "--top-k 3"; do
    $AG sample --model "$W/text.st" --tokens 20 --temperature 0 $extra >"$W/g1" 2>"$W/e5"
    rc=$?
    case $extra in *top-k*seed*) said="--top-k and --seed have" ;; *seed*) said="--seed has" ;; *) said="--top-k has" ;; esac
    [ $rc -eq 0 ] && cmp -s "$W/g0" "$W/g1" && [ "$(wc -l <"$W/e5")" -eq 1 ] &&
        grep -qxF "attograd sample: $said no effect: --temperature 0 takes the most likely token each time" "$W/e5"
    check $? "sample --temperature 0 $extra: the greedy text, one line saying $said no effect ($rc: $(cat "$W/e5"))"
done
# --top-k 1 leaves the draw one token: the greedy text, at any temperature;
# --top-k as large as the vocabulary keeps every token: the text of no --top-k
$AG sample --model "$W/text.st" --tokens 20 --top-k 1 --temperature 1.5 --seed 7 >"$W/k1" 2>&1
cmp -s "$W/g0" "$W/k1"
check $? "sample: --top-k 1 gives the greedy text ($(head -c 80 "$W/k1") vs $(head -c 80 "$W/g0"))"
V=$($AG info "$W/text.st" | sed -nE 's/.*vocab ([0-9]+),.*/\1/p')
$AG sample --model "$W/text.st" --tokens 60 --top-k "${V:-0}" --seed "${seed:-0}" >"$W/kv" 2>&1
[ -n "$V" ] && cmp -s "$W/s1" "$W/kv"
check $? "sample: --top-k $V (the vocabulary) gives the text of no --top-k"
$AG sample --model "$W/text.st" --tokens 200 --top-k 3 --seed 5 >"$W/k3" 2>&1
$AG sample --model "$W/text.st" --tokens 200 --seed 5 >"$W/k0" 2>&1
! cmp -s "$W/k3" "$W/k0"
check $? "sample: --top-k 3 draws other text than all tokens with the same seed"

# ---- 16: which part of a text eval scores, and what it reports -------------------------
n=$(wc -c <"$TEXT"); T=16
n_val=$((n / 10)); n_train=$((n - n_val))
w_val=$(((n_val - 1) / T)); w_train=$(((n_train - 1) / T))
loss() { sed -nE 's/^loss ([0-9.]+) .*/\1/p' "$1"; }
cp "$TEXT" "$W/other.txt"
ln -s "$TEXT" "$W/link.txt"
for f in own:"$TEXT" other:"$W/other.txt" val:"$W/other.txt --split val" all:"$W/other.txt --split all" \
         link:"$W/link.txt"; do
    $AG eval --model "$W/text.st" --text ${f#*:} >"$W/${f%%:*}.out" 2>&1
    check $? "eval --text ${f#*:}: $(cat "$W/${f%%:*}.out")"
done
[ "$(loss "$W/own.out")" = "$(loss "$W/val.out")" ] && grep -q "scored $w_val windows of $T tokens.*validation split.*the model's training file" "$W/own.out"
check $? "eval of the training file scores its last tenth, $w_val windows, and says so: $(cat "$W/own.out")"
[ -n "$(loss "$W/other.out")" ] && [ "$(loss "$W/other.out")" = "$(loss "$W/all.out")" ] &&
    [ "$(loss "$W/other.out")" != "$(loss "$W/val.out")" ] &&
    grep -q "scored $((w_val + w_train)) windows of $T tokens.*all of $W/other.txt, not the model's training file" "$W/other.out"
check $? "eval of another file scores all of it, $((w_val + w_train)) windows: $(cat "$W/other.out")"
[ "$(loss "$W/link.out")" = "$(loss "$W/own.out")" ] && grep -q "the model's training file" "$W/link.out"
check $? "eval through a symbolic link to the training file (same device and inode) scores its last tenth: $(cat "$W/link.out")"
for f in own other; do
    awk '/^loss / { l = $2; b = $3; sub(/^\(/, "", b); p = $8; sub(/\)$/, "", p)
                    bits = l / log(2); ppl = exp(l)
                    ok = $4 == "bits" && $5 == "per" && $6 == "byte," && $7 == "perplexity" &&
                         (b - bits) ^ 2 < 1e-8 && (p - ppl) ^ 2 < (1e-3 * ppl) ^ 2 }
         END { exit !ok }' "$W/$f.out"
    check $? "eval reports bits per byte = loss / ln 2 and perplexity = e^loss: $(head -n 1 "$W/$f.out")"
done
$AG eval --model "$W/copy.st" >"$W/task.out" 2>&1
grep -qE '^loss [0-9.]+ \([0-9.]+ bits per token, perplexity [0-9.e+]+\)$' "$W/task.out" &&
    grep -q "^scored 500 held-out problems of task copy$" "$W/task.out"
check $? "eval of a task reports bits per token and the problems scored: $(cat "$W/task.out")"
# train names the windows its evaluations score
$AG train --text "$TEXT" $SMALL --context $T --steps 1 >"$W/train.out" 2>&1
mid=$w_val; [ $mid -gt 100 ] && mid=100
grep -q "^  data .*($w_val windows of $T; evaluations during training score the first $mid, the last one all)" "$W/train.out"
check $? "train's config says how many windows its evaluations score: $(grep '^  data' "$W/train.out")"


# ---- the commands that only run a model forward hold what they use -----------
# info, sample and eval allocate no gradient block (ag_params_alloc_no_grad) and
# keep no optimizer moments from the file (ag_st_load_except), on a
# 7.1 M-parameter model (weights W = 28.5 MB; its file, 57 MB, holds the SGD
# momentum too) against the same command on the 1-layer fixture model.
$AG train --text "$TEXT" --layers 4 --d-model 384 --heads 4 --batch 2 --steps 1 --eval-every 0 --quiet \
    --threads 1 --save "$W/wide.st" >/dev/null 2>&1
check $? "train the 7.1 M-parameter model"
file_kb=$(($(wc -c <"$W/wide.st") / 1024))
weights_kb=$(($($AG info "$W/wide.st" | sed -n 's/.* \([0-9]*\) parameters.*/\1/p') * 4 / 1024))
forward_cmds="info %s|sample --model %s --tokens 5 --seed 1 --threads 1|eval --model %s --text $TEXT --threads 1 --batch 1"
# Resident memory: the peak (the kernel's maxrss of the one child) may exceed
# the fixture's by the weights once (read from the file straight into the
# model's parameters) and a quarter again for the step's arena, not by a
# second copy of them (the file's bytes kept beside the parameters) nor by
# the moments (either W more).
peak_kb() {   # peak_kb ARGS...: attograd ARGS' peak resident memory in KB (0: it failed)
    # posix_spawn shares Python's memory until the exec, so the peak is attograd's alone
    $PY -c 'import os, sys
null = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_WRONLY, 0) for fd in (1, 2)]
pid = os.posix_spawn(sys.argv[1], sys.argv[1:], os.environ, file_actions=null)
_, status, usage = os.wait4(pid, 0)
print(usage.ru_maxrss if status == 0 else 0)' "$AG" "$@" 2>/dev/null || echo 0
}
IFS='|'; set -- $forward_cmds; unset IFS
for cmd in "$@"; do
    # shellcheck disable=SC2059
    small=$(peak_kb $(printf "$cmd" "$W/text.st")) wide=$(peak_kb $(printf "$cmd" "$W/wide.st"))
    cap=$((small + weights_kb + weights_kb / 4))
    [ "$small" -gt 0 ] && [ "$wide" -gt 0 ] && [ "$wide" -le "$cap" ]
    check $? "$(printf "$cmd" wide.st): peak resident memory $wide KB, more than the 1-layer model's $small KB + 1.25 x the weights' $weights_kb KB = $cap KB"
done
# train --resume holds what a fresh run of the model holds (weights, gradients,
# momentum, the step's arena), within a quarter of the weights: the file's
# weights are read into the parameters, its moments into the optimizer and
# then released, not kept through the run (either would add W).
fresh=$(peak_kb train --text "$TEXT" --layers 4 --d-model 384 --heads 4 --batch 2 --steps 2 --eval-every 0 --quiet \
    --threads 1 --save "$W/fresh.st")
resumed=$(peak_kb train --resume "$W/wide.st" --steps 2 --eval-every 0 --quiet --threads 1 --save "$W/resumed.st")
cap=$((fresh + weights_kb / 4))
[ "$fresh" -gt 0 ] && [ "$resumed" -gt 0 ] && [ "$resumed" -le "$cap" ]
check $? "train --resume wide.st: peak resident memory $resumed KB, more than a fresh run's $fresh KB + a quarter of the weights' $weights_kb KB = $cap KB"
[ -s "$W/resumed.st" ]
check $? "train --resume wide.st saved its checkpoint"
rm -f "$W/fresh.st" "$W/resumed.st"
# attn draws one layer: the layers before it keep nothing and those after it
# do not run, so a 12-layer model's picture needs about what a 1-layer one's
# does (every layer's [H,T,T] weights were kept, with the layers' temporaries:
# 12 layers at context 256 held 11 MB more)
for n in 1 12; do
    $AG train --text "$TEXT" --layers $n --d-model 32 --heads 4 --context 256 --batch 1 --steps 1 --eval-every 0 \
        --quiet --threads 1 --save "$W/deep$n.st" >/dev/null 2>&1
done
prompt=$(head -c 256 "$TEXT" | tr -d '\n')
one=$(peak_kb attn --model "$W/deep1.st" --prompt "$prompt" --layer 0 --head all --threads 1 --out "$W/a1.svg")
deep=$(peak_kb attn --model "$W/deep12.st" --prompt "$prompt" --layer 5 --head all --threads 1 --out "$W/a12.svg")
layer_kb=$((4 * 256 * 256 * 4 / 1024))
cap=$((one + 2 * layer_kb))
[ "$one" -gt 0 ] && [ "$deep" -gt 0 ] && [ "$deep" -le "$cap" ]
check $? "attn --layer 5 of 12: peak resident memory $deep KB, more than the 1-layer model's $one KB + 2 layers' weights ($layer_kb KB each) = $cap KB"
rm -f "$W"/deep*.st "$W"/a*.svg
# Address space (ulimit -v, in KB, bisected: the least a command runs in),
# where the gradient block would show though it is never touched: the file
# (read whole, as info and eval check every tensor) and the weights, plus
# half the weights for the 2 MB alignment each large block gets; a gradient
# block would need W more.  AddressSanitizer cannot run under such a cap: that
# build skips it.
least_vm() {   # least_vm ARGS...: the smallest ulimit -v (KB) under which attograd ARGS exits 0
    lo=1000; hi=1000000
    (ulimit -v $hi; $AG "$@" >/dev/null 2>&1; exit $?) 2>/dev/null || { echo 0; return; }
    while [ $((hi - lo)) -gt 256 ]; do
        mid=$(((lo + hi) / 2))
        if (ulimit -v $mid; $AG "$@" >/dev/null 2>&1; exit $?) 2>/dev/null; then hi=$mid; else lo=$mid; fi
    done
    echo $hi
}
# (the "exit": a shell that ran attograd as its last command would leave the
# report of a crash under the cap, "Aborted", to this one's stderr)
if (ulimit -v 600000 && $AG --version >/dev/null 2>&1; exit $?) 2>/dev/null; then
    for cmd in "$@"; do
        # shellcheck disable=SC2059
        small=$(least_vm $(printf "$cmd" "$W/text.st")) wide=$(least_vm $(printf "$cmd" "$W/wide.st"))
        cap=$((small + file_kb + weights_kb + weights_kb / 2))
        [ "$small" -gt 0 ] && [ "$wide" -gt 0 ] && [ "$wide" -le "$cap" ]
        check $? "$(printf "$cmd" wide.st) needs $wide KB of address space, more than the 1-layer model's $small KB + its file's $file_kb KB + 1.5 x its weights' $weights_kb KB = $cap KB"
    done
else
    echo "SKIP: the address space of forward-only commands (this build cannot run under ulimit -v)"
fi

finish
