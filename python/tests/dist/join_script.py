"""DistributedDataParallel.join with uneven inputs: one torch script, run by PyTorch 1.13 (gloo, 2
processes from torch.multiprocessing) and by oar (2 ranks under mpirun, the script's `import torch`
given oar by oar's torch switch); run.sh compares the two. Rank 0 has 5 batches, rank 1 has 3.

  python3 join_script.py torch VARIANT OUT     PyTorch (writes OUT.0.npz, OUT.1.npz)
  mpirun -np 2 python3 join_script.py oar VARIANT OUT   oar, the same script
  python3 join_script.py golden OUT FILE.json  PyTorch's run recorded (join_golden/VARIANT.json: the
                                               reference where torch is absent; made by this mode)
  python3 join_script.py compare A B TOL       every rank's losses and parameters within TOL (relative
                                               for losses, absolute for parameters); both ranks end equal

VARIANT: join (torch's defaults: divide_by_initial_world_size=True), multi (torch's generic
Join([ddp, counter], divide_by_initial_world_size=False) with a joinable of the script's own beside
DDP: its per-step sums and last-joiner flags are compared exactly), effective
(divide_by_initial_world_size=False), throw (throw_on_early_termination=True: both ranks raise; the
messages' classes and the parameters at the stop are compared), mismatch (oar only: rank 0 runs an
all_reduce outside DDP while rank 1 has joined; both must fail naming a mismatched collective with the
join's count), dead (oar only: rank 0 exits while rank 1 shadows it; rank 1 must fail naming rank 0's
death), compiled
and compiled_effective (oar only: join and effective with the step compiled by oar.jit.to_static;
the joined rank shadows the program's buckets; compared with PyTorch's join and effective)."""
import os
import sys

import numpy as np

BATCHES = (5, 3)
SCRIPT = r'''
def run(torch, dist, DDP, rank, variant):
    rng = np.random.RandomState(5)
    model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy((rng.randn(*tuple(p.shape)) * 0.4).astype(np.float32)))
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    counter = make_counter(torch, dist)() if variant == "multi" else None
    n = BATCHES[rank]
    data = np.random.RandomState(50 + rank)
    xs = data.randn(n, 4, 6).astype(np.float32)
    ys = data.randn(n, 4, 3).astype(np.float32)
    kwargs = {"effective": {"divide_by_initial_world_size": False},
              "compiled_effective": {"divide_by_initial_world_size": False},
              "multi": {"divide_by_initial_world_size": False},
              "throw": {"throw_on_early_termination": True}}.get(variant, {})
    losses, error = [], ""

    def step(x, y):
        opt.zero_grad()
        loss = ((ddp(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss
    if variant.startswith("compiled"):      # oar only: the whole step one program (oar.jit.to_static)
        step = torch.jit.to_static(step)
    if counter is not None:   # torch's generic context: DDP first, then the script's own joinable
        from torch.distributed.algorithms import Join
        context = Join([ddp, counter], **kwargs)
    else:
        context = ddp.join(**kwargs)
    try:
        with context:
            for i in range(n):
                if variant == "mismatch" and rank == 0 and i == BATCHES[1]:
                    dist.all_reduce(torch.ones(1))   # rank 1 has joined: its join step meets this
                if variant == "dead" and rank == 0 and i == BATCHES[1] + 1:
                    sys.stdout.flush()
                    os._exit(3)                      # dies while rank 1 shadows it
                losses.append(step(torch.from_numpy(xs[i]), torch.from_numpy(ys[i])).item())
                if counter is not None:
                    counter.step(4 * (rank + 1))
    except (RuntimeError, OSError) as e:    # oar raises a dead peer as OSError (an I/O failure)
        if variant not in ("throw", "mismatch", "dead"):
            raise
        error = str(e)
    if variant.startswith("compiled"):
        assert not step.fell_back and step.num_traces() >= 1, "the step did not run compiled"
    params = [p.detach().numpy().copy() for p in model.parameters()]
    if variant != "dead":
        dist.barrier()
    extra = counter.seen + [float(counter.last_joiner)] if counter is not None else []
    return losses, params, error, extra


def make_counter(torch, dist):
    """A joinable of the script's own (as in torch's tests of Join): each step all-reduces how many
    samples this rank saw; a joined rank's hook contributes 0 and records the sums too; post_hook
    records whether this rank joined last."""
    from torch.distributed.algorithms import Join, Joinable, JoinHook

    class Counter(Joinable):
        def __init__(self):
            super().__init__()
            self.seen, self.last_joiner = [], None

        def step(self, n):
            Join.notify_join_context(self)
            t = torch.tensor([float(n)])
            dist.all_reduce(t)
            self.seen.append(t.item())

        def join_hook(self, **kwargs):
            counter = self

            class Hook(JoinHook):
                def main_hook(self):
                    t = torch.zeros(1)
                    dist.all_reduce(t)
                    counter.seen.append(t.item())

                def post_hook(self, is_last_joiner):
                    counter.last_joiner = is_last_joiner
            return Hook()

        @property
        def join_device(self):
            return torch.device("cpu")

        @property
        def join_process_group(self):
            return dist.group.WORLD
    return Counter
'''


