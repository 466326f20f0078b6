#!/usr/bin/env python3
"""CPU seconds per training step at 1 thread: oar static, oar eager and PyTorch eager, interleaved.

On a machine shared with other jobs a step's wall time measures the neighbours as much as the
code (bench/compare.py then reports the load). A single-threaded process's CPU time counts
only the cycles it was given, so it survives time slicing; what it still feels is the caches
the neighbours evict. Each figure is the difference between two runs of the same process
with SHORT and LONG timed steps, divided by LONG - SHORT: start-up, model set-up and warm-up
cancel. Per repetition the three run back to back; the table gives the median over
repetitions and the spread (min-max). One thread only: at two threads, CPU time says nothing
of how long the step took.

--cap avx2|generic holds both sides to one instruction set (bench/compare.py's CAPS).
Prints one JSON object per line on stdout and a Markdown table on stderr.
Usage: bench/cpu_time_compare.py [--build build] [--shared ../shared] [--reps 3] [--cap avx2]
                                 [--workloads tiny mlp ...]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import CAPS, CAP_NEEDS, TORCH_NAME, cpu_facts, torch_capability  # noqa: E402

# (short, long) timed steps: the long run adds about a CPU second or more of steps
STEPS = {"tiny": (200, 5200), "mlp": (20, 420), "lenet": (20, 820), "resnet20": (3, 13),
         "gpt-mini": (2, 8), "lstm-lm": (3, 23)}


def cpu_seconds(cmd):
    """User + system CPU seconds of the process cmd (all its threads); None if it failed."""
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.stderr.write(f"cpu_time_compare: {' '.join(cmd)} failed: {err.strip()[-300:]}\n")
        return None
    return ru.ru_utime + ru.ru_stime


def per_step(make_cmd, workload):
    lo, hi = STEPS[workload]
    a, b = cpu_seconds(make_cmd(lo)), cpu_seconds(make_cmd(hi))
    return (b - a) / (hi - lo) * 1e3 if a is not None and b is not None else None


def oar_cmd(build, workload, mode):
    return lambda steps: [os.path.join(build, "oar"), "bench", "--workload", workload, "--mode", mode,
                          "--threads", "1", "--steps", str(steps), "--json"]


def torch_cmd(shared, workload, out):
    return lambda steps: ["/usr/bin/python3", os.path.join(shared, "bench", "torch_workloads.py"), "--workload",
                          TORCH_NAME.get(workload, workload), "--threads", "1", "--steps", str(steps), "--out", out]


def summary(xs):
    xs = [x for x in xs if x is not None]
    return (statistics.median(xs), min(xs), max(xs)) if xs else (None, None, None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--shared", default=os.environ.get("OAR_SHARED_DIR", "../shared"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--workloads", nargs="+", default=list(STEPS), choices=list(STEPS))
    ap.add_argument("--cap", choices=sorted(CAPS), help="hold oar and PyTorch to this instruction set")
    a = ap.parse_args()
    if not os.path.exists(os.path.join(a.shared, "bench", "torch_workloads.py")):
        sys.exit(f"cpu_time_compare: {a.shared}/bench/torch_workloads.py not found; pass --shared DIR")
    cpu, flags = cpu_facts()
    if a.cap:
        missing = CAP_NEEDS[a.cap] - flags
        if missing:
            sys.exit(f"cpu_time_compare: --cap {a.cap} needs {', '.join(sorted(missing))}, which this CPU ({cpu}) lacks")
        os.environ.update(CAPS[a.cap])
    setting = {"cap": a.cap or "native", "cpu": cpu, "torch_cpu_capability": torch_capability()}
    with tempfile.NamedTemporaryFile(suffix=".jsonl") as f:
        rows = []
        for w in a.workloads:
            runs = {"static": [], "eager": [], "torch": []}
            for rep in range(a.reps):
                sys.stderr.write(f"\r{w}: repetition {rep + 1}/{a.reps} ")
                sys.stderr.flush()
                runs["static"].append(per_step(oar_cmd(a.build, w, "static"), w))
                runs["eager"].append(per_step(oar_cmd(a.build, w, "eager"), w))
                runs["torch"].append(per_step(torch_cmd(a.shared, w, f.name), w))
            sys.stderr.write("\r" + " " * 40 + "\r")
            s, e, t = (summary(runs[k]) for k in ("static", "eager", "torch"))
            row = {"workload": w, "threads": 1, "reps": a.reps, **setting,
                   "oar_static_cpu_ms": s[0], "oar_static_spread": [s[1], s[2]],
                   "oar_eager_cpu_ms": e[0], "oar_eager_spread": [e[1], e[2]],
                   "torch_cpu_ms": t[0], "torch_spread": [t[1], t[2]],
                   "ratio_torch_over_static": t[0] / s[0] if t[0] and s[0] else None,
                   "ratio_torch_over_eager": t[0] / e[0] if t[0] and e[0] else None}
            rows.append(row)
            print(json.dumps(row), flush=True)
    fmt = lambda x, p: "-" if x is None else format(x, p)
    sys.stderr.write(f"CPU: {cpu}; cap: {setting['cap']} (PyTorch ATen at {setting['torch_cpu_capability']}); "
                     "CPU ms per step at 1 thread, median [min-max]\n"
                     "| workload | oar static | oar eager | torch | torch/static | torch/eager |\n|---|---|---|---|---|---|\n")
    for r in rows:
        cell = lambda k, sp: f"{fmt(r[k], '.3g')} [{fmt(r[sp][0], '.3g')}–{fmt(r[sp][1], '.3g')}]"
        sys.stderr.write(f"| {r['workload']} | {cell('oar_static_cpu_ms', 'oar_static_spread')} | "
                         f"{cell('oar_eager_cpu_ms', 'oar_eager_spread')} | {cell('torch_cpu_ms', 'torch_spread')} | "
                         f"{fmt(r['ratio_torch_over_static'], '.2f')} | {fmt(r['ratio_torch_over_eager'], '.2f')} |\n")


if __name__ == "__main__":
    main()
