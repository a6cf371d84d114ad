#!/bin/bash
# cli_everyday2.sh - everyday use, second pass: outputs that are devices or
# pipes are written through, two runs never write one file, standard output
# that cannot be written is an error, and the project installs and builds
# as a C project does (make install with PREFIX and DESTDIR, pkg-config, a
# change of compiler rebuilds).  Run from the repository root; ATTOGRAD
# overrides ./build/attograd.  The last line is "N passed, N failed".
# Checks are quoted for eval on purpose; option lists ($SMALL) split into words.
# shellcheck disable=SC2016,SC2086
A=${ATTOGRAD:-./build/attograd}
ROOT=$(pwd)
TEXT=$ROOT/data/tiny.txt
# shellcheck source=tests/harness.sh
. "$(dirname "$0")/harness.sh"

need_binary
BUILD=$(dirname "$A")
tmp=$(mktemp -d "${TMPDIR:-/tmp}/attograd-everyday2.XXXXXX") || exit 1
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM
cd "$tmp" || exit 1

SMALL="--d-model 8 --heads 2 --layers 1 --context 8 --batch 4 --eval-every 0"
TINY="--text $TEXT $SMALL"
"$A" train $TINY --steps 3 --quiet --save m.st >/dev/null 2>&1 || fail "a first model could not be trained"

# one_line CMD...: CMD's exit status in $rc, its stderr in err.txt; one line?
one_line() { "$@" >out.txt 2>err.txt; rc=$?; [ "$(wc -l <err.txt)" -eq 1 ]; }

# one of a thing is said in the singular, as one layer, head or thread is:
# a run of 1 step on a text whose validation split holds 1 window
printf 'abcdefghij%.0s' 1 2 3 4 5 6 7 8 9 10 11 >one.txt
"$A" train --text one.txt --context 8 --d-model 8 --heads 2 --layers 1 --batch 4 --steps 1 --threads 1 \
    --save one.st >out.txt 2>&1
check "train --steps 1: 'run 1 step,', '1 window of 8' and 'done: 1 step in' ($(tr '\n' '|' <out.txt))" \
    eval 'grep -q "^  run        1 step, batch 4, seed 1, 1 thread," out.txt && grep -q "(1 window of 8;" out.txt &&
          grep -q "^done: 1 step in " out.txt'
"$A" eval --model one.st >out.txt 2>&1
check "eval of 1 window: 'scored 1 window of 8 tokens' ($(tr '\n' '|' <out.txt))" \
    grep -q "^scored 1 window of 8 tokens (8 tokens)" out.txt
"$A" train --text one.txt --context 1 --d-model 8 --heads 2 --layers 1 --batch 4 --steps 1 --threads 1 --quiet \
    --save one1.st >/dev/null 2>&1
"$A" eval --model one1.st >out.txt 2>&1
check "eval at context 1: 'scored 10 windows of 1 token (10 tokens)' ($(tr '\n' '|' <out.txt))" \
    grep -q "^scored 10 windows of 1 token (10 tokens)" out.txt
printf 'abababababa' >eleven.txt       # a validation split of 1 token
one_line "$A" eval --model one.st --text eleven.txt --split val
check "eval of a split of 1 token: 'the val split has 1 token, fewer' ($(cat err.txt))" \
    eval '[ $rc -eq 2 ] && grep -q "eleven.txt: the val split has 1 token, fewer than one window of 8 + 1" err.txt'
"$A" graph --model one.st --out one.dot --tokens 1 >out.txt 2>&1
check "graph --tokens 1: 'over 1 scored of 1 token' ($(cat out.txt))" grep -q "over 1 scored of 1 token$" out.txt
"$A" train --resume one.st --steps 0 >out.txt 2>&1
check "--resume of a 1-step run with --steps 0: 'the 1 step the checkpoint has already taken' ($(cat out.txt))" \
    grep -q "is less than the 1 step the checkpoint has already taken$" out.txt

# ---- 1. an output that is a device or a pipe is written through -----------------------
# a character device like /dev/null, made here (root only)
"$A" train $TINY --steps 4 --log-every 1 --quiet --log log.csv >/dev/null 2>&1
if mknod mynull c 1 3 2>/dev/null; then
    for run in "train $TINY --steps 3 --quiet --save mynull" "train $TINY --steps 3 --quiet --log mynull" \
               "attn --model m.st --prompt The --out mynull" \
               "attn --model m.st --prompt The --out a.svg --csv mynull" \
               "plot --log log.csv --out mynull" "graph --model m.st --out mynull"; do
        rm -f mynull && mknod mynull c 1 3
        "$A" $run >/dev/null 2>err.txt
        rc=$?
        check "$run: exit 0 ($rc: $(cat err.txt))" test $rc -eq 0
        check "$run: mynull is still a character device ($(ls -l mynull))" test -c mynull
    done
else
    skip "a device node cannot be made here (mknod needs root)"
fi
# /dev/stdout, whatever it is: a pipe here
"$A" attn --model m.st --prompt The --out /dev/stdout 2>err.txt | cat >piped.svg
check "attn --out /dev/stdout into a pipe writes the picture there ($(cat err.txt))" grep -q "</svg>" piped.svg
"$A" train $TINY --steps 3 --quiet --save /dev/stdout 2>err.txt | cat >piped.st
check "train --save /dev/stdout into a pipe writes the checkpoint there, and nothing else ($(cat err.txt))" \
    eval '"$A" info piped.st >/dev/null 2>>err.txt'
check "... the run's report goes to stderr instead ($(cat err.txt))" grep -q "^done: 3 steps" err.txt

# the process's own streams (/dev/stdout, /dev/fd/N, /proc/self/fd/N, a link to
# one) are written through the descriptor, as cat writes to it: a file the
# shell opened keeps its inode (it is not replaced by a renamed temporary
# file) and gets the bytes where the descriptor stands
inode() { stat -c %i "$1"; }
ln -s /dev/stdout to_stdout
for name in /dev/stdout /proc/self/fd/1 to_stdout; do
    echo "old contents" >own.st
    before=$(inode own.st)
    "$A" train $TINY --steps 3 --save $name >own.st 2>err.txt
    rc=$?
    check "train --save $name >own.st: exit 0, a checkpoint info reads ($rc: $(tail -n 1 err.txt))" \
        eval '[ $rc -eq 0 ] && "$A" info own.st >/dev/null'
    check "... own.st is the shell's file still (inode $before, now $(inode own.st)), and no temporary file is left" \
        eval '[ "$(inode own.st)" = "$before" ] && ! ls ./*.tmp.* >/dev/null 2>&1'
    check "... the report (configuration, steps, summary) went to stderr" \
        eval 'grep -q "^attograd train:" err.txt && grep -q "^done: 3 steps" err.txt && grep -q "^saved $name (step 3)" err.txt'
done
check "... the link to /dev/stdout is a link still" test -L to_stdout
"$A" train $TINY --steps 3 --save /dev/stdout >/dev/null 2>err.txt
rc=$?
check "train --save /dev/stdout >/dev/null: the report goes to /dev/null too, stderr stays empty ($rc: $(cat err.txt))" \
    eval '[ $rc -eq 0 ] && [ ! -s err.txt ]'
echo "old contents" >fd3.st
before=$(inode fd3.st)
"$A" train $TINY --steps 3 --quiet --save /dev/fd/3 3>fd3.st >out.txt 2>err.txt
rc=$?
check "train --save /dev/fd/3 3>fd3.st: the checkpoint in the same inode, the summary on stdout ($rc: $(cat err.txt))" \
    eval '[ $rc -eq 0 ] && "$A" info fd3.st >/dev/null && [ "$(inode fd3.st)" = "$before" ] && grep -q "^done:" out.txt'
# >> : the bytes go after what is there, as with cat
echo "kept line" >app.st
"$A" train $TINY --steps 3 --quiet --save /dev/stdout >>app.st 2>err.txt
tail -c +11 app.st >app_tail.st
check "train --save /dev/stdout >>app.st appends: the first line kept, the checkpoint after it ($(cat err.txt))" \
    eval '[ "$(head -n 1 app.st)" = "kept line" ] && "$A" info app_tail.st >/dev/null'
# a log on stdout: the CSV alone, in the shell's file
echo "old" >log_out.csv
before=$(inode log_out.csv)
"$A" train $TINY --steps 4 --log-every 1 --log /dev/stdout --save own_log.st >log_out.csv 2>err.txt
rc=$?
check "train --log /dev/stdout >log_out.csv: exit 0, the header and 4 rows, nothing else, same inode ($rc: $(head -c 300 log_out.csv))" \
    eval '[ $rc -eq 0 ] && [ "$(head -n 1 log_out.csv)" = "step,train_loss,val_loss,val_acc,lr,ms_per_step,tokens_per_s" ] &&
          [ "$(tail -n +2 log_out.csv | grep -c "^[1-4],")" -eq 4 ] && [ "$(wc -l <log_out.csv)" -eq 5 ] &&
          [ "$(inode log_out.csv)" = "$before" ]'
check "... and the checkpoint does not record /dev/stdout (or the shell's file) as the run's log" \
    eval '! "$A" info own_log.st | grep -q "log_path"'
# pictures
for run in "attn --model m.st --prompt The --out /dev/stdout" "plot --log log.csv --out /dev/stdout" \
           "graph --model m.st --out /dev/stdout"; do
    echo "old" >pic.out
    before=$(inode pic.out)
    "$A" $run >pic.out 2>err.txt
    rc=$?
    check "$run >pic.out: exit 0, the picture alone in the same inode ($rc: $(cat err.txt))" \
        eval '[ $rc -eq 0 ] && [ "$(inode pic.out)" = "$before" ] && ! grep -qx old pic.out && ! grep -q "ops; loss" pic.out &&
              tail -n 1 pic.out | grep -q "</svg>\|^}"'
