#!/bin/bash
# cli_multihost.sh - training across hosts over TCP: network namespaces on
# this machine stand for hosts, joined by veth pairs to a bridge in a
# namespace of its own (addresses 10.250.0.0/24 exist on those veths only),
# and mpirun reaches them through an rsh agent that runs `ip netns exec`.
# Checks: 2 and 3 hosts save the checkpoint one process saves, byte for
# byte, with dropout and micro-batches, also when a host's link is slowed
# down (tc tbf) during the run; kill -9 of one rank, a host's link cut, and
# SIGTERM to mpirun each leave a checkpoint of the last completed step, saved
# by the lowest rank still running, that resumes to the unbroken run's bytes; every
# process ends within --mpi-timeout + 10 s, mpirun too; nothing of the test
# is left behind.  Needs root, ip, network namespaces, mpirun and the MPI
# build, or reports itself skipped.  Run from the repository root; ATTOGRAD
# and ATTOGRAD_MPI override the two binaries.
# shellcheck disable=SC2086
A=${ATTOGRAD:-./build/attograd}
M=${ATTOGRAD_MPI:-./build-mpi/attograd}
ROOT=$(pwd)
TEXT=$ROOT/data/tiny.txt
# shellcheck source=tests/harness.sh
. "$(dirname "$0")/harness.sh"

need_binary
case $A in /*) ;; *) A=$ROOT/$A ;; esac
case $M in /*) ;; *) M=$ROOT/$M ;; esac
if ! command -v mpirun >/dev/null 2>&1 || [ ! -x "$M" ]; then
    skip "the multi-host checks: no mpirun or no $M (make MPI=1 builds it)"
    finish
fi
if ! command -v ip >/dev/null 2>&1 || ! command -v unshare >/dev/null 2>&1; then
    skip "the multi-host checks: no ip or unshare (sh tests/install-deps.sh installs iproute2)"
    finish
fi
P=ag$$                                  # namespaces P-sw (the switch), P-h0, P-h1, ...
if ! ip netns add "$P-probe" 2>/dev/null; then
    skip "the multi-host checks: this machine does not let this user make network namespaces (ip netns add)"
    finish
fi
ip netns del "$P-probe"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/attograd-multihost.XXXXXX") || exit 1
# shellcheck source=tests/netns_hosts.sh
. "$ROOT/tests/netns_hosts.sh"
trap 'hosts_down; rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM
cd "$tmp" || exit 1
if ! hosts_up 3; then
    skip "the multi-host checks: could not make 3 namespace hosts joined by veth pairs"
    finish
fi
hosts=3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
on() {
    local n=$1; shift
    on_hosts "$n" "$M" "$@"
}

# ---- the same bytes as one process -----------------------------------------------
RUN="--text $TEXT --d-model 32 --heads 2 --layers 1 --context 16 --batch 12 --micro-batch 2 --dropout 0.1
     --optimizer adamw --eval-every 0 --quiet --threads 1"
"$A" train $RUN --steps 6 --save one.st >/dev/null 2>&1
for n in 2 3; do
    on $n train $RUN --steps 6 --save hosts$n.st >hosts$n.out 2>&1
    rc=$?
    check "$n hosts over TCP: exit 0 (exit $rc: $(grep -m1 -v '^ *$' hosts$n.out))" test $rc -eq 0
    check "$n hosts over TCP save the checkpoint one process saves, with dropout and micro-batches" \
        cmp -s one.st hosts$n.st
done
# a link slowed to 20 Mbit/s (a token bucket on host 1's side) a few steps
# into the run: the exchange takes longer, the bytes are the same
"$A" train $RUN --steps 60 --save slow1.st --log "$tmp/slow.csv" --log-every 1 >/dev/null 2>&1
rm -f slow.csv
on 2 train $RUN --steps 60 --save slow2.st --log "$tmp/slow.csv" --log-every 1 >slow.out 2>&1 &
slow=$!
for _ in $(seq 300); do [ "$(cat slow.csv 2>/dev/null | wc -l)" -gt 5 ] && break; sleep 0.05; done
running=$(kill -0 $slow 2>/dev/null && echo 1)
ip netns exec "$P-h1" tc qdisc add dev "$P-e1" root tbf rate 20mbit burst 32kb latency 100ms
limited=$?
wait $slow
rc=$?
# the token bucket held packets back (overlimits) while the run went on
held=$(ip netns exec "$P-h1" tc -s qdisc show dev "$P-e1" | sed -nE 's/.*overlimits ([0-9]+).*/\1/p')
ip netns exec "$P-h1" tc qdisc del dev "$P-e1" root 2>/dev/null
if [ $limited -ne 0 ]; then
    skip "a slowed link: tc could not add a tbf limit here"
else
    check "a link slowed during the run: the limit came while it ran and held packets back ($held times)" \
        eval '[ -n "$running" ] && [ "${held:-0}" -gt 0 ]'
    check "a link slowed during the run: exit 0 (exit $rc: $(grep -m1 -v '^ *$' slow.out))" test $rc -eq 0
    check "a link slowed during the run: the checkpoint one process saves" cmp -s slow1.st slow2.st
fi

STEPS=400
# (logging where the faulty runs log: a checkpoint records its log's path)
"$A" train $RUN --steps $STEPS --save unbroken.st --log "$tmp/fault.csv" >/dev/null 2>&1

