# Sourced by the kill tests (train_dist.sh, train_ps.sh). rank_pid JOB RANK prints the process id
# of MPI rank RANK's program in a job started in the background as JOB (oar train --nproc: oar
# launch, then mpirun, then each rank's `oar launch-rank` with the program below it; or the ranks
# straight below JOB), or nothing when none is found.
rank_pid() {
  for p in $(pgrep -P "$(pgrep -P "$1" | head -1)" 2>/dev/null) $(pgrep -P "$1"); do
    if tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2"; then
      if tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null | grep -q ' launch-rank '; then p=$(pgrep -P "$p" | head -1); fi
      [ -n "$p" ] && echo "$p"
      return
    fi
  done
}
# kill_rank JOB RANK: SIGKILLs that rank and sets killed_at (ns since the epoch); fails, killing
# nothing, when the rank is not found.
kill_rank() {
  victim=$(rank_pid "$1" "$2")
  [ -n "$victim" ] || return 1
  killed_at=$(date +%s%N)
  kill -9 "$victim"
}
