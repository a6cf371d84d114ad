#!/bin/bash
# cli_mpi.sh - training on several ranks and in micro-batches: the plain
# build's --micro-batch (bitwise what whole batches give when that is one
# micro-batch without dropout, exact resume, checks) and its refusal to run
# as several mpirun processes; then, with Open MPI and build-mpi/attograd
# (make test builds it when mpicc exists): N = 1, 2, 3, 4 ranks give
# byte-identical checkpoints and identical losses on the copy task and on a
# text run with dropout, equal to the plain build's, and in bf16; a run
# saved on 2 ranks and resumed on 3 equals one that never stopped; kill -9
# or SIGSTOP of one rank ends every rank within 30 s with the checkpoint
# intact, and a save slower than the 8 s limit on ranks stuck inside MPI
# is written whole; bad invocations get one line from rank 0 and exit 2 on every rank, and so
# do ranks given different options, texts or checkpoints; a verdict one rank reaches alone is
# said by it, and every rank exits 2.  Without
# mpirun, mpicc or the MPI binary those checks report skipped.  Run from the
# repository root; ATTOGRAD and ATTOGRAD_MPI override the two binaries.
# Option lists ($TINY, $COPY, ...) are split into words on purpose.
# shellcheck disable=SC2086
A=${ATTOGRAD:-./build/attograd}
M=${ATTOGRAD_MPI:-./build-mpi/attograd}
ROOT=$(pwd)
TEXT=$ROOT/data/tiny.txt
# shellcheck source=tests/harness.sh
. "$(dirname "$0")/harness.sh"

