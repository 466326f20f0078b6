"""ZeroRedundancyOptimizer against the plain optimizer, both under DDP (docs/dist.md,
"ZeroRedundancyOptimizer"): optimizer state bytes per rank and the time of a training step and of
optimizer.step() alone (median over the steps after 10 of warm-up), printed as one JSON line per configuration by rank 0.

    mpirun -np 2 python3 bench/zero.py [HIDDEN [LAYERS [STEPS]]]     (PYTHONPATH=build/python)
"""
import json
import statistics
import sys
import time

import numpy as np

import oar
import oar.distributed as dist
from oar.distributed.optim import ZeroRedundancyOptimizer
from oar.nn.parallel import DistributedDataParallel as DDP


def model(hidden, layers):
    oar.manual_seed(0)
    mods = []
    for _ in range(layers):
        mods += [oar.nn.Linear(hidden, hidden), oar.nn.Tanh()]
    return oar.nn.Sequential(*mods, oar.nn.Linear(hidden, 10))


def run(kind, hidden, layers, steps):
    net = model(hidden, layers)
    ddp = DDP(net)
    if kind == "plain":
        opt = oar.optim.Adam(ddp.parameters(), lr=1e-3)
        local = opt
    else:
        opt = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=oar.optim.Adam, lr=1e-3,
                                      parameters_as_bucket_view=kind == "zero_bucket")
        local = opt.optim
    rng = np.random.RandomState(dist.get_rank())
    x = oar.from_numpy(rng.randn(32, hidden).astype(np.float32))
    y = oar.from_numpy(rng.randn(32, 10).astype(np.float32))
    step_ms, opt_ms = [], []
    for _ in range(steps):
        dist.barrier()
        t0 = time.perf_counter()
        opt.zero_grad()
        ((ddp(x) - y) ** 2).mean().backward()
        t1 = time.perf_counter()
        opt.step()
        t2 = time.perf_counter()
        step_ms.append((t2 - t0) * 1e3)
        opt_ms.append((t2 - t1) * 1e3)
    state = sum(v.numel() * v.element_size() for v in local.state_dict()["state"].values())
    states = [None] * dist.get_world_size()
    dist.all_gather_object(states, state)
    return {"optimizer": kind, "ranks": dist.get_world_size(), "parameters": sum(p.numel() for p in net.parameters()),
            "state_bytes_per_rank": states, "step_ms_median": round(statistics.median(step_ms[10:]), 3),
            "optimizer_step_ms_median": round(statistics.median(opt_ms[10:]), 3)}


def main():
    hidden, layers, steps = (int(a) for a in (sys.argv[1:] + ["512", "4", "50"][len(sys.argv) - 1:])[:3])
    oar.set_num_threads(1)
    dist.init_process_group("mpi")
    for kind in ("plain", "zero", "zero_bucket"):
        r = run(kind, hidden, layers, steps)
        if dist.get_rank() == 0:
            print(json.dumps(r), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
