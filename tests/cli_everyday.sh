#!/bin/bash
# cli_everyday.sh - everyday use of the attograd command, where a run or a
# file used to be lost: resuming saves back, outputs never overwrite inputs,
# saving through a symlink, a second Ctrl-C while saving, closed pipes and
# hang-ups, endless or huge inputs, long paths, fine-tuning settings from the
# command line, extending a cosine schedule, schedules that make no sense,
# and the threads' count and wait policy, which change no result.  Run from the repository root; ATTOGRAD
# overrides ./build/attograd.  The last line is "N passed, N failed".
# Checks are quoted for eval on purpose; option lists ($SMALL) split into words.
# shellcheck disable=SC2012,SC2016,SC2086
A=${ATTOGRAD:-./build/attograd}
ROOT=$(pwd)
TEXT=$ROOT/data/tiny.txt
# shellcheck source=tests/harness.sh
. "$(dirname "$0")/harness.sh"

need_binary
tmp=$(mktemp -d "${TMPDIR:-/tmp}/attograd-everyday.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM
cd "$tmp" || exit 1

SMALL="--d-model 8 --heads 2 --layers 1 --context 8 --batch 4 --eval-every 0"
TINY="--text $TEXT $SMALL"

# bad SUBSTRING CMD ARGS...: exit 2, one stderr line containing SUBSTRING,
# nothing on stdout, within 30 s
bad() {
    local want=$1; shift
    timeout 30 "$A" "$@" >"$tmp/stdout" 2>"$tmp/stderr"
    local rc=$?
    local why=""
    [ "$rc" -eq 2 ] || why="exit $rc"
    [ "$(wc -l <"$tmp/stderr")" -eq 1 ] || why="$why; $(wc -l <"$tmp/stderr") stderr lines"
    grep -qF -- "$want" "$tmp/stderr" || why="$why; no '$want'"
    [ -s "$tmp/stdout" ] && why="$why; stdout: $(head -c 200 "$tmp/stdout")"
    if [ -z "$why" ]; then ok; else fail "attograd $* -> $why; stderr: $(head -c 300 "$tmp/stderr")"; fi
}
# the metadata value of KEY in a checkpoint, as 'attograd info' does not show them all
meta() {
    python3 - "$1" "$2" 2>/dev/null <<'PY'
import json, struct, sys
b = open(sys.argv[1], 'rb').read()
n = struct.unpack('<Q', b[:8])[0]
print(json.loads(b[8:8 + n])['__metadata__'].get(sys.argv[2], ''))
PY
}

# ---- words: the tutorials' worked examples, not "seeds" ---------------------------
"$A" --help >help.txt 2>&1
check "attograd --help names the tutorials' worked examples ($(grep walkthrough help.txt))" \
    grep -q "walkthrough .*the tutorials' worked examples" help.txt
check "attograd --help never says seeds" eval '! grep -qi seeds help.txt'

# ---- 1. a resumed run saves back to its file, and every save says where ------------
"$A" train $TINY --steps 3 --quiet --save r.st >/dev/null 2>&1
"$A" train --resume r.st --steps 5 >out.txt 2>err.txt
rc=$?
check "--resume without --save: exit 0 (got $rc: $(cat err.txt))" test $rc -eq 0
check "--resume without --save saves back to the file it resumed ($(meta r.st step))" test "$(meta r.st step)" = 5
check "--resume without --save says where it saved ($(grep saved out.txt))" grep -qx "saved r.st (step 5)" out.txt
cp r.st r5.st
"$A" train --resume r.st --steps 7 --save other.st --quiet >out.txt 2>&1
check "--resume with --save elsewhere leaves the resumed file alone" cmp -s r.st r5.st
check "--resume with --save elsewhere saves there ($(meta other.st step))" test "$(meta other.st step)" = 7
check "--quiet still says where the run was saved ($(cat out.txt))" grep -qx "saved other.st (step 7)" out.txt
# a resumed run already at its last step trains nothing: its file is left as it was (not
# replaced by the same bytes: the same inode and mtime), however it is named; a --save
# elsewhere is a copy asked for and is written; more --steps train and save back
cp r5.st last.st; ln -s last.st last-link.st
was=$(stat -c '%i %y' last.st)
for run in "--resume last.st" "--resume last.st --save last.st --quiet" "--resume last-link.st --quiet" \
           "--resume last.st --save last-link.st --quiet"; do
    "$A" train $run >out.txt 2>err.txt
    rc=$?
    check "train $run at its last step: exit 0, nothing on stderr ($rc: $(cat err.txt))" \
        eval '[ $rc -eq 0 ] && [ ! -s err.txt ]'
    check "train $run at its last step leaves the file alone: inode and mtime ($was -> $(stat -c '%i %y' last.st))" \
        test "$(stat -c '%i %y' last.st)" = "$was"
    check "train $run says the file is left as it was ($(grep -v '^ ' out.txt | head -3 | tr '\n' ' '))" \
        grep -Eqx "last(-link)?\.st left as it was \(step 5: no steps taken, nothing to save\)" out.txt
done
check "and holds the same bytes, nothing beside it ($(ls last*))" \
    eval 'cmp -s last.st r5.st && [ "$(ls last*)" = "$(printf "last-link.st\nlast.st")" ]'
"$A" train --resume last.st --save last-copy.st --quiet >out.txt 2>&1
check "--resume at its last step with --save elsewhere writes the copy ($(cat out.txt))" \
    eval 'grep -qx "saved last-copy.st (step 5)" out.txt && cmp -s last-copy.st r5.st'
"$A" train --resume last.st --steps 6 --quiet >out.txt 2>&1
check "--resume with --steps past its last step trains and saves back ($(cat out.txt))" \
    eval 'grep -qx "saved last.st (step 6)" out.txt && [ "$(meta last.st step)" = 6 ]'
"$A" train $TINY --steps 4 --save-every 2 --save p.st --log-every 1 >out.txt 2>&1
check "a periodic save prints a line ($(grep saved out.txt | tr '\n' ' '))" \
    eval 'grep -qx "saved p.st (step 2)" out.txt && grep -qx "saved p.st (step 4)" out.txt'

# ---- 2. an output that is an input (or another output) is refused -------------------
cp "$TEXT" data.txt; cp data.txt data.bak
"$A" train --text data.txt $SMALL --steps 2 --quiet --save m.st >/dev/null 2>&1
"$A" train --text data.txt $SMALL --steps 2 --quiet --log run.csv --log-every 1 >/dev/null 2>&1
cp m.st m.bak; cp run.csv run.bak
ln -s data.txt link.txt; ln data.txt hard.txt
ln -s new.st dangling; mkdir -p sub; ln -s ../new.st sub/up  # links to a file not made yet
listing() { for f in *; do case $f in before.txt | after.txt | stdout | stderr) ;; *) echo "$f" ;; esac; done; }
listing >before.txt
bad "--log data.txt is the same file as --text data.txt" train --text data.txt $SMALL --steps 1 --log data.txt
bad "--save data.txt is the same file as --text data.txt" train --text data.txt $SMALL --steps 1 --save data.txt
bad "--log data.txt is the same file as --text link.txt" train --text link.txt $SMALL --steps 1 --log data.txt
bad "--save hard.txt is the same file as --text data.txt" train --text data.txt $SMALL --steps 1 --save hard.txt
bad "--log m.st is the same file as --resume m.st" train --resume m.st --steps 3 --log m.st
bad "--save m.st is the same file as --init m.st" train --init m.st --steps 1 --save m.st
bad "data.txt: writing it would destroy that input" train --resume m.st --steps 3 --save data.txt
bad "--save x.st and --log ./x.st are the same file" train --text data.txt $SMALL --steps 1 --save x.st --log ./x.st
bad "--out m.st is the same file as --model m.st" attn --model m.st --prompt 'The ' --out m.st
bad "--csv m.st is the same file as --model m.st" attn --model m.st --prompt 'The ' --out a.svg --csv m.st
bad "--out a.svg and --csv a.svg are the same file" attn --model m.st --prompt 'The ' --out a.svg --csv a.svg
# attn reads --text too (a vocabulary), so writing it is as refused
bad "--out data.txt is the same file as --text data.txt" attn --model m.st --prompt 'The ' --text data.txt --out data.txt
bad "--csv link.txt is the same file as --text hard.txt" \
    attn --model m.st --prompt 'The ' --text hard.txt --out a.svg --csv link.txt