need_binary
tmp=$(mktemp -d "${TMPDIR:-/tmp}/attograd-mpi.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM
cd "$tmp" || exit 1

# bad_in WANT CMD...: exit 2, one stderr line with WANT, nothing on stdout
bad_in() {
    local want=$1; shift
    "$@" >stdout 2>stderr
    local rc=$? why=""
    [ $rc -eq 2 ] || why="exit $rc"
    [ "$(wc -l <stderr)" -eq 1 ] || why="$why; $(wc -l <stderr) stderr lines"
    grep -qF -- "$want" stderr || why="$why; no '$want'"
    [ -s stdout ] && why="$why; stdout: $(head -c 200 stdout)"
    if [ -z "$why" ]; then ok; else fail "$* -> $why; stderr: $(head -c 300 stderr)"; fi
}
# a --log's steps and training losses; and validation losses and accuracies too
losses() { cut -d, -f1,2 "$1"; }
scores() { cut -d, -f1-4 "$1"; }
# a checkpoint's tensors, without the header (whose metadata names the options)
tensors() { tail -c +$((9 + $(od -An -t u8 -N 8 "$1"))) "$1"; }

# ---- the plain build ------------------------------------------------------------
TINY="--text $TEXT --d-model 16 --heads 2 --layers 1 --context 16 --eval-every 0 --quiet --threads 1"

# one micro-batch of the whole batch, no dropout: the whole-batch step, bit for bit
"$A" train $TINY --batch 8 --steps 6 --save whole.st >/dev/null
"$A" train $TINY --batch 8 --steps 6 --micro-batch 8 --save one.st >/dev/null
check "--micro-batch B without dropout gives the whole-batch weights, moments and generators" \
    eval 'cmp -s <(tensors whole.st) <(tensors one.st)'
"$A" train $TINY --batch 8 --steps 6 --micro-batch 2 --save four.st >/dev/null
check "--micro-batch 2 adds in another order: not the same bits as whole batches" \
    eval '! cmp -s <(tensors whole.st) <(tensors four.st)'

# resume is exact with micro-batches and dropout (each micro-batch's stream
# comes from seed, step and index)
MB="$TINY --batch 8 --micro-batch 2 --optimizer adamw --log-every 1"
# (both log to run.csv in turn: the checkpoint records its log's path)
"$A" train $MB --dropout 0.2 --steps 8 --save full.st --log run.csv >/dev/null && mv run.csv full.csv
"$A" train $MB --dropout 0.2 --steps 4 --save half.st --log run.csv >/dev/null
"$A" train --resume half.st --steps 8 --log-every 1 --eval-every 0 --quiet >/dev/null && mv run.csv half.csv
check "micro-batches with dropout: 4 steps + --resume for 4 more = 8 steps, byte for byte" cmp -s full.st half.st
check "micro-batches with dropout: the same 8 logged losses" \
    eval '[ "$(wc -l <full.csv)" -eq 9 ] && [ "$(losses full.csv)" = "$(losses half.csv)" ]'
"$A" train $MB --steps 8 --save nodrop.st >/dev/null
check "dropout is on in the micro-batches (dropout 0 trains other weights)" \
    eval '! cmp -s <(tensors full.st) <(tensors nodrop.st)'

bad_in "--micro-batch 3 does not divide --batch 8: give a --micro-batch that divides 8" \
    "$A" train $TINY --batch 8 --micro-batch 3
bad_in "--micro-batch cannot be changed with --resume" "$A" train --resume half.st --micro-batch 4
bad_in "--micro-batch 0 is out of range" "$A" train --micro-batch 0
# started by a launcher as two processes: rank 0 says why, every rank exits 2
OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0 bad_in "built without MPI" "$A" train $TINY --steps 1
OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=1 "$A" train $TINY --steps 1 >stdout 2>stderr
rc=$?
check "a plain build as rank 1 of 2 exits 2 silently (exit $rc, $(cat stderr))" \
    eval '[ $rc -eq 2 ] && [ ! -s stdout ] && [ ! -s stderr ]'
OMPI_COMM_WORLD_SIZE=1 OMPI_COMM_WORLD_RANK=0 "$A" train $TINY --steps 1 >/dev/null 2>&1
check "a plain build as the only process of mpirun -np 1 trains" test $? -eq 0

# ---- several ranks --------------------------------------------------------------
if ! command -v mpirun >/dev/null 2>&1 || ! command -v mpicc >/dev/null 2>&1; then
    skip "the MPI checks: no mpirun or mpicc (sh tests/install-deps.sh installs openmpi-bin and libopenmpi-dev)"
    finish
fi
case $M in /*) ;; *) M=$ROOT/$M ;; esac
if [ ! -x "$M" ]; then
    skip "the MPI checks: no $M (make MPI=1 builds it)"
    finish
fi
# root may run mpirun only when it says so; under the sanitizers, Open MPI's
# own allocations at exit are not this program's leaks
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
run() {  # run N ARGS...: attograd ARGS on N ranks
    local n=$1; shift
    mpirun --oversubscribe -np "$n" "$M" "$@"
}
# the progress lines without their timings
progress() { sed -nE 's/^(step +[0-9]+\/[0-9]+ \| loss [0-9.]+ \| lr [^|]+)\|.*ms\/step.*tok\/s(.*)$/\1\2/p' "$1"; }

# N = 1..4 on the copy task (--batch 24: the default micro-batch is 2 rows).
# Every run logs to copy.csv in turn (the checkpoint records its log's path),
# moved aside after it.
COPY="--batch 24 --steps 20 --log-every 5 --eval-every 10 --threads 1"
for n in 1 2 3 4; do
    run $n train $COPY --save copy$n.st --log copy.csv >copy$n.out 2>copy$n.err
    rc=$?
    mv copy.csv copy$n.csv
    check "copy on $n ranks: exit 0 (exit $rc: $(tail -n 2 copy$n.err))" test $rc -eq 0
done
check "copy: the configuration names the ranks and micro-batches" \
    grep -q "ranks      2 ranks x 1 thread, micro-batches of 2 rows (12 per step, 6 per rank)" copy2.out
for n in 2 3 4; do
    check "copy: $n ranks save the checkpoint 1 rank saves, byte for byte" cmp -s copy1.st copy$n.st
    check "copy: $n ranks print the losses, validation losses and accuracies 1 rank prints" \
        eval '[ -n "$(progress copy1.out)" ] && [ "$(progress copy1.out)" = "$(progress copy$n.out)" ]'
    check "copy: $n ranks log what 1 rank logs" eval '[ "$(scores copy1.csv)" = "$(scores copy$n.csv)" ]'
done
check "copy: 4 progress lines, 2 with a validation loss" \
    eval '[ "$(progress copy1.out | wc -l)" -eq 4 ] && [ "$(progress copy1.out | grep -c "val loss")" -eq 2 ]'
final_val() { tail -n 1 "$1" | cut -d, -f3; }
check "copy: eval --batch 24 in one process of the 4 ranks' checkpoint gives their final validation loss" \
    eval '[ -n "$(final_val copy4.csv)" ] &&
          [ "$("$A" eval --model copy4.st --batch 24 | sed -nE "s/^loss ([0-9.]+) .*/\1/p")" = "$(final_val copy4.csv)" ]'
"$A" train $COPY --micro-batch 2 --save copy_plain.st --log copy.csv >/dev/null 2>&1
check "copy: the plain build with --micro-batch 2 saves the same bytes" cmp -s copy1.st copy_plain.st

# N = 1..4 on text with dropout (and --threads 0: each rank its share of the cores)
TXT="--text $TEXT --d-model 32 --heads 2 --layers 2 --context 32 --batch 24 --micro-batch 2 --dropout 0.1
     --optimizer adamw --steps 20 --log-every 1 --eval-every 10 --quiet"
for n in 1 2 3 4; do
    run $n train $TXT --save text$n.st --log text.csv >text$n.out 2>text$n.err
    rc=$?
    mv text.csv text$n.csv
    check "text on $n ranks: exit 0 (exit $rc: $(tail -n 2 text$n.err))" test $rc -eq 0
done
for n in 2 3 4; do
    check "text with dropout: $n ranks save the checkpoint 1 rank saves" cmp -s text1.st text$n.st
    check "text with dropout: $n ranks log the losses 1 rank logs" eval '[ "$(scores text1.csv)" = "$(scores text$n.csv)" ]'
