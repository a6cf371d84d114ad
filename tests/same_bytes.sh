#!/bin/sh
# same_bytes.sh - the fingerprint of what a build computes, for refactors
# that must not change a bit: trains the README's examples and the test
# suites' configurations with the command CLI (short step counts where the
# tests use them; whole batches and micro-batches, bf16 when the CPU has it,
# dropout, text and tasks, --init and --resume), evaluates, samples and
# draws with the results, and writes the sha256 of every checkpoint and
# output, one "name hash" line each, to OUT.  Two builds compute the same
# when their OUT files are equal:
#
#   sh tests/same_bytes.sh ./build/attograd before.txt     # on the old code
#   sh tests/same_bytes.sh ./build/attograd after.txt      # on the new
#   diff before.txt after.txt
#
# With ATTOGRAD_MPI set to the MPI build's command, the micro-batch runs are
# also made on 1, 2 and 4 ranks and must give the 1-process bytes (checked
# here: a mismatch is a line "MISMATCH ..." in OUT).  Timings are cut from
# the logs (ms/step, tok/s) and progress lines are not hashed.  Takes a few
# minutes; not part of `make test`.  Run from the repository root.
# Option lists are split into words on purpose.
# shellcheck disable=SC2086
set -u
if [ $# -ne 2 ]; then
    echo "usage: sh tests/same_bytes.sh CLI OUT.txt" >&2
    exit 2
fi
A=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
OUT=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
M=${ATTOGRAD_MPI:+$(cd "$(dirname "$ATTOGRAD_MPI")" && pwd)/$(basename "$ATTOGRAD_MPI")}
ROOT=$(pwd)
TEXT=$ROOT/data/tiny.txt
W=$(mktemp -d "${TMPDIR:-/tmp}/attograd-same.XXXXXX") || exit 1
trap 'rm -rf "$W"' EXIT
trap 'exit 1' INT TERM
cd "$W" || exit 1
: >"$OUT"

# put NAME: the sha256 of standard input, as the line "HASH NAME" of OUT
put() { echo "$(sha256sum | cut -d' ' -f1) $1" >>"$OUT"; }
# run NAME ARGS...: attograd ARGS; its exit status and its stdout without
# timings (none of the progress lines) become lines of OUT (a path in this
# temporary directory, such as info's log_path, written W/)
run() {
    local name=$1; shift
    "$A" "$@" >"$name.stdout" 2>"$name.stderr"
    echo "$name exit $?" >>"$OUT"
    grep -v 'ms/step\|^done: \|^\[\|  threads \|^saved ' "$name.stdout" | LC_ALL=C sed "s|$W/|W/|g" | put "$name.stdout"
}
# hash FILE...: each file's sha256 (a log without its timing columns)
hash() {
    local f
    for f in "$@"; do
        if [ ! -e "$f" ]; then
            echo "missing $f" >>"$OUT"
        elif [ "${f%.csv}" != "$f" ]; then
            cut -d, -f1-5 "$f" | put "$f"
        elif [ "${f%.st}" != "$f" ]; then       # a run's log is recorded by its path in this temporary directory
            LC_ALL=C sed "s|$W/|W/|g" "$f" | put "$f"
        elif [ "${f%.dot}" != "$f" ]; then      # tensors are named by address: number them in order
            awk '{ while (match($0, /0x[0-9a-f]+/)) { a = substr($0, RSTART, RLENGTH); if (!(a in id)) id[a] = n++;
                   $0 = substr($0, 1, RSTART - 1) "T" id[a] substr($0, RSTART + RLENGTH) } print }' "$f" | put "$f"
        else
            put "$f" <"$f"
        fi
    done
}
bf16() { "$A" train --precision bf16 --steps 1 --quiet >/dev/null 2>&1; }

# ---- the README -------------------------------------------------------------
run readme_copy train --save copy.st --log copy.csv
run readme_attn attn --model copy.st --prompt 'gbjdaifc|gbjdaifc' --out attention-copy.svg
run readme_sort train --task sort --optimizer adamw --steps 800 --save sort.st
run readme_sort_sample sample --model sort.st --prompt 210120
run readme_tiny train --text "$TEXT" --optimizer adamw --lr 3e-3 --steps 2000 --schedule cosine --warmup 100 \
    --dropout 0.1 --log tiny.csv --save tiny.st --save-every 200
run readme_tiny_half train --text "$TEXT" --optimizer adamw --lr 3e-3 --steps 1000 --schedule cosine --warmup 100 \
    --dropout 0.1 --log tiny_half.csv --save tiny_half.st
