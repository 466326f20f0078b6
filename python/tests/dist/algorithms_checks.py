"""oar only, 2 ranks (algorithms.sh): what algorithms.sh's runs against PyTorch do not show.
hook_with_zero_step_interleaved steps bucket by bucket (the local optimizer called once per bucket
this rank owns, the step counted once); PowerSGD's first Q is torch's draw (pinned values from
torch.manual_seed(7), and torch itself where it is installed); batched_powerSGD_hook's padding, a
rank above the square's side and its statistics; post-local SGD's subgroup made by new_subgroups();
the averagers', PostLocalSGDOptimizer's and new_subgroups' errors and state, as torch 1.13's;
DDP(static_graph=True): the same gradients as without it, torch's error when the parameters used
change, _set_static_graph's warnings.

  mpirun -np 2 python3 algorithms_checks.py"""
import warnings

import numpy as np
from hooks_errors import expect, net, step


def zero_interleaved(oar, dist, rank):
    from oar.distributed.algorithms.ddp_comm_hooks import default_hooks as hooks
    from oar.distributed.algorithms.ddp_comm_hooks.ddp_zero_hook import hook_with_zero_step_interleaved
    from oar.distributed.optim import ZeroRedundancyOptimizer as ZeRO
    from oar.nn.parallel import DistributedDataParallel as DDP

    model = net(oar)
    ddp = DDP(model, bucket_cap_mb=0.0002, first_bucket_mb=0.0001)
    plain = ZeRO(ddp.parameters(), optimizer_class=oar.optim.Adam, lr=0.1)
    expect(ValueError, ["overlap_with_ddp=True"],
           lambda: hook_with_zero_step_interleaved(hooks.allreduce_hook, ddp, plain))
    zero = ZeRO(ddp.parameters(), optimizer_class=oar.optim.Adam, lr=0.1, overlap_with_ddp=True)
    ddp.register_comm_hook(None, hook_with_zero_step_interleaved(hooks.allreduce_hook, ddp, zero))
    calls = []
    local_step = zero.optim.step

    def counted():   # which parameters have a gradient when the local optimizer runs
        calls.append(sum(p.grad is not None for p in zero.optim.param_groups[0]["params"]))
        return local_step()

    zero.optim.step = counted
    owned = [k for k, _ in zero._overlap_info.assignments[rank]]
    for _ in range(2):
        step(oar, ddp, rank)
    per_bucket = [len(ps) for _, ps in zero._overlap_info.assignments[rank]]
    assert calls == per_bucket * 2, f"rank {rank}: local steps with {calls} gradients, expected {per_bucket} twice"
    assert rank == 1 or len(owned) >= 2, f"rank 0 owns buckets {owned}: nothing interleaves"
    assert zero.optim._c.steps() == 2, f"the local optimizer counted {zero.optim._c.steps()} steps for 2"
    params = np.concatenate([p.detach().numpy().ravel() for p in model.parameters()])
    both = [np.zeros_like(params), np.zeros_like(params)]
    out = oar.from_numpy(np.stack(both))
    dist.all_gather_into_tensor(out, oar.from_numpy(params[None]))
    assert np.array_equal(out.numpy()[0], out.numpy()[1]), "the ranks' parameters differ: broadcasts missing"


def torch_randn():
    from oar.distributed.algorithms.ddp_comm_hooks._torch_randn import TorchNormal

    g = TorchNormal(7)   # torch.manual_seed(7); torch.randn(3, 1); torch.randn(20, 1)
    small, large = g.randn((3, 1)).ravel(), g.randn((20, 1)).ravel()
    want = [-0.1467950940132141, 0.7861412763595581, 0.9468216300010681]
    assert small.tolist() == want, small.tolist()
    assert np.allclose(large[[0, 7, 19]], [-0.17643792927265167, 0.5035638809204102, -1.056684136390686],
                       rtol=0, atol=3e-7), large[[0, 7, 19]]
    try:
        import torch
    except ImportError:
        return
    worst = 0.0
    for seed in (0, 12345, 999_999_999):
        torch.manual_seed(seed)
        g = TorchNormal(seed)
        for shape in ((5, 1), (3, 1), (1, 1), (16, 1), (7, 2), (33, 2), (12, 12)):
            worst = max(worst, float(np.abs(torch.randn(*shape).numpy() - g.randn(shape)).max()))
    assert worst <= 3e-7, f"TorchNormal against torch.randn: {worst}"