done
check "text: 20 steps logged, 2 validation losses" \
    eval '[ "$(wc -l <text1.csv)" -eq 21 ] && [ "$(cut -d, -f3 text1.csv | grep -c .)" -eq 3 ]'
"$A" train $TXT --save text_plain.st --log text.csv >/dev/null 2>&1
check "text: the plain build with --micro-batch 2 saves the same bytes" cmp -s text1.st text_plain.st
run 2 train --text "$TEXT" --d-model 16 --heads 2 --layers 1 --batch 8 --steps 1 >threads.out 2>&1
share=$(($(getconf _NPROCESSORS_ONLN) / 2)); [ "$share" -ge 1 ] || share=1
check "--threads 0 on 2 ranks: half the machine's cores each, $share ($(grep ranks threads.out))" \
    grep -q "2 ranks x $share threads\?," threads.out

# --save /dev/stdout on ranks: rank 0's standard output is a terminal of
# mpirun's, copied to mpirun's own, where the checkpoint goes: the report
# goes to stderr, as in one process (the "saved" and "done" lines went
# after the checkpoint's bytes, which no reader then took)
run 2 train --text "$TEXT" --d-model 16 --heads 2 --layers 1 --batch 8 --steps 3 --eval-every 0 --threads 1 \
    --save piped_file.st >/dev/null 2>&1
run 2 train --text "$TEXT" --d-model 16 --heads 2 --layers 1 --batch 8 --steps 3 --eval-every 0 --threads 1 \
    --save /dev/stdout >piped.st 2>piped.err
check "--save /dev/stdout on 2 ranks: the checkpoint's bytes alone ($(tail -c 80 piped.st | tr -c '[:print:]' .))" \
    cmp -s piped.st piped_file.st
check "--save /dev/stdout on 2 ranks: the report on stderr" grep -q "^saved /dev/stdout (step 3)" piped.err

# more ranks than cores, one thread each: the note says so, and does not ask
# for fewer threads (it did: "3 ranks x 1 threads exceed this machine's 2
# cores: give fewer --threads")
cores=$(getconf _NPROCESSORS_ONLN)
if [ "$cores" -le 7 ]; then
    run $((cores + 1)) train --text "$TEXT" --d-model 16 --heads 2 --layers 1 --batch $((cores + 1)) --steps 1 \
        --eval-every 0 --threads 1 >over.out 2>&1
    check "$((cores + 1)) ranks of 1 thread on $cores cores: one note, not about threads ($(grep note over.out))" \
        eval '[ "$(grep -c "^  note       $((cores + 1)) ranks on this machine.s $cores cores\? take turns: start at most $cores here$" over.out)" -eq 1 ] &&
              ! grep -q "fewer --threads" over.out'
else
    skip "more ranks than cores: this machine has $cores"
fi

# bf16 on 1, 2 and 4 ranks: the bf16 products do not depend on the split either
BF="--text $TEXT --d-model 32 --heads 2 --layers 1 --context 32 --batch 16 --dropout 0.1
    --eval-every 0 --quiet --threads 1 --precision bf16"
if bf16_probe "$A"; then
    for n in 1 2 4; do
        run $n train $BF --steps 10 --save bf$n.st >/dev/null 2>&1
        check "bf16 on $n ranks: exit 0" test $? -eq 0
    done
    check "bf16: 2 and 4 ranks save the checkpoint 1 rank saves" eval 'cmp -s bf1.st bf2.st && cmp -s bf1.st bf4.st'
else
    skip "bf16 on several ranks: this CPU has no bf16 kernel (or the probe failed, above)"
fi

# saved on 2 ranks, resumed on 3 = never stopped
RES="--text $TEXT --d-model 32 --heads 2 --layers 2 --context 32 --batch 12 --dropout 0.1 --optimizer adamw
     --log-every 1 --eval-every 0 --quiet --threads 1"
run 1 train $RES --steps 16 --save once.st --log run.csv >/dev/null 2>&1
mv run.csv once.csv
run 2 train $RES --steps 8 --save twice.st --log run.csv >/dev/null 2>&1
run 3 train --resume twice.st --steps 16 --log-every 1 --eval-every 0 --quiet --threads 1 >resume.out 2>&1
mv run.csv twice.csv
check "resumed on 3 ranks: exit 0 ($(tail -n 1 resume.out))" grep -q "^saved twice.st (step 16)" resume.out
check "8 steps on 2 ranks + 8 resumed on 3 = 16 steps on 1, byte for byte" cmp -s once.st twice.st
check "... and the same 16 logged losses" eval '[ "$(losses once.csv)" = "$(losses twice.csv)" ]'

