"""ZeroRedundancyOptimizer with DistributedDataParallel: one torch script, run by PyTorch 1.13 (gloo, N
processes from torch.multiprocessing) and by oar (N ranks under mpirun, `import torch` given oar by oar's
torch switch); zero.sh compares the runs (docs/dist.md, "ZeroRedundancyOptimizer").

  python3 zero_script.py torch VARIANT N OUT     PyTorch (writes OUT.<rank>.npz)
  mpirun -np N python3 zero_script.py oar VARIANT N OUT   oar, the same script
  python3 zero_script.py golden OUT N FILE.json  PyTorch's run recorded (zero_golden/: the reference where
                                                 torch is absent; made by this mode)
  python3 zero_script.py compare A B N TOL [state] [counts]  every rank's losses within TOL (relative) and
                        parameters within TOL (absolute), all ranks equal; with `state`, the consolidated
                        optimizer states too; with `counts`, each rank's state element count equal
  mpirun -np N python3 zero_script.py errors     oar only: bad input gets torch's error types; with
                                                 parameters_as_bucket_view the parameters are views of
                                                 the buckets
  mpirun -np 3 python3 zero_script.py group      oar only: over new_group([0, 2]), ZeRO equals Adam

VARIANT: plain (DDP + Adam, the reference), zero (DDP + ZeroRedundancyOptimizer over Adam, made with the
weights' group, the biases' group added by add_param_group), bucket (the same with both groups at once and
parameters_as_bucket_view=True), join (zero with uneven inputs: rank r has BATCHES[r] batches, under
Join([ddp, zero])). After training, every rank consolidates the state to each rank in turn (so each holds
the whole state), a fresh optimizer over a copy of the model (in a DDP of its own) loads it, and both
train 3 more steps on the same batches: the extra values are each rank's optimizer state element count and the largest parameter
difference between the two (0: the state round-trips)."""
import os
import sys

import numpy as np
from dist_checks import expect, load