done
check "graph --out /dev/stdout: its line went to stderr" grep -q "/dev/stdout: [0-9]* ops; loss" err.txt
# a socket is neither opened (open(2) cannot) nor replaced: refused before training
python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' sock
for run in "train $TINY --steps 3 --quiet --save sock" "attn --model m.st --prompt The --out sock" \
    "train $TINY --steps 3 --quiet --log sock"; do
    one_line "$A" $run
    check "$run: exit 2, one line saying sock is a socket, sock left as it was ($rc: $(cat err.txt))" \
        eval '[ $rc -eq 2 ] && grep -q "sock: a socket, which is not written as a file" err.txt && test -S sock &&
              ! grep -q "^step\|^done" out.txt'
done
# periodic saves into a stream would follow each other there: refused
one_line "$A" train $TINY --steps 4 --quiet --save /dev/stdout --save-every 2
check "train --save /dev/stdout --save-every 2: exit 2, one line, nothing written ($rc: $(cat err.txt))" \
    eval '[ $rc -eq 2 ] && grep -q -- "--save-every 2: --save /dev/stdout is written through" err.txt && [ ! -s out.txt ]'
# a descriptor that is not open, or open for reading only: one line, exit 2, before training
one_line "$A" train $TINY --steps 3 --quiet --save /dev/fd/7
check "train --save /dev/fd/7 (not open): exit 2, one line ($rc: $(cat err.txt))" \
    eval '[ $rc -eq 2 ] && grep -q "/dev/fd/7: descriptor 7 is not open" err.txt'
one_line "$A" train $TINY --steps 3 --quiet --save /dev/fd/5 5<m.st
check "train --save /dev/fd/5 5<m.st (read only): exit 2, one line, the file as it was ($rc: $(cat err.txt))" \
    eval '[ $rc -eq 2 ] && grep -q "descriptor 5 is open for reading only" err.txt && "$A" info m.st >/dev/null'
# the same when what the descriptor holds is a device or a pipe, not a file
one_line "$A" train $TINY --steps 3 --quiet --save /dev/fd/5 5</dev/null
check "train --save /dev/fd/5 5</dev/null (read only): exit 2, one line, before training ($rc: $(cat err.txt))" \
    eval '[ $rc -eq 2 ] && grep -q "descriptor 5 is open for reading only" err.txt && ! grep -q "^done" out.txt'
one_line "$A" train $TINY --steps 3 --save /dev/stdin </dev/null
check "train --save /dev/stdin </dev/null (read only): exit 2, one line, before training ($rc: $(cat err.txt))" \
    eval '[ $rc -eq 2 ] && grep -q "descriptor 0 is open for reading only" err.txt && ! grep -q "^step\|^done" out.txt'
# a write that fails (stdout on a full device): one line, exit 1
if [ -w /dev/full ]; then
    "$A" train $TINY --steps 3 --quiet --save /dev/stdout >/dev/full 2>err.txt
    rc=$?
    check "train --save /dev/stdout >/dev/full: exit 1, one line saying the write failed ($rc: $(cat err.txt))" \
        eval '[ $rc -eq 1 ] && [ "$(grep -c "/dev/stdout: write failed: No space left on device" err.txt)" -eq 1 ]'
fi
# a named pipe: one with a reader receives the output; one without is refused at once
mkfifo pipe
timeout 30 cat pipe >from_pipe.svg &
reader=$!
for _ in $(seq 100); do      # until the reader has opened its end
    timeout 30 "$A" attn --model m.st --prompt The --out pipe 2>err.txt
    rc=$?
    grep -q "nothing reads" err.txt || break
    sleep 0.1
done
wait $reader
check "attn --out FIFO with a reader: exit 0 ($rc: $(cat err.txt))" test $rc -eq 0
check "attn --out FIFO: the reader got the whole picture" grep -q "</svg>" from_pipe.svg
check "attn --out FIFO: it is still a FIFO" test -p pipe
for run in "train $TINY --steps 3 --quiet --log pipe" "train $TINY --steps 3 --quiet --save pipe" \
           "attn --model m.st --prompt The --out pipe"; do
    one_line timeout 20 "$A" $run
    check "$run, nothing reading: exit 2 at once, not a hang (got $rc)" test $rc -eq 2
    check "$run, nothing reading: one line naming the pipe ($(cat err.txt))" grep -q "pipe that nothing reads" err.txt
done

# a log into a pipe whose reader leaves early: one line (its name holds a
# newline, written as a space), the run trains on and exits 1.  3000 rows
# (~120 KB) cannot all wait in the pipe's buffer for a reader that is gone.
nl_pipe="nl"$'\n'"pipe.csv"
mkfifo "$nl_pipe"
timeout 30 head -c 10 <"$nl_pipe" >/dev/null &
for _ in $(seq 100); do
    one_line timeout 60 "$A" train $TINY --steps 3000 --log-every 1 --quiet --log "$nl_pipe"
    grep -q "nothing reads" err.txt || break
    sleep 0.1
done
check "a log whose reader left: exit 1, one line naming it ($rc: $(tr '\n' '|' <err.txt))" \
    eval '[ $rc -eq 1 ] && [ "$(wc -l <err.txt)" -eq 1 ] && grep -q "cannot write log nl pipe.csv: Broken pipe" err.txt'
rm -f "$nl_pipe"

# ---- 2. two runs writing the same file ---------------------------------------------------
env --default-signal=INT "$A" train $TINY --steps 100000000 --threads 1 --quiet --save same.st --log same.csv >first.txt 2>&1 &
first=$!
for _ in $(seq 200); do [ -e same.st.lock ] && break; sleep 0.05; done
for run in "train $TINY --steps 3 --quiet --save same.st" "train $TINY --steps 3 --quiet --save x.st --log same.csv" \
           "train --resume m.st --steps 5 --save same.st" "attn --model m.st --prompt The --out same.st"; do
    one_line "$A" $run
    check "a second run writing what another writes: exit 2 ($run: $rc)" test $rc -eq 2
    check "a second run writing what another writes: one line naming the other process ($run: $(cat err.txt))" \
        grep -q "is being written by another run (process $first)" err.txt
done
ln -s same.st link.st
one_line "$A" train $TINY --steps 3 --quiet --save link.st
check "the same file through a link is refused too ($(cat err.txt))" grep -q "process $first" err.txt
check "refused runs leave no lock or temporary file of their own" eval '[ ! -e x.st.lock ] && ! ls ./*.tmp.* >/dev/null 2>&1'
kill -INT $first
wait $first
rc=$?
check "the first run, interrupted, saves and exits 130 ($rc: $(tail -n 2 first.txt | tr '\n' ' '))" test $rc -eq 130
check "the first run's lock files are gone when it ends" eval '[ ! -e same.st.lock ] && [ ! -e same.csv.lock ]'
"$A" train $TINY --steps 1 --quiet --save same.st --log same.csv >/dev/null 2>err.txt
rc=$?
check "after it ended, the file is free again ($(cat err.txt))" test $rc -eq 0
# a killed run leaves its lock file, but no lock: the next run takes it
"$A" train $TINY --steps 100000000 --threads 1 --quiet --save killed.st >/dev/null 2>&1 &
victim=$!
for _ in $(seq 200); do [ -e killed.st.lock ] && break; sleep 0.05; done
kill -9 $victim
wait $victim 2>/dev/null
check "kill -9 leaves the lock file behind" test -e killed.st.lock
"$A" train $TINY --steps 2 --quiet --save killed.st >/dev/null 2>err.txt
rc=$?
check "a lock file left by a killed run is not a lock ($(cat err.txt))" test $rc -eq 0
check "... and is removed by the run that took it" test ! -e killed.st.lock
# a file of the user's own under that name is not taken for a lock, nor changed
echo "my notes" >notes.st.lock
one_line "$A" train $TINY --steps 2 --quiet --save notes.st
check "a foreign NAME.lock: refused in one line ($rc: $(cat err.txt))" \
    eval '[ $rc -eq 2 ] && grep -q "notes.st.lock exists and is not" err.txt'
check "a foreign NAME.lock is left as it was" grep -qx "my notes" notes.st.lock
# an output named as another output's lock file would be that lock, removed
# (with what it holds) when the run ends: refused before anything is written
mkdir lockname && ln -s own.st.lock lockname/link.csv
for run in "train $TINY --steps 2 --quiet --save lockname/own.st --log lockname/own.st.lock" \
           "train $TINY --steps 2 --quiet --save lockname/own.st.lock --log lockname/own.st" \
           "train $TINY --steps 2 --quiet --save lockname/own.st --log lockname/link.csv" \
           "attn --model m.st --prompt The --out lockname/own.svg --csv lockname/own.svg.lock" \
           "attn --model m.st --prompt The --out lockname/own.st.lock --csv ./lockname/own.st"; do
    one_line "$A" $run
    check "$run: exit 2, one line naming the lock file ($rc: $(cat err.txt))" \
        eval '[ $rc -eq 2 ] && grep -q "is the lock file of --" err.txt'
    check "$run: nothing written ($(ls lockname | tr '\n' ' '))" test "$(ls lockname)" = link.csv
done