bad "--out run.csv is the same file as --log run.csv" plot --log run.csv --out run.csv
# a link to a file not made yet is the file a write through it makes: the
# log, created first, was replaced by the checkpoint and lost (exit 0)
bad "--save new.st and --log dangling are the same file" train --text data.txt $SMALL --steps 1 --save new.st --log dangling
bad "--save sub/up and --log dangling are the same file" train --text data.txt $SMALL --steps 1 --save sub/up --log dangling
bad "--out dangling and --csv new.st are the same file" attn --model m.st --prompt 'The ' --out dangling --csv new.st
bad "--out m.st is the same file as --model m.st" graph --model m.st --out m.st
check "refused outputs: the text is unchanged" cmp -s data.txt data.bak
check "refused outputs: the checkpoint is unchanged" cmp -s m.st m.bak
check "refused outputs: the log is unchanged" cmp -s run.csv run.bak
listing >after.txt
check "refused outputs: no file written ($(diff before.txt after.txt | tr '\n' ' '))" cmp -s before.txt after.txt

# an output that does not exist yet, or is another file, is fine
"$A" train --resume m.st --steps 3 --save m2.st --log new.csv --quiet >/dev/null 2>err.txt
check "distinct outputs are accepted ($(cat err.txt))" eval '[ -s m2.st ] && [ -s new.csv ]'

