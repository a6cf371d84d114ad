# netns_hosts.sh - hosts for multi-host runs on one machine, sourced by
# tests/cli_multihost.sh and tests/bench_multihost.sh: network namespaces
# $P-h0, $P-h1, ... at 10.250.0.1, .2, ... on veth pairs joined by a bridge
# in a namespace $P-sw of their own (the addresses exist on those veths
# only), and an rsh agent through which mpirun starts its daemons there.
# Each host has a disk of its own, as real hosts do: the directory `disk`
# of the caller's directory shows `disks/HOST` to the processes on HOST (a
# bind mount in their mount namespace); everything else is shared.
# The caller sets P (a prefix no one else uses) and works in its own
# directory, where hosts_up writes `hostfile` and `agent.sh`.

# hosts_up N: the switch and N hosts; 1 when something could not be made
hosts_up() {
    ip netns add "$P-sw" && ip -n "$P-sw" link add br0 type bridge && ip -n "$P-sw" link set br0 up || return 1
    : >hostfile
    mkdir -p disk || return 1
    for i in $(seq 0 $(($1 - 1))); do
        ip netns add "$P-h$i" &&
            ip link add "$P-e$i" type veth peer name "$P-p$i" &&
            ip link set "$P-e$i" netns "$P-h$i" && ip link set "$P-p$i" netns "$P-sw" &&
            ip -n "$P-sw" link set "$P-p$i" master br0 && ip -n "$P-sw" link set "$P-p$i" up &&
            ip -n "$P-h$i" link set lo up &&
            ip -n "$P-h$i" addr add "10.250.0.$((i + 1))/24" dev "$P-e$i" &&
            ip -n "$P-h$i" link set "$P-e$i" up || return 1
        mkdir -p "disks/$P-h$i" || return 1
        echo "$P-h$i slots=1" >>hostfile
    done
    # COMMAND on HOST, in its namespace, with its own host name (Open MPI
    # tells hosts apart by name) and its own disk
    cat >agent.sh <<AGENT
#!/bin/sh
host=\$1; shift
exec ip netns exec "\$host" unshare --uts --mount sh -c "mount --bind '$PWD/disks/\$host' '$PWD/disk' && hostname \$host && \$*"
AGENT
    chmod +x agent.sh
}

# hosts_down: every process on the hosts killed, the namespaces removed
hosts_down() {
    local ns pid
    for ns in $(ip netns list | awk '{print $1}' | grep "^$P-"); do
        for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
        ip netns del "$ns" 2>/dev/null
    done
}

# hosts_procs N: how many processes run on the first N hosts
hosts_procs() {
    local n=0 i
    for i in $(seq 0 $(($1 - 1))); do n=$((n + $(ip netns pids "$P-h$i" | wc -l))); done
    echo $n
}

# The flags a real network needs: TCP only, on the cluster's subnet, and
# keepalives on mpirun's own connections so that it notices a host that
# stopped answering within 1 + 1 x 2 s (Open MPI's default: 300 + 20 x 9 s).
NET_FLAGS="--mca btl tcp,self --mca btl_tcp_if_include 10.250.0.0/24 --mca oob_tcp_if_include 10.250.0.0/24
     --mca oob_tcp_keepalive_time 1 --mca oob_tcp_keepalive_intvl 1 --mca oob_tcp_keepalive_probes 2"

# on_hosts N ARGS...: mpirun on host 0 starting ARGS on the first N hosts, one rank each
on_hosts() {
    local n=$1; shift
    head -n "$n" hostfile >"hosts$n"
    # shellcheck disable=SC2086
    timeout 300 ip netns exec "$P-h0" unshare --uts --mount \
        sh -c 'mount --bind "disks/$0" disk && hostname "$0" && exec "$@"' "$P-h0" \
        mpirun --hostfile "hosts$n" -np "$n" --mca plm_rsh_agent "$PWD/agent.sh" $NET_FLAGS "$@"
}
