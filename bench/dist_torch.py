#!/usr/bin/env python3
"""PyTorch DDP (gloo) on the models of ../shared/bench/torch_workloads.py, as bench_dist train
measures oar: N processes x 1 thread, the same per-rank batch, SGD momentum 0.9, random data.
Prints one JSON line (rank 0), fields as bench_dist's: step_ms (median), samples_per_s.
Usage: dist_torch.py SHARED MODEL BATCH STEPS NPROC
Started by mpirun instead (bench/dist_netns.sh: one rank per namespaced host), each process is
one rank (OMPI_COMM_WORLD_RANK/SIZE) and gloo meets at MASTER_ADDR:MASTER_PORT (rank 0's host)."""
import importlib.util
import json
import os
import statistics
import sys
import time

shared, model_name, batch, steps, nproc = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
os.environ.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
TORCH_NAME = {"gpt-mini": "gpt"}


def load_workloads():
    """torch_workloads.py parses its arguments at import: give it a workload and 1 thread."""
    argv, sys.argv = sys.argv, ["torch_workloads.py", "--workload", TORCH_NAME.get(model_name, model_name), "--threads", "1"]
    spec = importlib.util.spec_from_file_location("torch_workloads", os.path.join(shared, "bench", "torch_workloads.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sys.argv = argv
    return mod


def worker(rank, port, out, master="127.0.0.1"):
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    tw = load_workloads()
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR=master, MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=nproc)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(100 + rank)
    if model_name == "mlp":
        model, x, y = tw.MLP(), torch.randn(batch, 784, generator=g), torch.randint(0, 10, (batch,), generator=g)
    elif model_name == "resnet20":
        model = tw.ResNet20().train()
        x, y = torch.randn(batch, 3, 32, 32, generator=g), torch.randint(0, 10, (batch,), generator=g)
    else:
        model = tw.GPTMini()
        for mod in model.modules():  # constant buffers (bool mask, positions): gloo in torch 1.13
            for name in list(mod._buffers):  # refuses to broadcast bool, so keep them as attributes
                setattr(mod, name, mod._buffers.pop(name))
        x, y = torch.randint(0, 256, (batch, 128), generator=g), torch.randint(0, 256, (batch * 128,), generator=g)
    ddp = torch.nn.parallel.DistributedDataParallel(model)  # 25 MB buckets, first 1 MB
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    times = []
    for k in range(steps + 3):
        t0 = time.perf_counter()
        logits = ddp(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if k >= 3:
            times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    if rank == 0:
        with open(out, "w") as f:
            f.write(json.dumps({"bench": "train", "framework": "torch-ddp-gloo", "torch": torch.__version__,
                                "model": model_name, "ranks": nproc, "batch_per_rank": batch,
                                "step_ms": round(1e3 * med, 2),
                                "step_ms_spread": [round(1e3 * min(times), 2), round(1e3 * max(times), 2)],
                                "samples_per_s": round(nproc * batch / med, 1)}) + "\n")
    dist.destroy_process_group()


if __name__ == "__main__" and "OMPI_COMM_WORLD_RANK" in os.environ:
    if int(os.environ["OMPI_COMM_WORLD_SIZE"]) != nproc:
        sys.exit(f"dist_torch: mpirun started {os.environ['OMPI_COMM_WORLD_SIZE']} processes, NPROC is {nproc}")
    rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
    worker(rank, int(os.environ.get("MASTER_PORT", "29533")), "/dev/stdout",
           os.environ.get("MASTER_ADDR", "127.0.0.1"))
elif __name__ == "__main__":
    import socket
    import tempfile
    import torch.multiprocessing as mp
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    mp.spawn(worker, args=(port, out), nprocs=nproc)
    print(open(out).read().strip())
    os.unlink(out)
