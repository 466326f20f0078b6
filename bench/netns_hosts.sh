#!/usr/bin/env bash
# Several hosts on one machine, for distributed runs over a real network stack: N network
# namespaces oar-h0..oar-h<N-1> (10.77.0.1..N/24, each with its own hostname) plugged into one
# switch (a bridge inside namespace oar-sw, so the machine's own network is never touched), an
# optional rate limit per link (tc tbf) and added delay (tc netem, when the kernel has it), and
# mpirun across them with MPI over TCP only. Needs root and iproute2.
#
#   bench/netns_hosts.sh up N [--rate 1gbit] [--delay 1ms]   make the hosts
#   bench/netns_hosts.sh mpirun N -- MPIRUN_ARGS...          mpirun from oar-h0 over the N hosts
#   bench/netns_hosts.sh exec K -- CMD...                    run CMD on host K
#   bench/netns_hosts.sh down                                remove every oar-h* and oar-sw
#   bench/netns_hosts.sh selftest                            up 3, an MPI job across them, down
#                                                            (exit 77: cannot run here)
# mpirun starts its daemons on the other hosts through bench/netns_rsh.sh (an rsh agent that
# enters the namespace of the address it is given) and keeps both its own channel and the
# message transport on 10.77.0.0/24; shared memory is off, since the ranks are "remote".
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
NET=10.77.0

ns_of() { echo "oar-h$1"; }

down() {
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^oar-(h[0-9]+|sw)$' || true); do
    ip netns del "$ns"
  done
}

up() {
  local n=$1 rate="" delay=""
  shift
  while [ $# -gt 0 ]; do
    case "$1" in
      --rate) rate=$2; shift 2 ;;
      --delay) delay=$2; shift 2 ;;
      *) echo "netns_hosts: unknown option '$1'; expected --rate RATE or --delay TIME" >&2; exit 2 ;;
    esac
  done
  if ! [[ "$n" =~ ^[0-9]+$ ]] || [ "$n" -lt 2 ] || [ "$n" -gt 8 ]; then
    echo "netns_hosts: expected 2 to 8 hosts, got '$n'" >&2
    exit 2
  fi
  down
  ip netns add oar-sw
  ip -n oar-sw link add br0 type bridge
  ip -n oar-sw link set br0 up
  for ((k = 0; k < n; k++)); do
    local ns
    ns=$(ns_of "$k")
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip link add eth0 netns "$ns" type veth peer name "port$k" netns oar-sw
    ip -n oar-sw link set "port$k" master br0
    ip -n oar-sw link set "port$k" up
    ip -n "$ns" addr add "$NET.$((k + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
    shape "$ns" "$rate" "$delay"
  done
  echo "netns_hosts: $n hosts up: $(for ((k = 0; k < n; k++)); do printf '%s=%s.%d ' "$(ns_of $k)" $NET $((k + 1)); done)" \
       "rate ${rate:-unlimited}, delay ${delay:-none}"
}

# The link's egress: tbf for a rate, netem for a delay (with its own rate when both are asked).
shape() {
  local ns=$1 rate=$2 delay=$3
  if [ -n "$delay" ]; then
    if ! ip netns exec "$ns" tc qdisc add dev eth0 root netem delay "$delay" ${rate:+rate "$rate"} 2>/dev/null; then
      echo "netns_hosts: this kernel has no netem qdisc, so --delay cannot be applied; run without it" >&2
      down
      exit 2
    fi
  elif [ -n "$rate" ]; then
    ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$rate" burst 256kb latency 100ms
  fi
}

hosts_arg() { # 10.77.0.1:S,10.77.0.2:S,...
  local n=$1 slots=$2 out=""
  for ((k = 0; k < n; k++)); do out="$out${out:+,}$NET.$((k + 1)):$slots"; done
  echo "$out"
}

run_mpirun() {
  local n=$1
  shift
  [ "${1:-}" = "--" ] && shift
  ip netns exec "$(ns_of 0)" unshare --uts sh -c 'hostname oar-h0; exec "$@"' sh \
    mpirun --allow-run-as-root --oversubscribe \
    --mca plm_rsh_agent "$here/netns_rsh.sh" --mca plm_rsh_no_tree_spawn 1 \
    --mca oob_tcp_if_include "$NET.0/24" --mca btl tcp,self --mca btl_tcp_if_include "$NET.0/24" \
    --host "$(hosts_arg "$n" 8)" "$@"
}

selftest() {
  if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null || ! ip netns add oar-probe 2>/dev/null; then
    echo "netns_hosts selftest: skipped: needs root, iproute2 and permission to make network namespaces"
    exit 77
  fi
  ip netns del oar-probe
  if ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then
    echo "netns_hosts selftest: skipped: needs MPI (mpicc, mpirun: apt-get install libopenmpi-dev openmpi-bin)"
    exit 77
  fi
  selftest_dir=$(mktemp -d)
  trap 'down; rm -rf "$selftest_dir"' EXIT
  mpicc -O2 -o "$selftest_dir/netns_check" "$here/netns_check.c"
  up 3 --rate 200mbit
  # 4 MB allreduced over 200 Mbit/s links cannot take less than the bytes a rank must send
  run_mpirun 3 -- -np 3 --map-by node "$selftest_dir/netns_check" 4194304 200
}

cmd=${1:-}
shift || true
case "$cmd" in
  up) up "$@" ;;
  down) down ;;
  mpirun) run_mpirun "$@" ;;
  exec)
    k=$1; shift; [ "${1:-}" = "--" ] && shift
    ip netns exec "$(ns_of "$k")" "$@" ;;
  selftest) selftest ;;
  *) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
