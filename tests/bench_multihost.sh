#!/bin/bash
# bench_multihost.sh - `make bench-multihost`: the README's model of the
# gradient exchange, t_c = bytes / b + 2 (N-1) alpha, against a training
# step measured on 2 network-namespace hosts (tests/netns_hosts.sh) whose
# links tc limits to a bandwidth b and a one-way delay alpha (netem; a
# kernel without netem gets the bandwidth alone, from a token bucket).  For
# each model and link: the bytes each rank sends per step, the model's t_c,
# the time measured in the exchange, and the step predicted (the step
# measured without a limit, plus t_c) against the step measured.  Then the
# overlap of the exchange with the backward pass: the medium model's step
# with the exchange after backward (--overlap 0) and during it (1), on an
# unlimited link and at 1 Gbit/s, with the weights' checksum of each (the
# same bits).  Needs root, ip, tc, network namespaces and Open MPI, or says
# why it is skipped.
# Usage: bash tests/bench_multihost.sh [small|medium|overlap]...
# Environment: BENCH_STEPS (timed steps; default: bench_train's).
cd "$(dirname "$0")/.." || exit 1
ROOT=$(pwd)
configs=${*:-small medium overlap}
for tool in mpicc mpirun ip tc unshare; do
    if ! command -v $tool >/dev/null 2>&1; then
        echo "bench-multihost: skipped: no $tool (sh tests/install-deps.sh installs openmpi-bin, libopenmpi-dev, iproute2)"
        exit 0
    fi
done
P=agb$$
if ! ip netns add "$P-probe" 2>/dev/null; then
    echo "bench-multihost: skipped: this user cannot make network namespaces (ip netns add)"
    exit 0
fi
ip netns del "$P-probe"
sh tests/bench_mpi.sh build || exit 1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/attograd-benchhosts.XXXXXX") || exit 1
# shellcheck source=tests/netns_hosts.sh
. "$ROOT/tests/netns_hosts.sh"
trap 'hosts_down; rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM
cd "$tmp" || exit 1
steps=${BENCH_STEPS:+--steps $BENCH_STEPS}
calc() { awk "BEGIN { print $1 }"; }
hosts_up 2 || { echo "bench-multihost: could not make 2 namespace hosts" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# limit RATE DELAY BYTES/S: every host's link sends at RATE after DELAY
# (netem on each host's side of its veth: one way from host to host is one
# DELAY).  A kernel without netem (sch_netem) gets the rate alone, from a
# token bucket (tbf, its burst 1 ms of the rate), and the delay is left out
# of the model too.
if ip netns exec "$P-h0" tc qdisc add dev lo root netem delay 1ms 2>/dev/null; then
    netem=1
    ip netns exec "$P-h0" tc qdisc del dev lo root
else
    netem=0
fi
limit() {
    local i burst
    for i in 0 1; do
        ip netns exec "$P-h$i" tc qdisc del dev "$P-e$i" root 2>/dev/null
        [ "$1" = none ] && continue
        if [ $netem = 1 ]; then
            ip netns exec "$P-h$i" tc qdisc add dev "$P-e$i" root netem rate "$1" delay "$2" limit 100000
        else
            burst=$(calc "$3 / 8 / 1000 < 32768 ? 32768 : int($3 / 8 / 1000)")
            ip netns exec "$P-h$i" tc qdisc add dev "$P-e$i" root tbf rate "$1" burst "$burst" latency 100ms
        fi || exit 1
    done
}

# measure CONFIG [OVERLAP]: "ms/step comm-ms/step sent-MB/step weights" of 2 ranks x 1 thread, micro-batches
# of half the batch, the exchange overlapped with backward (1, the default) or after it (0)
measure() {
    local half
    case $1 in small) half=6 ;; medium) half=8 ;; esac
    # shellcheck disable=SC2086
    on_hosts 2 --bind-to none "$ROOT/build-mpi/bench_mpi" --threads 1 --micro-batch $half --overlap "${2:-1}" $steps \
        "$1" 2>/dev/null |
        sed -nE 's/.*ms\/step +([0-9.]+) +comm ms\/step +([0-9.]+) +sent MB\/step +([0-9.]+).*weights ([0-9a-f]+).*/\1 \2 \3 \4/p'
}
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); $(mpirun --version | head -n 1)"
if [ $netem = 1 ]; then
    echo "2 hosts (network namespaces, veth; netem rate and delay on each host's side), 1 rank x 1 thread each"