# ---- 3, 6. a resume or an eval on changed data; the text found from another directory ----------
mkdir -p run/sub
cp "$TEXT" run/t.txt
(cd run && "$A" train --text t.txt $SMALL --steps 10 --quiet --save r.st >/dev/null 2>&1)
cp run/r.st r.bak
(cd run/sub && "$A" train --resume ../r.st --steps 12 --quiet >/dev/null 2>"$tmp/err.txt")
rc=$?
check "a text run resumes from another directory (its text by absolute path: $(cat err.txt))" test $rc -eq 0
cp r.bak run/r.st
(cd run/sub && "$A" eval --model ../r.st --text ../t.txt >out.txt 2>&1)
check "eval from another directory knows the training file and scores its last tenth ($(cat run/sub/out.txt))" \
    grep -q "the validation split (last tenth) of ../t.txt, the model's training file" run/sub/out.txt
python3 -c 'import sys; d = open(sys.argv[1], "rb").read(); open(sys.argv[1], "wb").write(d[::-1])' run/t.txt
one_line "$A" train --resume run/r.st --steps 12 --quiet
check "resume on a reversed text (same size): exit 2, one line saying so ($rc: $(cat err.txt))" \
    eval '[ $rc -eq 2 ] && grep -q "t.txt has changed since the checkpoint was saved: the same .* bytes, other contents" err.txt'
check "... and the checkpoint is left as it was" cmp -s run/r.st r.bak
one_line "$A" eval --model run/r.st --text run/t.txt
check "eval of the changed training file: exit 2, one line saying so ($rc: $(cat err.txt))" \
    eval '[ $rc -eq 2 ] && grep -q "has changed since the checkpoint was saved" err.txt'
echo "more" >>run/t.txt
one_line "$A" train --resume run/r.st --steps 12 --quiet
check "resume on a text with bytes appended: one line with both sizes ($(cat err.txt))" \
    eval '[ $rc -eq 2 ] && grep -Eq "[0-9]+ bytes then, [0-9]+ now" err.txt'
"$A" train --resume run/r.st --steps 12 --quiet --accept-changed-data >/dev/null 2>err.txt
rc=$?
check "--accept-changed-data resumes on it knowingly ($(cat err.txt))" test $rc -eq 0
"$A" train --resume run/r.st --steps 14 --quiet >/dev/null 2>err.txt
rc=$?
check "... and the new checkpoint knows the text as it is now ($(cat err.txt))" test $rc -eq 0
one_line "$A" train $TINY --steps 1 --accept-changed-data
check "--accept-changed-data without --resume is refused ($(cat err.txt))" test $rc -eq 2
# a recorded size or hash that is not one (a hand-edited file) is named, not read as a number
for bad in 'text_bytes=-5' 'text_bytes=12x' 'text_fnv1a64=zz'; do
    set_meta run/r.st bad.st "$bad"
    one_line "$A" train --resume bad.st --steps 16 --quiet
    check "resume of a checkpoint whose $bad: exit 2, one line naming it ($rc: $(cat err.txt))" \
        eval '[ $rc -eq 2 ] && grep -q "the checkpoint.s metadata ${bad%%=*} = .${bad#*=}. is not" err.txt'
    one_line "$A" eval --model bad.st
    check "eval of it: exit 2, the same line, not that the text changed ($rc: $(cat err.txt))" \
        eval '[ $rc -eq 2 ] && grep -q "metadata ${bad%%=*} = .${bad#*=}. is not" err.txt && ! grep -q "splits are not" err.txt'
done
# the text moved since: the refusal says how to name it, and naming it resumes
mv run/t.txt moved.txt
one_line "$A" train --resume run/r.st --steps 16 --quiet
check "resume whose text moved away: exit 2, one line saying to give it with --text ($rc: $(cat err.txt))" \
    eval '[ $rc -eq 2 ] && grep -q "t.txt, the text the checkpoint was trained on: No such file or directory; give it with --text FILE" err.txt'
"$A" train --resume run/r.st --text moved.txt --steps 16 --quiet >/dev/null 2>err.txt
rc=$?
check "... and --text with its new name resumes ($(cat err.txt))" test $rc -eq 0
# another text with the same bytes in another order (the same vocabulary): not
# "changed", a different file; the one recorded is still there, so leaving
# --text out resumes on it
python3 -c 'import sys; d = open(sys.argv[1], "rb").read(); open(sys.argv[2], "wb").write(d[::-1])' moved.txt other.txt
one_line "$A" train --resume run/r.st --text other.txt --steps 18 --quiet
check "resume with --text another file: exit 2, one line naming both files and what to do ($rc: $(cat err.txt))" \
    eval '[ $rc -eq 2 ] && grep -q "other.txt differs from .*/moved.txt, the text the checkpoint was trained on: the same .* bytes, other contents" err.txt &&
          grep -q "leave out --text to resume on that file, or add --accept-changed-data to go on with other.txt" err.txt &&
          ! grep -q "has changed" err.txt'
mv moved.txt gone.txt
one_line "$A" train --resume run/r.st --text other.txt --steps 18 --quiet
check "... and with the recorded text gone: give it with --text ($rc: $(cat err.txt))" \
    eval '[ $rc -eq 2 ] && grep -q "moved.txt is no longer there: give that text with --text FILE" err.txt &&
          grep -q "or add --accept-changed-data to go on with other.txt" err.txt'
mv gone.txt moved.txt
"$A" train --resume run/r.st --text other.txt --accept-changed-data --steps 18 --quiet >/dev/null 2>err.txt
rc=$?
check "... and --accept-changed-data goes on with the other text ($(cat err.txt))" test $rc -eq 0

# ---- 4. a resumed run continues the run's log, no step twice -----------------------------
"$A" train $TINY --steps 10 --log-every 2 --quiet --save l.st --log l.csv >/dev/null 2>&1
printf '12,9.9,,,0.1,1,1\n14,9.9,,,0.1,1,1\n' >>l.csv      # the interrupted run logged on after its save
# rows past the checkpoint's step are not dropped unasked: the file cannot
# tell a run killed after its save from the run of a copy of the checkpoint
cp l.csv l.bak && cp l.st l0.st
one_line "$A" train --resume l.st --steps 16 --log-every 2 --quiet --log l.csv
check "a log with whole rows past the checkpoint's step: exit 2, one line naming them and the ways on, log and checkpoint as they were ($rc: $(cat err.txt))" \
    eval '[ $rc -eq 2 ] && [ "$(wc -l <err.txt)" -eq 1 ] && grep -qF "log l.csv holds 2 rows past step 10, l.st'"'"'s (to step 14), logged after it was saved" err.txt &&
          grep -qF "give --log FILE to log the rest of the run in another file, or --truncate-log to drop them" err.txt &&
          cmp -s l.csv l.bak && cmp -s l.st l0.st'
one_line "$A" train $TINY --steps 2 --truncate-log
check "--truncate-log without --resume: exit 2, one line ($rc: $(cat err.txt))" \
    eval '[ $rc -eq 2 ] && [ "$(wc -l <err.txt)" -eq 1 ] && grep -qF -- "--truncate-log applies to --resume FILE" err.txt'
"$A" train --resume l.st --steps 16 --log-every 2 --quiet --log l.csv --truncate-log >out.txt 2>err.txt
check "--truncate-log says what it dropped ($(cat out.txt))" \
    grep -qxF "  log        l.csv: 2 rows past step 10 dropped (--truncate-log)" out.txt
steps=$(tail -n +2 l.csv | cut -d, -f1 | tr '\n' ' ')
check "the resumed run continues the run's log, each step once ($steps)" test "$steps" = "2 4 6 8 10 12 14 16 "
check "... the rows logged after the checkpoint are gone ($(grep -c 9.9 l.csv))" eval '! grep -q ",9.9," l.csv'
check "... one header" test "$(grep -c '^step,' l.csv)" -eq 1
# a copy of a checkpoint logs where its original does: resumed after the
# original trained on, it is refused, the original's later rows kept (cp
# a.st b.st, a.st trained to step 8, b.st resumed: the log was cut back to 4)
"$A" train $TINY --steps 4 --log-every 2 --quiet --save ca.st --log c.csv >/dev/null 2>&1
cp ca.st cb.st
"$A" train --resume ca.st --steps 8 --log-every 2 --quiet >/dev/null 2>&1
cp c.csv c.bak && cp cb.st cb0.st
for given in "" "--log c.csv"; do
    one_line "$A" train --resume cb.st --steps 6 --log-every 2 --quiet $given
    check "a copy of a checkpoint resumed ${given:-without --log} after its original trained on: exit 2, one line, the original's log and the copy as they were ($rc: $(cat err.txt))" \
        eval '[ $rc -eq 2 ] && grep -qF "c.csv holds 2 rows past step 4, cb.st'"'"'s (to step 8)" err.txt &&
              cmp -s c.csv c.bak && cmp -s cb.st cb0.st'
done
"$A" train --resume cb.st --steps 6 --log-every 2 --quiet --log cb.csv >/dev/null 2>err.txt
check "... and with a log of its own it goes on, the original's left as it was ($(cat err.txt))" \
    eval '[ "$(cut -d, -f1 cb.csv | tr "\n" " ")" = "step 6 " ] && cmp -s c.csv c.bak'
rm -f ca.st cb.st cb0.st c.csv c.bak cb.csv
# without --log, from another directory: the checkpoint names its log
"$A" train $TINY --steps 10 --log-every 2 --quiet --save n.st --log n.csv >/dev/null 2>&1
printf '12,9.9,,,0.1,1,1\n' >>n.csv
mkdir -p elsewhere
(cd elsewhere && "$A" train --resume ../n.st --steps 16 --log-every 2 --quiet --truncate-log >/dev/null 2>"$tmp/err.txt")
steps=$(tail -n +2 n.csv | cut -d, -f1 | tr '\n' ' ')
check "a resume without --log continues the run's log, each step once ($steps $(cat err.txt))" \
    test "$steps" = "2 4 6 8 10 12 14 16 "
