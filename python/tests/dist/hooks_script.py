"""DDP communication hooks, ZeroRedundancyOptimizer(overlap_with_ddp=True) and post-local SGD: one torch
script, run by PyTorch 1.13 (gloo, 2 processes from torch.multiprocessing) and by oar (2 ranks under
mpirun, `import torch` given oar by the switch); hooks.sh and algorithms.sh compare the runs (docs/dist.md,
"Communication hooks").

  python3 hooks_script.py torch VARIANT OUT       PyTorch (writes OUT.<rank>.npz)
  mpirun -np 2 python3 hooks_script.py oar VARIANT OUT   oar, the same script
  python3 hooks_script.py golden OUT FILE.json    PyTorch's run recorded (hooks_golden/, the reference
                                                  where torch is absent; made by this mode)
  python3 hooks_script.py compare A B TOL [extra]  both ranks' losses within TOL (relative), parameters
                                                  within TOL (absolute; 0: the same bits), ranks equal, the
                                                  same statistics (when both have them); with `extra`,
                                                  the last two only

VARIANT: none (DDP without a hook, the reference), allreduce, fp16, bf16 (default_hooks; PyTorch 1.13
refuses bf16_compress_hook without CUDA and gloo has no bf16 sum, so its run uses a hook with the same
arithmetic: bf16 values divided by 2, summed in f32, rounded to bf16), custom (a hook of the script's
own: a sum allreduce whose add_done_callback completes a Future() made by the hook with a new tensor,
the sum divided), unused (allreduce_hook where rank 1 skips a layer and no rank uses another, with
find_unused_parameters=True; unused_plain: the same without the hook), zero (DDP +
ZeroRedundancyOptimizer over Adam, step() after backward) and zero_overlap / zero_shard (overlap_with_ddp=True with hook_with_zero_step(allreduce_hook), whole
buckets or shard_buckets=True; PyTorch 1.13 runs that only on NCCL, so its reference is its zero run),
powersgd_full (powerSGD_hook from the third step with a rank as large as every matrix: the exact
average through the factors), powersgd (rank 1: compressed; oar draws torch's first Q, so the run
follows torch's) and powersgd_batched (batched_powerSGD_hook at rank 2; torch 1.13's own asserts, so its
run hands the hook's matrix to torch's orthogonalization as a batch of one); zero_interleaved /
zero_interleaved_shard (hook_with_zero_step_interleaved; torch's reference is its zero run); localsgd
(post_localSGD_hook for 2 steps globally, then each rank alone, PeriodicModelAverager(2, 2) after
each step) and localsgd_opt (no allreduce after the warm-up, PostLocalSGDOptimizer: the same
arithmetic); static (DDP(static_graph=True) where rank 1 skips a layer). algorithms.sh runs the last six."""
import os
import sys

import numpy as np
from dist_checks import load