# ---- faults ---------------------------------------------------------------------
# start_long N ARGS...: a long run on N ranks in the background, once it has
# saved (ARGS give --save-every); $mpid is mpirun
start_long() {
    local n=$1; shift
    rm -f long.st long.st.tmp.*
    mpirun --oversubscribe -np "$n" "$M" train --text "$TEXT" --d-model 48 --heads 3 --layers 2 --context 32 \
        --batch 12 --optimizer adamw --steps 1000000 --save long.st --eval-every 0 --quiet --threads 1 "$@" \
        >long.out 2>long.err &
    mpid=$!
    for _ in $(seq 100); do [ -e long.st ] && break; sleep 0.1; done
    sleep 0.5
}
# the pid of rank R of mpirun $mpid (mpirun starts the ranks itself on one machine)
rank_pid() {
    local p
    for p in $(pgrep -P "$mpid"); do
        if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1"; then
            echo "$p"
            return
        fi
    done
}
# wait_ended LABEL: mpirun and every rank gone within 30 s of now, mpirun non-zero
wait_ended() {
    local t0=$SECONDS rc
    for _ in $(seq 300); do kill -0 "$mpid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$mpid" 2>/dev/null; then
        fail "$1: mpirun still running after 30 s"
        kill -9 "$mpid"
    fi
    wait "$mpid"
    rc=$?
    last_rc=$rc
    check "$1: every rank ended non-zero within 30 s (mpirun exit $rc after $((SECONDS - t0)) s)" \
        eval '[ $rc -ne 0 ] && ! pgrep -f "$M train" >/dev/null'
    check "$1: the checkpoint is intact" eval '"$A" info long.st >/dev/null'
}

start_long 3 --save-every 1
victim=$(rank_pid 1)
check "kill -9: rank 1 found" test -n "$victim"
kill -9 "$victim"
wait_ended "kill -9 of rank 1"
check "kill -9: one line names rank 1 ($(grep -i 'rank 1' long.err | head -n 1))" \
    grep -q "process rank 1 .* exited on signal 9" long.err

# kill -9 of rank 0: rank 1, the lowest left, saves the last step and says
# so.  (It waited half a second for word from a lower rank after giving up,
# on top of the half second given to a stop: all of the second mpirun leaves
# before SIGKILL, and the save was lost, or made and not said.)
for try in 1 2 3; do
    # (the output emptied here, not by the background job's redirection,
    # which may come after the wait below has read the last try's steps)
    rm -f long.st long.st.tmp.* long.out
    mpirun --oversubscribe -np 2 "$M" train --text "$TEXT" --d-model 48 --heads 3 --layers 2 --context 32 \
        --batch 12 --optimizer adamw --steps 1000000 --save long.st --eval-every 0 --log-every 1 --threads 1 \
        >long.out 2>long.err &
    mpid=$!
    for _ in $(seq 100); do [ "$(grep -c '^step' long.out)" -ge 5 ] && break; sleep 0.1; done
    victim=$(rank_pid 0)
    kill -9 "$victim"
    wait_ended "kill -9 of rank 0, try $try"
    step=$(sed -nE 's/^attograd train: rank 1: .*: saved long.st at step ([0-9]+), the last step completed.*/\1/p' long.err)
    check "kill -9 of rank 0, try $try: rank 1 saves the last step and says so ($(grep '^attograd' long.err | tr '\n' '|'))" \
        eval '[ -n "$step" ] && "$A" info long.st | grep -q "step $step,"'
done

# A fault during the first step saves nothing: rank 1 frozen in a first step
# of seconds, rank 0 gives up after --mpi-timeout 1 having completed no
# step, and keep.st, which --save names, keeps the earlier run's step 3 (rank
# 0 saved the untrained model over it, "at step 0").
"$A" train $TINY --batch 8 --steps 3 --save keep.st >/dev/null
cp keep.st keep.orig
mpirun --oversubscribe -np 2 "$M" train --text "$TEXT" --d-model 256 --heads 4 --layers 4 --context 128 --batch 48 \
    --steps 2 --eval-every 0 --threads 1 --mpi-timeout 1 --save keep.st >keep.out 2>keep.err &
mpid=$!
for _ in $(seq 300); do grep -q "^  ranks" keep.out && break; sleep 0.02; done
victim=$(rank_pid 1)
kill -STOP "$victim"
for _ in $(seq 300); do kill -0 "$mpid" 2>/dev/null || break; sleep 0.1; done
kill -9 "$victim" 2>/dev/null
wait "$mpid"
check "a fault in the first step: one line says nothing is saved ($(grep '^attograd' keep.err))" \
    grep -q "^attograd train: rank 0: .* during step 1; no step was completed, so nothing is saved (keep.st is left as it was)" keep.err
check "a fault in the first step: --save is left as it was" cmp -s keep.st keep.orig

# The save of a rank above 0 that fails says why in its line (which said
# "failed (above)", the reason written where rank 1's stderr goes: nowhere).
rm -rf gone long.out && mkdir gone
mpirun --oversubscribe -np 2 "$M" train --text "$TEXT" --d-model 16 --heads 2 --layers 1 --batch 8 --steps 1000000 \
    --save gone/x.st --eval-every 0 --log-every 1 --threads 1 >long.out 2>long.err &
