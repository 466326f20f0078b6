"""The Python distributed tests' program (run.sh starts it under mpirun with 2 ranks, and alone as
the one-process reference). Modes:

  train STEPS BATCH OUT [compiled] [syncbn|bn]   an MLP (8-32-32-4, tanh) trained with
        DistributedDataParallel, DistributedSampler (shuffled by seed and epoch), SGD with momentum
        and clip_grad_norm_ to 1; rank 0 writes each step's global loss and the final parameters
        (float.hex, exact) to OUT. In one process (no launcher) the same code runs without
        DDP, so N ranks at batch B can be compared with one process at batch N*B. compiled: the
        step is oar.jit.to_static (its allreduces bucketed by the compiler). syncbn: a
        SyncBatchNorm after the first layer (bn: BatchNorm1d, the one-process reference;
        convert_sync_batchnorm turns it into SyncBatchNorm under the launcher; with bn at 2 ranks,
        rank 1 also writes OUT.rank1: its BatchNorm statistics start from rank 0's broadcast).
  api       the collectives, the sampler, unused parameters, no_sync, buckets, errors
  mock      torch code (`import torch.distributed as dist`, DDP, DistributedSampler, backend
            "gloo") run under oar's torch switch
  compare A B LOSS_TOL PARAM_TOL   two train outputs within the bounds (0 0: bitwise equal)
Exit 0 on success; a failed check raises."""
import os
import sys

import numpy as np


def world_job():
    return int(os.environ.get("OMPI_COMM_WORLD_SIZE", os.environ.get("PMI_SIZE", "1"))) > 1


def dataset(oar, n=192):
    rng = np.random.RandomState(1234)
    x = rng.randn(n, 8).astype(np.float32)
    w = rng.randn(8, 4).astype(np.float32)
    y = (x @ w).argmax(1).astype(np.int64)
    return oar.utils.data.TensorDataset(oar.from_numpy(x), oar.from_numpy(y))


def model(oar, norm):
    nn = oar.nn
    oar.manual_seed(7)
    layers = [nn.Linear(8, 32)]
    if norm:
        layers.append(nn.BatchNorm1d(32))
    layers += [nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 4)]
    return nn.Sequential(*layers)


def train(steps, batch, out, options):
    import oar
    import oar.distributed as dist
    from oar.nn.parallel import DistributedDataParallel as DDP
    from oar.utils.data.distributed import DistributedSampler

    oar.set_num_threads(1)
    multi = world_job()
    if multi:
        dist.init_process_group("mpi")
    norm = "syncbn" in options or "bn" in options
    net = model(oar, norm)
    if multi and "syncbn" in options:
        net = oar.nn.SyncBatchNorm.convert_sync_batchnorm(net)
        assert type(net[1]).__name__ == "SyncBatchNorm", net
    ranks, rank = (dist.get_world_size(), dist.get_rank()) if multi else (1, 0)
    wrapped = DDP(net, bucket_cap_mb=0.002, first_bucket_mb=0.001) if multi else net
    data = dataset(oar)
    sampler = DistributedSampler(data, num_replicas=ranks, rank=rank, shuffle=True, seed=3)
    loader = oar.utils.data.DataLoader(data, batch_size=batch, sampler=sampler, drop_last=True)
    opt = oar.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)

    def step(x, y):
        opt.zero_grad()
        loss = oar.nn.functional.cross_entropy(wrapped(x), y)
        loss.backward()
        oar.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        return loss

    if "compiled" in options:
        step = oar.jit.to_static(step)
    losses, epoch = [], 0
    while len(losses) < steps:
        sampler.set_epoch(epoch)
        for x, y in loader:
            loss = step(x, y).detach().clone()
            if multi:
                dist.all_reduce(loss, dist.ReduceOp.AVG)
            losses.append(loss.item())
            if len(losses) == steps:
                break
        epoch += 1
    state = [(k, v) for k, v in net.state_dict().items() if v.dtype == oar.float32]
    if multi:   # every rank must hold the same parameters (and SyncBatchNorm's statistics): max - min is 0
        same = [(k, v) for k, v in state if "running" not in k or "syncbn" in options]
        for k, v in same:
            hi, lo = v.clone(), v.clone()
            dist.all_reduce(hi, dist.ReduceOp.MAX)
            dist.all_reduce(lo, dist.ReduceOp.MIN)
            assert (hi - lo).abs().max().item() == 0, f"rank {rank}: {k} differs across ranks"
    # rank 0 writes OUT; with per-rank BatchNorm rank 1 writes OUT.rank1 too (its running statistics are
    # rank 0's broadcast before each forward, then its own batch's update: eager and compiled agree)
    if rank == 0 or (rank == 1 and "bn" in options):
        with open(out if rank == 0 else out + ".rank1", "w") as f:
            for v in losses:
                f.write(f"loss {float(v).hex()}\n")
            for k, v in state:
                f.write(f"param {k} " + " ".join(float(e).hex() for e in v.reshape(-1).tolist()) + "\n")
    if multi:
        stats = wrapped.bucket_stats()
        assert stats["steps"] == (0 if "compiled" in options else steps), stats
        if "compiled" in options:   # the program's own bucket allreduces did the averaging
            assert oar._C.dist_program_stats()["collectives"] >= steps, oar._C.dist_program_stats()
        dist.destroy_process_group()
    print(f"train rank {rank}: {steps} steps, last loss {losses[-1]:.6f}")