STEPS = 5
SCRIPT = r'''
def run(torch, dist, DDP, rank, variant, is_oar):
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks as hooks

    n = dist.get_world_size()

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(4, 8)
            self.b = torch.nn.Linear(8, 8)
            self.skip = torch.nn.Linear(8, 8)    # rank 1 skips it in the unused variants
            if variant.startswith("unused"):
                self.never = torch.nn.Linear(8, 8)   # no rank uses it
            self.c = torch.nn.Linear(8, 2)

        def forward(self, x):
            h = torch.tanh(self.a(x))
            h = torch.tanh(self.b(h))
            if not (variant.startswith("unused") or variant == "static") or rank == 0:
                h = torch.tanh(self.skip(h))
            return self.c(h)

    rng = np.random.RandomState(7)
    model = Net()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy((rng.randn(*tuple(p.shape)) * 0.4).astype(np.float32)))
    # small buckets (oar: 5 of them; torch's first bucket holds 1 MB until its rebuild): with 2 ranks the
    # average does not depend on the layout. PowerSGD's compression does: there both have torch's one
    # bucket (every parameter, last layer first once torch has rebuilt it after the first step)
    small = {} if variant.startswith("powersgd") else {"bucket_cap_mb": 0.0002}
    if is_oar and small:
        small["first_bucket_mb"] = 0.0001
    ddp = DDP(model, find_unused_parameters=variant.startswith("unused"), static_graph=variant == "static", **small)
    calls = [0]

    def counted(hook):
        def wrapped(state, bucket):
            calls[0] += 1
            return hook(state, bucket)
        return wrapped

    def custom(state, bucket):
        fut = dist.all_reduce(bucket.buffer(), async_op=True).get_future()
        out = torch.futures.Future()
        fut.add_done_callback(lambda f: out.set_result(f.value()[0] / n))
        return out

    def bf16_same_arithmetic(state, bucket):   # torch's run: gloo has no bf16 sum
        c = bucket.buffer().to(torch.bfloat16).div_(n).float()
        fut = dist.all_reduce(c, async_op=True).get_future()

        def back(f):
            out = bucket.buffer()
            out.copy_(f.value()[0].to(torch.bfloat16))
            return out
        return fut.then(back)

    zero_like = variant.startswith("zero")
    overlap = variant != "zero" and zero_like and is_oar
    average = extra = None
    if zero_like:
        from torch.distributed.optim import ZeroRedundancyOptimizer as ZeRO

        opt = ZeRO(ddp.parameters(), optimizer_class=torch.optim.Adam, lr=0.01, overlap_with_ddp=overlap)
        if overlap:
            from torch.distributed.algorithms.ddp_comm_hooks import ddp_zero_hook

            make = ddp_zero_hook.hook_with_zero_step_interleaved if "interleaved" in variant else \
                ddp_zero_hook.hook_with_zero_step
            ddp.register_comm_hook(None, counted(make(hooks.allreduce_hook, ddp, opt,
                                                      shard_buckets=variant.endswith("shard"))))
    elif variant.startswith("powersgd"):
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd

        # full: a rank as large as every matrix and no rate floor, so the two factors carry the whole
        # average (the same numbers as no hook, up to rounding); low: rank 1, torch's defaults otherwise
        # batched: the whole bucket as one square matrix, at rank 2
        full, batched = variant == "powersgd_full", variant == "powersgd_batched"
        if batched and not is_oar:
            # torch 1.13's batched hook hands its batched orthogonalization one matrix (an AssertionError at
            # the first compressed step): the matrix goes as a batch of one, what the hook means
            orthogonalize = psgd._orthogonalize
            psgd._orthogonalize = lambda m, epsilon=0: orthogonalize(m.unsqueeze(0) if m.dim() == 2 else m, epsilon)
        psgd_state = psgd.PowerSGDState(None, matrix_approximation_rank=8 if full else 2 if batched else 1,
                                        start_powerSGD_iter=2, min_compression_rate=0 if full else 2)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
        ddp.register_comm_hook(psgd_state, counted(psgd.batched_powerSGD_hook if batched else psgd.powerSGD_hook))
    elif variant.startswith("localsgd"):
        # post-local SGD: 2 steps of global averaging, then each rank alone (a subgroup of itself; or no
        # allreduce at all, with the averaging inside PostLocalSGDOptimizer), parameters averaged every
        # 2 steps from step 2 (so steps 2 and 4, and the ranks end equal)
        from torch.distributed.algorithms.ddp_comm_hooks import post_localSGD_hook as post_local
        from torch.distributed.algorithms.model_averaging import averagers

        alone = [dist.new_group([r]) for r in range(n)][rank]
        local_state = post_local.PostLocalSGDState(None, alone, start_localSGD_iter=2,
                                                   post_local_gradient_allreduce=variant == "localsgd")
        ddp.register_comm_hook(local_state, counted(post_local.post_localSGD_hook))
        opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
        average = averagers.PeriodicModelAverager(period=2, warmup_steps=2)
        if variant == "localsgd_opt":
            from torch.distributed.optim import PostLocalSGDOptimizer

            opt, average = PostLocalSGDOptimizer(opt, average), None
        extra = lambda: [local_state.iter, (average or opt.averager).step]  # noqa: E731
    else:
        opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
        hook = {"allreduce": hooks.allreduce_hook, "unused": hooks.allreduce_hook,
                "fp16": hooks.fp16_compress_hook, "custom": custom,
                "bf16": hooks.bf16_compress_hook if is_oar else bf16_same_arithmetic}.get(variant)
        if hook is not None:
            ddp.register_comm_hook(None, counted(hook))
    data = np.random.RandomState(100 + rank)
    losses = []
    for i in range(STEPS):
        x = torch.from_numpy(data.randn(6, 4).astype(np.float32))
        y = torch.from_numpy(data.randn(6, 2).astype(np.float32))
        opt.zero_grad()
        loss = ((ddp(x) - y) ** 2).mean()
        loss.backward()
        if not overlap:
            opt.step()
        if average is not None:
            average.average_parameters(model.parameters())
        losses.append(loss.item())
    if variant.startswith("unused"):
        assert model.never.weight.grad is None, "a parameter no rank used got a gradient"
    registered = overlap or (not zero_like and variant not in ("none", "unused_plain", "static"))
    assert calls[0] >= STEPS if registered else calls[0] == 0, f"the hook ran {calls[0]} times in {STEPS} steps"
    params = [p.detach().numpy().copy() for p in model.parameters()]
    dist.barrier()
    # PowerSGD's compression statistics (elements before and after, over the compressed steps): from the
    # shapes and the settings alone, so oar's equal torch's
    # (localsgd: the state's and the averager's step counts)
    extra = list(psgd_state.compression_stats()[1:]) if variant.startswith("powersgd") else \
        extra() if extra is not None else []
    return losses, params, [float(v) for v in extra]
'''


