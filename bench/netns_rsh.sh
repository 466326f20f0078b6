#!/bin/sh
# The rsh agent mpirun uses across bench/netns_hosts.sh's hosts: called as an ssh would be
# (options, a host, then the command as words), it runs the command in the namespace that owns
# the address, under its own hostname, as ssh would run it on that host. The set's prefix comes
# from OAR_NETNS (exported by netns_hosts.sh; mpirun passes its environment to the agent).
while [ $# -gt 0 ]; do
  case "$1" in
    -*) shift ;;  # ssh-style options (-x, -o ...) mean nothing here
    *) break ;;
  esac
done
host=$1
shift
case "$host" in
  10.77.0.*) k=$((${host##*.} - 1)) ;;
  oar-h*) k=${host#oar-h} ;;
  *) echo "netns_rsh: expected a host of bench/netns_hosts.sh (10.77.0.K or oar-hK), got '$host'" >&2; exit 2 ;;
esac
exec ip netns exec "${OAR_NETNS:-oar}-h$k" unshare --uts sh -c "hostname oar-h$k; $*"
