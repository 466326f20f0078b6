"""oar only, under mpirun (algorithms.sh): the hooks and averagers torch 1.13 offers only with CUDA or
NCCL, checked against NumPy models of their arithmetic.
2 ranks: noop_hook (each rank keeps its own gradients), quantization_pertensor_hook and
quantization_perchannel_hook (MinMaxObserver's quint8 parameters per rank, codes
round(g / scale) + zero_point clamped to [0, 255], every rank's codes dequantized and averaged),
register_ddp_comm_hook with DDPCommHookType, DDP._register_builtin_comm_hook.
4 ranks: HierarchicalModelAverager (groups of 2 every 2 steps, all 4 every 4 steps, after a warm-up)
against the same schedule simulated over every rank's parameters.

  mpirun -np 2 python3 more_hooks_checks.py hooks
  mpirun -np 4 python3 more_hooks_checks.py hierarchical"""
import sys
import warnings
from collections import OrderedDict

import numpy as np
from hooks_errors import expect


def local_and_all(oar, dist, g):
    """This rank's gradient g (flat f32 numpy) and every rank's, in rank order."""
    world = dist.get_world_size()
    out = oar.from_numpy(np.zeros((world, g.size), dtype=np.float32))
    dist.all_gather_into_tensor(out, oar.from_numpy(g[None].copy()))
    return out.numpy()


def quantized_mean(rows_per_rank):
    """NumPy's model of the quantization hooks: rows_per_rank[r] is rank r's bucket as channels (rows)."""
    total = 0
    for rows in rows_per_rank:
        lo = np.minimum(rows.min(axis=1), 0).astype(np.float32)
        hi = np.maximum(rows.max(axis=1), 0).astype(np.float32)
        scale = np.maximum((hi - lo) / np.float32(255), np.finfo(np.float32).eps).astype(np.float32)
        zp = np.clip(0 - np.round(lo / scale), 0, 255).astype(np.float32)
        codes = np.clip(np.round(rows / scale[:, None]) + zp[:, None], 0, 255)
        total = total + scale[:, None] * (codes - zp[:, None])
    return total / len(rows_per_rank)


def grads_with(oar, dist, rank, register):
    """One backward of a one-matrix model (so the bucket is that gradient) with a hook registered by
    register(ddp); returns (the synchronized gradient, this rank's own gradient), flat."""
    from oar.nn.parallel import DistributedDataParallel as DDP

    oar.manual_seed(5)
    model = oar.nn.Linear(6, 5, bias=False)
    ddp = DDP(model)
    register(ddp)
    x = oar.from_numpy(np.random.RandomState(10 + rank).randn(4, 6).astype(np.float32))
    (ddp(x) ** 2).sum().backward()
    oar.manual_seed(5)
    alone = oar.nn.Linear(6, 5, bias=False)
    (alone(x) ** 2).sum().backward()
    return model.weight.grad.numpy().ravel(), alone.weight.grad.numpy().ravel()