STEPS = 6
BATCHES = (5, 3, 4)
SCRIPT = r'''
def run(torch, dist, DDP, rank, n, variant):
    from torch.distributed.optim import ZeroRedundancyOptimizer as ZeRO
    from torch.distributed.algorithms import Join

    def make_model(seed):
        rng = np.random.RandomState(seed)
        layers = []
        for k in range(4):
            layers += [torch.nn.Linear(8, 8), torch.nn.Tanh()]
        model = torch.nn.Sequential(*layers, torch.nn.Linear(8, 2))
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(torch.from_numpy((rng.randn(*tuple(p.shape)) * 0.5).astype(np.float32)))
        return model

    def groups(model):
        weights = [p for name, p in model.named_parameters() if name.endswith("weight")]
        biases = [p for name, p in model.named_parameters() if name.endswith("bias")]
        return [{"params": weights}, {"params": biases, "lr": 0.02, "weight_decay": 0.01}]

    def flat_state(sd):   # torch: {index: {slot: tensor}}; oar: {"index.slot": tensor}
        out = {}
        for k, v in sd["state"].items():
            items = v.items() if isinstance(v, dict) else [(None, v)]
            for slot, t in items:
                key = str(k) if slot is None else f"{k}.{slot}"
                out[key] = np.array(t.detach().numpy() if hasattr(t, "numpy") else t, dtype=np.float64)
        return out

    def clone(v):
        if isinstance(v, dict):
            return {k: clone(x) for k, x in v.items()}
        if isinstance(v, list):
            return [clone(x) for x in v]
        return v.clone() if hasattr(v, "clone") else v

    def state_numel(opt):
        return sum(int(v.size) for v in flat_state(opt.state_dict()).values())

    model = make_model(7)
    ddp = DDP(model)
    g = groups(model)
    if variant == "plain":
        opt = torch.optim.Adam(g, lr=0.01)
    elif variant == "bucket":
        opt = ZeRO(g, optimizer_class=torch.optim.Adam, lr=0.01, parameters_as_bucket_view=True)
    else:
        opt = ZeRO(g[:1], optimizer_class=torch.optim.Adam, lr=0.01)
        opt.add_param_group(g[1])
    steps = BATCHES[rank] if variant == "join" else STEPS
    data = np.random.RandomState(100 + rank)
    xs = data.randn(steps, 4, 8).astype(np.float32)
    ys = data.randn(steps, 4, 2).astype(np.float32)
    losses = []

    def step(x, y):
        opt.zero_grad()
        loss = ((ddp(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss.item()

    if variant == "join":
        with Join([ddp, opt]):
            for i in range(steps):
                losses.append(step(torch.from_numpy(xs[i]), torch.from_numpy(ys[i])))
    else:
        for i in range(steps):
            losses.append(step(torch.from_numpy(xs[i]), torch.from_numpy(ys[i])))
    params = [p.detach().numpy().copy() for p in model.parameters()]

    if variant == "plain":
        numel, sd = state_numel(opt), opt.state_dict()
        n_params = sum(p.numel() for p in model.parameters())
        assert numel == 2 * n_params + len(params), f"Adam's state: {numel} elements for {n_params}"
    else:
        # about 1/N of the state: this rank's Adam state is its shard's moments (2 per element) and steps,
        # and the shard is within one parameter of an even split (the greedy bound)
        local = [p for grp in opt.optim.param_groups for p in grp["params"]]
        owned = sum(p.numel() for p in local)
        numel = state_numel(opt.optim)
        assert numel == 2 * owned + len(local), f"rank {rank}: {numel} state elements for {owned} owned"
        total = sum(p.numel() for p in model.parameters())
        largest = max(p.numel() for p in model.parameters())
        assert owned <= total / n + largest, f"rank {rank}: owns {owned} of {total} elements at {n} ranks"
        for to in range(n):
            opt.consolidate_state_dict(to=to)
            if rank == to:
                sd = opt.state_dict()
    state = flat_state(sd)
    # the state round-trips: a fresh optimizer over a copy of the model, loaded, steps as the original
    twin = make_model(8)
    with torch.no_grad():
        for a, b in zip(twin.parameters(), model.parameters()):
            a.copy_(b)
    if variant == "plain":
        opt2 = torch.optim.Adam(groups(twin), lr=0.01)
    else:
        opt2 = ZeRO(groups(twin), optimizer_class=torch.optim.Adam, lr=0.01)
    # copies: torch's consolidated state holds the consolidating rank's live state tensors, which its
    # ZeroRedundancyOptimizer.load_state_dict would share with the original instead of copying
    opt2.load_state_dict(clone(sd))
    ddp2 = DDP(twin)
    # one backward without a step: torch's DDP then rebuilds its buckets in the order gradients came, as
    # the original's did (a bucket's layout sets gloo's summation order at 3 ranks); oar's sums do not
    # depend on it
    ((ddp2(torch.zeros(4, 8)) - torch.zeros(4, 2)) ** 2).mean().backward()
    more = np.random.RandomState(200 + rank)
    for i in range(3):
        x = torch.from_numpy(more.randn(4, 8).astype(np.float32))
        y = torch.from_numpy(more.randn(4, 2).astype(np.float32))
        for m, o in ((ddp, opt), (ddp2, opt2)):
            o.zero_grad()
            ((m(x) - y) ** 2).mean().backward()
            o.step()
    diff = max(float(np.max(np.abs(a.detach().numpy() - b.detach().numpy())))
               for a, b in zip(model.parameters(), twin.parameters()))
    assert diff == 0, f"rank {rank}: after loading the state, training differs from the original by {diff}"
    dist.barrier()
    return losses, params, [float(numel), diff], state
'''


def save(out, rank, losses, params, extra, state):
    np.savez(f"{out}.{rank}.npz", losses=np.array(losses, dtype=np.float64), extra=np.array(extra, dtype=np.float64),
             **{f"p{k}": p for k, p in enumerate(params)}, **{f"s:{k}": v for k, v in state.items()})