def save(out, rank, losses, params, error, extra):
    np.savez(f"{out}.{rank}.npz", losses=np.array(losses, dtype=np.float64), error=np.array(error),
             extra=np.array(extra, dtype=np.float64), **{f"p{k}": p for k, p in enumerate(params)})


def torch_rank(rank, variant, out, init):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    env = {"np": np, "BATCHES": BATCHES, "os": os, "sys": sys}
    exec(SCRIPT, env)
    save(out, rank, *env["run"](torch, dist, DDP, rank, variant))
    dist.destroy_process_group()


def run_torch(variant, out):
    import os
    import tempfile

    import torch.multiprocessing as mp

    fd, path = tempfile.mkstemp(prefix="oar_join_")
    os.close(fd)
    os.unlink(path)   # gloo's file store makes it
    try:
        mp.spawn(torch_rank, args=(variant, out, "file://" + path), nprocs=2)
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
        rank = dist.get_rank()
        env = {"np": np, "BATCHES": BATCHES, "os": os, "sys": sys}
        exec(SCRIPT, env)
        losses, params, error, extra = env["run"](torch, dist, DDP, rank, variant)
        if variant == "dead":   # rank 1's shadow fails naming rank 0; MPI cannot finish with a dead rank
            ok = "rank 0" in error and "died" in error and "Join" in error
            print(f"join dead rank {rank}: {'OK' if ok else 'FAILED'}: {error}", flush=True)
            os._exit(0 if ok else 1)
        save(out, rank, losses, params, error, extra)
        dist.destroy_process_group()
    if variant == "mismatch":
        assert "mismatched collective" in error and "Join: counting" in error, \
            f"rank {rank}: expected a mismatched collective naming the join, got: {error!r}"
        print(f"join mismatch rank {rank}: {error[:160]}...")


def load(path, rank):
    """A run's rank: OUT.rank.npz, or the golden values recorded from PyTorch (a .json file of
    `golden`), for machines without torch."""
    if not path.endswith(".json"):
        return np.load(f"{path}.{rank}.npz")
    import json

    with open(path) as f:
        g = json.load(f)[rank]
    out = {"losses": np.array(g["losses"], dtype=np.float64), "error": np.array(g["error"]),
           "extra": np.array(g.get("extra", []), dtype=np.float64)}
    out.update({f"p{k}": np.array(v, dtype=np.float32) for k, v in enumerate(g["params"])})
    return out


def golden(prefix, path):
    """Records PyTorch's run (OUT prefix) as JSON for load()."""
    import json

    runs = []
    for rank in (0, 1):
        z = np.load(f"{prefix}.{rank}.npz")
        runs.append({"losses": [float(v) for v in z["losses"]], "error": str(z["error"]),
                     "params": [z[f"p{k}"].tolist() for k in range(4)], "extra": [float(v) for v in z["extra"]]})
    with open(path, "w") as f:
        json.dump(runs, f)


def compare(a, b, tol):
    worst_l = worst_p = 0.0
    for rank in (0, 1):
        x, y = load(a, rank), load(b, rank)
        lx, ly = x["losses"], y["losses"]
        assert lx.shape == ly.shape, f"rank {rank}: {lx.shape[0]} losses against {ly.shape[0]}"
        if lx.size:
            worst_l = max(worst_l, float(np.max(np.abs(lx - ly) / np.maximum(np.abs(ly), 1e-6))))
        for k in range(4):
            worst_p = max(worst_p, float(np.max(np.abs(x[f"p{k}"] - y[f"p{k}"]))))
        ex, ey = str(x["error"]), str(y["error"])
        for words in (("exhausted all", "inputs"), ("at least one rank", "exhausted")):
            assert all(w in ex.lower() for w in words) == all(w in ey.lower() for w in words), \
                f"rank {rank}: errors differ in kind: {ex!r} against {ey!r}"
        assert bool(ex) == bool(ey), f"rank {rank}: one run raised ({ex!r}), the other ({ey!r})"
        xe = x["extra"] if "extra" in x else np.zeros(0)
        ye = y["extra"] if "extra" in y else np.zeros(0)
        assert np.array_equal(xe, ye), \
            f"rank {rank}: the other joinable's sums and last-joiner flag differ: {xe.tolist()} against {ye.tolist()}"
    z0, z1 = load(b, 0), load(b, 1)
    same = all(np.array_equal(z0[f"p{k}"], z1[f"p{k}"]) for k in range(4))
    assert same, "the ranks end with different parameters (the last joiner's model did not reach all)"
    print(f"compare {a.split('/')[-1]} {b.split('/')[-1]}: losses {worst_l:.1e} (relative), parameters "
          f"{worst_p:.1e} (absolute); ranks equal")
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
        compare(sys.argv[2], sys.argv[3], float(sys.argv[4]))
    else:
        sys.exit(f"join_script: unknown mode {mode!r}; expected torch, oar or compare")