run readme_tiny_resume train --resume tiny_half.st --steps 2000
run readme_tiny_eval eval --model tiny.st --text "$TEXT"
run readme_tiny_sample sample --model tiny.st --prompt "The " --temperature 0.8 --top-k 10 --seed 1
run readme_plot plot --log copy.csv --log tiny.csv --out loss.svg
run readme_graph graph --model copy.st --out step.dot
run readme_graph_text graph --model tiny.st --out tiny.dot --tokens 12
run readme_info info tiny.st
run readme_walkthrough walkthrough
run readme_model train --text "$TEXT" --steps 300 --save model.safetensors
hash copy.st copy.csv attention-copy.svg sort.st tiny.st tiny.csv tiny_half.st loss.svg step.dot tiny.dot model.safetensors

# ---- cli_train.sh's runs -----------------------------------------------------
run copy_sgd train --quiet --seed 1 --save copy_sgd.st
run copy_adamw train --quiet --seed 2 --optimizer adamw --lr 3e-3 --save copy_adamw.st
run reverse train --quiet --seed 1 --task reverse --save reverse.st
run add train --quiet --seed 1 --task add --optimizer adamw --steps 1500 --batch 64 --save add.st
run text_det train --quiet --steps 30 --dropout 0.1 --log-every 1 --eval-every 0 --seed 7 --log det.csv --save det.st
run text_300 train --quiet --text "$TEXT" --optimizer adamw --lr 3e-3 --steps 300 --context 32 --batch 16 \
    --save text300.st --log text300.csv
hash copy_sgd.st copy_adamw.st reverse.st add.st det.csv det.st text300.st text300.csv