check "... one header, and no log written where the resume ran" \
    eval '[ "$(grep -c "^step," n.csv)" -eq 1 ] && [ -z "$(ls elsewhere)" ]'
rm n.csv
"$A" train --resume n.st --steps 18 --log-every 2 >out.txt 2>err.txt
check "a log deleted since: a new one, with its header, from the checkpoint's step ($(cat err.txt))" \
    eval '[ "$(cut -d, -f1 n.csv | tr "\n" " ")" = "step 18 " ] && grep -q "n.csv no longer exists" out.txt'
check "... said among the configuration's lines, after its first (not above it: $(head -c 300 out.txt | tr '\n' '|'))" \
    eval 'head -n 1 out.txt | grep -q "^attograd train: " && grep -q "^  log  *.*n.csv no longer exists" out.txt'
# a log whose directory is gone cannot start anew there: the line says the
# checkpoint named it and how to go on
mkdir -p gone
"$A" train $TINY --steps 2 --quiet --save gone.st --log gone/g.csv >/dev/null 2>&1
rm -r gone
one_line "$A" train --resume gone.st --steps 4 --quiet
check "a resume whose log's directory is gone: exit 2, one line naming it as the checkpoint's log and --log ($rc: $(cat err.txt))" \
    eval '[ $rc -eq 2 ] && grep -q "gone/g.csv, the run.s log the checkpoint names: No such file or directory; give --log FILE" err.txt'
"$A" train --resume gone.st --steps 4 --quiet --log gone.csv >/dev/null 2>err.txt
check "... and with --log elsewhere it goes on ($(cat err.txt))" test "$(cut -d, -f1 gone.csv | tr '\n' ' ')" = "step 4 "
rm -f gone.st gone.csv
"$A" train --resume n.st --steps 20 --log-every 2 --quiet --log other.csv >/dev/null 2>err.txt
check "--log given on resume writes there, and the run goes on there ($(cat err.txt))" \
    eval '[ "$(cut -d, -f1 other.csv | tr "\n" " ")" = "step 20 " ] && [ "$(wc -l <n.csv)" -eq 2 ]'
"$A" train --resume n.st --steps 22 --log-every 2 --quiet >/dev/null 2>err.txt
check "... and the next resume continues it ($(cat err.txt))" \
    test "$(cut -d, -f1 other.csv | tr '\n' ' ')" = "step 20 22 "
# a last row cut short (a full disk stopped its write: no newline) is
# dropped, whatever its step: continued, "18" and "24,..." made a row of
# step 1824, and "20,2.1" and "24,..." one of 10 fields
# (with a line saying so); plot reads the same log as the resume does: the
# whole rows drawn, the cut one left out, one line naming it (it refused
# the whole log)
for torn in '18' '20,2.1'; do
    printf 'step,train_loss,val_loss,val_acc,lr,ms_per_step,tokens_per_s\n20,1.5,,,0.1,1,1\n22,1.4,,,0.1,1,1\n%s' \
        "$torn" >torn.csv
    one_line "$A" plot --log torn.csv --out torn.svg
    check "plot of a log whose last row '$torn' is cut short: exit 0, one line naming torn.csv:4 as left out ($rc: $(cat err.txt))" \
        eval '[ $rc -eq 0 ] && grep -q "^attograd plot: torn.csv:4: the last row is cut short (no newline at its end): left out$" err.txt'
    check "... the two whole rows drawn: one line of 2 points" \
        test "$(grep -o 'class="series"[^>]* d="[^"]*"' torn.svg | tr -cd 'ML')" = ML
    rm -f torn.svg
    "$A" train --resume n.st --steps 24 --log-every 2 --quiet --log torn.csv --save torn.st >out.txt 2>err.txt
    rc=$?
    steps=$(tail -n +2 torn.csv | cut -d, -f1 | tr '\n' ' ')
    check "a log whose last row '$torn' is cut short: dropped before the run continues it ($rc: $steps $(cat err.txt))" \
        eval '[ $rc -eq 0 ] && [ "$steps" = "20 22 24 " ] && "$A" plot --log torn.csv --out torn.svg 2>err.txt &&
              [ ! -s err.txt ]'
    check "... and a line says so, naming the log and the line" \
        grep -q "^  log  *torn.csv:4: the last row was cut short (no newline at its end): dropped$" out.txt
    rm -f torn.svg
done
# a row cut short that is not the last (continued by the next) is no
# complete row: plot refuses the log, as before, writing nothing
printf 'step,train_loss,val_loss,val_acc,lr,ms_per_step,tokens_per_s\n20,1.5,,,0.1,1,1\n22,1.424,1.4,,,0.1,1,1\n26,1.3,,,0.1,1,1\n' \
    >torn.csv
one_line "$A" plot --log torn.csv --out torn.svg
check "plot of a log with a row cut short before its last: exit 2, one line naming the line, no picture ($rc: $(cat err.txt))" \
    eval '[ $rc -eq 2 ] && grep -q "torn.csv:3: expected 7 comma-separated fields, got 8" err.txt && [ ! -e torn.svg ]'
# a log that begins with a UTF-8 byte-order mark (an editor's) is read past
# it by plot and continued by a resumed run, which keeps the mark: in a log
# left as it was, and in one rewritten without the rows after the
# checkpoint's step (24 here) and a last row cut short
for rest in '' '24,1.3,,,0.1,1,1\n26,1'; do
    printf '\357\273\277step,train_loss,val_loss,val_acc,lr,ms_per_step,tokens_per_s\n20,1.5,,,0.1,1,1\n22,1.4,,,0.1,1,1\n'"$rest" >bom.csv
    "$A" train --resume n.st --steps 24 --log-every 2 --quiet --log bom.csv --save torn.st --truncate-log >/dev/null 2>err.txt
    rc=$?
    check "--resume continues a log that begins with a byte-order mark, the mark kept ('$rest' after: $rc: $(cat err.txt))" \
        eval '[ $rc -eq 0 ] && [ "$(head -c 3 bom.csv | od -An -tx1 | tr -d " ")" = efbbbf ] &&
              [ "$(tail -n +2 bom.csv | cut -d, -f1 | tr "\n" " ")" = "20 22 24 " ] && [ "$(grep -c step bom.csv)" -eq 1 ]'
    one_line "$A" plot --log bom.csv --out torn.svg
    check "... and plot draws it, saying nothing ($rc: $(cat err.txt))" eval '[ $rc -eq 0 ] && [ ! -s err.txt ] && [ -s torn.svg ]'
    rm -f torn.svg
done
# a log that is the header alone, after a byte-order mark and with no
# newline at its end, keeps the mark too: the header is given its newline
# (it was dropped as a row cut short, and written again without the mark)
printf '\357\273\277step,train_loss,val_loss,val_acc,lr,ms_per_step,tokens_per_s' >bom.csv
"$A" train --resume n.st --steps 24 --log-every 2 --quiet --log bom.csv --save torn.st >/dev/null 2>err.txt
rc=$?
check "--resume continues a log that is a byte-order mark and the header with no newline, the mark kept ($rc: $(cat err.txt))" \
    eval '[ $rc -eq 0 ] && [ "$(head -c 3 bom.csv | od -An -tx1 | tr -d " ")" = efbbbf ] &&
          [ "$(head -n 1 bom.csv)" = "$(printf "\357\273\277")step,train_loss,val_loss,val_acc,lr,ms_per_step,tokens_per_s" ] &&
          [ "$(tail -n +2 bom.csv | cut -d, -f1 | tr "\n" " ")" = "24 " ] && [ ! -s err.txt ]'
one_line "$A" plot --log bom.csv --out torn.svg
check "... and plot draws it, saying nothing ($rc: $(cat err.txt))" eval '[ $rc -eq 0 ] && [ ! -s err.txt ] && [ -s torn.svg ]'
rm -f torn.csv torn.st torn.svg bom.csv
# a file that is no log, named by --log or put where the run's log was, is
# refused, not appended to; the checkpoint is not rewritten
printf 'notes: do not lose\n' >notes.txt
cp n.st n0.st
"$A" train --resume n.st --steps 24 --log-every 2 --quiet --log notes.txt >/dev/null 2>err.txt
rc=$?
check "--resume --log into a file that is no log: exit 2, one line, the file and the checkpoint as they were ($(cat err.txt))" \
    eval '[ $rc -eq 2 ] && [ "$(wc -l <err.txt)" -eq 1 ] &&
          grep -q "notes.txt does not begin with a training log.s header line (step...), so it is no log to continue" err.txt &&
          [ "$(cat notes.txt)" = "notes: do not lose" ] && cmp -s n.st n0.st'
printf 'x\n' >other.csv
"$A" train --resume n.st --steps 24 --log-every 2 --quiet >/dev/null 2>err.txt
rc=$?
check "... and the run's own log replaced by another file: the same ($(cat err.txt))" \
    eval '[ $rc -eq 2 ] && grep -q "other.csv does not begin with a training log.s header line" err.txt &&
          [ "$(cat other.csv)" = x ] && cmp -s n.st n0.st'
rm -f notes.txt other.csv n0.st
# a relative log_path (a hand edit: attograd records absolute ones) is taken
# from the current directory, as the page's bare text name is; the line
# says so, and the log beside the checkpoint is left alone
set_meta n.st rel.st log_path=rel.csv
step=$("$A" info rel.st | sed -n 's/.*, step \([0-9]*\),.*/\1/p')
printf 'step,train_loss,val_loss,val_acc,lr,ms_per_step,tokens_per_s\n' >rel.csv && cp rel.csv rel.bak
mkdir -p relwd
(cd relwd && "$A" train --resume ../rel.st --steps $((step + 2)) --log-every 2 --save ../rel2.st >"$tmp/out.txt" 2>"$tmp/err.txt")
check "a relative log_path is taken from the current directory, and the line says so ($step: $(cat err.txt) $(grep '^  log' out.txt))" \
    eval '[ "$(cut -d, -f1 relwd/rel.csv | tr "\n" " ")" = "step $((step + 2)) " ] && cmp -s rel.csv rel.bak &&
          grep -qF "  log        rel.csv (the checkpoint'"'"'s log_path, relative: taken from the current directory) does not exist: a new log starts at step $((step + 1))" out.txt'
