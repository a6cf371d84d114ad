#!/bin/sh
# cli_checkpoint.sh - checkpoints through the attograd command line: a save /
# load round trip is bit-exact, N + N steps with a --resume in between equal
# 2N steps in one run (dropout on), kill -9 during periodic saving never
# leaves an unloadable file, and a corpus of broken files (tests/ckpt_corpus.py)
# is each refused with exit status 2 and its own one-line message.
# Run from the repository root; ATTOGRAD overrides ./build/attograd.
# Option lists ($SMALL, $opt, $common) are split into words on purpose.
# shellcheck disable=SC2086
AG=${ATTOGRAD:-./build/attograd}
TEXT=${TEXT:-data/tiny.txt}
PY=python3
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3

passed=0; failed=0
check() {   # check CONDITION-STATUS MESSAGE
    if [ "$1" -eq 0 ]; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        echo "FAIL: $2"
    fi
}

if [ ! -x "$AG" ]; then
    echo "cli_checkpoint: $AG not found (run make first)"
    echo "0 passed, 1 failed"
    exit 1
fi
W=$(mktemp -d "${TMPDIR:-/tmp}/attograd-ckpt.XXXXXX") || exit 1
trap 'rm -rf "$W"' EXIT
trap 'exit 1' INT TERM

SMALL="--text $TEXT --d-model 8 --heads 2 --layers 1 --context 8 --batch 4 --eval-every 0 --quiet"

# ---- round trip: load + save reproduces every byte --------------------------
# --resume with --steps equal to the saved step trains nothing and saves
# again: weights, moments, generators and metadata must all come back as read.
for opt in "--optimizer adamw" "--optimizer sgd --momentum 0.9"; do
    rm -f "$W/a.st" "$W/b.st"
    $AG train $SMALL $opt --dropout 0.1 --qkv-bias --steps 7 --save "$W/a.st" >/dev/null 2>&1
    check $? "round trip ($opt): train --save"
    $AG train --resume "$W/a.st" --save "$W/b.st" >/dev/null 2>&1
    check $? "round trip ($opt): train --resume --save"
    cmp -s "$W/a.st" "$W/b.st"
    check $? "round trip ($opt): a checkpoint loaded and saved again is byte-identical"
done
# --init keeps the weights: the same loss to every printed digit
$AG train --init "$W/a.st" --text "$TEXT" --steps 0 --quiet --save "$W/c.st" >/dev/null 2>&1
check $? "round trip: train --init --steps 0 --save"
l1=$($AG eval --model "$W/a.st" --text "$TEXT" --split all 2>&1)
l2=$($AG eval --model "$W/c.st" --text "$TEXT" --split all 2>&1)
[ -n "$l1" ] && [ "$l1" = "$l2" ]
check $? "round trip: --init then --save keeps the weights ($l1 vs $l2)"
# one optimizer step per training step: the metadata's step and optim_step
# agree in a run's checkpoint, and in one of a new run --init starts from it
# (a new optimizer at step 0); the loader refuses a file where they do not
# (the corpus below)
steps_of() {
    $PY -c 'import json, struct, sys
b = open(sys.argv[1], "rb").read()
m = json.loads(b[8:8 + struct.unpack("<Q", b[:8])[0]])["__metadata__"]
print(m["step"], m["optim_step"])' "$1"
}
$AG train --init "$W/a.st" --text "$TEXT" --steps 2 --quiet --save "$W/d.st" >/dev/null 2>&1
[ "$(steps_of "$W/a.st")" = "7 7" ] && [ "$(steps_of "$W/d.st")" = "2 2" ]
check $? "step and optim_step: 7 7 after 7 steps, 2 2 after --init and 2 more ($(steps_of "$W/a.st"); $(steps_of "$W/d.st"))"

# ---- resume determinism: 2N steps = N + resume + N --------------------------
# (and with every optimizer setting away from its default: the resumed run
# must take each one from the file, not from the flags' defaults)
N=6
for opt in "--optimizer adamw --weight-decay 0.1" "--optimizer sgd --momentum 0.9 --order sequential" \
    "--optimizer adamw --lr 0.01 --beta1 0.8 --beta2 0.99 --eps 1e-3 --weight-decay 0.2 --clip 0.5" \
    "--optimizer sgd --lr 0.05 --momentum 0.5 --weight-decay 0.01 --clip 0.5"; do
    common="$SMALL $opt --dropout 0.2 --seed 5 --log-every 1"
    # both runs log to run.csv, one after the other (the checkpoint records
    # its log's path, so runs logging elsewhere save other bytes)
    rm -f "$W"/full.* "$W"/half.* "$W"/run.csv
    $AG train $common --steps $((2 * N)) --save "$W/full.st" --log "$W/run.csv" >/dev/null 2>&1
    check $? "resume ($opt): one run of $((2 * N)) steps"
    mv "$W/run.csv" "$W/full.csv"
    $AG train $common --steps $N --save "$W/half.st" --log "$W/run.csv" >/dev/null 2>&1
    check $? "resume ($opt): first $N steps"
    $AG train --resume "$W/half.st" --steps $((2 * N)) --log-every 1 --eval-every 0 --quiet \
        --save "$W/half.st" >/dev/null 2>&1
    check $? "resume ($opt): --resume for $N more steps (the log continued without --log)"
    mv "$W/run.csv" "$W/half.csv"
    # step and training loss columns (timings and evaluation points differ)
    cut -d, -f1,2 "$W/full.csv" >"$W/full.loss"
    cut -d, -f1,2 "$W/half.csv" >"$W/half.loss"
    [ "$(wc -l <"$W/full.loss")" -eq $((2 * N + 1)) ] && cmp -s "$W/full.loss" "$W/half.loss"
    check $? "resume ($opt): the $((2 * N)) logged losses are identical"
    cmp -s "$W/full.st" "$W/half.st"
    check $? "resume ($opt): the final checkpoints are byte-identical"