# ---- cli_checkpoint.sh's runs ------------------------------------------------
SMALL="--text $TEXT --d-model 8 --heads 2 --layers 1 --context 8 --batch 4 --eval-every 0 --quiet"
run rt_adamw train $SMALL --optimizer adamw --dropout 0.1 --qkv-bias --steps 7 --save rt_a.st
run rt_adamw_again train --resume rt_a.st --save rt_b.st
run rt_sgd train $SMALL --optimizer sgd --momentum 0.9 --dropout 0.1 --qkv-bias --steps 7 --save rt_sgd.st
run rt_init train --init rt_a.st --text "$TEXT" --steps 0 --quiet --save rt_c.st
run rt_eval eval --model rt_a.st --text "$TEXT" --split all
hash rt_a.st rt_b.st rt_sgd.st rt_c.st
for opt in "--optimizer adamw --weight-decay 0.1" "--optimizer sgd --momentum 0.9 --order sequential"; do
    o=${opt##* }
    common="$SMALL $opt --dropout 0.2 --seed 5 --log-every 1"
    run full_$o train $common --steps 12 --save full_$o.st --log full_$o.csv
    run half_$o train $common --steps 6 --save half_$o.st --log half_$o.csv
    run resume_$o train --resume half_$o.st --steps 12 --log-every 1 --eval-every 0 --quiet --save half_$o.st \
        --log half_$o.csv
    hash full_$o.st full_$o.csv half_$o.st half_$o.csv
done
run sched train --text "$TEXT" --d-model 48 --heads 3 --layers 2 --context 32 --batch 4 --optimizer adamw \
    --schedule cosine --warmup 3 --steps 10 --clip 1 --quiet --save sched.st
hash sched.st

# ---- cli_mpi.sh's plain runs: micro-batches ----------------------------------
TINY="--text $TEXT --d-model 16 --heads 2 --layers 1 --context 16 --eval-every 0 --quiet --threads 1"
run mb_whole train $TINY --batch 8 --steps 6 --save mb_whole.st
run mb_one train $TINY --batch 8 --steps 6 --micro-batch 8 --save mb_one.st
run mb_four train $TINY --batch 8 --steps 6 --micro-batch 2 --save mb_four.st
MB="$TINY --batch 8 --micro-batch 2 --optimizer adamw --log-every 1"
run mb_full train $MB --dropout 0.2 --steps 8 --save mb_full.st --log mb_full.csv
run mb_half train $MB --dropout 0.2 --steps 4 --save mb_half.st --log mb_half.csv
run mb_resume train --resume mb_half.st --steps 8 --log-every 1 --eval-every 0 --quiet --log mb_half.csv
hash mb_whole.st mb_one.st mb_four.st mb_full.st mb_full.csv mb_half.st mb_half.csv
COPY="--batch 24 --steps 20 --log-every 5 --eval-every 10 --threads 1"
TXT="--text $TEXT --d-model 32 --heads 2 --layers 2 --context 32 --batch 24 --micro-batch 2 --dropout 0.1
     --optimizer adamw --steps 20 --log-every 1 --eval-every 10 --quiet"
run mb_copy train $COPY --micro-batch 2 --save mb_copy.st --log mb_copy.csv
run mb_text train $TXT --save mb_text.st --log mb_text.csv
run mb_copy_eval eval --model mb_copy.st --batch 24
hash mb_copy.st mb_copy.csv mb_text.st mb_text.csv

# ---- bf16 (cli_bf16.sh, cli_mpi.sh) ------------------------------------------
BF="--text $TEXT --d-model 32 --heads 2 --layers 1 --context 32 --batch 16 --dropout 0.1
    --eval-every 0 --quiet --threads 1 --precision bf16"
BR="--text $TEXT --precision bf16 --d-model 32 --heads 2 --layers 2 --context 16 --batch 8
    --dropout 0.1 --optimizer adamw --eval-every 0 --quiet"
if bf16; then
    run bf_copy train --precision bf16 --seed 1 --quiet --save bf_copy.st
    run bf_text train --text "$TEXT" --optimizer adamw --lr 3e-3 --steps 300 --context 32 --batch 16 \
        --eval-every 0 --log-every 25 --precision bf16 --log bf_text.csv --quiet
    run bf_whole train $BR --steps 40 --save bf_whole.st
    run bf_half train $BR --steps 20 --save bf_half.st
    run bf_resume train --resume bf_half.st --steps 40 --quiet
    run bf_eval eval --model bf_whole.st --text "$TEXT" --precision bf16
    run bf_sample sample --model bf_whole.st --text "$TEXT" --precision bf16 --prompt "The " --tokens 40 --seed 1
    run bf_mb train $BF --steps 10 --micro-batch 4 --save bf_mb.st
    hash bf_copy.st bf_text.csv bf_whole.st bf_half.st bf_mb.st
else
    echo "bf16: not available on this CPU" >>"$OUT"
fi

# ---- valgrind.sh's and cli_viz.sh's runs -------------------------------------
SORT="--task sort --d-model 16 --heads 2 --layers 1 --batch 8 --quiet"
VT="--text $TEXT --d-model 8 --heads 2 --layers 1 --context 8 --batch 4 --quiet"
run vg_sort train $SORT --steps 100 --eval-every 50 --threads 2 --save vg_sort.st
run vg_text train $VT --steps 12 --eval-every 6 --optimizer adamw --dropout 0.1 --qkv-bias --schedule cosine \
    --warmup 2 --save vg_text.st --save-every 4 --log vg_log.csv --threads 1
cp vg_text.st vg_text12.st
run vg_resume train --resume vg_text.st --steps 16 --quiet --eval-every 0 --threads 1
run vg_init train --init vg_sort.st --steps 3 --quiet --eval-every 0 --threads 1 --save vg_init.st
run vg_diverge train $SORT --lr 1e6 --clip 0 --steps 30 --eval-every 0 --threads 1
run viz_copy train --steps 200 --threads 1 --quiet --save viz_copy.st --log viz_copy.csv
run viz_attn attn --model viz_copy.st --prompt 'gbjdaifc|gbjdaifc' --out viz_attn.svg --csv viz_attn.csv
run viz_attn_one attn --model viz_copy.st --prompt 'gbjdaifc|gbjdaifc' --layer 1 --head 0 --out viz_attn1.svg
run viz_sample sample --model viz_copy.st --prompt 'gbjdaifc|' --tokens 8
run viz_eval eval --model viz_copy.st
run models_text train --text "$TEXT" --d-model 8 --heads 2 --layers 1 --context 16 --batch 4 --steps 20 --quiet \
    --save models_text.st
run models_eval_train eval --model models_text.st --text "$TEXT" --split train
run models_sample sample --model models_text.st --text "$TEXT" --prompt "The " --tokens 50 --seed 3
hash vg_sort.st vg_text12.st vg_text.st vg_log.csv vg_init.st viz_copy.st viz_copy.csv viz_attn.svg viz_attn.csv \
    viz_attn1.svg models_text.st

# ---- several ranks: the 1-process bytes --------------------------------------
if [ -n "$M" ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    for n in 1 2 4; do
        mpirun --oversubscribe -np $n "$M" train $COPY --micro-batch 2 --save copy_r$n.st --log mb_copy.csv --quiet \
            >/dev/null 2>&1
        mpirun --oversubscribe -np $n "$M" train $TXT --threads 1 --save text_r$n.st --log mb_text.csv >/dev/null 2>&1
        cmp -s copy_r$n.st mb_copy.st || echo "MISMATCH copy on $n ranks" >>"$OUT"
        cmp -s text_r$n.st mb_text.st || echo "MISMATCH text on $n ranks" >>"$OUT"
        if bf16; then
            mpirun --oversubscribe -np $n "$M" train $BF --steps 10 --micro-batch 4 --save bf_r$n.st >/dev/null 2>&1
            cmp -s bf_r$n.st bf_mb.st || echo "MISMATCH bf16 on $n ranks" >>"$OUT"
        fi
    done
    echo "ranks 1 2 4 compared" >>"$OUT"
fi
echo "$(grep -c . "$OUT") lines written to $OUT"