def batched_powersgd(oar, dist, rank):
    from oar.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd
    from oar.nn.parallel import DistributedDataParallel as DDP

    # one bucket of 130 elements (side 12, 14 of padding, so the square has a zero row); rank 20 > 12:
    # the factors keep 12 columns (torch's orthogonalization would refuse), orthonormalized by QR, so
    # P P^T = I and the factors carry the whole average: plain DDP's gradients, rounding apart
    model = net(oar)
    ddp = DDP(model)
    state = psgd.PowerSGDState(None, matrix_approximation_rank=20, start_powerSGD_iter=2, min_compression_rate=0)
    ddp.register_comm_hook(state, psgd.batched_powerSGD_hook)
    plain = DDP(net(oar))
    for i in range(4):
        step(oar, ddp, rank + i)
        step(oar, plain, rank + i)
        worst = max(float(np.abs(p.grad.numpy() - q.grad.numpy()).max())
                    for p, q in zip(ddp.parameters(), plain.parameters()))
        assert worst <= 1e-5, f"step {i}: the full-rank batched hook missed plain DDP's gradients by {worst}"
    assert state.compression_stats()[1:] == (2 * 130, 2 * 12 * 20 * 2), state.compression_stats()
    assert tuple(state.q_memory_dict[0].shape) == (12, 12) and state.error_dict[0].numel() == 144


def post_local(oar, dist, rank):
    from oar.distributed.algorithms.ddp_comm_hooks import post_localSGD_hook as post_local
    from oar.distributed.algorithms.model_averaging import averagers, utils
    from oar.distributed.optim import PostLocalSGDOptimizer
    from oar.nn.parallel import DistributedDataParallel as DDP

    # subgroup=None: new_subgroups() at the first local step, the ranks of this machine (both here)
    ddp = DDP(net(oar))
    state = post_local.PostLocalSGDState(None, None, start_localSGD_iter=1)
    ddp.register_comm_hook(state, post_local.post_localSGD_hook)
    for i in range(3):
        step(oar, ddp, rank)
    assert state.iter == 1 and state.subgroup is not None and state.subgroup.size() == 2, (state.iter, state.subgroup)
    grads = np.concatenate([p.grad.numpy().ravel() for p in ddp.parameters()])
    out = oar.from_numpy(np.zeros((2, grads.size), dtype=np.float32))
    dist.all_gather_into_tensor(out, oar.from_numpy(grads[None]))
    assert np.array_equal(out.numpy()[0], out.numpy()[1]), "the machine's subgroup did not average"

    expect(ValueError, ["warmup_steps", "non-negative"], lambda: averagers.PeriodicModelAverager(2, warmup_steps=-1))
    expect(ValueError, ["period", "positive"], lambda: averagers.PeriodicModelAverager(0))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        averagers.PeriodicModelAverager(1)
    assert any("period is 1" in str(x.message) for x in w), [str(x.message) for x in w]
    expect(TypeError, ["abstract"], lambda: averagers.ModelAverager())
    expect(NotImplementedError, ["not supported"], lambda: utils.get_params_to_average([3]))
    # mixed dtypes travel together and come back in their own; a rank outside the group keeps its own
    a, b = oar.full((3,), float(rank)), oar.full((2,), float(rank + 1), dtype=oar.float64)
    utils.average_parameters(iter([a, b]), None)
    assert a.dtype == oar.float32 and a.numpy().tolist() == [0.5] * 3 and b.numpy().tolist() == [1.5] * 2, (a, b)
    alone = [dist.new_group([r]) for r in range(2)][1 - rank]   # the other rank's group: not a member
    c = oar.full((2,), float(rank))
    utils.average_parameters(iter([c]), alone)
    assert c.numpy().tolist() == [float(rank)] * 2, c

    model = net(oar)
    opt = PostLocalSGDOptimizer(oar.optim.SGD(model.parameters(), lr=0.1), averagers.PeriodicModelAverager(4))
    for _ in range(3):
        opt.zero_grad()
        (model(oar.ones(2, 4)) ** 2).mean().backward()
        opt.step()
    sd = opt.state_dict()
    assert sd["step"] == 3 and opt.param_groups is opt.optim.param_groups, sd.get("step")
    del sd["step"]
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        opt.load_state_dict(sd)
    assert opt.averager.step == 0 and any("step counter" in str(x.message) for x in w)