done

# ---- kill -9 during periodic saving ------------------------------------------
# Every step saves (write to a temp file, fsync, rename); killing the process
# at any instant must leave either no file yet or a complete loadable one.
existed=0; midsave=0
for i in 1 2 3 4 5 6 7 8 9 10 11 12; do
    rm -f "$W"/k.st*
    $AG train --text "$TEXT" --d-model 48 --heads 3 --layers 2 --context 32 --batch 4 --optimizer adamw \
        --steps 1000000 --save-every 1 --save "$W/k.st" --eval-every 0 --quiet --threads 1 >/dev/null 2>&1 &
    pid=$!
    delay=$(awk -v s="$$$i" 'BEGIN { srand(s); printf "%.3f", 0.02 + 0.5 * rand() }')
    sleep "$delay"
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    ls "$W"/k.st.tmp.* >/dev/null 2>&1 && midsave=$((midsave + 1))
    if [ -e "$W/k.st" ]; then
        existed=$((existed + 1))
        out=$($AG info "$W/k.st" 2>&1)
        check $? "kill -9 after ${delay}s left an unloadable checkpoint: $out"
    fi
done
echo "kill -9: $existed of 12 runs had saved, $midsave were killed in the middle of a save"
[ "$existed" -gt 0 ]
check $? "kill -9: no run got as far as its first save (the test proved nothing)"

# ---- paths a checkpoint cannot record ---------------------------------------
# The metadata is JSON, UTF-8: a text or a log whose path is not UTF-8 (a
# Linux name may hold any byte) could not be recorded, and every save would
# fail; the run is refused before it trains or writes anything (it trained
# to the end, then lost its work to "metadata value ... is not valid UTF-8")
bad=$(printf 'latin1-\351t\351.txt')
cp "$TEXT" "$W/$bad"
rm -f "$W/u.st" "$W/u.csv"
TINY="--d-model 8 --heads 2 --layers 1 --context 8 --batch 4 --eval-every 0 --quiet"
$AG train $TINY --steps 3 --text "$W/$bad" --save "$W/u.st" >"$W/out" 2>"$W/err"
rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <"$W/err")" -eq 1 ] && grep -q "is not valid UTF-8" "$W/err" && [ ! -e "$W/u.st" ] &&
    ! grep -q "^step" "$W/out"
check $? "a text whose path is not UTF-8: refused before training, exit 2, one line (exit $rc: $(cat "$W/err"))"
$AG train $SMALL --steps 3 --save "$W/u.st" --log "$W/$bad.csv" >"$W/out" 2>"$W/err"
rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <"$W/err")" -eq 1 ] && grep -q "is not valid UTF-8" "$W/err" && [ ! -e "$W/u.st" ] &&
    [ ! -e "$W/$bad.csv" ]
check $? "a log whose path is not UTF-8: refused before training, nothing written (exit $rc: $(cat "$W/err"))"
$AG train $TINY --steps 3 --text "$W/$bad" --log "$W/$bad.csv" >/dev/null 2>"$W/err"
check $? "without --save nothing is recorded, and the run goes on: $(cat "$W/err")"
rm -f "$W/$bad" "$W/$bad.csv"