mpid=$!
for _ in $(seq 100); do [ "$(grep -c '^step' long.out)" -ge 5 ] && break; sleep 0.1; done
victim=$(rank_pid 0)
rm -rf gone
kill -9 "$victim"
wait "$mpid"
check "kill -9 of rank 0, --save's directory gone: rank 1's line says why it did not save ($(grep '^attograd' long.err))" \
    grep -q "^attograd train: rank 1: .*; not saved: .*gone/x.st.*No such file or directory" long.err

# ... and a --save that is rank 0's standard output is not rank 1's: it
# says so (it wrote the checkpoint to its own, /dev/null, and said "saved
# /dev/stdout at step N")
mpirun --oversubscribe -np 2 "$M" train --text "$TEXT" --d-model 16 --heads 2 --layers 1 --batch 8 --steps 1000000 \
    --save /dev/stdout --eval-every 0 --threads 1 >stream.st 2>long.err &
mpid=$!
sleep 2
victim=$(rank_pid 0)
kill -9 "$victim"
wait "$mpid"
check "kill -9 of rank 0, --save /dev/stdout: rank 1 does not claim to save ($(grep '^attograd' long.err))" \
    grep -q "^attograd train: rank 1: .*; --save /dev/stdout is rank 0's own stream, which this rank cannot write" long.err

start_long 3 --save-every 1 --mpi-timeout 2
victim=$(rank_pid 2)
kill -STOP "$victim"
wait_ended "SIGSTOP of rank 2 with --mpi-timeout 2"
check "SIGSTOP: the ranks that waited say so ($(grep -m1 'have not answered' long.err))" \
    grep -q "rank 0: the other ranks have not answered for 2 s" long.err
check "SIGSTOP: the ranks that gave up exit 4, and mpirun with them (mpirun exit $last_rc)" test "$last_rc" -eq 4

# A rank that gave up and saves is not cut off by the alarm that ends ranks
# stuck inside MPI (8 s): its checkpoint goes to a pipe whose reader starts
# reading 12 s after rank 2 stops, and arrives whole.
rm -f slow.fifo slow.st
mkfifo slow.fifo
(exec 3<slow.fifo; sleep 14; cat <&3 >slow.st) &
reader=$!
mpirun --oversubscribe -np 3 "$M" train --text "$TEXT" --d-model 48 --heads 3 --layers 2 --context 32 \
    --batch 12 --optimizer adamw --steps 1000000 --save slow.fifo --save-every 0 --eval-every 0 --quiet \
    --threads 1 --mpi-timeout 2 >slow.out 2>slow.err &
mpid=$!
sleep 2
victim=$(rank_pid 2)
kill -STOP "$victim"
for _ in $(seq 600); do kill -0 "$mpid" 2>/dev/null || break; sleep 0.1; done
kill -9 "$mpid" 2>/dev/null
wait "$mpid"
kill -9 "$victim" 2>/dev/null
wait "$reader"
step=$(sed -nE 's/.*saved slow.fifo at step ([0-9]+).*/\1/p' slow.err)
check "a save slower than 8 s after giving up is written whole ($(grep -m1 '^attograd' slow.err))" \
    eval '[ -n "$step" ] && "$A" info slow.st | grep -q "step $step,"'

# A fault before the run has completed a step saves nothing: the state is
# the one it started from, and --save may hold earlier work.  Rank 0 alone
# opens --log, and refuses one it cannot write; rank 1, given 3 s before
# SIGKILL (the README advises 30 for large models), gave up on rank 0 and
# saved its untrained model over keep.st.  (Now the ranks meet before
# training, and leave together with rank 0's status.)
"$A" train $TINY --batch 8 --steps 3 --save keep.st >/dev/null
cp keep.st keep.orig
mpirun --oversubscribe --mca odls_base_sigkill_timeout 3 -np 2 "$M" train $TINY --batch 8 --steps 3 \
    --save keep.st --log nodir/run.csv >keep.out 2>keep.err
check "a --log rank 0 cannot write, on 2 ranks: refused in its line ($(grep '^attograd' keep.err | tr '\n' '|'))" \
    grep -q "^attograd train: cannot write log nodir/run.csv" keep.err
check "a --log rank 0 cannot write, on 2 ranks: no rank saves over --save" cmp -s keep.st keep.orig

# The last save takes as long as it takes: rank 1, waiting for rank 0 to
# end, does not give up after --mpi-timeout (it did, and left; mpirun then
# killed rank 0 while it wrote, and the checkpoint was cut short).
rm -f slowend.fifo slowend.st
mkfifo slowend.fifo
(exec 3<slowend.fifo; sleep 4; cat <&3 >slowend.st) &
reader=$!
run 2 train --text "$TEXT" --d-model 48 --heads 3 --layers 2 --batch 8 --steps 10 --eval-every 0 --quiet --threads 1 \
    --mpi-timeout 1 --save slowend.fifo >slowend.out 2>slowend.err
rc=$?
wait "$reader"
check "a last save slower than --mpi-timeout, to a pipe read late: exit 0 and the whole checkpoint (exit $rc; $(grep -m1 -i 'improperly\|attograd' slowend.err))" \
    eval '[ $rc -eq 0 ] && "$A" info slowend.st | grep -q "step 10,"'