rm -rf rel.st rel2.st rel.csv rel.bak relwd

# ---- 5. standard output that cannot be written --------------------------------------------
if [ -w /dev/full ]; then
    for run in "eval --model m.st --text $TEXT" "info m.st" "sample --model m.st --prompt The --tokens 5 --seed 1" \
               "walkthrough" "graph --model m.st --out g.dot" "--version" "--help" "train --help" "eval --help" \
               "attn --help"; do
        "$A" $run >/dev/full 2>err.txt
        rc=$?
        check "$run >/dev/full: a non-zero exit (got $rc)" test $rc -ne 0
        check "$run >/dev/full: one line saying so ($(cat err.txt))" \
            eval '[ "$(wc -l <err.txt)" -eq 1 ] && grep -q "cannot write standard output" err.txt'
    done
    # sample stops drawing at the first write that fails: ten million tokens
    # (minutes of drawing) into /dev/full end at once, exit 1, one line
    timeout 30 "$A" sample --model m.st --tokens 10000000 --seed 1 >/dev/full 2>err.txt
    rc=$?
    check "sample --tokens 10000000 >/dev/full stops at the first write that fails: exit 1 at once (got $rc: $(cat err.txt))" \
        eval '[ $rc -eq 1 ] && [ "$(wc -l <err.txt)" -eq 1 ] && grep -q "cannot write standard output: No space left" err.txt'
    # a picture that cannot be written: the message names the file, and the other output is not written
    for run in "attn --model m.st --prompt The --out /dev/full --csv w.csv" "plot --log log.csv --out /dev/full"; do
        one_line "$A" $run
        check "$run: exit 2, one line naming /dev/full ($rc: $(cat err.txt))" \
            eval '[ $rc -eq 2 ] && grep -q "/dev/full: write failed: No space left on device" err.txt'
    done
    check "attn --out /dev/full --csv w.csv: no CSV written" test ! -e w.csv
    # the CSV log is an output too: a write that fails is said, the run trains on, saves, and exits 1
    one_line "$A" train $TINY --steps 3 --log-every 1 --quiet --log /dev/full --save full.st
    check "train --log /dev/full: exit 1, one line saying the log cannot be written ($rc: $(cat err.txt))" \
        eval '[ $rc -eq 1 ] && grep -q "cannot write log /dev/full: No space left on device" err.txt'
    check "train --log /dev/full: the run still trained and saved" eval '"$A" info full.st | grep -q "step 3,"'
    one_line "$A" train --resume full.st --steps 3 --quiet --log /dev/full
    check "train --resume with no steps left, --log /dev/full: exit 1 ($rc: $(cat err.txt))" \
        eval '[ $rc -eq 1 ] && grep -q "cannot write log /dev/full" err.txt'
else
    skip "no /dev/full here"
fi

# ---- standard output appended to an input ---------------------------------------------------
# what a command prints would go into the checkpoint or the text it reads
# (as `cat f >>f`): refused in one line, the file left as it was
cp m.st in.st && cp m.st in.bak && cp "$TEXT" in.txt && cp in.txt in.txt.bak
for run in "info in.st" "sample --model in.st --prompt The --tokens 5 --seed 1" "eval --model in.st --text $TEXT" \
           "graph --model in.st --out g2.dot" "eval --model m.st --text in.txt" \
           "train --text in.txt --steps 2 --quiet" "train --resume in.st --steps 200 --save t2.st" \
           "train --init in.st --steps 2 --quiet"; do
    case $run in *in.txt*) into=in.txt ;; *) into=in.st ;; esac
    "$A" $run >>$into 2>err.txt
    rc=$?
    check "$run >>$into: exit 2, one line naming it, $into unchanged ($rc: $(cat err.txt))" \
        eval '[ $rc -eq 2 ] && [ "$(wc -l <err.txt)" -eq 1 ] && grep -q "standard output is the same file as .*$into" err.txt &&
              cmp -s in.st in.bak && cmp -s in.txt in.txt.bak'
done
check "graph into its model: no DOT written" test ! -e g2.dot
check "train with its report into its input: no checkpoint written" test ! -e t2.st
rm -f in.st in.bak in.txt in.txt.bak

# a standard output the caller closed is not the first file opened: graph's
# line (which went into its output's lock file) is reported as unwritten, and
# a training run's progress lines as closed
"$A" graph --model m.st --out closed.dot >&- 2>err.txt
rc=$?
check "graph >&-: exit 1, one line saying so ($rc: $(cat err.txt))" \
    eval '[ $rc -eq 1 ] && [ "$(wc -l <err.txt)" -eq 1 ] && grep -q "cannot write standard output" err.txt'
"$A" train $TINY --steps 2 --save closed.st --log closed.csv >&- 2>err.txt
rc=$?
check "train >&-: trains and saves, one line saying stdout is closed ($rc: $(cat err.txt))" \
    eval '[ $rc -eq 0 ] && [ -s closed.st ] && [ "$(wc -l <err.txt)" -eq 1 ] && grep -q "standard output is closed" err.txt'
# /dev/stdout named when the caller closed standard output: the descriptor
# is said to be not open (it was said to be open for reading only: the
# /dev/null the command holds in its place), and nothing is written
for run in "train $TINY --steps 2 --save /dev/stdout" "train $TINY --steps 2 --log /dev/stdout" \
           "attn --model m.st --prompt The --out /dev/stdout" "graph --model m.st --out /dev/stdout"; do
    "$A" $run >&- 2>err.txt
    rc=$?
    check "$run >&-: exit 2, one line saying descriptor 1 is not open ($rc: $(cat err.txt))" \
        eval '[ $rc -eq 2 ] && [ "$(wc -l <err.txt)" -eq 1 ] && grep -q "^attograd [a-z]*: /dev/stdout: descriptor 1 is not open$" err.txt'
done
# a standard output that is full is not closed: the line says why it failed
for q in "" "--quiet"; do
    "$A" train $TINY --steps 2 --save full.st $q >/dev/full 2>err.txt
    rc=$?
    check "train $q >/dev/full: trains and saves, one line naming the full device ($rc: $(cat err.txt))" \
        eval '[ $rc -eq 0 ] && [ -s full.st ] && [ "$(wc -l <err.txt)" -eq 1 ] &&
              grep -q "cannot write standard output: No space left on device" err.txt'
    rm -f full.st
done

# ---- 8. --resume accepts flags equal to the checkpoint's, refuses others ----------------------
"$A" train --steps 2 --quiet --save eq.st >/dev/null 2>&1
"$A" train --resume eq.st --lr 0.1 --batch 32 --seed 1 --optimizer sgd --layers 2 --heads 4 --task copy \
    --steps 3 --quiet >/dev/null 2>err.txt
rc=$?
check "--resume with the checkpoint's own values (--lr 0.1 --batch 32 ...) is accepted ($(cat err.txt))" test $rc -eq 0
for f in "--lr 0.2" "--batch 16" "--optimizer adamw" "--heads 2" "--dropout 0.1" "--micro-batch 8"; do
    one_line "$A" train --resume eq.st $f --steps 4 --quiet
    check "--resume $f (another value): exit 2, both values named ($(cat err.txt))" \
        eval '[ $rc -eq 2 ] && grep -q -- "${f%% *} cannot be" err.txt'
done
# a value that differs in its 16th digit is shown with the digits that
# differ, not as the same '0.9' on both sides
one_line "$A" train --resume eq.st --momentum 0.9000000000000001 --steps 4 --quiet
check "--resume --momentum 0.9000000000000001: the two values told apart ($(cat err.txt))" \
    eval '[ $rc -eq 2 ] && grep -q -- "(0.9000000000000001 given, the checkpoint holds 0.9)" err.txt'
one_line "$A" train --resume eq.st --lr 0.1234567 --steps 4 --quiet
check "--resume --lr 0.1234567: shown as given ($(cat err.txt))" \
    eval '[ $rc -eq 2 ] && grep -q -- "(0.1234567 given, the checkpoint holds 0.1)" err.txt'
# -0 is 0: a run given --momentum -0 resumes with --momentum 0
"$A" train --steps 2 --quiet --momentum -0 --save zero.st >/dev/null 2>&1
"$A" train --resume zero.st --momentum 0 --steps 3 --quiet >/dev/null 2>err.txt
rc=$?
check "--momentum -0 then --resume --momentum 0: the same value, accepted ($(cat err.txt))" test $rc -eq 0
"$A" train --init eq.st --heads 4 --layers 2 --steps 1 --quiet >/dev/null 2>err.txt
rc=$?
check "--init with the checkpoint's own architecture flags is accepted ($(cat err.txt))" test $rc -eq 0

# ---- 9. flags that would be ignored are refused with the reason -------------------------------
"$A" train --steps 2 --quiet --save task.st >/dev/null 2>&1
one_line "$A" eval --model task.st --split train
check "eval --split on a task model: exit 2, the reason ($rc: $(cat err.txt))" \
    eval '[ $rc -eq 2 ] && grep -q -- "--split applies to text" err.txt'