def save(out, rank, losses, params, extra):
    np.savez(f"{out}.{rank}.npz", losses=np.array(losses, dtype=np.float64), extra=np.array(extra, dtype=np.float64),
             **{f"p{k}": p for k, p in enumerate(params)})


def torch_rank(rank, variant, out, init):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    env = {"np": np, "STEPS": STEPS}
    exec(SCRIPT, env)
    torch_variant = "zero" if variant.startswith("zero") else variant
    save(out, rank, *env["run"](torch, dist, DDP, rank, torch_variant, False))
    dist.destroy_process_group()


def run_torch(variant, out):
    """PyTorch's run: the oracle. gloo now and then aborts a rank as the processes end ("terminate called
    without an active exception", SIGABRT, after the results are saved): a rank killed by a signal is the
    oracle failing, not what is tested, so such a run is repeated, at most three times in all."""
    import tempfile

    import torch.multiprocessing as mp

    for attempt in range(3):
        fd, path = tempfile.mkstemp(prefix="oar_hooks_")
        os.close(fd)
        os.unlink(path)   # gloo's file store makes it
        try:
            mp.spawn(torch_rank, args=(variant, out, "file://" + path), nprocs=2)
            return
        except mp.ProcessExitedException as e:
            if not getattr(e, "signal_name", None) or attempt == 2:
                raise
            print(f"PyTorch's {variant}: a rank died by {e.signal_name}; running it again", file=sys.stderr)
        finally:
            if os.path.exists(path):
                os.unlink(path)


def run_oar(variant, out):
    import oar

    oar.set_num_threads(1)
    with oar.mock_torch():
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP

        assert torch is oar, "the switch did not give oar"
        dist.init_process_group("gloo")
        assert dist.get_world_size() == 2, f"expected 2 ranks, got {dist.get_world_size()}"
        env = {"np": np, "STEPS": STEPS}
        exec(SCRIPT, env)
        save(out, dist.get_rank(), *env["run"](torch, dist, DDP, dist.get_rank(), variant, True))
        dist.destroy_process_group()



def golden(prefix, path):
    import json

    runs = [np.load(f"{prefix}.{r}.npz") for r in range(2)]
    n_params = len([k for k in runs[0].files if k.startswith("p")])
    with open(path, "w") as f:
        json.dump({"losses": [[float(v) for v in z["losses"]] for z in runs],
                   "extra": [[float(v) for v in z["extra"]] for z in runs],
                   "params": [[float(str(v)) for v in runs[0][f"p{k}"].ravel()] for k in range(n_params)]}, f)


def compare(a, b, tol, extra_only=False):
    worst_l = worst_p = 0.0
    for rank in range(2):
        x, y = load(a, rank), load(b, rank)
        assert not (x["extra"].size and y["extra"].size) or np.array_equal(x["extra"], y["extra"]), \
            f"rank {rank}: {x['extra'].tolist()} against {y['extra'].tolist()}"
        if extra_only:
            continue
        lx, ly = x["losses"], y["losses"]
        assert lx.shape == ly.shape, f"rank {rank}: {lx.shape} losses against {ly.shape}"
        worst_l = max(worst_l, float(np.max(np.abs(lx - ly) / np.maximum(np.abs(ly), 1e-6))))
        for k in sorted(k for k in y if k.startswith("p")):
            worst_p = max(worst_p, float(np.max(np.abs(x[k].ravel().astype(np.float64) - y[k].ravel()))))
    ranks = [load(b, r) for r in range(2)]
    keys = sorted(k for k in ranks[0] if k.startswith("p"))
    assert all(np.array_equal(ranks[0][k], ranks[1][k]) for k in keys), "the ranks end with different parameters"
    if extra_only:
        print(f"compare {a.split('/')[-1]} {b.split('/')[-1]}: the same statistics {ranks[0]['extra'].tolist()}; "
              f"ranks equal")
        return
    print(f"compare {a.split('/')[-1]} {b.split('/')[-1]}: losses {worst_l:.1e} (relative), parameters {worst_p:.1e} "
          f"(absolute); ranks equal")
    assert worst_l <= tol and worst_p <= tol, f"beyond {tol}: losses {worst_l}, parameters {worst_p}"


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "torch":
        run_torch(sys.argv[2], sys.argv[3])
    elif mode == "oar":
        run_oar(sys.argv[2], sys.argv[3])
    elif mode == "golden":
        golden(sys.argv[2], sys.argv[3])
    elif mode == "compare":
        compare(sys.argv[2], sys.argv[3], float(sys.argv[4]), "extra" in sys.argv[5:])
    else:
        sys.exit(f"hooks_script: unknown mode {mode!r}; expected torch, oar, golden or compare")