# ---- 3. saving through a symlink writes the file it points to -----------------------
mkdir -p store
"$A" train $TINY --steps 2 --quiet --save store/real.st >/dev/null 2>&1
ln -s store/real.st via.st                   # relative, into another directory
"$A" train --resume via.st --steps 4 --quiet --save via.st >out.txt 2>err.txt
rc=$?
check "resume through a symlink: exit 0 ($rc: $(cat err.txt))" test $rc -eq 0
check "the symlink is still a symlink" test -L via.st
check "the link's target was saved ($(meta store/real.st step))" test "$(meta store/real.st step)" = 4
check "no temporary file beside the link or the target ($(ls store | tr '\n' ' '))" \
    eval '[ "$(ls store)" = real.st ] && ! ls ./*.tmp.* >/dev/null 2>&1'
ln -s store/pic.svg pic.svg
"$A" attn --model via.st --prompt 'The ' --out pic.svg >/dev/null 2>err.txt
check "attn --out through a symlink writes its target ($(cat err.txt))" eval '[ -L pic.svg ] && [ -s store/pic.svg ]'

# ---- 4. a second Ctrl-C while the checkpoint is being written ----------------------
# strace holds every fsync for 3 s: the second SIGINT lands inside the final
# save, after the temporary file is written and before it is renamed.
held_fsync() {  # held_fsync ARGS...: attograd ARGS in the background, every fsync held 3 s; strace's pid in $spid
    ASAN_OPTIONS=detect_leaks=0 env --default-signal=INT strace -f -o trace.txt -e trace=execve,fsync \
        -e inject=fsync:delay_enter=3000000 "$A" "$@" &
    spid=$!
}
traced() { awk '/execve/ { print $1; exit }' trace.txt; }       # attograd's pid under strace
until_true() { for _ in $(seq 300); do eval "$1" && return; sleep 0.05; done; }
if command -v strace >/dev/null && strace -f -o /dev/null -e trace=fsync true 2>/dev/null; then
    "$A" train $TINY --steps 2 --quiet --save keep.st >/dev/null 2>&1
    cp keep.st keep.bak
    held_fsync train --resume keep.st --save keep.st --steps 1000000 --threads 1 --log-every 1 >out.txt 2>err.txt
    until_true 'grep -q "^step" out.txt 2>/dev/null'
    kill -INT "$(traced)"
    until_true 'ls keep.st.tmp.* >/dev/null 2>&1'
    kill -INT "$(traced)"
    wait $spid
    rc=$?
    check "second SIGINT while saving: exit 130 (got $rc)" test $rc -eq 130
    check "second SIGINT while saving: the message says so ($(tr '\n' '|' <err.txt))" \
        grep -q "interrupted again while saving: keep.st was not written; the previous checkpoint is kept" err.txt
    check "second SIGINT while saving: the previous checkpoint is byte-identical" cmp -s keep.st keep.bak
    check "second SIGINT while saving: no temporary file left ($(ls keep.st* | tr '\n' ' '))" \
        eval '! ls keep.st.tmp.* >/dev/null 2>&1'
    # a picture command stopped while it writes leaves no temporary file either
    "$A" train $TINY --steps 3 --quiet --log-every 1 --log plot.csv >/dev/null 2>&1
    held_fsync plot --log plot.csv --out plot.svg >/dev/null 2>err.txt
    until_true 'ls plot.svg.tmp.* >/dev/null 2>&1'
    kill -INT "$(traced)"
    wait $spid
    rc=$?
    check "SIGINT while plot writes: exit 130 (got $rc)" test $rc -eq 130
    check "SIGINT while plot writes: no picture, no temporary file ($(ls plot.svg* 2>&1 | tr '\n' ' '))" \
        eval '! ls plot.svg* >/dev/null 2>&1'
    # SIGTERM before training starts: nothing the run made is left behind.
    # held_on CALL FILE ARGS...: attograd ARGS, each CALL on FILE held 3 s;
    # term_holder LOCK: SIGTERM to the process LOCK names, its status in rc
    held_on() {
        local call=$1 file=$2; shift 2
        ASAN_OPTIONS=detect_leaks=0 strace -f -o trace.txt -e trace="$call" -P "$file" \
            -e inject="$call":delay_enter=3000000 "$A" "$@" >out.txt 2>err.txt &
        spid=$!
    }
    term_holder() { kill -TERM "$(awk '{ print $2 }' "$1")"; wait $spid; rc=$?; }
    # after the outputs are locked, while the text is opened
    cp "$TEXT" held.txt
    held_on openat held.txt train --text held.txt $SMALL --steps 1 --quiet --save early.st --log early.csv
    until_true '[ -s early.csv.lock ]'
    term_holder early.st.lock
    check "SIGTERM while the text is opened: exit 143 (got $rc: $(cat err.txt))" test $rc -eq 143
    check "SIGTERM while the text is opened: no lock or other file left ($(ls early.* 2>&1 | tr '\n' ' '))" \
        eval '! ls early.* >/dev/null 2>&1'
    # ... and while a resumed run rewrites its log (its reads held): no temporary file
    # (the log holds rows 5 and 6, past the checkpoint's step 4, to drop)
    "$A" train $TINY --steps 4 --log-every 1 --quiet --save lg.st --log lg.csv >/dev/null 2>&1
    cp lg.st lg.st4 && "$A" train --resume lg.st --steps 6 --quiet >/dev/null 2>&1 && mv lg.st4 lg.st
    cp lg.csv lg.bak
    held_on read lg.csv train --resume lg.st --steps 6 --quiet --truncate-log
    until_true 'ls lg.csv.tmp.* >/dev/null 2>&1'
    term_holder lg.st.lock
    check "SIGTERM while the log is rewritten: exit 143 (got $rc: $(cat err.txt))" test $rc -eq 143
    check "SIGTERM while the log is rewritten: the log is as it was" cmp -s lg.csv lg.bak
    check "SIGTERM while the log is rewritten: no temporary or lock file left ($(ls lg.* | tr '\n' ' '))" \
        test "$(ls lg.* | tr '\n' ' ')" = "lg.bak lg.csv lg.st "
