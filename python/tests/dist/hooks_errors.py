"""oar only, 2 ranks (hooks.sh): DDP communication hooks' bad input gets torch 1.13's error types and
messages; GradBucket's API; hooks run in bucket order during backward; oar.futures.Future's semantics;
half-precision allreduce sums; ZeroRedundancyOptimizer(overlap_with_ddp=True)'s errors.

  mpirun -np 2 python3 hooks_errors.py"""
import warnings

import numpy as np
from dist_checks import expect



def net(oar):
    oar.manual_seed(3)
    return oar.nn.Sequential(oar.nn.Linear(4, 8), oar.nn.Tanh(), oar.nn.Linear(8, 8), oar.nn.Tanh(),
                             oar.nn.Linear(8, 2))


def step(oar, ddp, rank):
    x = oar.from_numpy(np.random.RandomState(rank).randn(3, 4).astype(np.float32))
    for p in ddp.parameters():
        p.grad = None
    (ddp(x) ** 2).mean().backward()


def futures(oar):
    from oar.futures import Future, collect_all, wait_all

    f = Future()
    expect(RuntimeError, ["not completed yet"], f.value)
    expect(RuntimeError, ["nothing will complete"], f.wait)
    seen = []
    f.add_done_callback(lambda fut: seen.append(fut.value()))
    g = f.then(lambda fut: fut.value() * 2)
    h = g.then(lambda fut: 1 / 0)
    assert not g.done()
    f.set_result(21)
    assert seen == [21] and g.done() and g.wait() == 42 and g.value() == 42, (seen, g.done())
    expect(RuntimeError, ["Got the following error when running the callback", "ZeroDivisionError"], h.wait)
    expect(RuntimeError, ["marked completed once"], lambda: f.set_result(1))
    e = Future()
    e.set_exception(ValueError("bad"))
    expect(ValueError, ["bad"], e.wait)
    expect(TypeError, ["expected an exception"], lambda: Future().set_exception(3))
    both = collect_all([f, g])
    assert [x.value() for x in both.wait()] == [21, 42]
    assert wait_all([f, g]) == [21, 42]
    import oar.futures as fm

    assert Future[oar.Tensor] == fm.Future[oar.Tensor], "Future[Tensor] is not one type (hook annotations)"


def collectives(oar, dist, rank):
    """f16 and bf16 sums (fixed rank order, f32 adds rounded back) and get_future's value."""
    # sums on a tie of the half grid: rounded to nearest even, as f32 adds rounded back
    for dt, a, b, want in ((oar.float16, 1 + 2 ** -10, 2 ** -11, 1 + 2 ** -9),
                           (oar.bfloat16, 1 + 2 ** -7, 2 ** -8, 1 + 2 ** -6)):
        t = oar.full((5,), a if rank == 0 else b, dtype=dt)
        fut = dist.all_reduce(t, async_op=True).get_future()
        out = fut.wait()
        assert isinstance(out, list) and out[0] is t, out
        assert t.dtype == dt and t.float().numpy().tolist() == [want] * 5, (dt, t.float().numpy())
    assert np.float16(1 + 2 ** -10 + 2 ** -11) == np.float16(1 + 2 ** -9)   # the fp16 case is numpy's rounding
    expect(RuntimeError, ["get_future", "wait()"], lambda: dist.isend(oar.zeros(1), 1 - rank).get_future())
    dist.recv(oar.zeros(1), 1 - rank)