one_line "$A" sample --model task.st --prompt 'abcdefgh|' --tokens 50
check "sample --tokens on a task model: exit 2, the reason ($rc: $(cat err.txt))" \
    eval '[ $rc -eq 2 ] && grep -q -- "--tokens applies to text models" err.txt'
# --accept-changed-data has no text to accept on a task run (eval refuses it the same way)
cp task.st task2.st
one_line "$A" train --resume task2.st --steps 3 --quiet --accept-changed-data
check "train --resume of a task run --accept-changed-data: exit 2, the reason, nothing trained ($rc: $(cat err.txt))" \
    eval '[ $rc -eq 2 ] && grep -q -- "--accept-changed-data applies to a run on a text file: a copy run" err.txt &&
          cmp -s task.st task2.st'
rm -f task2.st
# --temperature on a task model is honoured: a hot sample differs from the greedy answer somewhere
greedy=$("$A" sample --model task.st --prompt 'abcdefgh|' 2>/dev/null)
hot=""
for s in 1 2 3 4 5; do hot="$hot$("$A" sample --model task.st --prompt 'abcdefgh|' --temperature 5 --seed $s 2>/dev/null)"; done
check "sample --temperature on a task model changes its answers ($greedy vs ${hot:0:60})" \
    eval '[ -n "$greedy" ] && [ "$hot" != "$greedy$greedy$greedy$greedy$greedy" ]'

# ---- 11. a file that is not a checkpoint at all is named as such ---------------------------
printf 'just some text, long enough to have 8 bytes and more\n' >notes.txt
for run in "info notes.txt" "eval --model notes.txt" "sample --model notes.txt"; do
    one_line "$A" $run
    check "$run: exit 2, 'not a safetensors file' ($rc: $(cat err.txt))" \
        eval '[ $rc -eq 2 ] && grep -q "notes.txt: not a safetensors file" err.txt'
done
# a metadata value with a newline and a terminal escape is listed on one line, bytes shown as \xNN
set_meta m.st esc.st note=$'one\ntwo\x1b[31m'
"$A" info esc.st >out.txt 2>err.txt
check "info lists a metadata value with control bytes on one line, escaped ($(grep note out.txt))" \
    eval 'grep -qxF "    note             one\\x0atwo\\x1b[31m" out.txt && ! grep -q "$(printf "\033")" out.txt'
# eval names the training file the checkpoint records: a crafted one with a
# newline and a terminal escape stays on its line, its bytes made visible
set_meta m.st esc.st text_path=$'/nowhere/one\ntwo\x1b[31m.txt'
"$A" eval --model esc.st --text "$TEXT" >out.txt 2>err.txt
check "eval names a recorded training file with control bytes on one line, escaped ($(tail -n 1 out.txt))" \
    eval '[ "$(wc -l <out.txt)" -eq 2 ] && grep -qF "maybe not the model'"'"'s training file: /nowhere/one two\x1b[31m.txt is not found" out.txt &&
          ! grep -q "$(printf "\033")" out.txt'
head -c 20 m.st >cut.st
one_line "$A" info cut.st
check "a cut checkpoint is not called 'not a safetensors file' ($(cat err.txt))" \
    eval '[ $rc -eq 2 ] && grep -q "runs past the end" err.txt && ! grep -q "not a safetensors" err.txt'

# ---- 15. the README and --help agree ----------------------------------------------------------
# every option a subcommand's --help lists is in the README's synopsis of it
# (train's options are described in its prose); --threads defaults to 0 everywhere
synopsis() {    # the README's lines for "attograd CMD", continuation lines included
    awk -v cmd="$1" '$1 == "attograd" && $2 == cmd { on = 1; print; next }
                     on && /^                    / { print; next } { on = 0 }' "$ROOT/README.md"
}
for cmd in train eval sample info attn plot graph walkthrough; do
    "$A" $cmd --help >help.txt 2>&1
    missing=""
    for o in $(grep -oE '^  --[a-z0-9-]+' help.txt); do
        if [ $cmd = train ]; then grep -q -- "$o\b" "$ROOT/README.md" || missing="$missing $o"
        else synopsis $cmd | grep -q -- "$o\b" || missing="$missing $o"; fi
    done
    check "README names every option of $cmd --help (missing:$missing)" test -z "$missing"
    if grep -q -- "--threads" help.txt; then
        check "$cmd --threads defaults to 0, all cores ($(grep -- --threads help.txt))" \
            grep -Eq -- "--threads N .*0 = all cores \(default\)" help.txt
    fi
done
check "README shows attograd --version" eval 'grep -q "attograd --version" "$ROOT/README.md"'
check "README says what exit status a failed save gives" \
    grep -q "a save that fails.*exit status 1\|save that fails during or after training" "$ROOT/README.md"