else
    skip "a second SIGINT while saving (strace cannot trace here)"
fi

# ---- 5. a closed pipe does not stop the run; a hang-up saves like SIGTERM ------------
# 1000 progress lines (~90 KB) cannot all fit in a pipe that nobody reads any more
"$A" train $TINY --steps 1000 --log-every 1 --save pipe.st 2>err.txt | head -n 3 >head.txt
rc=${PIPESTATUS[0]}
check "train | head -n 3: exit 0, not killed by SIGPIPE (got $rc: $(cat err.txt))" test "$rc" -eq 0
check "train | head -n 3: the run trained to the end and saved ($(meta pipe.st step))" test "$(meta pipe.st step)" = 1000
check "train | head -n 3: one line says stdout is closed ($(cat err.txt))" \
    eval '[ "$(wc -l <err.txt)" -eq 1 ] && grep -q "standard output is closed" err.txt'
check "train | head -n 3: head got the configuration" test "$(wc -l <head.txt)" -eq 3
"$A" train $TINY --steps 1000000 --threads 1 --save hup.st >out.txt 2>err.txt &
pid=$!
for _ in $(seq 300); do grep -q '^  data' out.txt 2>/dev/null && break; sleep 0.1; done
sleep 0.3
kill -HUP $pid
wait $pid
rc=$?
check "SIGHUP: exit 129 (got $rc)" test $rc -eq 129
check "SIGHUP: finishes the step and saves ($(cat err.txt))" \
    eval 'grep -q "hung up at step [0-9]*: stopping and saving" err.txt && [ "$(meta hup.st step)" -ge 1 ]'
