#!/usr/bin/env bash
# Several hosts on one machine, for distributed runs over a real network stack: N network
# namespaces <P>-h0..<P>-h<N-1> (10.77.0.1..N/24, each with its own hostname oar-hK) plugged into
# one switch (a bridge inside namespace <P>-sw, so the machine's own network is never touched), an
# optional rate limit per link (tc tbf) and added delay (tc netem, when the kernel has it), and
# mpirun across them with MPI over TCP only. Needs root and iproute2.
# P, the set's prefix, is $OAR_NETNS (default "oar"): runs side by side need their own (`job`
# picks a fresh one per run), since every set uses the same addresses inside its own switch.
#
#   bench/netns_hosts.sh up N [--rate 1gbit] [--delay 1ms]   make the hosts
#   bench/netns_hosts.sh mpirun N -- MPIRUN_ARGS...          mpirun from host 0 over the N hosts
#   bench/netns_hosts.sh exec K -- CMD...                    run CMD on host K, with Open MPI told
#                                                            (OMPI_MCA_*) to reach the other hosts
#                                                            over their links: `oar launch --hosts
#                                                            10.77.0.1:1,10.77.0.2:1` works there
#   bench/netns_hosts.sh down                                remove the set's namespaces
#   bench/netns_hosts.sh job N [--rate R] [--delay D] -- CMD...
#                                                            up with a fresh prefix, CMD on host 0
#                                                            (as exec), down (also on failure)
#   bench/netns_hosts.sh selftest                            a job of 3 hosts running one MPI
#                                                            allreduce (exit 77: cannot run here)
# mpirun starts its daemons on the other hosts through bench/netns_rsh.sh (an rsh agent that
# enters the namespace of the address it is given) and keeps both its own channel and the
# message transport on 10.77.0.0/24; shared memory is off, since the ranks are "remote".
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
NET=10.77.0
export OAR_NETNS=${OAR_NETNS:-oar}
if ! [[ "$OAR_NETNS" =~ ^[a-z][a-z0-9]{0,11}$ ]]; then
  echo "netns_hosts: expected OAR_NETNS of 1 to 12 lower-case letters and digits, got '$OAR_NETNS'" >&2
  exit 2
fi

ns_of() { echo "$OAR_NETNS-h$1"; }

down() { # this set only: another run's hosts are not ours to remove
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$OAR_NETNS-(h[0-9]+|sw)\$" || true); do
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
  if ip netns list 2>/dev/null | grep -qE "^$OAR_NETNS-sw( |\$)"; then
    echo "netns_hosts: the set '$OAR_NETNS' exists already (another run's?); pick another OAR_NETNS or run 'down'" >&2
    exit 2
  fi
  local sw="$OAR_NETNS-sw"
  ip netns add "$sw"
  ip -n "$sw" link add br0 type bridge
  ip -n "$sw" link set br0 up
  for ((k = 0; k < n; k++)); do
    local ns
    ns=$(ns_of "$k")
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip link add eth0 netns "$ns" type veth peer name "port$k" netns "$sw"
    ip -n "$sw" link set "port$k" master br0
    ip -n "$sw" link set "port$k" up
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

# Open MPI's settings for a job started on one of the hosts (mpirun reads OMPI_MCA_*): daemons
# through the rsh agent, its channel and the messages over TCP on the hosts' links only.
mca_env() {
  export OMPI_MCA_plm_rsh_agent="$here/netns_rsh.sh" OMPI_MCA_plm_rsh_no_tree_spawn=1 \
    OMPI_MCA_oob_tcp_if_include="$NET.0/24" OMPI_MCA_btl=tcp,self OMPI_MCA_btl_tcp_if_include="$NET.0/24" \
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
}

on_host() { # on_host K CMD...: CMD in host K's namespace, under its hostname
  local k=$1
  shift
  mca_env
  ip netns exec "$(ns_of "$k")" unshare --uts sh -c "hostname oar-h$k; exec \"\$@\"" sh "$@"
}

run_mpirun() {
  local n=$1
  shift
  [ "${1:-}" = "--" ] && shift
  on_host 0 mpirun --oversubscribe --host "$(hosts_arg "$n" 8)" "$@"
}

job() { # job N [--rate R] [--delay D] -- CMD...
  local n=$1 opts=()
  shift
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do opts+=("$1"); shift; done
  [ "${1:-}" = "--" ] && shift
  OAR_NETNS="oar$$$(printf '%04d' $((RANDOM % 10000)))"
  OAR_NETNS=${OAR_NETNS:0:12}
  trap down EXIT
  up "$n" "${opts[@]}"
  on_host 0 "$@"
}

selftest() {
  if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null || ! ip netns add "oarprobe$$" 2>/dev/null; then
    echo "netns_hosts selftest: skipped: needs root, iproute2 and permission to make network namespaces"
    exit 77
  fi
  ip netns del "oarprobe$$"
  if ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then
    echo "netns_hosts selftest: skipped: needs MPI (mpicc, mpirun: apt-get install libopenmpi-dev openmpi-bin)"
    exit 77
  fi
  selftest_dir=$(mktemp -d)
  mpicc -O2 -o "$selftest_dir/netns_check" "$here/netns_check.c"
  # 4 MB allreduced over 200 Mbit/s links cannot take less than the bytes a rank must send
  local rc=0
  ( job 3 --rate 200mbit -- mpirun --oversubscribe --host "$(hosts_arg 3 8)" -np 3 --map-by node \
      "$selftest_dir/netns_check" 4194304 200 ) || rc=$?
  rm -rf "$selftest_dir"
  return $rc
}

cmd=${1:-}
shift || true
case "$cmd" in
  up) up "$@" ;;
  down) down ;;
  mpirun) run_mpirun "$@" ;;
  exec)
    k=$1; shift; [ "${1:-}" = "--" ] && shift
    on_host "$k" "$@" ;;
  job) job "$@" ;;
  selftest) selftest ;;
  *) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