# ---- 13. make install with PREFIX and DESTDIR; pkg-config ----------------------------------
# The sub-makes see the variables of the make that runs this test (MAKEFLAGS),
# so they find its build up to date.
mk() { make -s --no-print-directory -C "$ROOT" BUILDDIR="${BUILD#"$ROOT"/}" "$@"; }
case $BUILD in "$ROOT"/*) in_tree=1 ;; *) in_tree= ;; esac
if [ -z "$in_tree" ]; then
    skip "the binary under test is not built in this tree: no install to test"
elif ! command -v pkg-config >/dev/null; then
    skip "no pkg-config (sh tests/install-deps.sh installs it)"
else
    mk install PREFIX="$tmp/usr" >install.txt 2>&1
    rc=$?
    check "make install PREFIX=...: exit 0 ($(tail -n 3 install.txt))" test $rc -eq 0
    for f in bin/attograd lib/libattograd.a lib/libattograd.so lib/pkgconfig/attograd.pc include/attograd.h; do
        check "make install puts $f under PREFIX" test -e "usr/$f"
    done
    for h in "$ROOT"/include/*.h; do
        check "make install installs the header $(basename "$h")" cmp -s "$h" "usr/include/$(basename "$h")"
    done
    check "the installed command runs (attograd --version)" eval '"$tmp/usr/bin/attograd" --version >/dev/null'
    export PKG_CONFIG_PATH=$tmp/usr/lib/pkgconfig
    check "pkg-config --modversion attograd is what attograd --version prints" \
        eval '"$tmp/usr/bin/attograd" --version | grep -q "^attograd $(pkg-config --modversion attograd) "'
    # the usage example that opens the installed header, with its results printed
    sed -n '/^ \* Example:/,/^ \*\//p' usr/include/attograd.h | sed -n 's/^ \*     //p' >example.inc
    {
        echo '#include <attograd.h>'
        echo '#include <stdio.h>'
        echo 'int main(void) {'
        sed 's/^ag_params_free/printf("%g %g %g %g\\n", (double)y->data[0], (double)w->grad[0], (double)w->grad[1], (double)w->grad[2]);\n&/' example.inc
        echo 'return 0; }'
    } >example.c
    cc=${CC:-cc}
    # shellcheck disable=SC2046
    $cc example.c -o example $(pkg-config --cflags --libs attograd) 2>cc.txt
    check "the header's example builds with \`pkg-config --cflags --libs attograd\` alone ($(head -c 300 cc.txt))" \
        test -x example
    check "... and links the shared library" eval 'LD_LIBRARY_PATH= ldd ./example 2>/dev/null | grep -q libattograd.so'
    check "... and computes what the header says (y = 8, dy/dw = 2 0 2: got $(LD_LIBRARY_PATH=$tmp/usr/lib ./example))" \
        eval '[ "$(LD_LIBRARY_PATH=$tmp/usr/lib ./example)" = "8 2 0 2" ]'
    # a link to the shared library needs no -lm or -pthread (the library
    # records them itself); one to the static library needs both, which
    # attograd.pc gives as Libs.private for `pkg-config --static`
    libs=" $(pkg-config --libs attograd) " static_libs=" $(pkg-config --static --libs attograd) "
    check "pkg-config --libs attograd lists neither -lm nor -pthread (the shared library records them:$libs)" \
        eval 'case "$libs" in *" -lm "* | *" -pthread "*) false ;; esac'
    check "pkg-config --static --libs attograd lists -lm and -pthread ($static_libs)" \
        eval 'case "$static_libs" in *" -lm "*) ;; *) false ;; esac && case "$static_libs" in *" -pthread "*) ;; *) false ;; esac'
    # shellcheck disable=SC2046
    $cc example.c -o example_static $(pkg-config --cflags attograd) usr/lib/libattograd.a \
        $(pkg-config --static --libs-only-other --libs-only-l attograd | sed 's/-lattograd//') 2>cc.txt
    check "the static library links with the flags \`pkg-config --static\` gives ($(head -c 300 cc.txt))" \
        eval '[ "$(./example_static)" = "8 2 0 2" ]'
    # and a program linked -static throughout with those flags alone (not
    # with the sanitizers, whose runtime is not linked statically, nor
    # without the C library's static archive)
    case "$libs" in *" -fsanitize="*) static_ok= ;; *) static_ok=1 ;; esac
    if [ -n "$static_ok" ] && printf 'int main(void) { return 0; }\n' | $cc -static -x c - -o static_probe 2>/dev/null; then
        # shellcheck disable=SC2046
        $cc -static example.c -o example_all_static $(pkg-config --cflags --static --libs attograd) 2>cc.txt
        check "-static with \`pkg-config --cflags --static --libs attograd\` alone links and computes the example ($(head -c 300 cc.txt))" \
            eval '[ "$(./example_all_static 2>&1)" = "8 2 0 2" ]'
    else
        skip "$cc -static: the library is built with sanitizers, or there is no static C library"
    fi
    # the installed headers in the strictest settings a C or C++ user may
    # have: no compound literal, designated initializer or restrict in them,
    # C linkage for C++, and no warning at -Wconversion
    printf '#include <attograd.h>\n#include <attograd_io.h>\nint main(void) { return ag_get_threads() > 0 ? 0 : 1; }\n' >strict.c
    for std in "-std=c99 -pedantic" "-std=c11 -pedantic -Wconversion -Wsign-conversion -Wstrict-prototypes"; do
        # shellcheck disable=SC2046
        $cc $std -Wall -Wextra -Werror strict.c -o strict $(pkg-config --cflags --libs attograd) 2>cc.txt
        check "the headers compile with $cc $std -Wall -Wextra -Werror ($(head -c 300 cc.txt))" test -x strict
        rm -f strict
    done
    cat >strict.cpp <<'EOF_CPP'
#include <attograd.h>
#include <attograd_io.h>
#include <cstdio>
int main()
{
    ag_ctx *ctx = ag_ctx_new();
    ag_params *ps = ag_params_new();
    const int shape[] = { 3 };
    ag_tensor *w = ag_params_add(ps, "w", 1, shape);
    ag_params_alloc(ps);
    w->data[0] = 1; w->data[1] = -2; w->data[2] = 3;
    const ag_real xs[] = { 2, 2, 2 };
    ag_tensor *y = ag_sum_all(ctx, ag_relu(ctx, ag_mul(ctx, ag_from(ctx, 1, shape, xs), w)));
    ag_backward(ctx, y);
    std::printf("%g %g %g %g %s\n", (double)y->data[0], (double)w->grad[0], (double)w->grad[1],
                (double)w->grad[2], ag_st_dtype_name(AG_ST_F32));
    ag_params_free(ps);
    ag_ctx_free(ctx);
    return 0;
}
EOF_CPP
    # a library built with sanitizers links their runtime, which only the
    # compiler family that built it provides (gcc's libasan is not clang's)
    cc_family=gcc; $cc --version 2>/dev/null | grep -q clang && cc_family=clang
    case " $(pkg-config --libs attograd) " in *" -fsanitize="*) sanitized=1 ;; *) sanitized= ;; esac
    for cxx in g++ clang++; do
        if ! command -v $cxx >/dev/null; then
            skip "no $cxx: the headers in C++"
            continue
        fi
        case $cxx in clang*) cxx_family=clang ;; *) cxx_family=gcc ;; esac
        if [ -n "$sanitized" ] && [ "$cxx_family" != "$cc_family" ]; then
            skip "$cxx: the library is built with sanitizers by $cc_family, whose runtime $cxx does not link"
            continue
        fi
        # shellcheck disable=SC2046
        $cxx -std=c++11 -Wall -Wextra -Werror -pedantic strict.cpp -o strict_cpp $(pkg-config --cflags --libs attograd) \
            2>cc.txt
        check "the headers compile and link as C++ ($cxx -std=c++11 -pedantic -Werror: $(head -c 300 cc.txt))" \
            test -x strict_cpp
        check "... and the C++ program computes the header's example ($(LD_LIBRARY_PATH=$tmp/usr/lib ./strict_cpp))" \
            eval '[ "$(LD_LIBRARY_PATH=$tmp/usr/lib ./strict_cpp)" = "8 2 0 2 F32" ]'
        rm -f strict_cpp
    done
    # another package's files in the shared directories stay, and so do the
    # directories (attograd has none of its own: they may have been there before)
    echo other >usr/include/other.h && echo other >usr/lib/pkgconfig/other.pc
    mk uninstall PREFIX="$tmp/usr" >/dev/null 2>&1
    check "make uninstall removes every file it installed, only those ($(find usr -type f -o -type l | tr '\n' ' '))" \
        test "$(find usr -type f -o -type l | sort | tr '\n' ' ')" = "usr/include/other.h usr/lib/pkgconfig/other.pc "
    check "make uninstall leaves the directories ($(find usr -type d | sort | tr '\n' ' '))" \
        test "$(find usr -type d | sort | tr '\n' ' ')" = "usr usr/bin usr/include usr/lib usr/lib/pkgconfig "
    rm -f usr/include/other.h usr/lib/pkgconfig/other.pc
    # DESTDIR stages the files; attograd.pc names the PREFIX they will live under
    mk install DESTDIR="$tmp/stage" PREFIX=/opt/ag >/dev/null 2>&1
    check "make install DESTDIR=... PREFIX=/opt/ag stages under DESTDIR" test -x stage/opt/ag/bin/attograd
    check "attograd.pc names PREFIX, not DESTDIR ($(grep libdir= stage/opt/ag/lib/pkgconfig/attograd.pc))" \
        eval 'grep -qx "libdir=/opt/ag/lib" stage/opt/ag/lib/pkgconfig/attograd.pc'
    mk uninstall DESTDIR="$tmp/stage" PREFIX=/opt/ag >/dev/null 2>&1
    check "make uninstall DESTDIR=... removes the staged files" test -z "$(find stage -type f -o -type l)"
    # a DESTDIR with a space stages there (it went to a directory cut at the space)
    mk install DESTDIR="$tmp/st ag-stage-dir" PREFIX=/opt/ag >install.txt 2>&1
    check "make install DESTDIR='with a space' stages under it ($(tail -n 2 install.txt))" \
        eval 'test -x "st ag-stage-dir/opt/ag/bin/attograd" && cmp -s "$ROOT/include/attograd.h" "st ag-stage-dir/opt/ag/include/attograd.h"'
    mk uninstall DESTDIR="$tmp/st ag-stage-dir" PREFIX=/opt/ag >/dev/null 2>&1
    check "make uninstall DESTDIR='with a space' removes them" eval 'test -z "$(find "st ag-stage-dir" -type f -o -type l)"'
    # PREFIX is where the files will live and what attograd.pc tells
    # compilers: a relative one (taken from the source tree) and one with a
    # space (split by make, and by \$(pkg-config ...)) are refused in one
    # line naming PREFIX, before anything is written
    # (the names are this test's own: what a make that split them wrote
    # into the source tree is removed)
    # and so is one holding what the recipes' shell quoting or attograd.pc
    # reads as syntax: a double quote (the files went to ag-quoteprefix
    # before the shell stopped), a # (installed, and attograd.pc's comment
    # cut the paths it gave compilers at it)
    for bad in "ag-rel-prefix/inst" "$tmp/with ag-space-prefix" "$tmp/ag-quote\"prefix" "$tmp/ag-hash#prefix"; do
        mk install PREFIX="$bad" >install.txt 2>err.txt
        rc=$?
        check "make install PREFIX='$bad': refused, one line naming PREFIX (exit $rc: $(head -c 300 err.txt))" \
            eval '[ $rc -ne 0 ] && [ "$(wc -l <err.txt)" -eq 1 ] && grep -q "PREFIX=.*absolute path" err.txt'
        check "make install PREFIX='$bad': nothing written" \
            eval '! test -e "$ROOT/ag-rel-prefix" && ! test -e "$ROOT/ag-space-prefix" && ! test -e "$tmp/with" &&
                  ! test -e "$tmp/ag-quoteprefix" && ! test -e "$tmp/ag-hash#prefix"'
        rm -rf "$ROOT/ag-rel-prefix" "$ROOT/ag-space-prefix" "$ROOT/ag-stage-dir" "$tmp/ag-quoteprefix" \
            "$tmp/ag-hash#prefix"
    done
    # a DESTDIR with a double quote: staged where the shell's quoting put it
    mk install DESTDIR="$tmp/ag-quote\"stage" PREFIX=/opt/ag >install.txt 2>err.txt
    rc=$?
    check "make install DESTDIR='...\"...': refused, one line naming DESTDIR (exit $rc: $(head -c 300 err.txt))" \
        eval '[ $rc -ne 0 ] && [ "$(wc -l <err.txt)" -eq 1 ] && grep -q "DESTDIR=" err.txt'
    check "make install DESTDIR='...\"...': nothing written" eval '! test -e "$tmp/ag-quotestage/opt"'
    rm -rf "$tmp/ag-quotestage"
    mk uninstall PREFIX=ag-rel-prefix/inst >/dev/null 2>err.txt
    check "make uninstall PREFIX=ag-rel-prefix/inst: refused ($(head -c 200 err.txt))" grep -q "PREFIX=.*absolute path" err.txt
    # a build directory given as an absolute path: `make run` runs the
    # command built there (it ran ./ before the path)
    runcmd=$(make -s --no-print-directory -C "$ROOT" -n BUILDDIR="$BUILD" run 2>&1 | tail -n 1)
    check "make BUILDDIR=/abs/path run runs /abs/path/attograd ($runcmd)" \
        eval '[ "$runcmd" = "$BUILD/attograd train" ]'
    # one given as ./dir: make spells its files dir/..., and the link left
    # dir/flags among the objects (ld: "syntax error")
    rel=${BUILD#"$ROOT"/}
    linkcmd=$(make --no-print-directory -C "$ROOT" -n -B BUILDDIR="./$rel" "$rel/attograd" 2>&1 |
              grep -E -- "-o $rel/attograd( |\$)" | tail -n 1)
    check "make BUILDDIR=./dir links the command without the flags file ($linkcmd)" \
        eval '[ -n "$linkcmd" ] && ! printf "%s" "$linkcmd" | grep -q "/flags"'
fi

# ---- 16. a long evaluation shows its progress on a terminal, and only there ------------
# `script` gives the command a terminal; the meter redraws in place and
# erases itself, so what is left is the same result a pipe gets
if command -v script >/dev/null && script -qec true /dev/null >/dev/null 2>&1; then
    big=$tmp/big.txt
    for i in 1 2 3 4 5 6 7 8; do cat "$TEXT"; done >"$big"
    ev="$A eval --model m.st --text $big --batch 4"
    script -qec "$ev" /dev/null >tty.txt 2>&1
    "$A" eval --model m.st --text "$big" --batch 4 >pipe.txt 2>pipe_err.txt
    check "eval on a terminal draws its progress (evaluating N/M windows)" \
        grep -qa "evaluating [0-9]*/[0-9]* windows" tty.txt
    check "... and erases it: the lines left are what a pipe gets" \
        eval 'tr "\r" "\n" <tty.txt | grep -v "^ *$" | grep -v "^evaluating" | diff - pipe.txt'
    check "... and a pipe gets no progress, on either stream" \
        eval '! grep -qa evaluating pipe.txt pipe_err.txt'
    script -qec "$A train --text $big $SMALL --steps 2" /dev/null >tty.txt 2>&1
    check "train draws the final evaluation's progress on a terminal" \
        grep -qa "evaluating [0-9]*/[0-9]* windows" tty.txt
    script -qec "$A train --text $big $SMALL --steps 2 --quiet" /dev/null >tty.txt 2>&1
    check "... but not with --quiet" eval '! grep -qa evaluating tty.txt'
    # the checkpoint on stdout sends the report to stderr, the terminal here:
    # the step progress bar goes with it
    script -qec "$A train --text $TEXT $SMALL --steps 10 --log-every 10 --save /dev/stdout >bar.st" /dev/null \
        >tty.txt 2>&1
    check "with --save /dev/stdout, the progress bar is drawn on stderr's terminal" \
        eval 'grep -qa "\[[#.]*\] 5/10" tty.txt && "$A" info bar.st >/dev/null'