# ---- what a checkpoint says, shown ------------------------------------------
# a path the metadata records (text_path, log_path: a file's, or a hand
# edit's) may hold a newline or a terminal's escape: eval and train show it
# as an error shows it, on one line, the escape as \x1b, never raw
set_meta() {   # set_meta IN OUT KEY VALUE: IN with one metadata value changed
    $PY -c 'import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
h["__metadata__"][sys.argv[3]] = sys.argv[4]
t = json.dumps(h, separators=(",", ":")).encode()
t += b" " * (-(8 + len(t)) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(t)) + t + b[8 + n:])' "$@"
}
esc=$(printf '\033[31mred\nline2')
$AG train $SMALL --steps 2 --save "$W/e0.st" >/dev/null 2>&1
cp "$TEXT" "$W/$esc.txt"
set_meta "$W/e0.st" "$W/e1.st" text_path "$W/$esc.txt"
set_meta "$W/e1.st" "$W/e2.st" log_path "$W/$esc.csv"
$AG eval --model "$W/e1.st" --text "$TEXT" >"$W/out" 2>"$W/err"
rc=$?
[ $rc -eq 0 ] && [ "$(wc -l <"$W/out")" -eq 2 ] && ! grep -q "$(printf '\033')" "$W/out" && grep -q 'x1b\[31mred line2' "$W/out"
check $? "eval shows the checkpoint's text_path on its line, the escape as \\x1b (exit $rc: $(cat -v "$W/out" "$W/err"))"
$AG train --resume "$W/e2.st" --steps 3 >"$W/out" 2>&1
rc=$?
[ $rc -eq 0 ] && ! grep -q "$(printf '\033')" "$W/out" && grep -q '^  data  .*x1b\[31mred line2.txt: ' "$W/out" &&
    grep -q '^  log  .*x1b\[31mred line2.csv is a new file\|^  log  .*x1b\[31mred line2.csv no longer exists' "$W/out"
check $? "train --resume shows the recorded text and log paths on their lines (exit $rc: $(cat -v "$W/out"))"
rm -f "$W/$esc.txt" "$W/$esc.csv"

# ---- broken files ------------------------------------------------------------
$AG train $SMALL --optimizer adamw --steps 3 --save "$W/good.st" >/dev/null 2>&1
check $? "corpus: train the good checkpoint"
mkdir -p "$W/corpus"
if ! $PY tests/ckpt_corpus.py "$W/good.st" "$W/corpus" >"$W/manifest" 2>"$W/corpus.err"; then
    cat "$W/corpus.err"
    check 1 "corpus: tests/ckpt_corpus.py failed"
fi
tab=$(printf '\t')
while IFS="$tab" read -r name expect; do
    f="$W/corpus/$name.safetensors"
    for cmd in info eval; do
        if [ $cmd = info ]; then
            $AG info "$f" >"$W/out" 2>"$W/err"
        else
            $AG eval --model "$f" --text "$TEXT" >"$W/out" 2>"$W/err"
        fi
        rc=$?
        if [ "$expect" = OK ]; then
            check $rc "$name: $cmd should load it: $(cat "$W/err")"
            continue
        fi
        msg=$(cat "$W/err")
        [ $rc -eq 2 ]
        check $? "$name: $cmd exited $rc, expected 2 ($msg)"
        [ "$(wc -l <"$W/err")" -eq 1 ] && [ ! -s "$W/out" ]
        check $? "$name: $cmd should print exactly one line, on stderr ($msg)"
        case "$msg" in
            *"$f"*"$expect"*) check 0 "" ;;
            *) check 1 "$name: $cmd message lacks the file name or '$expect': $msg" ;;
        esac
    done
done <"$W/manifest"
# a weight missing from a run's file, whose moments hold its name after
# "optim.m.", is said missing and nothing more (it is no prefixed name)
msg=$($AG info "$W/corpus/missing_weight.safetensors" 2>&1)
case "$msg" in
    *"tensor 'out_head.weight' is missing") check 0 "" ;;
    *) check 1 "missing_weight: the message should end at 'is missing': $msg" ;;
esac
[ "$(wc -l <"$W/manifest")" -ge 60 ]
check $? "corpus: only $(wc -l <"$W/manifest") cases were generated"

# ---- files other programs write, files a resume cannot take -----------------
# weights alone, no metadata: what the file lacks comes from --heads and
# --text, or is asked for; tied weights stored once are used for both; a
# file without the run's state or one of its settings is not resumed
printf 'abcabcabc\n' >"$W/other.txt"
while IFS="$tab" read -r name line expect; do
    f="$W/corpus/$name.safetensors"
    args=$(printf '%s' "$line" | sed "s|FILE|$f|; s|TEXT|$TEXT|; s|OTHER|$W/other.txt|")
    $AG $args >"$W/out" 2>"$W/err"
    rc=$?
    msg=$(cat "$W/err")
    case "$expect" in
        OK*)
            check $rc "$name: $args should load it: $msg"
            want=${expect#OK}; want=${want#:}
            [ -z "$want" ] || case "$msg" in *"$want"*) ;; *) false ;; esac
            check $? "$name: $args should say '$want' on stderr: $msg" ;;
        *)
            [ $rc -eq 2 ] && [ "$(wc -l <"$W/err")" -eq 1 ] && [ ! -s "$W/out" ]
            check $? "$name: $args exited $rc, expected 2 and one line on stderr ($msg)"
            case "$msg" in
                *"$f"*"$expect"*) check 0 "" ;;
                *) check 1 "$name: the message lacks the file name or '$expect': $msg" ;;
            esac ;;
    esac
done <"$W/corpus/foreign.manifest"
[ "$(wc -l <"$W/corpus/foreign.manifest")" -ge 12 ]
check $? "corpus: only $(wc -l <"$W/corpus/foreign.manifest") files of other programs were generated"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