# Ctrl-C: mpirun passes SIGTERM to every rank; they stop at the same step and
# rank 0 saves it, as one process does.  A signal that finds rank 1 waiting for
# rank 0 (which is saving, often, with --save-every 1) must not make it give up
# (it waits half a second for the others); a rank that gives up (a step longer
# than that) must wait for rank 0's save, or mpirun kills rank 0 mid-save when
# it exits.
for every in 50 1 1; do
    start_long 2 --save-every $every
    kill -INT "$mpid"
    wait "$mpid"
    step=$(sed -nE 's/.*(terminated at|saved long.st at) step ([0-9]+).*/\2/p' long.err)
    check "Ctrl-C of mpirun, --save-every $every: rank 0 saves the step it stopped at ($(cat long.err long.out | head -n 2))" \
        eval '[ -n "$step" ] && "$A" info long.st | grep -q "step $step,"'
    check "Ctrl-C of mpirun, --save-every $every: the one-process lines ($(grep '^attograd' long.err | tr '\n' '|'))" \
        eval '[ "$(grep "^attograd" long.err)" = "attograd train: terminated at step $step: stopping and saving" ] &&
              [ "$(tail -n 1 long.out)" = "saved long.st (step $step)" ]'
    check "Ctrl-C of mpirun, --save-every $every: no temporary file left ($(ls long.st.tmp.* 2>/dev/null))" \
        eval '! ls long.st.tmp.* >/dev/null 2>&1'
done

# SIGTERM to one rank alone (a signal that reaches the ranks at different
# moments, as on several hosts, where mpirun's daemons pass it on): the others
# learn of it at the step's agreement, and the run ends as one process's.  A
# signal that comes while the rank waits in that agreement, having given it no
# stop, is kept for the next step's (it was lost: the rank trained on, and
# mpirun's SIGKILL came before any save).
for r in 0 1; do
    start_long 2 --save-every 50
    victim=$(rank_pid $r)
    kill -TERM "$victim"
    for _ in $(seq 300); do kill -0 "$mpid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$mpid" 2>/dev/null && kill -9 "$mpid"
    wait "$mpid"
    step=$(sed -nE 's/^attograd train: terminated at step ([0-9]+): stopping and saving$/\1/p' long.err)
    check "SIGTERM to rank $r alone: every rank stops at one step, as one process ($(grep '^attograd' long.err | tr '\n' '|'))" \
        eval '[ -n "$step" ] && [ "$(grep "^attograd" long.err)" = "attograd train: terminated at step $step: stopping and saving" ] &&
              [ "$(tail -n 1 long.out)" = "saved long.st (step $step)" ] && "$A" info long.st | grep -q "step $step,"'
done

# Ctrl-C of mpirun during the last evaluation (every window of a 48 MB text's
# validation split, seconds per rank): mpirun passes SIGTERM to every rank;
# the ranks agree after each round of groups, stop together, and end as one
# process does (and as a stop during training steps does on ranks): the
# one-process lines, the step the evaluation follows saved, its log row without
# a validation loss.  (Before, the collective where the ranks agree to stop
# gave up as soon as it found the flag up, and the run ended through the fault
# path: "rank 0: stopped by a signal ... saved big.st at step 2".)  A signal
# that did not land in the evaluation (a machine so loaded that step 2 took
# the 0.3 s) is tried again.
for _ in $(seq 1080); do cat "$TEXT"; done > big.txt
for try in 1 2 3; do
    rm -f big.st big.csv big.out
    mpirun --oversubscribe -np 2 "$M" train --text big.txt --steps 2 --log-every 1 --threads 1 --save big.st \
        --log big.csv >big.out 2>big.err &
    mpid=$!
    for _ in $(seq 600); do grep -q "^step *1/2" big.out && break; sleep 0.05; done
    sleep 0.3; t0=$SECONDS; kill -INT "$mpid"; wait "$mpid"
    grep -q "during the evaluation at step 2" big.err && break
done
check "Ctrl-C of mpirun in the last evaluation: it landed there (try $try: $(grep -m1 '^attograd' big.err))" \
    grep -q "during the evaluation at step 2" big.err
check "Ctrl-C of mpirun in the last evaluation: every rank gone within 5 s ($((SECONDS - t0)) s)" \
    test $((SECONDS - t0)) -le 5
check "Ctrl-C of mpirun in the last evaluation: the one-process line, no fault ($(grep '^attograd' big.err | tr '\n' '|'))" \
    eval '[ "$(grep "^attograd" big.err)" = "attograd train: terminated during the evaluation at step 2: stopping and saving" ]'
check "Ctrl-C of mpirun in the last evaluation: step 2 saved, and said ($(tail -n 1 big.out))" \
    eval '[ "$(tail -n 1 big.out)" = "saved big.st (step 2)" ] && "$A" info big.st | grep -q "step 2,"'
