#!/bin/bash
# cli_robust.sh - hostile input to every attograd subcommand: bad flags and
# values, missing / unreadable / empty / binary / changing files, checkpoints
# of another task or vocabulary, sizes that cannot fit in memory, and faults
# while training (divergence with periodic saves, a second SIGINT, disk full,
# an unwritable directory).  A refused command must exit 2 with exactly one
# line on stderr, print nothing on stdout and write no file.  Complements
# cli_train.sh and cli_checkpoint.sh, which hold the cases not repeated here.
# Run from the repository root; ATTOGRAD overrides ./build/attograd.
# Checks are quoted for eval on purpose; option lists ($SMALL) split into words.
# shellcheck disable=SC2012,SC2016,SC2086,SC2317
A=${ATTOGRAD:-./build/attograd}
ROOT=$(pwd)
TEXT=$ROOT/data/tiny.txt
# shellcheck source=tests/harness.sh
. "$(dirname "$0")/harness.sh"

need_binary
tmp=$(mktemp -d "${TMPDIR:-/tmp}/attograd-robust.XXXXXX") || exit 1
MNT=$tmp/full
cleanup() { mountpoint -q "$MNT" 2>/dev/null && umount "$MNT"; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 1' INT TERM
chmod 755 "$tmp"            # the unprivileged user below must reach the fixtures
F=$tmp/fx                   # fixtures (inputs); must not change
O=$tmp/out                  # where refused commands are told to write; must stay empty
mkdir -p "$F" "$O"

# ---- fixtures ----------------------------------------------------------------
SMALL="--d-model 8 --heads 2 --layers 1 --context 8 --batch 4 --eval-every 0 --quiet"
# shellcheck disable=SC2086
"$A" train --text "$TEXT" $SMALL --steps 3 --save "$F/text.st" >/dev/null 2>&1
"$A" train --steps 3 --eval-every 0 --quiet --save "$F/copy.st" >/dev/null 2>&1
if [ ! -s "$F/text.st" ] || [ ! -s "$F/copy.st" ]; then fail "could not train the fixture checkpoints"; finish; fi
: >"$F/empty"
printf x >"$F/onebyte"
head -c 4096 /dev/urandom >"$F/random.bin"
printf 'abcabcabcabcabcabcab\n' >"$F/short.txt"                # 21 bytes: no window of 32 fits
head -c 2000 "$TEXT" | tr -d 'z' >"$F/subset.txt"               # bytes all inside tiny.txt's vocabulary
printf '%s\n' 'some text with a tab	and {braces} ~' >"$F/foreign.txt"
printf 'step,train_loss,val_loss,val_acc,lr,ms_per_step,tokens_per_s\n' >"$F/header.csv"   # a log with no rows
mkdir -p "$F/dir"
cp "$F/text.st" "$F/secret.st"; cp "$TEXT" "$F/secret.txt"
cp "$TEXT" "$F/new"$'\n'"line.st"                  # a name with a newline in it
chmod 600 "$F/secret.st" "$F/secret.txt"
CHANGING=/proc/version      # fstat says 0 bytes, a read returns more: a file changing under the reader

snapshot() { (cd "$tmp" && find fx out -print0 | sort -z | xargs -0 md5sum 2>/dev/null; find fx out | sort); }
snapshot >"$tmp/snap.ref"

# bad SUBSTRING CMD ARGS...: exit 2, one stderr line containing SUBSTRING, an
# empty stdout, and no file created or changed (run from an empty directory,
# so a stray relative write would show as well).
bad() {
    local want=$1; shift
    (cd "$O" && "$A" "$@") >"$tmp/stdout" 2>"$tmp/stderr"
    local rc=$?
    local lines; lines=$(wc -l <"$tmp/stderr")
    local why=""
    [ "$rc" -eq 2 ] || why="exit $rc"
    [ "$lines" -eq 1 ] || why="$why; $lines stderr lines"
    grep -qF -- "$want" "$tmp/stderr" || why="$why; no '$want'"
    [ -s "$tmp/stdout" ] && why="$why; stdout: $(head -c 200 "$tmp/stdout")"
    snapshot >"$tmp/snap.now"
    cmp -s "$tmp/snap.ref" "$tmp/snap.now" || why="$why; files changed: $(diff "$tmp/snap.ref" "$tmp/snap.now" | grep '^[<>]' | head -3 | tr '\n' ' ')"
    if [ -z "$why" ]; then ok; else fail "attograd $* -> $why; stderr: $(head -c 300 "$tmp/stderr")"; fi
    rm -rf "${O:?}"/* "$O"/.[!.]* 2>/dev/null
}

COMMANDS=$("$A" --help | sed -nE 's/^  ([a-z]+) .*/\1/p' | tr '\n' ' ')
has() { case " $COMMANDS " in *" $1 "*) return 0 ;; esac; return 1; }
check "attograd --help lists train, eval, sample and info ($COMMANDS)" \
    test "$(echo "$COMMANDS" | grep -c 'train eval sample info')" -eq 1
check "attograd --help names --version and help CMD, which the README's synopsis lists" \
    eval '"$A" --help | grep -q "^       attograd --version$" && "$A" --help | grep -q "attograd help <command>"'

# ---- every subcommand: unknown flags, missing values, stray words ------------
for cmd in $COMMANDS; do
    if [ "$cmd" = info ]; then
        bad "unknown option '--no-such-flag'" info --no-such-flag
        bad "expects exactly one checkpoint file" info "$F/text.st" "$F/copy.st"
        continue
    fi
    bad "unknown option '--no-such-flag'" "$cmd" --no-such-flag
    bad "unknown option '-q'" "$cmd" -q
    bad "unexpected argument 'stray'" "$cmd" stray
done
# a near miss names the option meant: a prefix of one option, or one edit
# from one; none when two fit (--sav: --save, --save-every) or none does
bad "unknown option '--step' (did you mean --steps? see attograd train --help)" train --step 5
bad "unknown option '--stpes' (did you mean --steps?" train --stpes 5
bad "unknown option '--d_model' (did you mean --d-model?" train --d_model 8
bad "unknown option '--temp' (did you mean --temperature?" sample --model "$F/text.st" --temp 1
bad "unknown option '--sav' (see attograd train --help)" train --sav x.st
bad "unknown option '--model' (see attograd train --help)" train --model "$F/text.st"
bad "unknown command 'Train'" Train
bad "unknown command ''" ""
bad "--version takes no arguments (got 'x')" --version x
# a near miss of a command names the one meant, as one of an option does
bad "help: unknown command 'trian' (did you mean train? see attograd --help)" help trian
bad "unknown command 'trian' (did you mean train? see attograd --help)" trian
bad "unknown command 'smaple' (did you mean sample?" smaple
bad "unknown command 'walk' (did you mean walkthrough?" walk
bad "unknown command '--verison' (did you mean --version?" --verison
bad "unknown command 'frobnicate' (see attograd --help)" frobnicate
bad "help takes one command (got 'extra' after 'train')" help train extra
# `attograd help CMD` is `attograd CMD --help`
for cmd in $COMMANDS; do
    check "attograd help $cmd prints what attograd $cmd --help prints" \
        eval '[ "$("$A" help "$cmd" 2>&1; echo "rc $?")" = "$("$A" "$cmd" --help 2>&1; echo "rc $?")" ] && "$A" help "$cmd" | grep -q "^usage: attograd $cmd "'
done
# a newline inside a value or a path is still one line (written as a space)
bad "unknown command 'tr ain'" $'tr\nain'
bad "unknown option '--no such'" train $'--no\nsuch'
bad "--lr expects a number, got '0.1 2'" train --lr $'0.1\n2'
# and a terminal's escape or another control byte is shown as \xNN, not sent to the terminal
bad "--lr expects a number, got '1\\x1b[31m2\\x07'" train --lr $'1\e[31m2\a'
printf 'step,lo\033[31mss\n1,2\n' >"$tmp/esc.csv"
bad "bad header 'step,lo\\x1b[31mss'" plot --log "$tmp/esc.csv" --out "$tmp/esc.svg"
bad "--save $F/new line.st is the same file as --text $F/new line.st" \
    train --text "$F/new"$'\n'"line.st" --save "$F/new"$'\n'"line.st" --steps 1

# ---- train: values -------------------------------------------------------------
bad "--lr expects a number, got 'nan'" train --lr nan
bad "--lr expects a number, got '0x10'" train --lr 0x10
bad "--dropout expects a number, got '0x1p-3'" train --dropout 0x1p-3
bad "--micro-batch 3 does not divide --batch 8: give a --micro-batch that divides 8" train --batch 8 --micro-batch 3
bad "--lr expects a number, got 'inf'" train --lr inf
# numbers past a double's or a long's range are numbers out of the option's range
bad "--lr 1e999 is out of range: it must be > 0 and <= 1000000" train --lr 1e999
bad "--lr 1e-400 is too close to 0: below a double's smallest normal magnitude" train --lr 1e-400
# clip's bound is 1e308: a value past it is said to be, not refused with '>= 0' alone
bad "--clip 1e309 is out of range: it must be >= 0 and <= 1e+308" train --clip 1e309
bad "--clip 1.7976931348623157e308 is out of range: it must be >= 0 and <= 1e+308" train --clip 1.7976931348623157e308
bad "--seed 18446744073709551616 is out of range: it must be >= 0 and <= 9200000000000000000" train --seed 18446744073709551616
# an integer's bounds compared as integers: through a double, these equal 9.2e18
bad "--seed 9200000000000000001 is out of range: it must be >= 0 and <= 9200000000000000000" train --seed 9200000000000000001
bad "--seed 9200000000000000512 is out of range" eval --model "$F/copy.st" --seed 9200000000000000512
bad "--seed -18446744073709551616 is out of range: it must be >= 0" eval --model "$F/copy.st" --seed -18446744073709551616
bad "--lr expects a number, got ''" train --lr=
bad "--lr -0.1 is out of range" train --lr -0.1
bad "--lr expects a number, got '0.1 '" train --lr "0.1 "
bad "--steps expects an integer, got '1.5'" train --steps 1.5
bad "--steps 99999999999999999999 is out of range: it must be >= 0 and <= 1000000000000000" train --steps 99999999999999999999
bad "--d-model expects an integer, got '64x'" train --d-model=64x
bad "--quiet takes no value" train --quiet=1
bad "--batch 0 is out of range" train --batch 0
# eval's --batch has train's bound and message (RUN_MAX_BATCH, run.h)
for b in 0 1048577; do
    t_msg=$(cd "$O" && "$A" train --batch $b 2>&1) e_msg=$(cd "$O" && "$A" eval --model "$F/copy.st" --batch $b 2>&1)
    check "eval --batch $b is refused as train's is ('$t_msg' / '$e_msg')" \
        test "${t_msg#attograd train: }" = "${e_msg#attograd eval: }" -a -n "$t_msg"
done
bad "--layers 0 is out of range" train --layers 0
bad "--heads 0 is out of range" train --heads 0
bad "--context 0 is out of range" train --context 0
bad "--context 65537 is out of range" train --context 65537
bad "--d-model 100000 is out of range" train --d-model 100000 --layers 100
bad "--heads 3 does not divide --d-model 64" train --heads 3
bad "--dropout -0.1 is out of range" train --dropout -0.1
bad "--dropout 1.5 is out of range" train --dropout 1.5
bad "--momentum 1 is out of range" train --momentum 1
bad "--beta2 1 is out of range" train --beta2 1 --optimizer adamw
bad "--eps 0 is out of range" train --eps 0
bad "--clip -1 is out of range" train --clip -1
bad "--threads 5000 is out of range" train --threads 5000
bad "--seed -1 is out of range" train --seed -1
bad "--log-every 0 is out of range" train --log-every 0
bad "--text expects a value, got an empty string" train --text ""
bad "--save needs a value" train --steps 1 --save

# ---- train: contradictory flags --------------------------------------------------
bad "--lr cannot be changed with --resume" train --resume "$F/text.st" --lr 0.5
bad "--seed cannot be changed with --resume" train --resume "$F/text.st" --seed 9
bad "--heads 2 contradicts the file's metadata n_head 4" train --init "$F/copy.st" --heads 2
bad "--arch cannot be used with --resume" train --resume "$F/copy.st" --arch attn-only
bad "--qkv-bias cannot be used with --init (the checkpoint's model has no query/key/value biases)" \
    train --init "$F/text.st" --qkv-bias --steps 1
bad "--steps 1 is less than the 3 steps" train --resume "$F/text.st" --steps 1
bad "--task sort does not match the model" train --init "$F/text.st" --task sort
bad "--task sort does not match the model" train --init "$F/copy.st" --task sort
bad "--text given but the model was trained on task copy" train --init "$F/copy.st" --text "$TEXT"

# ---- train: files ------------------------------------------------------------------
bad "$F/empty is empty" train --text "$F/empty"
bad "/dev/null is not a regular file" train --text /dev/null
bad "changed size while reading" train --text "$CHANGING"
bad "too short for context 32" train --text "$F/short.txt" --context 32
bad "too short for context 64" train --text "$F/short.txt"
for opt in --init --resume; do
    bad "$F/none.st" train $opt "$F/none.st"
    bad "is a directory" train $opt "$F/dir"
    bad "shorter than the 8-byte header" train $opt "$F/empty"
    bad "exceeds the limit" train $opt "$F/random.bin"
    bad "$TEXT" train $opt "$TEXT"
    bad "grew while being read" train $opt "$CHANGING"
done
# a checkpoint of another vocabulary: a text with bytes the model never saw
bad "is not in the vocabulary" train --init "$F/text.st" --text "$F/foreign.txt" --steps 1
bad "is not in the vocabulary" train --init "$F/text.st" --text "$F/random.bin" --steps 1
bad "too short for context 8" train --init "$F/text.st" --text "$F/short.txt" --steps 1
bad "cannot write log" train --steps 1 --log "$O/no/such/dir/log.csv"
# an output that is a directory, or a name ending in '/' (not there yet, or a
# file's), is refused saying so (it was "Is a directory" from the system,
# wrong for the name not there and for the file's)
bad "--log $F/dir is a directory: give the name of the file to write" train --steps 1 --log "$F/dir"
bad "--save $F/dir is a directory: give the name of the file to write" train --steps 1 --save "$F/dir"
bad "--save new/ ends in '/', which names a directory: give the name of the file to write" train --steps 1 --save new/
bad "--save $F/empty/ ends in '/', which names a directory" train --steps 1 --save "$F/empty/"
bad "--log new/ ends in '/', which names a directory" train --steps 1 --log new/
if has attn; then
    bad "--out $F/dir is a directory" attn --model "$F/copy.st" --prompt 'abcdefgh|' --out "$F/dir"
    bad "--csv new/ ends in '/'" attn --model "$F/copy.st" --prompt 'abcdefgh|' --out a.svg --csv new/
    bad "--out new/ ends in '/'" plot --log "$F/header.csv" --out new/
    bad "--out $F/dir is a directory" graph --model "$F/copy.st" --out "$F/dir"
fi

# ---- train: sizes that cannot fit are refused before allocating, naming the GB ----
# d_model 16384, 64 blocks: 12 d^2 weights a block (qkv 3d^2, projection d^2, MLP
# 8d^2), 2.06e11 in all.  Float parameters + gradients + SGD momentum are 12
# bytes each: 2474 GB; AdamW's two moments make 16 bytes: 3299 GB.
gb_near() {  # gb_near WANT ARGS...: the refusal names about WANT GB (within 2%)
    local want=$1; shift
    bad "GB" train "$@" --save "$O/never.st"
    local got; got=$(sed -nE 's/.*\(([0-9.]+) GB for parameters.*/\1/p' "$tmp/stderr")
    check "memory refusal for $* names ~$want GB (got '$got')" \
        awk -v a="$got" -v b="$want" 'BEGIN { exit !(a != "" && a > 0.98 * b && a < 1.02 * b) }'
}
gb_near 2474 --d-model 16384 --layers 64 --heads 1
gb_near 3299 --d-model 16384 --layers 64 --heads 1 --optimizer adamw
# batch x context past INT_MAX rows (2^20 x 4096 = 2^32): refused in GB like
# any other size (the estimate's row count is not an int that wraps; the
# sanitizer build stops on signed overflow)
bad "this run needs about" train --text "$TEXT" --d-model 8 --heads 2 --layers 1 --batch 1048576 --context 4096 --save "$O/never.st"

# an allocation that fails anyway (address space capped) is a message, not a crash;
# AddressSanitizer cannot start under such a cap, so that build skips it
if { (ulimit -v 600000 && "$A" --version) >/dev/null 2>&1; } 2>/dev/null; then
    (ulimit -v 600000; cd "$O" && "$A" train --steps 1 --batch 5000 --eval-every 0 --quiet) \
        >"$tmp/stdout" 2>"$tmp/stderr"
    rc=$?
    check "allocation failure: exit 2 with one 'out of memory' line naming train (exit $rc: $(head -c 200 "$tmp/stderr"))" \
        eval '[ $rc -eq 2 ] && [ "$(wc -l <"$tmp/stderr")" -eq 1 ] && grep -q "^attograd train: out of memory" "$tmp/stderr"'
    # eval's batch, which no estimate bounds, fails in the engine: named as eval's
    head -c 1500000 /dev/urandom | base64 >"$tmp/wide.txt"
    "$A" train --text "$tmp/wide.txt" $SMALL --steps 1 --save "$tmp/wide.st" >/dev/null 2>&1
    (ulimit -v 600000; cd "$O" && "$A" eval --model "$tmp/wide.st" --split all --batch 1048576) >"$tmp/stdout" 2>"$tmp/stderr"
    rc=$?
    check "eval's allocation failure: exit 2 with one line 'attograd eval: out of memory' (exit $rc: $(head -c 200 "$tmp/stderr"))" \
        eval '[ $rc -eq 2 ] && [ "$(wc -l <"$tmp/stderr")" -eq 1 ] && grep -q "^attograd eval: out of memory" "$tmp/stderr"'
else
    skip "allocation failure under ulimit -v (this build cannot run with a capped address space)"
fi

# ---- train: binary data is a valid byte-level text -------------------------------
# 4 KB of random bytes has ~256 distinct bytes: a vocabulary like any other.
(cd "$O" && "$A" train --text "$F/random.bin" $SMALL --steps 2 --save "$O/bin.st") >/dev/null 2>"$tmp/stderr"
rc=$?
check "train --text on binary data trains (exit $rc: $(head -c 200 "$tmp/stderr"))" test $rc -eq 0
"$A" sample --model "$O/bin.st" --tokens 20 >"$tmp/stdout" 2>"$tmp/stderr"
check "sample from the binary-data model works" test $? -eq 0 -a -s "$tmp/stdout"
rm -f "$O/bin.st"
# a text whose bytes are a subset of the checkpoint's vocabulary continues with it
(cd "$O" && "$A" train --init "$F/text.st" --text "$F/subset.txt" --steps 1 --quiet --eval-every 0) \
    >/dev/null 2>"$tmp/stderr"
rc=$?
check "--init with a text inside the model's vocabulary trains (exit $rc: $(head -c 200 "$tmp/stderr"))" test $rc -eq 0

# ---- eval ------------------------------------------------------------------------
bad "--model needs a value" eval --model
bad "--model expects a value, got an empty string" eval --model ""
bad "--seed expects an integer, got 'x'" eval --model "$F/copy.st" --seed x
# --seed draws copy's and reverse's held-out problems; sort's and add's are all
# scored and a text's every window, where it would change nothing
bad "--seed applies to the copy and reverse tasks, whose held-out problems are drawn: a text is scored on every window of its split" \
    eval --model "$F/text.st" --text "$TEXT" --seed 2
"$A" train --task sort --steps 1 --eval-every 0 --quiet --save "$tmp/sort.st" >/dev/null 2>&1
bad "--seed applies to the copy and reverse tasks, whose held-out problems are drawn: every held-out problem of sort is scored" \
    eval --model "$tmp/sort.st" --seed 2
# a text model without --text is scored on the file it was trained on, as
# --resume trains on it; gone, that file is named in one line
(cd "$O" && "$A" eval --model "$F/text.st") >"$tmp/own" 2>&1
(cd "$O" && "$A" eval --model "$F/text.st" --text "$TEXT") >"$tmp/given" 2>&1
check "eval of a text model without --text scores its training file ($(head -c 200 "$tmp/own"))" \
    eval 'grep -q "the validation split (last tenth) of .*the model.s training file" "$tmp/own" && cmp -s "$tmp/own" "$tmp/given"'
cp "$TEXT" "$tmp/gone.txt"
"$A" train --text "$tmp/gone.txt" $SMALL --steps 1 --save "$tmp/gone.st" >/dev/null 2>&1
rm -f "$tmp/gone.txt"
bad "cannot open $tmp/gone.txt, the text the model was trained on: No such file or directory; give the text with --text FILE" \
    eval --model "$tmp/gone.st"
rm -f "$tmp/gone.st"
check "eval --help says a text model's --text defaults to its training file, as eval does" \
    eval '"$A" eval --help | grep -q -- "--text FILE .*(default for a text model: the file it was trained on)"'
bad "--accept-changed-data applies to a text model's training file: a copy model is scored on its held-out problems" \
    eval --model "$F/copy.st" --accept-changed-data
bad "--accept-changed-data applies to a text model's training file: $F/secret.txt is not" \
    eval --model "$F/text.st" --text "$F/secret.txt" --accept-changed-data
(cd "$O" && "$A" eval --model "$F/copy.st" --seed 2) >"$tmp/stdout" 2>&1
check "eval --seed 2 draws copy's held-out problems ($(head -c 200 "$tmp/stdout"))" grep -q "scored 500 held-out problems of task copy" "$tmp/stdout"
rm -f "$tmp/sort.st" "$O/"*
bad "--threads expects an integer, got '2x'" eval --model "$F/copy.st" --threads 2x
bad "--threads -1 is out of range" eval --model "$F/copy.st" --threads -1
bad "--split 'test' is not a split" eval --model "$F/text.st" --text "$TEXT" --split test
bad "--task and --text both given" eval --model "$F/text.st" --text "$TEXT" --task copy
bad "--task sort does not match the model" eval --model "$F/copy.st" --task sort
bad "--task copy does not match the model" eval --model "$F/text.st" --task copy
bad "--text given but the model was trained on task copy" eval --model "$F/copy.st" --text "$TEXT"
bad "$F/none.st" eval --model "$F/none.st"
bad "is a directory" eval --model "$F/dir"
bad "shorter than the 8-byte header" eval --model "$F/empty"
bad "exceeds the limit" eval --model "$F/random.bin"
bad "grew while being read" eval --model "$CHANGING"
bad "$F/empty is empty" eval --model "$F/text.st" --text "$F/empty"
bad "is a directory" eval --model "$F/text.st" --text "$F/dir"
bad "changed size while reading" eval --model "$F/text.st" --text "$CHANGING"
bad "is not in the vocabulary" eval --model "$F/text.st" --text "$F/foreign.txt"
bad "is not in the vocabulary" eval --model "$F/text.st" --text "$F/random.bin"
# shorter than one window of the model's context (8): 21 bytes, validation split 2
bad "fewer than one window of 8 + 1" eval --model "$F/text.st" --text "$F/short.txt" --split val
printf 'abcab\n' >"$tmp/five.txt"
bad "fewer than one window of 8 + 1" eval --model "$F/text.st" --text "$tmp/five.txt" --split all

# ---- sample ----------------------------------------------------------------------
bad "--tokens 0 is out of range" sample --model "$F/text.st" --tokens 0
bad "--tokens expects an integer, got '5x'" sample --model "$F/text.st" --tokens 5x
bad "--temperature -1 is out of range" sample --model "$F/text.st" --temperature -1
bad "--temperature expects a number, got 'nan'" sample --model "$F/text.st" --temperature nan
bad "--top-k 257 is out of range" sample --model "$F/text.st" --top-k 257
bad "--task: unknown task 'parity' (tasks: copy, reverse, sort, add)" eval --model "$F/copy.st" --task parity
# a name past PATH_MAX (4096 on Linux) is refused by its length, shown by its start
long=$(head -c 5000 /dev/zero | tr '\0' a)
bad "is 5003 bytes, longer than the 4095 the system accepts" train --steps 1 --save "$long.st"
bad "is 5003 bytes, longer than the 4095 the system accepts" eval --model "$long.st"
bad "cannot write log: the file name 'aaa" train --steps 1 --log "$long.csv"
check "... a --log name that long is shown by its start: the line stays short ($(wc -c <"$tmp/stderr") bytes)" \
    test "$(wc -c <"$tmp/stderr")" -lt 300
bad "$F/foreign.txt: byte 0x09 at offset 20 is not in the vocabulary" sample --model "$F/text.st" --text "$F/foreign.txt"
# the help's defaults are what sample does: a task model answers greedily
# (no seed drawn, the --temperature 0 answer), a text model samples at 1
check "sample --help gives --temperature's default for task models as 0 (greedy)" \
    eval '"$A" sample --help | grep -q -- "--temperature X .*(default 1; task models: 0)"'
check "sample of a task model without --temperature is its --temperature 0 answer, no seed drawn" \
    eval '[ "$("$A" sample --model "$F/copy.st" --prompt abcdefgh"|" 2>&1)" = "$("$A" sample --model "$F/copy.st" --prompt abcdefgh"|" --temperature 0 2>&1)" ]'
# a task model answering greedily (no --temperature) says a --seed or
# --top-k given has no effect, and answers as without it
"$A" sample --model "$F/copy.st" --prompt abcdefgh"|" --seed 3 --top-k 2 >"$tmp/stdout" 2>"$tmp/stderr"
rc=$?
check "sample of a task model without --temperature, given --seed and --top-k: its greedy answer, one line saying they have no effect ($rc: $(cat "$tmp/stderr"))" \
    eval '[ $rc -eq 0 ] && [ "$(cat "$tmp/stdout")" = "$("$A" sample --model "$F/copy.st" --prompt abcdefgh"|" 2>/dev/null)" ] &&
          [ "$(wc -l <"$tmp/stderr")" -eq 1 ] &&
          grep -qxF "attograd sample: --top-k and --seed have no effect: a task model without --temperature takes the most likely token each time" "$tmp/stderr"'
check "sample --help says --top-k and --seed have no effect when greedy" \
    eval '"$A" sample --help | tr "\n" " " | grep -q -- "--top-k and --seed have no effect there"'
check "train --help says SIGUSR2 and SIGALRM save and stop the run as SIGTERM does" \
    eval '"$A" train --help | grep -q "^SIGINT, SIGTERM, SIGHUP, SIGUSR2 and SIGALRM "'
check "train --help says --steps counts a resumed run's steps" \
    eval '"$A" train --help | grep -q -- "--steps N .*--resume: counting those taken"'
bad "$F/none.st" sample --model "$F/none.st"
bad "exceeds the limit" sample --model "$F/random.bin"
bad "shorter than the 8-byte header" sample --model "$F/empty"
bad "is not in the vocabulary" sample --model "$F/text.st" --prompt "$(printf 'caf\303\251')"
bad "is not in the vocabulary" sample --model "$F/text.st" --prompt '{~}'
bad "is not a token of task copy" sample --model "$F/copy.st" --prompt 'abcxyz|'
bad "--prompt is required for a task model" sample --model "$F/copy.st"
bad "takes a prompt of 9 tokens" sample --model "$F/copy.st" --prompt 'abcdefgh|abcdefgh|'
bad "takes a prompt of 9 tokens" sample --model "$F/copy.st" --prompt 'abc|'
# a prompt of more tokens than sample's buffer held is refused by its count against the task's,
# as a shorter one is (it said "copy text is longer than 64 tokens")
bad "--prompt: task copy takes a prompt of 9 tokens shaped like \"abcdefgh|\" (got 100 tokens: \"$(printf '%040d' 0 | tr 0 a)...\")" \
    sample --model "$F/copy.st" --prompt "$(printf '%0100d' 0 | tr 0 a)"
# a text prompt longer than the context is not an error: the model reads its last 8 tokens
long_prompt=$(head -n 1 "$TEXT" | cut -c 1-40)
(cd "$O" && "$A" sample --model "$F/text.st" --prompt "$long_prompt" --tokens 5) >"$tmp/stdout" 2>"$tmp/stderr"
rc=$?
check "sample with a prompt longer than the context continues it ($(head -c 200 "$tmp/stderr"))" \
    eval '[ $rc -eq 0 ] && grep -qF "$long_prompt" "$tmp/stdout"'

# ---- info --------------------------------------------------------------------------
bad "expects exactly one checkpoint file" info
bad "$F/none.st" info "$F/none.st"
bad "is a directory" info "$F/dir"
bad "shorter than the 8-byte header" info "$F/empty"
bad "file is 1 byte, shorter than the 8-byte header length" info "$F/onebyte"
check "info --help's usage line names its FILE argument" eval '[ "$("$A" info --help | head -n 1)" = "usage: attograd info FILE [--heads N]" ]'
check "info --help's description is one line, not cut after 'metadata and'" \
    eval '"$A" info --help | grep -qx "A checkpoint'"'"'s config, parameter count, metadata and tensors\."'
# "--" ends the options: a file whose name begins with "-" after it
cp "$F/text.st" "$tmp/-dash.st"
check "info -- FILE reads a file named -dash.st" eval '(cd "$tmp" && "$A" info -- -dash.st) | grep -q "^  arch gpt"'
check "info --heads 2 -- FILE reads it too" eval '"$A" info --heads 2 -- "$F/text.st" | grep -q "^  arch gpt"'
bad "unknown option '-dash.st'" info -dash.st
bad "expects exactly one checkpoint file" info -- "$F/text.st" "$tmp/-dash.st"
check "info says '1 layer, 2 heads' of the 1-layer fixture" eval '"$A" info "$F/text.st" | grep -q "^  arch gpt, vocab [0-9]*, 1 layer, 2 heads,"'
bad "is not a regular file" info /dev/null
bad "exceeds the limit" info "$F/random.bin"
bad "grew while being read" info "$CHANGING"
bad "$TEXT" info "$TEXT"
# A checkpoint that ends early or fails while its tensors are read into
# place: strace makes the read(2) that reaches the first byte after the
# header (8 + the header's length: the first tensor's) return the end of the
# file, or EIO.  Which read that is, is found by tracing the command first
# (the file's reads, with the offsets their sizes add up to); no such read is
# a failure.  Nothing is written (train --resume would save over it).
if command -v strace >/dev/null && strace -o /dev/null -e trace=read true 2>/dev/null; then
    abs_a=$(cd "$(dirname "$A")" && pwd)/$(basename "$A")
    data_at=$((8 + $(od -A n -t u8 -N 8 "$F/text.st")))
    for cmd in info train; do
        args="$F/text.st" save=""
        [ $cmd = train ] && args="--resume $F/text.st --steps 5" save="--save $tmp/traced.st"
        rm -f "$tmp/reads"
        # shellcheck disable=SC2086
        (cd "$tmp" && ASAN_OPTIONS=detect_leaks=0 strace -o "$tmp/reads" -P "$F/text.st" -e trace=read "$abs_a" $cmd $args $save \
            >/dev/null 2>&1)
        rm -f "$tmp/traced.st"
        nth=$(awk -v at="$data_at" '/^read\(/ { n++; r = $NF + 0; if (pos <= at && at < pos + r) { print n; exit } pos += r }' "$tmp/reads" 2>/dev/null)
        if [ -z "$nth" ]; then
            fail "attograd $cmd $args: no read(2) of $F/text.st reached its first tensor at byte $data_at ($(head -c 300 "$tmp/reads" 2>/dev/null))"
            continue
        fi
        for fault in "retval=0" "error=EIO"; do
            printf '#!/bin/sh\nASAN_OPTIONS=detect_leaks=0 exec strace -o /dev/null -P "%s" -e trace=read -e inject=read:%s:when=%s "%s" "$@"\n' \
                "$F/text.st" "$fault" "$nth" "$abs_a" >"$tmp/faulty"
            chmod +x "$tmp/faulty"
            want="file shrank while being read"; [ "$fault" = "error=EIO" ] && want="read error: Input/output error"
            # shellcheck disable=SC2086
            A=$tmp/faulty bad "$want" $cmd $args
        done
    done
else
    skip "a checkpoint failing mid-read (strace cannot trace here)"
fi

# ---- the picture commands, when this build has them --------------------------------
if has attn; then
    bad "--layer expects an integer, got '1x'" attn --model "$F/copy.st" --prompt abc --layer 1x --out "$O/a.svg"
    bad "--head ' 1' is not 'all' or a head index" attn --model "$F/copy.st" --prompt abc --head " 1" --out "$O/a.svg"
    bad "shorter than the 8-byte header" attn --model "$F/empty" --prompt abc --out "$O/a.svg"
    bad "exceeds the limit" attn --model "$F/random.bin" --prompt abc --out "$O/a.svg"
    bad "is a directory" attn --model "$F/dir" --prompt abc --out "$O/a.svg"
    bad "is not in the vocabulary" attn --model "$F/text.st" --prompt '{~}' --out "$O/a.svg"
    # a --text beside a file that lists its vocabulary must fit it, as sample's must (it was not looked at)
    bad "$F/foreign.txt: byte 0x09 at offset 20 is not in the vocabulary" attn --model "$F/text.st" --prompt the \
        --text "$F/foreign.txt" --out "$O/a.svg"
    bad "--prompt has 11 bytes, a token each, but the model's context is 8" attn --model "$F/text.st" --prompt 'the the the' \
        --out "$O/a.svg"
    # the CSV and the picture both or neither: an SVG that cannot be made
    # leaves no CSV, a CSV that cannot be written no SVG
    bad "no/such/a.svg: cannot create temp file" attn --model "$F/copy.st" --prompt abc --csv "$O/w.csv" \
        --out "$O/no/such/a.svg"
    bad "/dev/full: write failed" attn --model "$F/copy.st" --prompt abc --csv /dev/full --out "$O/a.svg"
    # ... and an SVG whose last step fails, after both are written: strace
    # fails the run's second fsync(2) (the CSV's is the first), and the CSV
    # there before is left as it was, not renamed into place beside the
    # old picture
    if command -v strace >/dev/null && strace -o /dev/null -e trace=fsync true 2>/dev/null; then
        P=$tmp/pair
        mkdir -p "$P"
        "$A" attn --model "$F/copy.st" --prompt abc --csv "$P/w.csv" --out "$P/w.svg" 2>/dev/null
        cp "$P/w.csv" "$P/w0.csv" && cp "$P/w.svg" "$P/w0.svg"
        ASAN_OPTIONS=detect_leaks=0 strace -f -o /dev/null -e trace=fsync -e inject=fsync:error=EIO:when=2 \
            "$A" attn --model "$F/copy.st" --prompt cba --csv "$P/w.csv" --out "$P/w.svg" >/dev/null 2>"$tmp/stderr"
        rc=$?
        check "attn whose SVG fails to sync: exit 2, one line naming it ($rc: $(cat "$tmp/stderr"))" \
            eval '[ $rc -eq 2 ] && [ "$(wc -l <"$tmp/stderr")" -eq 1 ] && grep -q "w.svg: fsync failed" "$tmp/stderr"'
        check "... the CSV and the SVG as they were, no temporary file left ($(ls "$P" | tr '\n' ' '))" \
            eval 'cmp -s "$P/w.csv" "$P/w0.csv" && cmp -s "$P/w.svg" "$P/w0.svg" && [ "$(ls "$P" | wc -l)" -eq 4 ]'
        "$A" attn --model "$F/copy.st" --prompt cba --csv "$P/w.csv" --out "$P/w.svg" 2>/dev/null
        check "... which that prompt changes, when nothing fails" \
            eval '! cmp -s "$P/w.csv" "$P/w0.csv" && ! cmp -s "$P/w.svg" "$P/w0.svg"'
        rm -r "$P"
    else
        skip "attn's SVG failing after its CSV is written (strace cannot trace here)"
    fi
fi
if has plot; then
    bad "$F/empty" plot --log "$F/empty" --out "$O/p.svg"
    bad "$F/random.bin" plot --log "$F/random.bin" --out "$O/p.svg"
    bad "$F/dir" plot --log "$F/dir" --out "$O/p.svg"
    bad "$F/header.csv: no rows after the header" plot --log "$F/header.csv" --out "$O/p.svg"
fi
if has graph; then
    bad "--tokens 0 is out of range" graph --model "$F/copy.st" --tokens 0 --out "$O/g.dot"
    bad "--tokens expects an integer, got '5x'" graph --model "$F/copy.st" --tokens 5x --out "$O/g.dot"
    bad "--tokens: 100 tokens are more than the model's context (8)" graph --model "$F/text.st" --tokens 100 --out "$O/g.dot"
    bad "--tokens: 100 tokens are more than the task's sequence length" graph --model "$F/copy.st" --tokens 100 \
        --out "$O/g.dot"
    bad "exceeds the limit" graph --model "$F/random.bin" --out "$O/g.dot"
    # copy scores only the answer: the first 8 tokens of a problem predict no scored target
    bad "--tokens 3: the copy task scores only the answer, and the first 3 tokens predict none of it: give --tokens 9 to 16" \
        graph --model "$F/copy.st" --tokens 3 --out "$O/g.dot"
    bad "give --tokens 9 to 16" graph --model "$F/copy.st" --tokens 8 --out "$O/g.dot"
    bad "--seed applies to task models, whose step reads a problem drawn with it: a text model's step reads the tokens 0, 1, 2, ..." \
        graph --model "$F/text.st" --seed 2 --out "$O/g.dot"
    # --help states, for every task, the range the refusal names (a model of
    # each task, --tokens 1 refused: "give --tokens A to B"; help: "TASK A to B")
    help=$("$A" graph --help)
    for task in copy reverse sort add; do
        (cd "$O" && "$A" train --task "$task" --steps 1 --eval-every 0 --quiet --save "$tmp/$task.st") >/dev/null 2>&1
        range=$("$A" graph --model "$tmp/$task.st" --tokens 1 --out "$O/g.dot" 2>&1 | sed -n 's/.*give --tokens \([0-9]* to [0-9]*\)$/\1/p')
        rm -f "$tmp/$task.st"
        check "graph --help states the --tokens range of the $task task that graph asks for ('$range')" \
            eval '[ -n "$range" ] && printf "%s\n" "$help" | grep -q -- "--tokens N .* $task $range,*\( \|\$\)"'
    done
fi
if has walkthrough; then
    bad "--section 0 is out of range" walkthrough --section 0
    bad "--section expects an integer, got '1x'" walkthrough --section 1x
fi

# ---- files no one may read, as an unprivileged user --------------------------------
# root reads a mode-600 file anyway, so when running as root the reader is
# uid 65534 (setpriv); a non-root user just meets the permission bits.
if [ "$(id -u)" -ne 0 ]; then
    runas() { "$@"; }
    chmod 000 "$F/secret.st" "$F/secret.txt"
elif command -v setpriv >/dev/null && setpriv --reuid=65534 --regid=65534 --clear-groups "$A" --version >/dev/null 2>&1; then
    runas() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
else
    runas() { return 99; }
fi
if runas "$A" --version >/dev/null 2>&1 && ! runas cat "$F/secret.txt" >/dev/null 2>&1; then
    bad_as() {  # like bad, as the unprivileged user
        local want=$1; shift
        (cd "$O" && runas "$A" "$@") >"$tmp/stdout" 2>"$tmp/stderr"
        local rc=$?
        if [ $rc -eq 2 ] && [ "$(wc -l <"$tmp/stderr")" -eq 1 ] && grep -qF -- "$want" "$tmp/stderr" &&
            [ ! -s "$tmp/stdout" ] && [ -z "$(ls -A "$O")" ]; then ok; else
            fail "unreadable: attograd $* -> exit $rc, stderr: $(head -c 300 "$tmp/stderr")"; fi
    }
    bad_as "Permission denied" train --text "$F/secret.txt"
    bad_as "Permission denied" train --init "$F/secret.st"
    bad_as "Permission denied" eval --model "$F/secret.st" --text "$TEXT"
    bad_as "Permission denied" eval --model "$F/text.st" --text "$F/secret.txt"
    bad_as "Permission denied" sample --model "$F/secret.st"
    bad_as "Permission denied" info "$F/secret.st"

    # an unwritable directory while saving: an error, the old checkpoint intact
    mkdir -p "$tmp/ro" && cp "$F/text.st" "$tmp/ro/m.st" && chmod 755 "$tmp/ro"
    (cd "$O" && runas "$A" train --steps 2 --quiet --eval-every 0 --save "$tmp/ro/m.st") >/dev/null 2>"$tmp/stderr"
    rc=$?
    check "unwritable directory: exit $rc, one line naming the file ($(cat "$tmp/stderr"))" \
        eval '[ $rc -ne 0 ] && [ $rc -lt 128 ] && [ "$(wc -l <"$tmp/stderr")" -eq 1 ] && grep -qF "$tmp/ro/m.st" "$tmp/stderr"'
    check "unwritable directory: the old checkpoint is intact" cmp -s "$tmp/ro/m.st" "$F/text.st"
    check "unwritable directory: nothing else in it" test "$(ls -A "$tmp/ro")" = m.st

    # a resumed run at its last step in an unwritable directory: nothing to write, nothing refused
    mkdir -p "$tmp/rol" && "$A" train --task copy --d-model 8 --heads 2 --layers 1 --batch 4 --eval-every 0 \
        --steps 2 --save "$tmp/rol/m.st" >/dev/null 2>&1 && cp "$tmp/rol/m.st" "$tmp/rol.bak" && chmod 755 "$tmp/rol"
    (cd "$O" && runas "$A" train --resume "$tmp/rol/m.st" --quiet) >"$tmp/stdout" 2>"$tmp/stderr"
    rc=$?
    check "resume at its last step in an unwritable directory: exit 0, the file left as it was ($rc: $(cat "$tmp/stderr"))" \
        eval '[ $rc -eq 0 ] && [ ! -s "$tmp/stderr" ] && grep -qx "$tmp/rol/m.st left as it was (step 2: .*)" "$tmp/stdout"'
    check "resume at its last step in an unwritable directory: the checkpoint kept, nothing beside it" \
        eval 'cmp -s "$tmp/rol/m.st" "$tmp/rol.bak" && [ "$(ls -A "$tmp/rol")" = m.st ]'

    # the same with the run's --log beside it, recorded in the checkpoint: it
    # has no row to drop and none to add, so it is neither replaced nor opened
    mkdir -p "$tmp/roL" && "$A" train --task copy --d-model 8 --heads 2 --layers 1 --batch 4 --eval-every 0 \
        --steps 2 --log "$tmp/roL/run.csv" --save "$tmp/roL/m.st" >/dev/null 2>&1 &&
        cp "$tmp/roL/run.csv" "$tmp/roL.csv" && cp "$tmp/roL/m.st" "$tmp/roL.st" && chmod 755 "$tmp/roL"
    (cd "$O" && runas "$A" train --resume "$tmp/roL/m.st" --quiet) >"$tmp/stdout" 2>"$tmp/stderr"
    rc=$?
    check "resume at its last step with its --log in an unwritable directory: exit 0 ($rc: $(cat "$tmp/stderr"))" \
        eval '[ $rc -eq 0 ] && [ ! -s "$tmp/stderr" ] && grep -qx "$tmp/roL/m.st left as it was (step 2: .*)" "$tmp/stdout"'
    check "resume at its last step with its --log in an unwritable directory: both files kept, nothing beside them" \
        eval 'cmp -s "$tmp/roL/m.st" "$tmp/roL.st" && cmp -s "$tmp/roL/run.csv" "$tmp/roL.csv" &&
              [ "$(ls -A "$tmp/roL" | tr "\n" " ")" = "m.st run.csv " ]'

    # a checkpoint made read-only (chmod a-w) in a writable directory is not replaced
    mkdir -p "$tmp/rof" && cp "$F/text.st" "$tmp/rof/m.st" && chmod 777 "$tmp/rof" && chmod 444 "$tmp/rof/m.st"
    [ "$(id -u)" -eq 0 ] && chown 65534 "$tmp/rof/m.st"
    (cd "$O" && runas "$A" train --steps 2 --quiet --eval-every 0 --save "$tmp/rof/m.st") >/dev/null 2>"$tmp/stderr"
    rc=$?
    check "read-only checkpoint: exit 2, one line saying so ($rc: $(cat "$tmp/stderr"))" \
        eval '[ $rc -eq 2 ] && [ "$(wc -l <"$tmp/stderr")" -eq 1 ] && grep -qF "$tmp/rof/m.st: Permission denied: the file is read-only" "$tmp/stderr"'
    check "read-only checkpoint: kept byte for byte, nothing beside it" \
        eval 'cmp -s "$tmp/rof/m.st" "$F/text.st" && [ "$(ls -A "$tmp/rof")" = m.st ]'
else
    skip "unreadable files and an unwritable directory (no way to drop root here)"
fi

# ---- --save into a directory that does not exist ------------------------------------
(cd "$O" && "$A" train --steps 2 --quiet --eval-every 0 --save "$O/no/such/m.st") >/dev/null 2>"$tmp/stderr"
rc=$?
check "--save in a missing directory: exit $rc, one line ($(cat "$tmp/stderr"))" \
    eval '[ $rc -ne 0 ] && [ $rc -lt 128 ] && [ "$(wc -l <"$tmp/stderr")" -eq 1 ] && grep -qF "$O/no/such/m.st" "$tmp/stderr"'
check "--save in a missing directory: no file written" test -z "$(ls -A "$O")"

# ---- disk full while saving (a 1.5-checkpoint tmpfs, when mounting is allowed) ------
# The copy model with SGD momentum is a fixed size; the first periodic save
# fits, the second needs room for its temporary copy next to the first and
# fails.  The first must stay whole and no temporary file may remain.
mkdir -p "$MNT"
size=$(wc -c <"$F/copy.st")
if mount -t tmpfs -o size=$((size * 3 / 2 / 4096 * 4096)) tmpfs "$MNT" 2>/dev/null; then
    (cd "$O" && "$A" train --steps 6 --save-every 1 --quiet --eval-every 0 --save "$MNT/m.st") \
        >"$tmp/stdout" 2>"$tmp/stderr"
    rc=$?
    check "disk full: exit $rc, one line saying so ($(cat "$tmp/stderr"))" \
        eval '[ $rc -ne 0 ] && [ $rc -lt 128 ] && [ "$(wc -l <"$tmp/stderr")" -eq 1 ] && grep -q "No space left" "$tmp/stderr"'
    check "disk full: the step-1 checkpoint is intact" eval '"$A" info "$MNT/m.st" | grep -q "step 1,"'
    check "disk full: no temporary file left ($(ls -A "$MNT" | tr '\n' ' '))" test "$(ls -A "$MNT")" = m.st
    # an older checkpoint, replaced by a run that cannot fit, is kept byte for byte
    rm -f "$MNT/m.st"; cp "$F/text.st" "$MNT/old.st"
    head -c "$size" /dev/zero >"$MNT/filler" 2>/dev/null
    (cd "$O" && "$A" train --steps 2 --quiet --eval-every 0 --save "$MNT/old.st") >/dev/null 2>"$tmp/stderr"
    rc=$?
    check "disk full at the final save: exit $rc ($(cat "$tmp/stderr"))" eval '[ $rc -ne 0 ] && [ $rc -lt 128 ]'
    check "disk full at the final save: the old checkpoint is byte-identical" cmp -s "$MNT/old.st" "$F/text.st"
    check "disk full at the final save: no temporary file left" test -z "$(find "$MNT" -name '*.tmp*')"
    umount "$MNT"
else
    skip "disk full (cannot mount a tmpfs here)"
fi

# ---- a file-size limit (ulimit -f) ----------------------------------------------------
# A save past the limit fails its write (EFBIG) and is reported in one line,
# exit 1, its temporary file and the locks removed (SIGXFSZ, which the limit
# sends, would have ended the process there and left them).
(ulimit -f 16; cd "$O" && exec "$A" train --steps 2 --eval-every 0 --quiet --save "$O/big.st" --log "$O/big.csv") \
    >/dev/null 2>"$tmp/stderr"
rc=$?
check "a save past ulimit -f: exit 1, one line saying so, only the log left ($rc; $(cat "$tmp/stderr"); $(ls -A "$O" | tr '\n' ' '))" \
    eval '[ $rc -eq 1 ] && [ "$(wc -l <"$tmp/stderr")" -eq 1 ] && grep -q "big.st: write failed: File too large" "$tmp/stderr" &&
          [ "$(ls -A "$O")" = big.csv ]'
rm -f "$O"/*

# ---- divergence with periodic saves ---------------------------------------------------
# lr 1e6 without clipping blows up within a few steps; every step saves.
# The run must stop naming the step, exit non-zero, and leave the last
# checkpoint written before it went bad loadable and finite.
(cd "$O" && "$A" train --lr 1e6 --clip 0 --steps 50 --save-every 1 --eval-every 0 --quiet --save "$O/div.st") \
    >/dev/null 2>"$tmp/stderr"
rc=$?
msg=$(cat "$tmp/stderr")
check "divergence with --save-every: exit $rc is non-zero ($msg)" eval '[ $rc -ne 0 ] && [ $rc -lt 128 ]'
check "divergence with --save-every: one line naming the step ($msg)" \
    eval '[ "$(wc -l <"$tmp/stderr")" -eq 1 ] && grep -q "step [0-9]" "$tmp/stderr"'
check "divergence with --save-every: the kept checkpoint loads" eval '"$A" info "$O/div.st" >/dev/null 2>&1'
check "divergence with --save-every: no temporary file left" test "$(ls -A "$O")" = div.st
rm -f "$O"/*
# Without --save-every nothing was saved: the line says so, not that a
# checkpoint is kept, and names the loss NaN (printf's "-nan" is no word)
(cd "$O" && "$A" train --lr 1e6 --clip 0 --steps 50 --eval-every 0 --quiet --save "$O/div.st") >/dev/null 2>"$tmp/stderr"
rc=$?
msg=$(cat "$tmp/stderr")
check "divergence before any save: exit 3, one line saying the loss is NaN and $O/div.st was not written, no file ($msg)" \
    eval '[ $rc -eq 3 ] && [ "$(wc -l <"$tmp/stderr")" -eq 1 ] && grep -q "loss is NaN at step [0-9]" "$tmp/stderr" &&
          grep -q "; $O/div.st was not written$" "$tmp/stderr" && [ -z "$(ls -A "$O")" ]'
rm -f "$O"/*
# With clipping, SGD at lr 1e6 on the attn-only model (no layer norm to
# rein the activations in) keeps the loss finite until a gradient overflows,
# within a few steps (step 3 with seeds 1-3, 4 with seed 5): the message
# names that parameter and the step.  Which overflows first, loss or
# gradient, depends on every rounding of the run; the sanitizer build
# (ATTOGRAD_QUICK) rounds differently, so it skips this one.
if [ -n "${ATTOGRAD_QUICK:-}" ]; then
    skip "gradient overflow (its rounding-dependent run is asserted by the plain make test)"
else
    (cd "$O" && "$A" train --arch attn-only --optimizer sgd --lr 1e6 --steps 50 --save-every 1 --eval-every 0 --quiet \
        --save "$O/div.st") >/dev/null 2>"$tmp/stderr"
    rc=$?
    msg=$(cat "$tmp/stderr")
    check "gradient overflow: exit $rc, one line naming the parameter and the step ($msg)" \
        eval '[ $rc -ne 0 ] && [ $rc -lt 128 ] && [ "$(wc -l <"$tmp/stderr")" -eq 1 ] &&
              grep -qE "gradient of [a-z_.0-9]+ is not finite at step [0-9]+" "$tmp/stderr"'
    check "gradient overflow: the kept checkpoint loads" eval '"$A" info "$O/div.st" >/dev/null 2>&1'
fi
rm -f "$O"/*

# ---- a second SIGINT leaves at once, the checkpoint untouched ---------------------------
# A wide model (d_model 192, batch 384) on one thread takes about two
# seconds a step, so both signals land inside the first step.  The control run (one SIGINT) proves the
# same timing would have saved.
sigint_run() {  # sigint_run N [SIG]: start a run saving over a copy of text.st, send N SIGs (INT)
    cp "$F/text.st" "$O/keep.st"
    env --default-signal=INT "$A" train --steps 5 --d-model 192 --batch 384 --eval-every 0 --threads 1 --save "$O/keep.st" \
        >"$tmp/stdout" 2>"$tmp/stderr" &
    local pid=$!
    for _ in $(seq 300); do grep -q '^  data' "$tmp/stdout" && break; sleep 0.1; done
    sleep 0.2                   # past the signal handlers' installation, inside step 1
    for _ in $(seq "$1"); do kill -"${2:-INT}" $pid; sleep 0.05; done
    wait $pid
}
sigint_run 2; rc=$?
check "second SIGINT: exit 130 (got $rc)" test $rc -eq 130
check "second SIGINT: left without finishing the step ($(cat "$tmp/stderr"))" eval '! grep -q "stopping" "$tmp/stderr"'
check "second SIGINT: the checkpoint is byte-identical" cmp -s "$O/keep.st" "$F/text.st"
check "second SIGINT: no temporary file left ($(ls -A "$O" | tr '\n' ' '))" test "$(ls -A "$O")" = keep.st
sigint_run 1; rc=$?
check "one SIGINT (control): exit 130 after saving (got $rc: $(cat "$tmp/stderr"))" \
    eval '[ $rc -eq 130 ] && grep -q "interrupted at step 1: stopping and saving" "$tmp/stderr"'
check "one SIGINT (control): the checkpoint was replaced" eval '! cmp -s "$O/keep.st" "$F/text.st" && "$A" info "$O/keep.st" | grep -q "step 1,"'
rm -f "$O"/*
# SIGUSR2 and SIGALRM, which batch schedulers (Slurm's --signal) and
# `timeout -s` send as a warning before a kill, stop the run as SIGTERM does:
# the step finished and saved, exit 128 + the signal, no temporary file;
# their default action ended it at once with nothing saved
# (the step it lands in, 1 unless the machine is busy, is the one the line names)
for sig in USR2:140 ALRM:142; do
    sigint_run 1 "${sig%:*}"; rc=$?
    n=$(sed -n "s/^attograd train: SIG${sig%:*} at step \([1-4]\): stopping and saving\$/\1/p" "$tmp/stderr")
    check "SIG${sig%:*}: exit ${sig#*:} after the step, one line naming the signal (got $rc: $(cat "$tmp/stderr"))" \
        eval '[ $rc -eq ${sig#*:} ] && [ -n "$n" ] && [ "$(wc -l <"$tmp/stderr")" -eq 1 ]'
    check "SIG${sig%:*}: the checkpoint holds step ${n:-?}, no temporary file left ($(ls -A "$O" | tr '\n' ' '))" \
        eval '"$A" info "$O/keep.st" | grep -q "step ${n:-x}," && [ "$(ls -A "$O")" = keep.st ]'
    rm -f "$O"/*
done

snapshot >"$tmp/snap.now"
check "the fixtures are unchanged at the end" cmp -s "$tmp/snap.ref" "$tmp/snap.now"
finish