# A signal ignored when the run started stays ignored: SIGHUP under nohup
# (the run outlives its terminal), SIGINT in a script's `attograd train ... &`
# under a shell without job control (the Ctrl-C meant for the commands in
# front passes it by, as it passes a command without a handler; made
# explicit here).  The run trains on through it, and a SIGTERM still stops it.
ignored_at_start() {  # ignored_at_start SIG WORD: WORD is what the run would say had it stopped
    rm -f ign.st
    (trap '' "$1"; exec "$A" train $TINY --steps 1000000 --threads 1 --save ign.st >out.txt 2>err.txt) &
    local pid=$! word=$2 sent alive rc
    for _ in $(seq 300); do grep -q '^  data' out.txt 2>/dev/null && break; sleep 0.1; done
    sleep 0.3
    kill -"$1" $pid
    sent=$?
    sleep 1
    kill -0 $pid 2>/dev/null
    alive=$?
    kill -TERM $pid
    wait $pid
    rc=$?
    check "SIG$1 ignored at start: the run went on through it (sent $sent, alive $alive: $(cat err.txt))" \
        eval '[ $sent -eq 0 ] && [ $alive -eq 0 ] && ! grep -q "$word" err.txt'
    check "SIG$1 ignored at start, then SIGTERM: exit 143, saved (got $rc, step $(meta ign.st step))" \
        eval '[ $rc -eq 143 ] && [ "$(meta ign.st step)" -ge 1 ]'
}
ignored_at_start HUP "hung up"
ignored_at_start INT "interrupted"
# sample, started with SIGINT ignored, keeps it ignored too
rm -f sample.out
(trap '' INT; exec "$A" sample --model ign.st --tokens 1000000 --threads 1 >sample.out 2>err.txt) &
pid=$!
for _ in $(seq 300); do [ -s sample.out ] && break; sleep 0.05; done
kill -INT $pid
size=$(wc -c <sample.out)
for _ in $(seq 300); do [ "$(wc -c <sample.out)" -gt $((size + 20)) ] && break; kill -0 $pid 2>/dev/null || break; sleep 0.05; done
kill -0 $pid 2>/dev/null
alive=$?
kill -TERM $pid
wait $pid
rc=$?
check "sample with SIGINT ignored at start: prints on through a SIGINT (alive $alive: $(cat err.txt))" \
    eval '[ $alive -eq 0 ] && [ "$(wc -c <sample.out)" -gt $((size + 20)) ]'
check "... and SIGTERM ends it, exit 143 (got $rc: $(cat err.txt))" test $rc -eq 143
# a save cut short by a killed run (simulated: its temporary files made by
# hand, named with the id of a process that has ended) is removed by the next
# run that holds the file's lock, and said; one of a live process (another
# rank's check that the file can be written), files of another name, or not of
# the temporary pattern, stay
gone=$(sh -c 'echo $$')
rm -f stale.st* other.st.tmp.$gone
: >stale.st.tmp.$gone; : >stale.st.tmp.$gone.1; : >stale.st.tmp.$$; : >stale.st.tmp.x1; : >other.st.tmp.$gone
: >stale.st.tmp.
"$A" train $TINY --steps 2 --quiet --save stale.st >out.txt 2>err.txt
rc=$?
check "stale temporary files of the output: removed ($(ls stale.st* other.st* | tr '\n' ' '))" \
    eval '[ $rc -eq 0 ] && [ ! -e stale.st.tmp.$gone ] && [ ! -e stale.st.tmp.$gone.1 ] && [ -e stale.st ]'
check "stale temporary files: one line each on stderr ($(tr '\n' '|' <err.txt))" \
    eval '[ "$(wc -l <err.txt)" -eq 2 ] &&
          grep -qx "attograd train: removed stale.st.tmp.$gone, a save cut short by a run that was killed" err.txt &&
          grep -qx "attograd train: removed stale.st.tmp.$gone.1, a save cut short by a run that was killed" err.txt'