check "Ctrl-C of mpirun in the last evaluation: the log's row 2 has no validation loss ($(tail -n 1 big.csv))" \
    eval '[ "$(wc -l < big.csv)" -eq 3 ] && tail -n 1 big.csv | grep -q "^2,[0-9.]*,,,"'
rm -f big.txt

# SIGUSR1 to mpirun, which passes it to every rank (each gets it at its own
# moment): the ranks agree on a step, rank 0 saves it once, and training goes
# on; a second signal saves a later step.  The file saved at the first, resumed
# on 2 ranks, continues as a run that never stopped.
USR="--text $TEXT --d-model 16 --heads 2 --layers 1 --context 16 --batch 8 --dropout 0.1 --optimizer adamw
     --log-every 1 --eval-every 0 --threads 1"
rm -f usr.st
mpirun --oversubscribe -np 2 "$M" train $USR --steps 1000000 --save usr.st >usr.out 2>usr.err &
mpid=$!
saves() { grep -c "^attograd train: SIGUSR1: saved usr.st (step [0-9]*); training goes on$" usr.err; }
for _ in $(seq 300); do grep -q "^step" usr.out && break; kill -0 $mpid 2>/dev/null || break; sleep 0.1; done
kill -USR1 $mpid
for _ in $(seq 300); do [ "$(saves)" -ge 1 ] && break; kill -0 $mpid 2>/dev/null || break; sleep 0.1; done
cp usr.st at_signal.st 2>/dev/null
kill -USR1 $mpid
for _ in $(seq 300); do [ "$(saves)" -ge 2 ] && break; kill -0 $mpid 2>/dev/null || break; sleep 0.1; done
running=0; kill -0 $mpid 2>/dev/null && running=1
kill -INT $mpid 2>/dev/null
wait $mpid
steps_saved() { sed -nE 's/^attograd train: SIGUSR1: saved usr.st \(step ([0-9]+)\).*/\1/p' usr.err | sed -n "$1p"; }
k=$(steps_saved 1)
k2=$(steps_saved 2)
check "SIGUSR1 to mpirun: the ranks go on training after each ($(grep -v Forwarding usr.err | tr '\n' '|'))" \
    test $running -eq 1
check "SIGUSR1 to mpirun, twice: two lines from rank 0, the second at a later step ($k, $k2)" \
    eval '[ "$(saves)" -eq 2 ] && [ -n "$k" ] && [ -n "$k2" ] && [ "$k2" -gt "$k" ]'
check "SIGUSR1 to mpirun: the file saved at the first is a checkpoint of step $k" \
    eval '"$A" info at_signal.st | grep -q "step $k,"'
end=$((k + 6))
run 2 train $USR --steps $end --save unbroken.st >/dev/null 2>&1
run 2 train --resume at_signal.st --steps $end --log-every 1 --eval-every 0 --threads 1 >/dev/null 2>err.txt
check "SIGUSR1 to mpirun: resumed on 2 ranks from step $k to $end = a run that never stopped ($(cat err.txt))" \
    eval 'cmp -s <(tensors unbroken.st) <(tensors at_signal.st)'

# ---- bad invocations: one line from rank 0, exit 2 on every rank -----------------
# Each rank runs in a session of its own, where mpirun's SIGTERM and SIGKILL
# (sent to the ranks left once one has exited non-zero) do not reach it, and
# its exit status is recorded.
cat >wrap.sh <<'EOF'
#!/bin/sh
setsid sh -c '"$@"; rc=$?; echo "rank $OMPI_COMM_WORLD_RANK exit $rc" >>"$RANKS"; exit $rc' sh "$@" &
wait $!
EOF
chmod +x wrap.sh
export RANKS=$tmp/ranks
bad_ranks() {  # bad_ranks WANT N BINARY ARGS...
    local want=$1 n=$2; shift 2
    rm -f "$RANKS"
    timeout 60 mpirun --oversubscribe -np "$n" ./wrap.sh "$@" >stdout 2>stderr
    local rc=$? why=""
    for _ in $(seq 100); do [ "$(wc -l <"$RANKS" 2>/dev/null)" = "$n" ] && break; sleep 0.1; done
    [ $rc -eq 2 ] || why="mpirun exit $rc"
    [ "$(grep -c '^attograd' stderr)" -eq 1 ] || why="$why; $(grep -c '^attograd' stderr) attograd lines"
    grep -qF -- "$want" stderr || why="$why; no '$want'"
    [ "$(grep -c ' exit 2$' "$RANKS" 2>/dev/null)" = "$n" ] || why="$why; ranks: $(tr '\n' ' ' <"$RANKS")"
    [ -s stdout ] && why="$why; stdout: $(head -c 200 stdout)"
    if [ -z "$why" ]; then ok; else fail "$n ranks: $* -> $why; stderr: $(grep '^attograd' stderr | head -c 300)"; fi
}
bad_ranks "--batch 32 does not split evenly over 3 ranks" 3 "$M" train --batch 32
# with a --micro-batch, the --batch suggested holds whole micro-batches on each rank (33 did not)
bad_ranks "--batch 32 does not split evenly over 3 ranks: give a --batch that 24 divides (3 ranks x --micro-batch 8), such as 48" \
    3 "$M" train --batch 32 --micro-batch 8