def subgroups(oar, dist, rank):
    mine, groups = dist.new_subgroups(group_size=1)
    assert len(groups) == 2 and groups[rank] is mine and mine.size() == 1, (mine, groups)
    assert groups[1 - rank] is dist.GroupMember.NON_GROUP_MEMBER
    mine, groups = dist.new_subgroups()   # the launcher's local size: both ranks
    assert mine.size() == 2 and len(groups) == 1
    expect(ValueError, ["must not exceed the world size"], lambda: dist.new_subgroups(group_size=3))
    expect(ValueError, ["greater than 0"], lambda: dist.new_subgroups(group_size=0))
    expect(ValueError, ["cannot be empty"], lambda: dist.new_subgroups_by_enumeration([]))
    expect(ValueError, ["has appeared in both subgroup"], lambda: dist.new_subgroups_by_enumeration([[0, 1], [1]]))
    mine, groups = dist.new_subgroups_by_enumeration([[1], [0]])
    assert mine is groups[1 - rank] and mine.size() == 1


def static_graph(oar, dist, rank):
    from oar.nn.parallel import DistributedDataParallel as DDP

    class Skips(oar.nn.Module):   # rank 1 skips b (a static difference between ranks); `use_b` changes it
        def __init__(self):
            super().__init__()
            oar.manual_seed(5)
            self.a, self.b, self.c = oar.nn.Linear(4, 8), oar.nn.Linear(8, 8), oar.nn.Linear(8, 2)

        def forward(self, x, use_b=True):
            h = oar.tanh(self.a(x))
            if use_b and rank == 0:
                h = oar.tanh(self.b(h))
            return self.c(h)

    def train(ddp, uses):
        for i, use_b in enumerate(uses):
            for p in ddp.parameters():
                p.grad = None
            x = oar.from_numpy(np.random.RandomState(10 * i + rank).randn(3, 4).astype(np.float32))
            (ddp(x, use_b) ** 2).mean().backward()
        return [None if p.grad is None else p.grad.numpy().copy() for p in ddp.parameters()]

    static = DDP(Skips(), static_graph=True)
    assert static.static_graph
    plain = DDP(Skips())
    assert not plain.static_graph
    got, want = train(static, [True] * 3), train(plain, [True] * 3)
    assert all(np.array_equal(g, w) for g, w in zip(got, want)), "static_graph=True changed the gradients"
    # b used (by rank 0) in the first steps, by no rank in the third: torch's error, naming b
    changing = DDP(Skips(), static_graph=True)
    expect(RuntimeError, ["training graph has changed", "static_graph", "'b.weight'"],
           lambda: train(changing, [True, True, False]))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        static._set_static_graph()
        DDP(Skips(), find_unused_parameters=True)._set_static_graph()
    said = [str(x.message) for x in w]
    assert any("no need to set it again" in m for m in said) and any("find_unused_parameters=true" in m
                                                                       for m in said), said


def main():
    import oar
    import oar.distributed as dist

    oar.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch_randn()
    zero_interleaved(oar, dist, rank)
    batched_powersgd(oar, dist, rank)
    subgroups(oar, dist, rank)
    post_local(oar, dist, rank)
    static_graph(oar, dist, rank)
    dist.barrier()
    print(f"algorithms checks rank {rank}: OK")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