def torch_rank(rank, variant, n, out, init):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=n)
    env = {"np": np, "BATCHES": BATCHES, "STEPS": STEPS}
    exec(SCRIPT, env)
    save(out, rank, *env["run"](torch, dist, DDP, rank, n, variant))
    dist.destroy_process_group()


def run_torch(variant, n, out):
    """PyTorch's run: the oracle. Its gloo now and then aborts a rank as the processes end after uneven
    inputs ("terminate called without an active exception", SIGABRT; seen once in a fresh-clone CI of
    join at 3 ranks, never in oar's runs): a rank killed by a signal is the oracle failing, not what is
    tested, so such a run is repeated, at most three times in all."""
    import tempfile

    import torch.multiprocessing as mp

    for attempt in range(3):
        fd, path = tempfile.mkstemp(prefix="oar_zero_")
        os.close(fd)
        os.unlink(path)   # gloo's file store makes it
        try:
            mp.spawn(torch_rank, args=(variant, n, out, "file://" + path), nprocs=n)
            return
        except mp.ProcessExitedException as e:
            if not getattr(e, "signal_name", None) or attempt == 2:
                raise
            print(f"PyTorch's {variant} at {n} ranks: a rank died by {e.signal_name}; running it again",
                  file=sys.stderr)
        finally:
            if os.path.exists(path):
                os.unlink(path)


def run_oar(variant, n, out):
    import oar

    oar.set_num_threads(1)
    with oar.mock_torch():
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP

        assert torch is oar, "the switch did not give oar"
        dist.init_process_group("gloo")
        assert dist.get_world_size() == n, f"expected {n} ranks, got {dist.get_world_size()}"
        env = {"np": np, "BATCHES": BATCHES, "STEPS": STEPS}
        exec(SCRIPT, env)
        save(out, dist.get_rank(), *env["run"](torch, dist, DDP, dist.get_rank(), n, variant))
        dist.destroy_process_group()