def hooks_api(oar, dist, rank):
    from oar.distributed.algorithms.ddp_comm_hooks import default_hooks as hooks
    from oar.futures import Future
    from oar.nn.parallel import DistributedDataParallel as DDP

    model = net(oar)
    ddp = DDP(model, bucket_cap_mb=0.0002, first_bucket_mb=0.0001)
    seen = []

    def spy(state, bucket: dist.GradBucket) -> Future[oar.Tensor]:
        seen.append((bucket.index(), bucket.is_last(), bucket))
        state.append(bucket.index())
        # the views are the buffer's: a write through gradients() shows in buffer()
        views = bucket.gradients()
        assert [tuple(g.shape) for g in views] == [tuple(p.shape) for p in bucket.parameters()]
        assert sum(g.numel() for g in views) == bucket.buffer().numel()
        assert views[0].data_ptr() == bucket.buffer().data_ptr()
        return hooks.allreduce_hook(None, bucket)

    state = []
    ddp.register_comm_hook(state, spy)
    step(oar, ddp, rank)
    n = len(ddp.bucket_stats()["buckets"])
    assert n >= 3, f"expected several buckets, got {n}"
    assert [s[0] for s in seen] == list(range(n)) and [s[1] for s in seen] == [False] * (n - 1) + [True], seen
    assert state == list(range(n)), state
    names = {id(p): name for name, p in model.named_parameters()}
    order = [names[id(p)] for _, _, b in seen for p in b.parameters()]
    assert order == [name for name, _ in reversed(list(model.named_parameters()))], order
    stats = ddp.bucket_stats()
    assert stats["launched_in_backward"] == n and stats["launched_at_sync"] == 0, stats   # overlapping backward
    # the hook's value is what lands in .grad: bucket 0's parameter (the last layer's bias) against the hook
    assert np.array_equal(model[4].bias.grad.numpy(), seen[0][2].buffer()[:2].numpy())
    expect(RuntimeError, ["can only be called once"], lambda: ddp.register_comm_hook(None, hooks.allreduce_hook))

    d2 = DDP(net(oar))
    expect(TypeError, ["Communication hook must be callable."], lambda: d2.register_comm_hook(None, 5))

    def bad_bucket(state, bucket: int):
        pass

    def bad_return(state, bucket) -> int:
        pass

    expect(ValueError, ["bucket annotation should be dist.GradBucket"], lambda: d2.register_comm_hook(None, bad_bucket))
    expect(ValueError, ["return annotation should be torch.futures.Future"],
           lambda: d2.register_comm_hook(None, bad_return))
    # a hook returning the tensor, not a Future: raised by backward, as torch's
    d2.register_comm_hook(None, lambda s, bucket: bucket.buffer())
    expect(RuntimeError, ["must return a torch.futures.Future object", "Tensor"], lambda: step(oar, d2, rank))

    # a hook that raises: backward raises it; the next step (with a good hook state) goes on
    calls = [0]

    def flaky(state, bucket):
        calls[0] += 1
        if calls[0] == 1:
            raise KeyError("flaky hook")
        return hooks.allreduce_hook(None, bucket)

    d3 = DDP(net(oar))
    d3.register_comm_hook(None, flaky)
    expect(KeyError, ["flaky hook"], lambda: step(oar, d3, rank))
    step(oar, d3, rank)
    mine = np.concatenate([p.grad.numpy().ravel() for p in d3.parameters()])
    other = [None, None]
    dist.all_gather_object(other, mine.tobytes())
    assert other[0] == other[1], "after a failed hook step, the next step's gradients differ across ranks"

    # a Future of the wrong size fails backward with the sizes named
    d4 = DDP(net(oar))

    def short(state, bucket):
        f = Future()
        f.set_result(bucket.buffer()[:1])
        return f

    d4.register_comm_hook(None, short)
    expect(RuntimeError, ["1 elements", "expected the bucket's"], lambda: step(oar, d4, rank))

    # a noop hook (torch's doc example): no communication, each rank keeps its own gradients
    d5 = DDP(net(oar))

    def noop(state, bucket):
        f = Future()
        f.set_result(bucket.buffer())
        return f

    d5.register_comm_hook(None, noop)
    step(oar, d5, rank)
    local = net(oar)
    x = oar.from_numpy(np.random.RandomState(rank).randn(3, 4).astype(np.float32))
    (local(x) ** 2).mean().backward()
    for a, b in zip(d5.parameters(), local.parameters()):
        assert np.array_equal(a.grad.numpy(), b.grad.numpy()), "noop hook: the gradients were changed"

    # no_sync with a hook: the accumulated gradients reach the hook at the next synced backward, and the
    # result is the hookless one's bits
    def accumulate(hooked):
        m = net(oar)
        d = DDP(m)
        if hooked:
            d.register_comm_hook(None, hooks.allreduce_hook)
        rs = np.random.RandomState(10 + rank)
        xs = [oar.from_numpy(rs.randn(3, 4).astype(np.float32)) for _ in range(2)]
        with d.no_sync():
            (d(xs[0]) ** 2).mean().backward()
        (d(xs[1]) ** 2).mean().backward()
        return [p.grad.numpy().copy() for p in m.parameters()]

    hooked, plain = accumulate(True), accumulate(False)
    assert all(np.array_equal(a, b) for a, b in zip(hooked, plain)), "no_sync with a hook differs from without"

    # join and compiled steps are not offered with a hook
    from oar.distributed.algorithms import Join

    def in_join():
        with Join([ddp]):
            step(oar, ddp, rank)

    expect(RuntimeError, ["communication hook"], in_join)
    dist.barrier()