def compare(a, b, loss_tol, param_tol):
    def read(p):
        loss, params = [], {}
        for line in open(p):
            kind, *rest = line.split()
            if kind == "loss":
                loss.append(float.fromhex(rest[0]))
            else:
                params[rest[0]] = np.array([float.fromhex(v) for v in rest[1:]])
        return np.array(loss), params

    (la, pa), (lb, pb) = read(a), read(b)
    assert len(la) == len(lb) and pa.keys() == pb.keys(), f"{a} and {b} hold different runs"
    dl = float(np.max(np.abs(la - lb) / np.maximum(np.abs(la), 1e-30)))
    dp = max(float(np.max(np.abs(pa[k] - pb[k]))) for k in pa)
    print(f"compare {os.path.basename(a)} {os.path.basename(b)}: loss (relative) {dl:.3g}, parameters "
          f"(absolute) {dp:.3g}; bounds {loss_tol:g}, {param_tol:g}")
    assert dl <= loss_tol and dp <= param_tol, "outside the bounds"


def expect_raises(kind, text, fn, *args, **kw):
    try:
        fn(*args, **kw)
    except kind as e:
        assert text in str(e), f"expected '{text}' in: {e}"
        return
    raise AssertionError(f"{fn.__name__} did not raise {kind.__name__}")


