"""DDP communication hooks timed (docs/dist.md, "Communication hooks"): under
`oar launch --nproc 2 -- python3 bench/ddp_hooks.py [REPS]` (or mpirun -np 2). One training step (an MLP
256-1024-1024-10, batch 64 per rank, 1 thread per rank, 4 MB buckets) of DDP without a hook, with
allreduce_hook, fp16_compress_hook and bf16_compress_hook (SGD), and of DDP with ZeroRedundancyOptimizer
(Adam) stepping after backward against overlap_with_ddp=True (the step inside hook_with_zero_step).
The variants are interleaved (one step of each per round, a barrier before each), so load drifts hit
them alike; rank 0 prints one JSON object: the medians in ms, their ratios to the hookless step (and
overlapped ZeRO's to plain ZeRO's), the time DDP spent collecting the hooks' Futures after backward,
and the machine's load average before and after."""
import json
import os
import sys
import time

import oar
import oar.distributed as dist
from oar.distributed.algorithms.ddp_comm_hooks import default_hooks as hooks
from oar.distributed.algorithms.ddp_comm_hooks.ddp_zero_hook import hook_with_zero_step
from oar.distributed.optim import ZeroRedundancyOptimizer as ZeRO
from oar.nn.parallel import DistributedDataParallel as DDP

VARIANTS = ("none", "allreduce", "fp16", "bf16", "zero", "zero_overlap")


def make(variant):
    oar.manual_seed(0)
    net = oar.nn.Sequential(oar.nn.Linear(256, 1024), oar.nn.Tanh(), oar.nn.Linear(1024, 1024), oar.nn.Tanh(),
                            oar.nn.Linear(1024, 10))
    ddp = DDP(net, bucket_cap_mb=4)
    overlap = variant == "zero_overlap"
    if variant.startswith("zero"):
        opt = ZeRO(ddp.parameters(), optimizer_class=oar.optim.Adam, lr=1e-3, overlap_with_ddp=overlap)
        if overlap:
            ddp.register_comm_hook(None, hook_with_zero_step(hooks.allreduce_hook, ddp, opt))
    else:
        opt = oar.optim.SGD(ddp.parameters(), lr=1e-3)
        hook = {"allreduce": hooks.allreduce_hook, "fp16": hooks.fp16_compress_hook,
                "bf16": hooks.bf16_compress_hook}.get(variant)
        if hook is not None:
            ddp.register_comm_hook(None, hook)
    x, y = oar.randn(64, 256), oar.randn(64, 10)

    def step():
        opt.zero_grad()
        ((ddp(x) - y) ** 2).mean().backward()
        if not overlap:
            opt.step()

    return ddp, step


def main(reps):
    oar.set_num_threads(1)
    dist.init_process_group("mpi")
    load_before = os.getloadavg()
    runs = {v: make(v) for v in VARIANTS}
    times = {v: [] for v in VARIANTS}
    for r in range(reps + 3):
        for v in VARIANTS:
            dist.barrier()
            t0 = time.perf_counter()
            runs[v][1]()
            if r >= 3:   # warm-up rounds
                times[v].append(time.perf_counter() - t0)
    med = {v: sorted(ts)[len(ts) // 2] * 1e3 for v, ts in times.items()}
    stats = {v: runs[v][0].bucket_stats() for v in VARIANTS}
    if dist.get_rank() == 0:
        print(json.dumps({
            "bench": "ddp_hooks", "ranks": dist.get_world_size(), "threads_per_rank": 1, "reps": reps,
            "model": "MLP 256-1024-1024-10, batch 64 per rank", "buckets": len(stats["none"]["buckets"]),
            "median_ms": {v: round(t, 3) for v, t in med.items()},
            "ratio_to_none": {v: round(med[v] / med["none"], 3) for v in VARIANTS[:4]},
            "zero_overlap_to_zero": round(med["zero_overlap"] / med["zero"], 3),
            "hook_wait_ms_per_step": {v: round(stats[v]["hook_wait_seconds"] * 1e3 / (reps + 3), 3)
                                      for v in VARIANTS if v not in ("none", "zero")},
            "hooks_called_in_backward": {v: stats[v]["launched_in_backward"] for v in VARIANTS},
            "loadavg_before": [round(x, 2) for x in load_before],
            "loadavg_after": [round(x, 2) for x in os.getloadavg()]}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 30)