check "stale temporary files: a live process's, and other names, stay" \
    eval '[ -e stale.st.tmp.$$ ] && [ -e stale.st.tmp.x1 ] && [ -e other.st.tmp.$gone ] && [ -e stale.st.tmp. ]'
rm -f stale.st* other.st.tmp.$gone

# ---- 6. endless, special or huge inputs are refused before they are read -------------
mkfifo fifo
bad "fifo is not a regular file" train --text fifo
bad "fifo is not a regular file" eval --model fifo
bad "fifo is not a regular file" info fifo
bad "fifo is not a regular file" sample --model fifo
bad "fifo is not a regular file" plot --log fifo --out p.svg
bad "fifo is not a regular file" train --resume fifo
# sparse files: no disk space, but larger than the limits; capped memory
# where this build can run so (the sanitizers cannot), in case they are read
truncate -s $((1024 * 1024 * 1024 + 1)) big.txt
truncate -s $((4 * 1024 * 1024 * 1024 + 1)) big.st
cap=""
if { (ulimit -v 2000000 && "$A" --version) >/dev/null 2>&1; } 2>/dev/null; then cap="ulimit -v 2000000;"; fi
refused_big() {  # refused_big SUBSTRING ARGS...: like bad, under the memory cap when there is one
    local want=$1; shift
    (eval "$cap"; timeout 30 "$A" "$@") >"$tmp/stdout" 2>"$tmp/stderr"
    local rc=$?
    if [ $rc -eq 2 ] && [ "$(wc -l <"$tmp/stderr")" -eq 1 ] && grep -qF -- "$want" "$tmp/stderr"; then ok; else
        fail "attograd $* -> exit $rc: $(head -c 300 "$tmp/stderr")"; fi
}
refused_big "big.txt is 1073741825 bytes, more than the 1 GiB a text file may have" train --text big.txt
refused_big "big.txt is 1073741825 bytes, more than the 1 GiB a text file may have" eval --model m2.st --text big.txt
refused_big "big.st is 4294967297 bytes, more than the 4 GiB a checkpoint may have" info big.st
refused_big "big.st is 4294967297 bytes, more than the 4 GiB a checkpoint may have" train --init big.st
refused_big "big.txt is 1073741825 bytes, more than the 1 GiB a CSV log may have" plot --log big.txt --out p.svg
# --text beside a model is read for its vocabulary (or checked against the
# one the file lists): it read /dev/zero until memory ran out, waited on a
# pipe forever, or was taken without a look (attn)
bad "fifo is not a regular file" sample --model m2.st --text fifo
refused_big "big.txt is 1073741825 bytes, more than the 1 GiB a text file may have" sample --model m2.st --text big.txt
refused_big "/dev/zero is not a regular file" attn --model m2.st --prompt 'The ' --out a.svg --text /dev/zero
if [ -n "$cap" ]; then
    refused_big "/dev/zero is not a regular file" train --text /dev/zero
    refused_big "/dev/zero is not a regular file" sample --model m2.st --text /dev/zero
else
    skip "train --text /dev/zero (no memory cap in this build)"
fi
rm -f big.txt big.st fifo

# ---- 7. long paths: what a save creates is checked before training --------------------
long=$(printf 'n%.0s' $(seq 247)).st          # 250 bytes: a legal name; NAME.tmp.PID would not be
"$A" train $TINY --steps 2 --quiet --save "$long" >out.txt 2>err.txt
rc=$?
check "--save with a 250-byte name: exit 0 ($rc: $(head -c 300 err.txt))" test $rc -eq 0
check "--save with a 250-byte name: saved, no temporary file left" \
    eval '[ "$(meta "$long" step)" = 2 ] && ! ls ./*.tmp.* >/dev/null 2>&1'
"$A" train --resume "$long" --steps 3 --save-every 1 --quiet >/dev/null 2>err.txt
check "--resume and periodic saves to a 250-byte name ($(head -c 300 err.txt))" test "$(meta "$long" step)" = 3
rm -f "$long"
toolong=$(printf 'n%.0s' $(seq 253)).st       # 256 bytes: refused before training, the whole name said
bad "File name too long" train $TINY --steps 2 --save "$toolong"
check "--save with a 256-byte name: the message is whole ($(wc -c <"$tmp/stderr") bytes)" \
    eval 'grep -qF "$toolong" "$tmp/stderr" && grep -q "too long$" "$tmp/stderr"'