def errors():
    """Bad input raises what torch 1.13 raises (types), with messages that say what to do."""
    import oar
    import oar.distributed as dist
    from oar.distributed.optim import ZeroRedundancyOptimizer as ZeRO

    oar.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    model = oar.nn.Linear(4, 3)
    params = list(model.parameters())
    expect(ValueError, ["empty parameter list"], lambda: ZeRO([], optimizer_class=oar.optim.SGD, lr=0.1))
    expect(TypeError, ["iterable of Tensors"], lambda: ZeRO(params[0], optimizer_class=oar.optim.SGD, lr=0.1))
    expect(TypeError, ["Tensors or dicts"], lambda: ZeRO([params[0], {"params": [params[1]]}],
                                                        optimizer_class=oar.optim.SGD, lr=0.1))
    expect(ValueError, ["'params' key"], lambda: ZeRO([{"lr": 0.1}], optimizer_class=oar.optim.SGD, lr=0.1))
    expect(ValueError, ["single parameter group"],   # overlap_with_ddp=True: hooks_errors.py has the rest
           lambda: ZeRO([{"params": [params[0]]}, {"params": [params[1]]}], optimizer_class=oar.optim.SGD,
                        overlap_with_ddp=True, lr=0.1))
    expect(TypeError, ["optimizer_class"], lambda: ZeRO(params, optimizer_class=object, lr=0.1))
    zero = ZeRO(params, optimizer_class=oar.optim.Adam, lr=0.1)
    model(oar.ones(2, 4)).sum().backward()
    zero.step()
    expect(RuntimeError, ["not been consolidated", f"consolidate_state_dict(to={rank})"], zero.state_dict)
    expect(RuntimeError, [f"[0, {n})", f"got {n}"], lambda: zero.consolidate_state_dict(to=n))
    expect(RuntimeError, ["got -1"], lambda: zero.consolidate_state_dict(to=-1))
    expect(TypeError, ["expected `to` to be an int"], lambda: zero.consolidate_state_dict(to="0"))
    zero.consolidate_state_dict(to=0)
    if rank == 0:
        sd = zero.state_dict()
        assert sorted(sd["state"]) == ["0.exp_avg", "0.exp_avg_sq", "0.step", "1.exp_avg", "1.exp_avg_sq",
                                       "1.step"], sorted(sd["state"])
        expect(ValueError, ["different number of parameter groups"],
               lambda: zero.load_state_dict({"state": {}, "param_groups": sd["param_groups"] * 2}))
        expect(ValueError, ["doesn't match the size"], lambda: zero.load_state_dict(
            {"state": {}, "param_groups": [dict(sd["param_groups"][0], params=[0])]}))
        expect(ValueError, ["'<param index>.<slot>'"], lambda: zero.load_state_dict(
            {"state": {"7.exp_avg": sd["state"]["0.exp_avg"]}, "param_groups": sd["param_groups"]}))
    else:   # consolidated on rank 0 only
        expect(RuntimeError, ["not been consolidated"], zero.state_dict)
    # parameters_as_bucket_view: each parameter is a view of its owner's bucket, through steps too
    net = oar.nn.Linear(4, 3)
    zb = ZeRO(net.parameters(), optimizer_class=oar.optim.SGD, lr=0.1, parameters_as_bucket_view=True)
    owners = [zb._param_to_rank[id(p)] for p in net.parameters()]
    for r, bucket in enumerate(zb._buckets):
        bucket.fill_(r + 1.0)
    got = [float(p.detach().numpy().min()) for p in net.parameters()] + [float(p.detach().numpy().max())
                                                                        for p in net.parameters()]
    assert got == [r + 1.0 for r in owners] * 2, f"the parameters are not views of their buckets: {got}"
    net(oar.ones(2, 4)).sum().backward()
    zb.step()
    for p in net.parameters():
        bucket = zb._buckets[zb._param_to_rank[id(p)]].numpy()
        assert any(np.array_equal(p.detach().numpy().ravel(), bucket[k:k + p.numel()]) for k in range(bucket.size)), \
            "after a step a parameter's values are not in its bucket"
    dist.barrier()
    print(f"zero errors rank {rank}: OK")
    dist.destroy_process_group()


def group_run():
    """At 3 ranks, over new_group([0, 2]): DDP + ZeRO(Adam) and DDP + Adam, side by side in one job, give
    the same parameters bit for bit on both members (ZeRO's broadcasts name world ranks as torch's);
    rank 1 takes no part."""
    import oar
    import oar.distributed as dist
    from oar.distributed.optim import ZeroRedundancyOptimizer as ZeRO
    from oar.nn.parallel import DistributedDataParallel as DDP

    oar.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    assert dist.get_world_size() == 3, "group_run needs 3 ranks"
    g = dist.new_group([0, 2])
    if g is dist.GroupMember.NON_GROUP_MEMBER:
        try:
            ZeRO([oar.zeros(2, requires_grad=True)], optimizer_class=oar.optim.SGD, process_group=g, lr=0.1)
            raise AssertionError("a non-member made a ZeroRedundancyOptimizer over the group")
        except ValueError as e:
            assert "NON_GROUP_MEMBER" in str(e), e
    else:
        nets = []
        for sharded in (False, True):
            oar.manual_seed(4)
            net = oar.nn.Sequential(oar.nn.Linear(6, 8), oar.nn.Tanh(), oar.nn.Linear(8, 8), oar.nn.Tanh(),
                                    oar.nn.Linear(8, 3))
            ddp = DDP(net, process_group=g)
            opt = ZeRO(ddp.parameters(), optimizer_class=oar.optim.Adam, process_group=g, lr=0.01) if sharded \
                else oar.optim.Adam(ddp.parameters(), lr=0.01)
            data = np.random.RandomState(300 + rank)
            for _ in range(5):
                x = oar.from_numpy(data.randn(4, 6).astype(np.float32))
                opt.zero_grad()
                (ddp(x) ** 2).mean().backward()
                opt.step()
            nets.append(net)
            if sharded:
                owned = sum(p.numel() for grp in opt.optim.param_groups for p in grp["params"])
                total = sum(p.numel() for p in net.parameters())
                assert 0 < owned < total, f"rank {rank} owns {owned} of {total} elements over a group of 2"
        for a, b in zip(nets[0].parameters(), nets[1].parameters()):
            assert np.array_equal(a.detach().numpy(), b.detach().numpy()), "ZeRO over the group differs from Adam"
        mine = np.concatenate([p.detach().numpy().ravel() for p in nets[1].parameters()])
        other = [None, None]
        dist.all_gather_object(other, mine.tobytes(), group=g)
        assert other[0] == other[1], "the group's ranks end with different parameters"
    dist.barrier()
    print(f"zero group rank {rank}: OK")
    dist.destroy_process_group()



