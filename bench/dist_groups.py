"""Process groups and DDP.join from Python, timed (docs/dist.md, "Process groups"): under
`oar launch --nproc 4 -- python3 bench/dist_groups.py` (or mpirun -np 4). Prints, on rank 0, medians
over R repetitions of: new_group of two ranks (each rank makes {0,1} and {2,3}), a 4 KiB all_reduce
within a group of 2 against the same over the world of 4, and a DDP training step (MLP 64-256-256-10,
batch 32 per rank) inside join() against one outside it (the join's per-step counting allreduces)."""
import sys
import time

import oar
import oar.distributed as dist
from oar.nn.parallel import DistributedDataParallel as DDP


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def timed(fn, reps):
    out = []
    for _ in range(reps):
        dist.barrier()
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return median(out)


def main(reps):
    oar.set_num_threads(1)
    dist.init_process_group("mpi")
    me, n = dist.get_rank(), dist.get_world_size()
    made = []
    t_new = timed(lambda: made.append((dist.new_group([0, 1]), dist.new_group([2, 3]))), reps) / 2
    mine = made[0][0] if me < 2 else made[0][1]
    t = oar.ones(1024)
    t_group = timed(lambda: dist.all_reduce(t, group=mine), reps * 10)
    t_world = timed(lambda: dist.all_reduce(t), reps * 10)
    for a, b in made:
        dist.destroy_process_group(a)
        dist.destroy_process_group(b)
    oar.manual_seed(0)
    net = oar.nn.Sequential(oar.nn.Linear(64, 256), oar.nn.Tanh(), oar.nn.Linear(256, 256), oar.nn.Tanh(),
                            oar.nn.Linear(256, 10))
    ddp = DDP(net)
    opt = oar.optim.SGD(ddp.parameters(), lr=0.01)
    x, y = oar.randn(32, 64), oar.randn(32, 10)

    def step():
        opt.zero_grad()
        ((ddp(x) - y) ** 2).mean().backward()
        opt.step()

    t_plain = timed(step, reps)
    with ddp.join():
        t_join = timed(step, reps)
    if me == 0:
        print(f"ranks {n}, median of {reps} (all_reduce: {reps * 10}): new_group {t_new * 1e3:.2f} ms; "
              f"4 KiB all_reduce in a group of 2 {t_group * 1e6:.0f} us, over the world {t_world * 1e6:.0f} us; "
              f"DDP step {t_plain * 1e3:.2f} ms, inside join() {t_join * 1e3:.2f} ms")
    dist.destroy_process_group()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