bad_ranks "--micro-batch 4 does not divide the 6 rows each of 4 ranks gets from --batch 24" \
    4 "$M" train --batch 24 --micro-batch 4
bad_ranks "--micro-batch 5 (the default) does not divide the 4 rows each of 5 ranks gets from --batch 20" \
    5 "$M" train --batch 20
bad_ranks "--micro-batch 2 (the default) does not divide the 1 row each of 8 ranks gets from --batch 8" 8 "$M" train --batch 8
bad_ranks "this attograd was built without MPI" 2 "$A" train
bad_ranks "this attograd was built without MPI" 4 "$A" train --steps 1
bad_ranks "whole.st was trained in whole batches" 2 "$M" train --resume whole.st
bad_ranks "the checkpoint's --batch 8 does not split evenly over 3 ranks: resume it on 1, 2 or 4 ranks" \
    3 "$M" train --resume full.st
"$A" train $TINY --batch 12 --micro-batch 2 --steps 1 --save m2.st >/dev/null
bad_ranks "the checkpoint's --micro-batch 2 does not divide the 3 rows each of 4 ranks gets from its --batch 12: resume it on 1, 2, 3 or 6 ranks" \
    4 "$M" train --resume m2.st
bad_ranks "--lr expects a number" 3 "$M" train --lr x
# more numbers of ranks fit than the line lists: it says so (it listed the
# first 8 as if they were all: "1, 2, 3, 4, 5, 6, 8 or 9 ranks")
"$A" train --d-model 8 --heads 1 --layers 1 --batch 720 --micro-batch 1 --steps 1 --eval-every 0 --quiet \
    --threads 1 --save m720.st >/dev/null
bad_ranks "the checkpoint's --batch 720 does not split evenly over 7 ranks: resume it on 1, 2, 3, 4, 5, 6, 8, 9, ... ranks" \
    7 "$M" train --resume m720.st

# Ranks given different runs (mpirun's "-np 1 A : -np 1 B", a host with
# another copy of a file): rank 0 gets the words of $RANK0 after the
# others, the other ranks those of $RANK1.  They trained on silently, each
# rank updating its own weights with the gradient summed over all (or hung
# in collectives that did not match); now every rank compares what it was
# given before anything is written, and all refuse.
printf '#!/bin/sh\nif [ "$OMPI_COMM_WORLD_RANK" = 0 ]; then exec "$@" $RANK0; fi\nexec "$@" $RANK1\n' >ranks.sh
chmod +x ranks.sh
sed 's/the/teh/g' "$TEXT" >other.txt
"$A" train $TINY --batch 8 --micro-batch 2 --steps 2 --save r2.st >/dev/null
"$A" train --resume r2.st --steps 3 --save r3.st --quiet >/dev/null
cp r2.st r2copy.st
printf 'step,train_loss,val_loss,val_acc,lr,ms_per_step,tokens_per_s\n' >kept.csv
DIFF="--d-model 16 --heads 2 --layers 1 --context 16 --batch 12 --micro-batch 2 --steps 2 --eval-every 0 --quiet --threads 1"
RANK0="--text $TEXT --lr 0.1" RANK1="--text $TEXT --lr 0.2" bad_ranks \
    "the ranks were started with different options: give every rank the same" 2 ./ranks.sh "$M" train $DIFF --log kept.csv
check "ranks with different options: the log is not touched" eval '[ "$(wc -l <kept.csv)" -eq 1 ]'
RANK0="--text $TEXT" RANK1="--text other.txt" bad_ranks \
    "the ranks read different text: $TEXT is not the same file on every rank" 3 ./ranks.sh "$M" train $DIFF
RANK0="--resume r2.st" RANK1="--resume r3.st" bad_ranks \
    "the ranks start from different weights: --resume r2.st is not the same checkpoint on every rank" \
    2 ./ranks.sh "$M" train --quiet
check "ranks resumed from different checkpoints: neither is touched" \
    eval '"$A" info r2.st | grep -q "step 2," && "$A" info r3.st | grep -q "step 3,"'
RANK0="--resume r2.st" RANK1="--resume r2copy.st" mpirun --oversubscribe -np 2 ./ranks.sh "$M" train --quiet \
    --steps 3 --save same.st >same.out 2>&1
check "ranks resumed from two copies of one checkpoint train on ($(tail -n 1 same.out))" cmp -s same.st r3.st
# a verdict one rank reaches alone: that rank says it, and every rank exits 2
RANK0="--text $TEXT" RANK1="--text missing.txt" bad_ranks "attograd train: rank 1: cannot open missing.txt" \
    3 ./ranks.sh "$M" train $DIFF
bad_ranks "cannot write log nodir/run.csv" 2 "$M" train $DIFF --text "$TEXT" --log nodir/run.csv
finish