def api():
    import oar
    import oar.distributed as dist
    from oar.nn.parallel import DistributedDataParallel as DDP
    from oar.utils.data.distributed import DistributedSampler

    oar.set_num_threads(1)
    expect_raises(RuntimeError, "has not been initialized", dist.get_rank)
    expect_raises(ValueError, "expected backend 'mpi' or 'gloo'", dist.init_process_group, "nccl")
    expect_raises(ValueError, "world_size=5", dist.init_process_group, "gloo", world_size=5)
    dist.init_process_group("gloo")
    assert dist.is_initialized() and dist.get_backend() == "gloo"
    n, r = dist.get_world_size(), dist.get_rank()
    assert n == int(os.environ["OMPI_COMM_WORLD_SIZE"]) and r == int(os.environ["OMPI_COMM_WORLD_RANK"])
    expect_raises(RuntimeError, "twice", dist.init_process_group, "mpi")
    expect_raises(ValueError, "expected group=None, group.WORLD or a group from new_group", dist.all_reduce,
                  oar.ones(2), group=object())
    expect_raises(ValueError, "no 'product' reduction", dist.all_reduce, oar.ones(2), dist.ReduceOp.PRODUCT)

    # collectives
    t = oar.tensor([1.0, 2.0]) * (r + 1)
    dist.all_reduce(t)
    assert t.tolist() == [sum(range(1, n + 1)) * v for v in (1.0, 2.0)], t
    t = oar.tensor([float(r)])
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    assert t.item() == n - 1
    t = oar.tensor([float(r)])
    w = dist.all_reduce(t, op=dist.ReduceOp.AVG, async_op=True)
    w.wait()
    assert w.is_completed() and t.item() == (n - 1) / 2
    t = oar.full((3,), float(r))
    dist.broadcast(t, src=n - 1)
    assert t.tolist() == [n - 1.0] * 3
    parts = [oar.zeros(2, dtype=oar.int64) for _ in range(n)]
    dist.all_gather(parts, oar.tensor([r, 10 * r]))
    assert [p.tolist() for p in parts] == [[k, 10 * k] for k in range(n)], parts
    flat = oar.zeros(2 * n)
    dist.all_gather_into_tensor(flat, oar.full((2,), float(r)))
    assert flat.tolist() == [float(k) for k in range(n) for _ in range(2)]
    out = oar.zeros(2)
    dist.reduce_scatter(out, [oar.full((2,), float(k + r)) for k in range(n)])
    assert out.tolist() == [float(sum(r2 + r for r2 in range(n)))] * 2, out
    dist.barrier()
    if n >= 2 and r < 2:
        buf = oar.tensor([42.0 if r == 0 else 0.0])
        (dist.send if r == 0 else dist.recv)(buf, 1 - r, tag=5)
        assert buf.item() == 42.0
    expect_raises(RuntimeError, "contiguous", dist.all_reduce, oar.ones(4, 4).t())

    # the sampler: every sample once per epoch across ranks, padded or dropped as torch does
    for size, drop in ((10, False), (11, False), (11, True)):
        seen = []
        for k in range(n):
            s = DistributedSampler(list(range(size)), num_replicas=n, rank=k, shuffle=True, seed=1, drop_last=drop)
            s.set_epoch(2)
            seen.append(list(s))
            assert len(seen[-1]) == len(s)
        flat_seen = sorted(i for part in seen for i in part)
        total = (size // n) * n if drop else -(-size // n) * n
        assert len(flat_seen) == total, (size, drop, flat_seen)
        assert set(flat_seen) == set(range(size)) or (drop and len(set(flat_seen)) == total), (size, drop)
    a = DistributedSampler(list(range(50)), num_replicas=1, rank=0, shuffle=True, seed=1)
    order0 = list(a)
    a.set_epoch(1)
    assert list(a) != order0 and sorted(list(a)) == sorted(order0)
    expect_raises(ValueError, "Invalid rank", DistributedSampler, [1], num_replicas=2, rank=2)

    # unused parameters: rank 0 uses `extra`, nobody uses `idle`; no hang, torch's gradients
    class Net(oar.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = oar.nn.Linear(3, 2)
            self.extra = oar.nn.Linear(2, 2)
            self.idle = oar.nn.Linear(2, 2)

        def forward(self, x, use_extra):
            y = self.fc(x)
            return self.extra(y) if use_extra else y

    oar.manual_seed(r)   # different initial values: DDP must broadcast rank 0's
    net = Net()
    ddp = DDP(net, find_unused_parameters=True)
    x = oar.full((4, 3), float(r + 1))
    ddp(x, r == 0).sum().backward()
    assert net.idle.weight.grad is None, "a parameter no rank used got a gradient"
    g_extra = net.extra.weight.grad.clone()
    g_fc = net.fc.weight.grad.clone()
    # the reference: each rank's own gradient (zeros where unused), averaged by hand
    ref = Net()
    ref.load_state_dict(net.state_dict())
    ref(x, r == 0).sum().backward()
    for mine, g in ((ref.extra.weight.grad, g_extra), (ref.fc.weight.grad, g_fc)):
        local = mine.clone() if mine is not None else oar.zeros_like(g)
        dist.all_reduce(local, dist.ReduceOp.AVG)
        assert (local - g).abs().max().item() < 1e-6, (local, g)

    # no_sync: two micro-batches, the first kept local, = the average of the two sums
    for p in net.parameters():
        p.grad = None
    with ddp.no_sync():
        ddp(x, True).sum().backward()
        assert ddp.bucket_stats()["steps"] == 1   # nothing sent inside the block
    ddp(x * 2, True).sum().backward()
    ref2 = Net()
    ref2.load_state_dict(net.state_dict())
    (ref2(x, True).sum() + ref2(x * 2, True).sum()).backward()
    local = ref2.fc.weight.grad.clone()
    dist.all_reduce(local, dist.ReduceOp.AVG)
    assert (local - net.fc.weight.grad).abs().max().item() < 1e-5, (local, net.fc.weight.grad)
    st = ddp.bucket_stats()
    assert st["steps"] == 2, st

    # buckets as configured: 64x64 linears are 16 KiB of gradients each
    oar.manual_seed(0)
    big = oar.nn.Sequential(*[oar.nn.Linear(64, 64, bias=False) for _ in range(6)])
    bd = DDP(big, bucket_cap_mb=32 * 1024 / 2 ** 20, first_bucket_mb=16 * 1024 / 2 ** 20)
    bd(oar.ones(2, 64)).sum().backward()
    st = bd.bucket_stats()
    assert [b for b in st["buckets"]] == [(4096, 1), (8192, 2), (8192, 2), (4096, 1)], st
    assert st["launched_in_backward"] == 4 and st["launched_at_sync"] == 0, st
    # a different model on one rank is refused, naming both
    if n >= 2:
        other = oar.nn.Linear(4, 4 if r == 0 else 5)
        expect_raises(RuntimeError, "mismatched collective", DDP, other)
    dist.destroy_process_group()
    assert not dist.is_initialized()
    print(f"api rank {r}: ok")


MOCK_SCRIPT = '''
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

dist.init_process_group(backend="gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(rank)
model = nn.Sequential(nn.Linear(6, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 3))
model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
ddp = DDP(model)
data = TensorDataset(torch.randn(64, 6), torch.randint(0, 3, (64,)))
sampler = DistributedSampler(data, shuffle=True, seed=0)
loader = DataLoader(data, batch_size=8, sampler=sampler)
opt = torch.optim.Adam(ddp.parameters(), lr=1e-2)
for epoch in range(2):
    sampler.set_epoch(epoch)
    for x, y in loader:
        opt.zero_grad()
        loss = nn.functional.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()
for name, p in model.named_parameters():
    hi, lo = p.detach().clone(), p.detach().clone()
    dist.all_reduce(hi, op=dist.ReduceOp.MAX)
    dist.all_reduce(lo, op=dist.ReduceOp.MIN)
    assert (hi - lo).abs().max().item() == 0, name
dist.barrier()
dist.destroy_process_group()
print(f"mock rank {rank}/{world}: torch code ran on oar, final loss {loss.item():.4f}")
'''


def mock():
    import oar

    oar.set_num_threads(1)
    with oar.mock_torch():
        exec(compile(MOCK_SCRIPT, "torch_ddp_script.py", "exec"), {"__name__": "__main__"})
        import torch

        assert torch is oar, "the switch did not give oar"


if __name__ == "__main__":
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "train":
        train(int(args[0]), int(args[1]), args[2], args[3:])
    elif mode == "compare":
        compare(args[0], args[1], float(args[2]), float(args[3]))
    elif mode == "api":
        api()
    elif mode == "mock":
        mock()
    else:
        sys.exit(f"ddp_worker: unknown mode {mode!r}; expected train, compare, api or mock")
