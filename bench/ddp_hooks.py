"""DDP communication hooks timed (docs/dist.md, "Communication hooks"): one torch script, run by oar
(`mpirun -np 2 python3 bench/ddp_hooks.py oar [REPS]`, `import torch` given oar by the switch) and by
PyTorch with gloo (`python3 bench/ddp_hooks.py torch [REPS]`, 2 processes). One training step (an MLP
256-1024-1024-10, batch 64 per rank, 1 thread per rank, 4 MB buckets) of DDP without a hook, with
allreduce_hook, fp16_compress_hook, bf16_compress_hook (oar only: torch 1.13 refuses it without NCCL)
powerSGD_hook and batched_powerSGD_hook (rank 4, compressing from the third step; oar only: torch
1.13's powerSGD_hook did not finish a step within 100 s on gloo with this model, and its batched hook
fails its own assertion) and post-local SGD (post_localSGD_hook without gradient allreduce after 2
steps, PostLocalSGDOptimizer averaging the parameters every 4 steps) under SGD, and of DDP with
ZeroRedundancyOptimizer (Adam) stepping after backward against overlap_with_ddp=True (oar only: the
step inside hook_with_zero_step or hook_with_zero_step_interleaved, which torch 1.13 runs on NCCL
only). The variants are interleaved
(one step of each per round, a barrier before each, 3 rounds of warm-up), so load drifts hit them
alike; rank 0 prints one JSON object: the medians in ms, their ratios to the hookless step (and
overlapped ZeRO's to plain ZeRO's), the machine's load average before and after, and for oar the
time DDP spent collecting the hooks' Futures after backward."""
import json
import os
import sys
import time

SCRIPT = r'''
def bench(torch, dist, DDP, reps, is_oar):
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks as hooks
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd
    from torch.distributed.optim import ZeroRedundancyOptimizer as ZeRO

    variants = ["none", "allreduce", "fp16", "bf16", "powersgd", "powersgd_batched", "localsgd", "zero",
                "zero_overlap", "zero_interleaved"]
    if not is_oar:   # bf16 and overlap need NCCL in torch 1.13; its PowerSGD stalled here (see the docs)
        variants = [v for v in variants if v not in ("bf16", "zero_overlap", "zero_interleaved", "powersgd",
                                                     "powersgd_batched")]

    def make(variant):
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.Tanh(), torch.nn.Linear(1024, 1024),
                                  torch.nn.Tanh(), torch.nn.Linear(1024, 10))
        ddp = DDP(net, bucket_cap_mb=4)
        overlap = variant in ("zero_overlap", "zero_interleaved")
        if variant.startswith("zero"):
            opt = ZeRO(ddp.parameters(), optimizer_class=torch.optim.Adam, lr=1e-3, overlap_with_ddp=overlap)
            if overlap:
                from torch.distributed.algorithms.ddp_comm_hooks import ddp_zero_hook

                make_hook = ddp_zero_hook.hook_with_zero_step_interleaved if variant == "zero_interleaved" else \
                    ddp_zero_hook.hook_with_zero_step
                ddp.register_comm_hook(None, make_hook(hooks.allreduce_hook, ddp, opt))
        else:
            opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
            if variant.startswith("powersgd"):
                ddp.register_comm_hook(psgd.PowerSGDState(None, matrix_approximation_rank=4, start_powerSGD_iter=2),
                                       psgd.batched_powerSGD_hook if variant.endswith("batched") else
                                       psgd.powerSGD_hook)
            elif variant == "localsgd":
                from torch.distributed.algorithms.ddp_comm_hooks import post_localSGD_hook as post_local
                from torch.distributed.algorithms.model_averaging import averagers
                from torch.distributed.optim import PostLocalSGDOptimizer

                ddp.register_comm_hook(post_local.PostLocalSGDState(None, None, 2, post_local_gradient_allreduce=False),
                                       post_local.post_localSGD_hook)
                opt = PostLocalSGDOptimizer(opt, averagers.PeriodicModelAverager(period=4, warmup_steps=2))
            elif variant != "none":
                ddp.register_comm_hook(None, {"allreduce": hooks.allreduce_hook, "fp16": hooks.fp16_compress_hook,
                                              "bf16": hooks.bf16_compress_hook}[variant])
        x, y = torch.randn(64, 256), torch.randn(64, 10)

        def step():
            opt.zero_grad()
            ((ddp(x) - y) ** 2).mean().backward()
            if not overlap:
                opt.step()

        return ddp, step

    runs = {v: make(v) for v in variants}
    times = {v: [] for v in variants}
    for r in range(reps + 3):
        for v in variants:
            dist.barrier()
            t0 = time.perf_counter()
            runs[v][1]()
            if r >= 3:
                times[v].append(time.perf_counter() - t0)
    med = {v: sorted(ts)[len(ts) // 2] * 1e3 for v, ts in times.items()}
    out = {"median_ms": {v: round(t, 3) for v, t in med.items()},
           "ratio_to_none": {v: round(med[v] / med["none"], 3) for v in variants if not v.startswith("zero")}}
    if is_oar:
        out["zero_overlap_to_zero"] = round(med["zero_overlap"] / med["zero"], 3)
        out["zero_interleaved_to_zero"] = round(med["zero_interleaved"] / med["zero"], 3)
        out["hook_wait_ms_per_step"] = {v: round(runs[v][0].bucket_stats()["hook_wait_seconds"] * 1e3 / (reps + 3), 3)
                                        for v in variants if v not in ("none", "zero")}
        out["buckets"] = len(runs["none"][0].bucket_stats()["buckets"])
    return out
'''


def report(impl, reps, out, load_before):
    out.update({"bench": "ddp_hooks", "impl": impl, "ranks": 2, "threads_per_rank": 1, "reps": reps,
                "model": "MLP 256-1024-1024-10, batch 64 per rank, buckets of 4 MB",
                "loadavg_before": [round(x, 2) for x in load_before],
                "loadavg_after": [round(x, 2) for x in os.getloadavg()]})
    print(json.dumps(out))


def run_oar(reps):
    import oar

    oar.set_num_threads(1)
    load = os.getloadavg()
    with oar.mock_torch():
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP

        dist.init_process_group("gloo")
        env = {"time": time}
        exec(SCRIPT, env)
        out = env["bench"](torch, dist, DDP, reps, True)
        if dist.get_rank() == 0:
            report("oar", reps, out, load)
        dist.destroy_process_group()


def torch_rank(rank, reps, init, load):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    env = {"time": time}
    exec(SCRIPT, env)
    out = env["bench"](torch, dist, DDP, reps, False)
    if rank == 0:
        report("torch " + torch.__version__, reps, out, load)
    dist.destroy_process_group()


def run_torch(reps):
    import tempfile

    import torch.multiprocessing as mp

    fd, path = tempfile.mkstemp(prefix="oar_hooks_bench_")
    os.close(fd)
    os.unlink(path)
    try:
        mp.spawn(torch_rank, args=(reps, "file://" + path, os.getloadavg()), nprocs=2)
    finally:
        if os.path.exists(path):
            os.unlink(path)


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "oar"
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    if which == "oar":
        run_oar(n)
    elif which == "torch":
        run_torch(n)
    else:
        sys.exit(f"ddp_hooks: expected oar or torch, got {which!r}")