def golden(prefix, n, path):
    """Records PyTorch's run (OUT prefix) as JSON for load(): every rank's losses and extra values, and
    the parameters (equal on every rank; compare checks that on the run it reads)."""
    import json

    runs = [np.load(f"{prefix}.{r}.npz") for r in range(n)]
    n_params = len([k for k in runs[0].files if k.startswith("p")])
    with open(path, "w") as f:
        json.dump({"losses": [[float(v) for v in z["losses"]] for z in runs],
                   "extra": [[float(v) for v in z["extra"]] for z in runs],
                   "params": [[float(v) for v in runs[0][f"p{k}"].ravel()] for k in range(n_params)]}, f)


def compare(a, b, n, tol, with_state, with_counts):
    worst_l = worst_p = worst_s = 0.0
    for rank in range(n):
        x, y = load(a, rank), load(b, rank)
        lx, ly = x["losses"], y["losses"]
        assert lx.shape == ly.shape, f"rank {rank}: {lx.shape[0]} losses against {ly.shape[0]}"
        worst_l = max(worst_l, float(np.max(np.abs(lx - ly) / np.maximum(np.abs(ly), 1e-6))))
        keys = sorted(k for k in y if k.startswith("p") and not k.startswith("s:"))
        for k in keys:
            worst_p = max(worst_p, float(np.max(np.abs(x[k].ravel() - y[k].ravel()))))
        n_extra = 2 if with_counts else 1   # the state element count, only between two sharded runs
        assert np.array_equal(x["extra"][-n_extra:], y["extra"][-n_extra:]), \
            f"rank {rank}: state elements and round-trip difference {x['extra'].tolist()} against {y['extra'].tolist()}"
        if with_state:
            sx = {k for k in x if k.startswith("s:")}
            sy = {k for k in y if k.startswith("s:")}
            assert sx == sy, f"rank {rank}: consolidated states differ in names: {sorted(sx ^ sy)}"
            assert sx, f"rank {rank}: no consolidated state"
            for k in sx:
                worst_s = max(worst_s, float(np.max(np.abs(x[k] - y[k]))))
    ranks = [load(b, r) for r in range(n)]
    keys = sorted(k for k in ranks[0] if k.startswith("p"))
    assert all(np.array_equal(ranks[0][k], z[k]) for z in ranks[1:] for k in keys), "the ranks end with different parameters"
    print(f"compare {a.split('/')[-1]} {b.split('/')[-1]}: losses {worst_l:.1e} (relative), parameters {worst_p:.1e}"
          f"{f', consolidated state {worst_s:.1e}' if with_state else ''} (absolute); ranks equal")
    assert worst_l <= tol and worst_p <= tol and worst_s <= tol, \
        f"beyond {tol}: losses {worst_l}, parameters {worst_p}, state {worst_s}"


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "torch":
        run_torch(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    elif mode == "oar":
        run_oar(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    elif mode == "golden":
        golden(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    elif mode == "compare":
        compare(sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]), "state" in sys.argv[6:],
                "counts" in sys.argv[6:])
    elif mode == "errors":
        errors()
    elif mode == "group":
        group_run()
    else:
        sys.exit(f"zero_script: unknown mode {mode!r}; expected torch, oar, golden, compare or errors")