def powersgd(oar):
    from oar.distributed.algorithms.ddp_comm_hooks.powerSGD_hook import PowerSGDState

    expect(ValueError, ["start_powerSGD_iter` > 1"], lambda: PowerSGDState(None, start_powerSGD_iter=1))
    expect(ValueError, ["matrix_approximation_rank >= 1"], lambda: PowerSGDState(None, matrix_approximation_rank=0))
    s = PowerSGDState(None, start_powerSGD_iter=1, use_error_feedback=False, warm_start=False)
    assert s.compression_stats() == (0, 0, 0)


def zero_overlap(oar, dist, rank):
    from oar.distributed.algorithms.ddp_comm_hooks import default_hooks as hooks
    from oar.distributed.algorithms.ddp_comm_hooks.ddp_zero_hook import hook_with_zero_step
    from oar.distributed.optim import ZeroRedundancyOptimizer as ZeRO
    from oar.nn.parallel import DistributedDataParallel as DDP

    model = net(oar)
    ddp = DDP(model, bucket_cap_mb=0.0002, first_bucket_mb=0.0001)
    plain = ZeRO(ddp.parameters(), optimizer_class=oar.optim.SGD, lr=0.1)
    expect(ValueError, ["overlap_with_ddp=True"], lambda: hook_with_zero_step(hooks.allreduce_hook, ddp, plain))
    weights = [p for n, p in model.named_parameters() if n.endswith("weight")]
    biases = [p for n, p in model.named_parameters() if n.endswith("bias")]
    expect(ValueError, ["single parameter group"],
           lambda: ZeRO([{"params": weights}, {"params": biases}], optimizer_class=oar.optim.SGD, lr=0.1,
                        overlap_with_ddp=True))
    zero = ZeRO(ddp.parameters(), optimizer_class=oar.optim.SGD, lr=0.1, overlap_with_ddp=True)
    expect(RuntimeError, ["fully initialized"], lambda: zero.consolidate_state_dict(to=0))
    other = ZeRO(net(oar).parameters(), optimizer_class=oar.optim.SGD, lr=0.1, overlap_with_ddp=True)
    expect(ValueError, ["not among the ZeroRedundancyOptimizer's parameters"],
           lambda: hook_with_zero_step(hooks.allreduce_hook, ddp, other))
    ddp.register_comm_hook(None, hook_with_zero_step(hooks.allreduce_hook, ddp, zero))
    expect(RuntimeError, ["already steps inside a DDP hook"], lambda: hook_with_zero_step(hooks.allreduce_hook, ddp,
                                                                                          zero))
    expect(RuntimeError, ["single parameter group"], lambda: zero.add_param_group({"params": [oar.zeros(2)]}))
    before = [p.detach().numpy().copy() for p in model.parameters()]
    step(oar, ddp, rank)
    after = [p.detach().numpy().copy() for p in model.parameters()]
    assert all(not np.array_equal(a, b) for a, b in zip(before, after)), "the first step did not update"
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert zero.step() is None
    assert any("overlap_with_ddp=True" in str(x.message) for x in w), [str(x.message) for x in w]
    assert [p.detach().numpy().tolist() for p in model.parameters()] == [a.tolist() for a in after], \
        "step() changed the parameters with overlap_with_ddp=True"
    owned = {id(p) for g in zero.optim.param_groups for p in g["params"]}
    assert 0 < len(owned) < len(list(model.parameters())), f"rank {rank} owns {len(owned)} parameters"
    zero.consolidate_state_dict(to=0)
    if rank == 0:
        assert len(zero.state_dict()["param_groups"][0]["params"]) == len(list(model.parameters()))
    dist.barrier()


def errors():
    import oar
    import oar.distributed as dist

    oar.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    futures(oar)
    collectives(oar, dist, rank)
    hooks_api(oar, dist, rank)
    powersgd(oar)
    zero_overlap(oar, dist, rank)
    print(f"hooks errors rank {rank}: OK")
    dist.destroy_process_group()


if __name__ == "__main__":
    errors()