deep=""
for _ in 1 2 3 4 5 6; do deep="$deep$(printf 'd%.0s' $(seq 200))/"; done     # 1206 bytes of directories
mkdir -p "$deep"
"$A" train $TINY --steps 2 --quiet --save "${deep}m.st" >out.txt 2>err.txt
rc=$?
check "--save in an existing 1.2 KB directory path: exit 0 ($rc: $(head -c 300 err.txt))" test $rc -eq 0
check "--save in an existing 1.2 KB directory path: saved" test "$(meta "${deep}m.st" step)" = 2
bad "No such file or directory" train $TINY --steps 2 --save "${deep}no/m.st"
check "a missing directory: the message names the whole path" grep -qF "${deep}no/m.st" "$tmp/stderr"
rm -rf d*

# ---- 8. --init: the architecture from the checkpoint, the run's settings from the flags ----
"$A" train $TINY --dropout 0.1 --steps 3 --quiet --save base.st >/dev/null 2>&1
"$A" train --init base.st --dropout 0.2 --steps 1 --save ft.st >out.txt 2>err.txt
rc=$?
check "--init with --dropout trains (exit $rc: $(cat err.txt))" test $rc -eq 0
check "--init with --dropout 0.2: the run and its checkpoint use it ($(meta ft.st dropout))" \
    eval 'grep -q "dropout 0.2$" out.txt && [ "$(meta ft.st dropout)" = 0.20000000000000001 ]'
"$A" train --init base.st --steps 1 --quiet --save ft0.st >/dev/null 2>&1
check "--init without --dropout: the flag's default, 0 ($(meta ft0.st dropout))" test "$(meta ft0.st dropout)" = 0
"$A" train --init base.st --context 4 --steps 0 --quiet --save crop.st >/dev/null 2>err.txt
check "--init with a shorter --context: saved with context 4 ($(meta crop.st context_length); $(cat err.txt))" \
    test "$(meta crop.st context_length)" = 4
python3 - base.st crop.st >cmp.txt 2>&1 <<'PY'
import json, struct, sys
def load(p):
    b = open(p, 'rb').read()
    n = struct.unpack('<Q', b[:8])[0]
    h = json.loads(b[8:8 + n])
    return {k: (v['shape'], b[8 + n + v['data_offsets'][0]:8 + n + v['data_offsets'][1]])
            for k, v in h.items() if k != '__metadata__' and not k.startswith(('optim.', 'state.'))}
a, c = load(sys.argv[1]), load(sys.argv[2])
pos_a, pos_c = a.pop('pos_emb.weight'), c.pop('pos_emb.weight')
ok = pos_c[0] == [4, pos_a[0][1]] and pos_c[1] == pos_a[1][:len(pos_c[1])] and a == c
print('same' if ok else 'differ: %s %s' % (pos_a[0], pos_c[0]))
PY
check "--context 4: the first 4 position embeddings and every other weight kept ($(cat cmp.txt))" grep -qx same cmp.txt
"$A" eval --model crop.st --text "$TEXT" >out.txt 2>err.txt
check "the cropped model evaluates ($(cat err.txt))" grep -q "^loss" out.txt
bad "--context 16 is longer than the checkpoint's 8" train --init base.st --context 16 --steps 1
bad "--layers cannot be used with --init" train --init base.st --layers 2 --steps 1
bad "--dropout cannot be used with --resume" train --resume base.st --dropout 0.2
bad "--context cannot be used with --resume" train --resume base.st --context 4

# ---- 9. extending a resumed cosine run: the schedule stays, the extra steps run at --min-lr ----
"$A" train $TINY --schedule cosine --lr 0.01 --min-lr 0.001 --steps 10 --quiet --save cos.st >/dev/null 2>&1
"$A" train --resume cos.st --steps 14 --log-every 1 --log cos.csv >out.txt 2>err.txt
rc=$?
check "extending a cosine run: exit 0 ($rc: $(cat err.txt))" test $rc -eq 0
check "extending a cosine run says so in one line ($(grep -c 'cosine schedule ends' out.txt))" \
    eval '[ "$(grep -c "the cosine schedule ends at step 10, the run.s first --steps; steps 11 to 14 continue at --min-lr 0.001" out.txt)" -eq 1 ]'
