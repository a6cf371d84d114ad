#!/bin/sh
# valgrind.sh - short runs of every attograd subcommand under valgrind's
# memcheck: training (a task with the engine's threads, a text with AdamW, dropout,
# periodic saves and a log), a resume, eval, sample, info, a state_dict
# without metadata (F16, tied weights), the picture
# commands when present, and refused commands.  Each must end with its
# expected exit status and no invalid access, no use of an uninitialized
# value and no definite or indirect leak.
#
# valgrind 3.19 cannot decode AVX-512, so the binary is a separate build for
# x86-64-v2 in build-valgrind/ (VALGRIND_ATTOGRAD overrides it).  Run from the
# repository root; the last line is "N passed, N failed".
passed=0; failed=0
ok()   { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL: $*"; }
finish() { echo "$passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit; }

if ! command -v valgrind >/dev/null; then
    echo "valgrind.sh: valgrind is not installed (apt-get install valgrind)"
    fail "valgrind missing"
    finish
fi
A=${VALGRIND_ATTOGRAD:-}
if [ -z "$A" ]; then
    make -s --no-print-directory BUILDDIR=build-valgrind ARCH=-march=x86-64-v2 all || { fail "build-valgrind"; finish; }
    A=./build-valgrind/attograd
fi
W=$(mktemp -d "${TMPDIR:-/tmp}/attograd-valgrind.XXXXXX") || exit 1
trap 'rm -rf "$W"' EXIT
TEXT=data/tiny.txt

# An exit status valgrind's own errors never share with attograd's (0, 2, 3, 130...).
VG_ERR=99
# vg WANT_STATUS NAME ARGS...: attograd ARGS under memcheck
vg() {
    want=$1; name=$2; shift 2
    valgrind -q --leak-check=full --errors-for-leak-kinds=definite,indirect --show-leak-kinds=definite,indirect \
        --track-origins=yes --error-exitcode=$VG_ERR "$A" "$@" >"$W/out" 2>"$W/err"
    rc=$?
    if [ "$rc" -eq "$want" ]; then
        ok
    elif [ "$rc" -eq $VG_ERR ]; then
        fail "$name: memcheck errors:"; grep '^==' "$W/err" | head -40
    else
        fail "$name: exit $rc, expected $want: $(grep -v '^==' "$W/err" | head -5)"
    fi
}

SORT="--task sort --d-model 16 --heads 2 --layers 1 --batch 8 --quiet"
TXT="--text $TEXT --d-model 8 --heads 2 --layers 1 --context 8 --batch 4 --quiet"
# shellcheck disable=SC2086
{
vg 0 "train sort 100 steps (2 threads), save" train $SORT --steps 100 --eval-every 50 --threads 2 --save "$W/sort.st"
vg 0 "train text, adamw, dropout, save-every, log" train $TXT --steps 12 --eval-every 6 --optimizer adamw \
    --dropout 0.1 --qkv-bias --schedule cosine --warmup 2 --save "$W/text.st" --save-every 4 --log "$W/log.csv" --threads 1
vg 0 "resume text for 4 more steps" train --resume "$W/text.st" --steps 16 --quiet --eval-every 0 --threads 1
vg 0 "init from sort, sgd" train --init "$W/sort.st" --steps 3 --quiet --eval-every 0 --threads 1
vg 0 "eval text" eval --model "$W/text.st" --text "$TEXT" --split all --threads 1
vg 0 "eval sort" eval --model "$W/sort.st" --threads 1
vg 0 "sample text" sample --model "$W/text.st" --prompt "The " --tokens 30 --top-k 5 --threads 1
vg 0 "sample sort, greedy" sample --model "$W/sort.st" --prompt 210120 --threads 1
vg 0 "info" info "$W/text.st"
}
# a checkpoint as PyTorch code writes it: no metadata, tok_emb.weight in F16
# and out_head.weight left out (tied), read with --heads and --text
PY=python3; [ -x /usr/bin/python3 ] && PY=/usr/bin/python3
if $PY - "$W/text.st" "$W/bare.st" <<'EOF'
import struct, sys
sys.dont_write_bytecode = True
sys.path.insert(0, "tests")
from ckpt_corpus import build, read
_, _, meta, entries = read(sys.argv[1])
out = []
for name, dtype, shape, blob in entries:
    if name == "tok_emb.weight":
        n = len(blob) // 4
        dtype, blob = "F16", struct.pack(f"<{n}e", *struct.unpack(f"<{n}f", blob))
    if not name.startswith(("optim.", "state.", "out_head.")):
        out.append([name, dtype, shape, blob])
with open(sys.argv[2], "wb") as f:
    f.write(build({}, out))
EOF
then
    vg 0 "eval a bare F16 state_dict with tied weights" eval --model "$W/bare.st" --text "$TEXT" --heads 2 --threads 1
    vg 0 "info of it" info "$W/bare.st" --heads 2
    vg 2 "refused: it without --heads" sample --model "$W/bare.st" --text "$TEXT"
else
    fail "could not write the bare state_dict"
fi
if "$A" --help | grep -q '^  attn '; then
    vg 0 "attn" attn --model "$W/sort.st" --prompt 210120 --out "$W/a.svg" --csv "$W/a.csv" --threads 1
    vg 0 "plot" plot --log "$W/log.csv" --out "$W/p.svg"
    vg 0 "graph" graph --model "$W/sort.st" --out "$W/g.dot"
    vg 0 "walkthrough" walkthrough --section 1
fi
# refused commands leave through die(): nothing may leak on the way out
head -c 300 /dev/urandom >"$W/junk.st"
printf 'abab' >"$W/short.txt"
vg 2 "refused: broken checkpoint" eval --model "$W/junk.st"
vg 2 "refused: text too short" train --text "$W/short.txt" --steps 1
vg 2 "refused: prompt outside the vocabulary" sample --model "$W/sort.st" --prompt 2103
vg 2 "refused: bad flag value" train --lr 1e-3x
vg 2 "refused: vocabulary mismatch" train --init "$W/text.st" --text "$W/junk.st"
# divergence stops the run (exit 3) through the normal cleanup path
# shellcheck disable=SC2086
vg 3 "divergence" train $SORT --lr 1e6 --clip 0 --steps 30 --eval-every 0 --threads 1
finish