# ---- faults ----------------------------------------------------------------------
# start N ARGS: a long run on N hosts in the background, after its first steps
start() {
    local n=$1; shift
    rm -f disks/*/fault.st fault.st fault.csv
    on "$n" train $RUN --steps $STEPS --mpi-timeout 3 --save "$tmp/disk/fault.st" --log "$tmp/fault.csv" --log-every 1 \
        "$@" >fault.out 2>&1 &
    mpid=$!
    for _ in $(seq 300); do [ "$(cat fault.csv 2>/dev/null | wc -l)" -gt 10 ] && break; sleep 0.1; done
}
# rank_pid R: the pid of rank R, on whichever host
rank_pid() {
    local ns p
    for ns in $(seq 0 $((hosts - 1))); do
        for p in $(ip netns pids "$P-h$ns"); do
            if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1"; then
                echo "$p"
                return
            fi
        done
    done
}
# ended LABEL: mpirun and every process on the hosts gone within 3 + 10 s
ended() {
    local t0=$SECONDS left=0
    for _ in $(seq 130); do kill -0 "$mpid" 2>/dev/null || break; sleep 0.1; done
    wait "$mpid"
    local rc=$?
    for _ in $(seq 20); do
        left=$(hosts_procs $hosts)
        [ "$left" -eq 0 ] && break
        sleep 0.1
    done
    check "$1: mpirun ended non-zero within --mpi-timeout + 10 s (exit $rc after $((SECONDS - t0)) s)" \
        eval '[ $rc -ne 0 ] && [ $rc -ne 124 ]'
    check "$1: no process left on the hosts ($left)" test $left -eq 0
}
# resumes LABEL: the step saved on host 0's disk, named in one line, resumes
# in one process to the unbroken run's bytes
resumes() {
    local step
    cp "disks/$P-h0/fault.st" fault.st 2>/dev/null
    step=$("$A" info fault.st 2>/dev/null | sed -nE 's/.*step ([0-9]+),.*/\1/p')
    check "$1: one line says what happened and the step saved ($(grep -m1 'saved .* at step' fault.out))" \
        eval '[ -n "$step" ] && [ "$(grep -c "^attograd train: rank [0-9]: .*saved .*fault.st at step $step," fault.out)" -ge 1 ]'
    check "$1: a checkpoint of a step taken (step $step of $STEPS)" eval '[ -n "$step" ] && [ "$step" -gt 0 ] && [ "$step" -lt $STEPS ]'
    "$A" train --resume fault.st --steps $STEPS --eval-every 0 --quiet --threads 1 >resume.out 2>&1
    check "$1: step $step resumed in one process gives the unbroken run's bytes" cmp -s unbroken.st fault.st
}

start 3
victim=$(rank_pid 1)
check "kill -9: rank 1 found" test -n "$victim"
kill -9 "$victim"
ended "kill -9 of rank 1 of 3"
resumes "kill -9 of rank 1 of 3"
check "kill -9: rank 0 saved" grep -q "^attograd train: rank 0: .*saved" fault.out

start 3
ip -n "$P-h2" link set "$P-e2" down
ended "host 2's link cut"
resumes "host 2's link cut"
# host 2, alone on its side of the cut, saves on its own disk what it
# completed, unless its daemon ended it first; its line cannot reach mpirun
if [ -e "disks/$P-h2/fault.st" ]; then
    other=$("$A" info "disks/$P-h2/fault.st" 2>/dev/null | sed -nE 's/.*step ([0-9]+),.*/\1/p')
    check "host 2's link cut: host 2's own save is a whole checkpoint of a step taken (step $other)" \
        eval '[ -n "$other" ] && [ "$other" -gt 0 ] && [ "$other" -lt $STEPS ]'
fi
# SIGTERM to mpirun (what a batch system sends at the end of a job): every
# rank stops at one step, rank 0 saves it on its disk, and it resumes
ip -n "$P-h2" link set "$P-e2" up
start 3
launcher=""
for p in $(ip netns pids "$P-h0"); do [ "$(cat /proc/$p/comm 2>/dev/null)" = mpirun ] && launcher=$p; done
check "SIGTERM to mpirun: mpirun found on host 0" test -n "$launcher"
kill -TERM "$launcher"
ended "SIGTERM to mpirun"
cp "disks/$P-h0/fault.st" fault.st 2>/dev/null
step=$("$A" info fault.st 2>/dev/null | sed -nE 's/.*step ([0-9]+),.*/\1/p')
check "SIGTERM to mpirun: a checkpoint of a step taken (step $step of $STEPS)" \
    eval '[ -n "$step" ] && [ "$step" -gt 0 ] && [ "$step" -lt $STEPS ]'
check "SIGTERM to mpirun: one line names the step saved ($(grep -m1 -E 'terminated at step|saved .* at step' fault.out))" \
    grep -qE "terminated at step $step: stopping and saving|saved .*fault.st at step $step," fault.out
"$A" train --resume fault.st --steps $STEPS --eval-every 0 --quiet --threads 1 >resume.out 2>&1
check "SIGTERM to mpirun: step $step resumed in one process gives the unbroken run's bytes" cmp -s unbroken.st fault.st
finish