check "extending a cosine run: steps 11-14 at --min-lr ($(cut -d, -f1,5 cos.csv | tail -n 4 | tr '\n' ' '))" \
    test "$(cut -d, -f5 cos.csv | tail -n 4 | tr '\n' ' ')" = "0.001 0.001 0.001 0.001 "
"$A" train --resume cos.st --steps 16 --log-every 1 --log cos2.csv --quiet >/dev/null 2>&1
check "a second extension keeps the first schedule ($(cut -d, -f5 cos2.csv | tail -n 2 | tr '\n' ' '))" \
    test "$(cut -d, -f5 cos2.csv | tail -n 2 | tr '\n' ' ')" = "0.001 0.001 "

# with --warmup the rate climbs lr (s+1)/warmup over the first steps, then
# the cosine runs from lr toward --min-lr over the steps after them
"$A" train $TINY --schedule cosine --warmup 3 --lr 0.01 --min-lr 0.001 --steps 6 --log-every 1 --log warm.csv \
    --quiet >/dev/null 2>err.txt
check "cosine with warmup: lr per step 1/3, 2/3, 1 of --lr, then 1, 3/4, 1/4 of the way down ($(cut -d, -f5 warm.csv | tail -n 6 | tr '\n' ' '); $(cat err.txt))" \
    test "$(cut -d, -f5 warm.csv | tail -n 6 | tr '\n' ' ')" = "0.00333333 0.00666667 0.01 0.01 0.00775 0.00325 "

# ---- 10. schedules that make no sense are refused --------------------------------------
bad "--min-lr 0.1 is above --lr 0.01" train $TINY --steps 2 --schedule cosine --lr 0.01 --min-lr 0.1
bad "--min-lr 0.01 is above --lr 0.003" train $TINY --steps 2 --schedule cosine --optimizer adamw --min-lr 0.01
bad "--warmup 5 is longer than --steps 2" train $TINY --steps 2 --schedule cosine --warmup 5
bad "--min-lr applies only to --schedule cosine" train $TINY --steps 2 --min-lr 0.001
bad "--warmup applies only to --schedule cosine" train $TINY --steps 2 --warmup 1
bad "--warmup applies only to --schedule cosine" train --init base.st --steps 2 --warmup 1
# flags the optimizer or the data would ignore
bad "--momentum applies only to --optimizer sgd (the optimizer is adamw)" train $TINY --steps 2 --optimizer adamw --momentum 0.5
for f in "--beta1 0.8" "--beta2 0.99" "--eps 1e-6"; do
    bad "${f% *} applies only to --optimizer adamw (the optimizer is sgd)" train $TINY --steps 2 $f
done
bad "--order applies only to --text (task copy draws random problems)" train --steps 2 --order sequential
bad "--order applies only to --text (task reverse draws random problems)" train --task reverse --steps 2 --order random
# a flag of the MPI build alone (build-mpi/ has its own tests: cli_mpi.sh)
bad "--mpi-timeout applies only to the MPI build (make MPI=1)" train $TINY --steps 2 --mpi-timeout 60
bad "--mpi-timeout applies only to the MPI build (make MPI=1)" train --resume base.st --steps 4 --mpi-timeout 0

# ---- 17. threads and their wait policy change no bit of a run ---------------------------
# The engine's threads (src/pool.c) decide at run time how long an idle thread
# polls; a policy in the environment overrides that.  Neither, nor the thread
# count, may change a result: the checkpoints are the same bytes.
"$A" train --steps 20 --quiet --threads 1 --save t1.st >/dev/null 2>&1
for how in "--threads 2" "--threads 3" "OMP_WAIT_POLICY=passive --threads 2" "OMP_WAIT_POLICY=active --threads 2"; do
    policy=${how%%--*}
    env $policy "$A" train --steps 20 --quiet ${how#"$policy"} --save tn.st >/dev/null 2>&1
    check "the same checkpoint with $how as with --threads 1" cmp -s t1.st tn.st
done

finish