def hooks(oar, dist, rank):
    from oar.distributed.algorithms import ddp_comm_hooks as H
    from oar.distributed.algorithms.ddp_comm_hooks import debugging_hooks, quantization_hooks

    synced, own = grads_with(oar, dist, rank, lambda d: d.register_comm_hook(None, debugging_hooks.noop_hook))
    assert np.array_equal(synced, own), "noop_hook changed the gradients"
    assert not np.array_equal(*local_and_all(oar, dist, own)), "the ranks' inputs should differ"

    synced, own = grads_with(oar, dist, rank,
                             lambda d: d.register_comm_hook(None, quantization_hooks.quantization_pertensor_hook))
    ranks = local_and_all(oar, dist, own)
    want = quantized_mean([r[None] for r in ranks])[0]
    plain = ranks.mean(axis=0)
    assert np.allclose(synced, want, rtol=1e-6, atol=1e-6), np.abs(synced - want).max()
    assert not np.array_equal(synced, plain), "per-tensor codes gave the exact average: nothing was quantized"

    def per_channel(d):
        d.register_comm_hook(None, lambda s, b: quantization_hooks.quantization_perchannel_hook(s, b, bucket_size=8))

    synced, own = grads_with(oar, dist, rank, per_channel)
    ranks = local_and_all(oar, dist, own)
    padded = [np.concatenate([r, np.zeros(2, np.float32)]).reshape(4, 8) for r in ranks]   # 30 -> 4 x 8
    want = quantized_mean(padded).ravel()[:30]
    assert np.allclose(synced, want, rtol=1e-6, atol=1e-6), np.abs(synced - want).max()
    coarse = quantized_mean([r[None] for r in ranks])[0]
    assert np.abs(synced - plain).max() < np.abs(coarse - plain).max(), "per-channel no finer than per-tensor"

    base, _ = grads_with(oar, dist, rank, lambda d: None)
    for kind in (H.DDPCommHookType.ALLREDUCE, H.DDPCommHookType.NOOP, H.DDPCommHookType.FP16_COMPRESS,
                 H.DDPCommHookType.QUANTIZE_PER_TENSOR):
        got, own = grads_with(oar, dist, rank, lambda d: H.register_ddp_comm_hook(kind, d))
        if kind is H.DDPCommHookType.ALLREDUCE:
            assert np.array_equal(got, base), "ALLREDUCE is not DDP's average"
        elif kind is H.DDPCommHookType.NOOP:
            assert np.array_equal(got, own), "NOOP changed the gradients"
        else:
            assert not np.array_equal(got, base) and np.allclose(got, base, rtol=0, atol=0.05 * np.abs(base).max()), kind
    half, _ = grads_with(oar, dist, rank, lambda d: d._register_builtin_comm_hook(dist.BuiltinCommHookType.FP16_COMPRESS))
    fp16, _ = grads_with(oar, dist, rank, lambda d: H.register_ddp_comm_hook(H.DDPCommHookType.FP16_COMPRESS, d))
    assert np.array_equal(half, fp16), "the built-in FP16_COMPRESS is not fp16_compress_hook"
    got, _ = grads_with(oar, dist, rank, lambda d: d._register_builtin_comm_hook(dist.BuiltinCommHookType.ALLREDUCE))
    assert np.array_equal(got, base)
    expect(ValueError, ["BuiltinCommHookType", "'BOGUS'"],
           lambda: grads_with(oar, dist, rank, lambda d: d._register_builtin_comm_hook("BOGUS")))

    def twice(d):
        H.register_ddp_comm_hook(H.DDPCommHookType.POWER_SGD, d)
        assert d._comm_state.matrix_approximation_rank == 1 and d._comm_state.start_powerSGD_iter == 1000
        d.register_comm_hook(None, debugging_hooks.noop_hook)

    expect(RuntimeError, ["once"], lambda: grads_with(oar, dist, rank, twice))


def hierarchical(oar, dist, rank):
    from oar.distributed.algorithms.model_averaging.hierarchical_model_averager import HierarchicalModelAverager as HMA

    assert dist.get_world_size() == 4
    averager = HMA(OrderedDict([(2, 2), (4, 4)]), warmup_steps=3)
    p = oar.zeros(3, requires_grad=True)
    p.grad = oar.zeros(3)
    sim = np.zeros((4, 3))   # every rank's parameter, advanced by the same rule
    for step in range(10):
        with oar.no_grad():
            p += float((rank + 1) * (step + 1))
        sim += np.arange(1, 5)[:, None] * (step + 1)
        averager.average_parameters(iter([p]))
        if step >= 3:
            if step % 4 == 0:
                sim[:] = sim.mean(axis=0)
            elif step % 2 == 0:
                sim[:2], sim[2:] = sim[:2].mean(axis=0), sim[2:].mean(axis=0)
        assert np.allclose(p.detach().numpy(), sim[rank], rtol=1e-6), (step, p.detach().numpy(), sim[rank])
    assert averager.step == 10
    # parameter groups (an optimizer's), and a parameter without a gradient is left alone
    q, r = oar.full((2,), float(rank), requires_grad=True), oar.full((2,), float(rank), requires_grad=True)
    q.grad = oar.zeros(2)
    HMA(OrderedDict([(1, 2), (2, 4)])).average_parameters([{"params": [q, r]}])   # step 0: all four
    assert q.detach().numpy().tolist() == [1.5, 1.5] and r.detach().numpy().tolist() == [float(rank)] * 2
    expect(ValueError, ["must not be empty"], lambda: HMA(OrderedDict()))
    expect(ValueError, ["minimum period", "positive"], lambda: HMA(OrderedDict([(0, 2), (4, 4)])))
    expect(ValueError, ["last value", "must be equal to the size", "4"], lambda: HMA(OrderedDict([(2, 2)])))
    expect(ValueError, ["warmup_steps", "non-negative"], lambda: HMA(OrderedDict([(2, 4)]), warmup_steps=-1))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        HMA(OrderedDict([(1, 4)]))
    assert any("maximum period" in str(x.message) for x in w), [str(x.message) for x in w]


def main():
    import oar
    import oar.distributed as dist

    oar.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    {"hooks": hooks, "hierarchical": hierarchical}[sys.argv[1]](oar, dist, rank)
    dist.barrier()
    print(f"{sys.argv[1]} checks rank {rank}: OK")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