else
    echo "2 hosts (network namespaces, veth; this kernel has no netem: the rate alone, by tbf; alpha = 0), 1 rank x 1 thread each"
fi
printf '%-7s %-18s %9s %11s %12s %13s %13s %7s\n' model link "MB/step" "t_c model" "t_c measured" \
    "step predicted" "step measured" "off"
for c in $configs; do
    case $c in small | medium) ;; overlap) continue ;;
    *) echo "bench_multihost.sh: '$c' is not a config (small, medium, overlap)" >&2; exit 2 ;; esac
    limit none
    read -r base base_comm mb _ <<<"$(measure "$c")"
    [ -n "$base" ] || { echo "bench-multihost: the $c run failed" >&2; exit 1; }
    compute=$(calc "$base - $base_comm")
    printf '%-7s %-18s %9.2f %11s %12.1f %13s %13.1f %7s\n' "$c" "unlimited" "$mb" "-" "$base_comm" "-" "$base" "-"
    for link in "10gbit 50us 10e9 50e-6" "1gbit 500us 1e9 500e-6" "100mbit 5ms 100e6 5e-3"; do
        set -- $link
        limit "$1" "$2" "$3"
        [ $netem = 1 ] || set -- "$1" "" "$3" 0
        read -r ms comm mb _ <<<"$(measure "$c")"
        [ -n "$ms" ] || { echo "bench-multihost: the $c run on $1 failed" >&2; exit 1; }
        # t_c = bytes / b + 2 (N-1) alpha with N = 2, in ms
        tc_ms=$(calc "$mb * 1e6 * 8 / $3 * 1e3 + 2 * $4 * 1e3")
        pred=$(calc "$compute + $tc_ms")
        off=$(calc "($ms - $pred) / $pred * 100")
        printf '%-7s %-18s %9.2f %11.1f %12.1f %13.1f %13.1f %6.0f%%\n' "$c" "$1${2:+, $2}" "$mb" "$tc_ms" "$comm" \
            "$pred" "$ms" "$off"
    done
done

# The overlap: the same steps with the exchange after backward and during it,
# alternated BENCH_REPS times (default 3; the median of each), so that a
# change of load on the machine touches both alike.
case " $configs " in *" overlap "*) ;; *) exit 0 ;; esac
reps=${BENCH_REPS:-3}
median() { tr ' ' '\n' | grep . | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
echo
echo "overlap of the exchange with the backward pass: medium, 2 hosts x 1 rank x 1 thread, ms/step (median of"
echo "$reps runs each, alternated); waiting: the part of the step spent waiting for the exchange after backward"
printf '%-12s %12s %15s %13s %16s %7s %s\n' link "after: step" "after: waiting" "during: step" "during: waiting" \
    "saved" "same weights"
for link in "none" "1gbit 500us 1e9"; do
    set -- $link
    limit "$1" "${2:-}" "${3:-0}"
    off_ms="" off_comm="" on_ms="" on_comm="" same=yes
    for _ in $(seq "$reps"); do
        read -r a b _ wa <<<"$(measure medium 0)"
        read -r c d _ wc <<<"$(measure medium 1)"
        [ -n "$a" ] && [ -n "$c" ] || { echo "bench-multihost: the overlap runs on $1 failed" >&2; exit 1; }
        off_ms="$off_ms $a" off_comm="$off_comm $b" on_ms="$on_ms $c" on_comm="$on_comm $d"
        [ "$wa" = "$wc" ] || same=no
    done
    a=$(echo "$off_ms" | median) b=$(echo "$off_comm" | median) c=$(echo "$on_ms" | median) d=$(echo "$on_comm" | median)
    printf '%-12s %12.1f %15.1f %13.1f %16.1f %6.0f%% %s\n' "$([ "$1" = none ] && echo unlimited || echo "$1")" \
        "$a" "$b" "$c" "$d" "$(calc "($a - $c) / $a * 100")" "$same"
done