else
    skip "the progress of a long evaluation (no script(1) to give it a terminal)"
fi

# ---- 17. SIGUSR1 saves after the step and training goes on ----------------------------
# The run's progress goes into a named pipe read here line by line: when the
# reading stops, the run blocks on its next progress line, never more than a
# pipe's worth (64 KB, some 700 lines) ahead, so a run of 5000 steps cannot
# end (and overwrite the file saved at the signal) before it is looked at.
USR="--text $TEXT $SMALL --dropout 0.1 --optimizer adamw --steps 5000 --log-every 1 --threads 1"
# blocked PID: PID waits to write into a full pipe
blocked() { case "$(cat /proc/$1/wchan 2>/dev/null)" in *pipe_write*) return 0 ;; esac; return 1; }
# served ERR: ERR has a SIGUSR1 line (the run, if still there, has gone past it)
served() { grep -q "SIGUSR1" "$1"; }
rm -f usr.fifo && mkfifo usr.fifo
"$A" train $USR --save usr.st >usr.fifo 2>usr.err &
pid=$!
exec 3<usr.fifo
while IFS= read -r line <&3 && [ "${line#step}" = "$line" ]; do :; done    # up to its first progress line
for _ in $(seq 600); do blocked $pid && break; kill -0 $pid 2>/dev/null || break; sleep 0.05; done
check "SIGUSR1: the run trains until its progress fills the pipe" blocked $pid
# three while it is blocked in the middle of a step's report: one save, after that step
for _ in 1 2 3; do kill -USR1 $pid 2>/dev/null; sleep 0.05; done
check "SIGUSR1: three signals while it writes a progress line do not end the run" kill -0 $pid
while ! served usr.err && IFS= read -r line <&3; do :; done
cp usr.st at_signal.st 2>/dev/null
k=$(sed -nE 's/^attograd train: SIGUSR1: saved usr.st \(step ([0-9]+)\); training goes on$/\1/p' usr.err)
cat <&3 >usr.out
exec 3<&-
wait $pid
rc=$?
check "SIGUSR1: the run goes on and exits 0 ($rc: $(tr '\n' '|' <usr.err))" test $rc -eq 0
check "SIGUSR1: one line on stderr, saved usr.st (step N); training goes on ($(tr '\n' '|' <usr.err))" \
    eval '[ -n "$k" ] && [ "$(wc -l <usr.err)" -eq 1 ]'
check "SIGUSR1: the progress lines went on (a write it interrupted was not taken for a closed stdout)" \
    eval 'grep -q "^step   5000/5000" usr.out && grep -q "^saved usr.st (step 5000)" usr.out'
check "SIGUSR1: the file saved then is a checkpoint of step $k ($("$A" info at_signal.st 2>&1 | grep -m1 step))" \
    eval '"$A" info at_signal.st | grep -q "step $k,"'
"$A" train $USR --save unbroken.st >/dev/null 2>&1
check "SIGUSR1: the run's final checkpoint is the unbroken run's, byte for byte" cmp -s unbroken.st usr.st
"$A" train --resume at_signal.st --log-every 1000 --threads 1 >/dev/null 2>err.txt
check "SIGUSR1: resumed from the file saved at step $k to step 5000: the unbroken run, byte for byte ($(cat err.txt))" \
    cmp -s unbroken.st at_signal.st
# signalled SIG BLOCKED ARGS...: train ARGS, its progress into a named pipe
# read here; after its first progress line (and with BLOCKED 1 once it waits
# on the full pipe) SIG is sent; the rest of the progress goes to usr.out,
# stderr to usr.err, the exit status to $rc
signalled() {
    sig=$1 wait_blocked=$2
    shift 2
    rm -f usr.fifo && mkfifo usr.fifo
    "$A" train "$@" >usr.fifo 2>usr.err &
    pid=$!
    exec 3<usr.fifo
    while IFS= read -r line <&3 && [ "${line#step}" = "$line" ]; do :; done
    if [ "$wait_blocked" = 1 ]; then
        for _ in $(seq 600); do blocked $pid && break; kill -0 $pid 2>/dev/null || break; sleep 0.05; done
    fi
    kill -"$sig" $pid 2>/dev/null
    cat <&3 >usr.out
    exec 3<&-
    wait $pid
    rc=$?
}
# without --save (or --resume) there is nothing to save to: said, and the run goes on
signalled USR1 0 $USR
check "SIGUSR1 without --save: exit 0, the run trained to the end ($rc: $(tr '\n' '|' <usr.err))" \
    eval '[ $rc -eq 0 ] && grep -q "^done: 5000 steps" usr.out'
check "SIGUSR1 without --save: one line names --save ($(tr '\n' '|' <usr.err))" \
    eval '[ "$(wc -l <usr.err)" -eq 1 ] && grep -qx "attograd train: SIGUSR1: nothing to save to (no --save FILE); training goes on" usr.err'
# a save that fails (a full disk: /dev/full, written through) is said, and the run goes on
signalled USR1 0 $USR --save /dev/full
check "SIGUSR1 with a save that fails: one line says so, the run trains to the end, its last save fails: exit 1 ($rc: $(tr '\n' '|' <usr.err))" \
    eval '[ $rc -eq 1 ] && grep -q "^step   5000/5000" usr.out &&
          grep -qx "attograd train: SIGUSR1: not saved: /dev/full: .*; training goes on" usr.err'
# SIGTERM while the run is blocked writing a progress line: the write is
# restarted after the handler, not failed (EINTR) and taken for a closed
# stdout; the run ends after its step, saves and says so on stdout
rm -f term.st
signalled TERM 1 $USR --save term.st
check "SIGTERM while a progress line waits on a full pipe: exit 143, no 'standard output is closed' ($rc: $(tr '\n' '|' <usr.err))" \
    eval '[ $rc -eq 143 ] && ! grep -q "standard output is closed" usr.err'
check "... and the save is said on stdout and holds the step it names ($(grep '^saved' usr.out))" \
    eval 'n=$(sed -nE "s/^saved term.st \(step ([0-9]+)\)$/\1/p" usr.out) && [ -n "$n" ] &&
          "$A" info term.st | grep -q "step $n,"'
# the other commands have nothing to save: it does not end them
rm -f sample.out
env --default-signal=INT "$A" sample --model m.st --tokens 1000000 --threads 1 >sample.out 2>sample.err &
pid=$!
for _ in $(seq 300); do [ -s sample.out ] && break; sleep 0.05; done
kill -USR1 $pid 2>/dev/null
size=$(wc -c <sample.out)
for _ in $(seq 300); do [ "$(wc -c <sample.out)" -gt $((size + 20)) ] && break; kill -0 $pid 2>/dev/null || break; sleep 0.05; done
check "SIGUSR1 does not end sample: it goes on printing" eval '[ "$(wc -c <sample.out)" -gt $((size + 20)) ]'
kill -INT $pid 2>/dev/null
wait $pid
rc=$?
check "... and SIGINT ends it as before, exit 130 ($rc: $(cat sample.err))" test $rc -eq 130

# ---- 14. a change of compiler or flags rebuilds -------------------------------------------
# in a build directory of its own: one object is enough to see it
obj=$tmp/b/src/pcg32.o
mk0() { make --no-print-directory -C "$ROOT" BUILDDIR="$tmp/b" "$@" "$obj" 2>&1; }
mk0 >/dev/null
check "an object builds in a fresh build directory" test -s "$obj"
check "an unchanged build is up to date" eval '! mk0 | grep -q "CC "'
check "another -O rebuilds" eval 'mk0 OPT=-O1 | grep -q "CC "'
check "... and going back rebuilds again" eval 'mk0 | grep -q "CC "'
if command -v clang >/dev/null; then
    check "make CC=clang after make rebuilds with clang" eval 'mk0 CC=clang | grep -q "CC "'
    check "... and then is up to date" eval '! mk0 CC=clang | grep -q "CC "'
    check "... and the build directory says what it was built with" grep -q "^clang" "$tmp/b/flags"
else
    skip "no clang to change compiler to"
fi

finish
