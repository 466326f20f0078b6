"""python -m oar.bench.linalg [--n N] [--batch B] [--repeats R] [--iters I] [--dtype float32|float64]
[--only NAME,...]:
torch.linalg on oar (LAPACK through OpenBLAS) beside PyTorch in the same process, one thread each.
Each function runs forward, and forward + backward of a sign-invariant loss, on the same batch of
n x n matrices; the libraries alternate per repeat so load hits both. Prints JSON: per function
and library the median time per call with min and max over the repeats, and oar / torch (below 1:
oar is faster)."""
import argparse
import json
import os
import platform
import statistics
import time

import numpy as np

CALLS = {
    "solve": lambda L, a, b: L.linalg.solve(a, b),
    "eigh": lambda L, a, b: L.linalg.eigh(a + a.transpose(-2, -1))[0],
    "svd": lambda L, a, b: L.linalg.svd(a, full_matrices=False)[1],
    "qr": lambda L, a, b: L.linalg.qr(a)[1].abs(),
    "lu_factor": lambda L, a, b: L.linalg.lu_factor(a)[0],
    "lstsq": lambda L, a, b: L.linalg.lstsq(a, b).solution,
    "matrix_exp": lambda L, a, b: L.linalg.matrix_exp(a / a.shape[-1] ** 0.5),
    "cholesky_ex": lambda L, a, b: L.linalg.cholesky_ex(a @ a.transpose(-2, -1)).L,
    "householder_product": lambda L, a, b: L.linalg.householder_product(a, b[..., 0] * 0.1),
    # phase- and order-invariant: eigenvalues' real parts and the vectors' moduli weighted by them
    "eig": lambda L, a, b: _eig_loss(*L.linalg.eig(a)),
    "ldl_factor": lambda L, a, b: L.linalg.ldl_factor(a + a.transpose(-2, -1)).LD,
}
FORWARD_ONLY = {"ldl_factor"}  # torch 1.13 has no derivative for it


def _eig_loss(lam, v):
    return (v.real * v.real + v.imag * v.imag) * lam.real.unsqueeze(-2)


def timed(fn, iters):
    fn()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - t0) / iters


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=64)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--dtype", default="float64", choices=("float32", "float64"))
    p.add_argument("--only", default="", help="comma-separated function names (default: all)")
    args = p.parse_args(argv)
    import torch

    import oar

    torch.set_num_threads(1)
    oar.set_num_threads(1)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((args.batch, args.n, args.n)).astype(args.dtype) + 2 * np.eye(args.n, dtype=args.dtype)
    b = rng.standard_normal((args.batch, args.n, 4)).astype(args.dtype)
    out = {"bench": "linalg", "n": args.n, "batch": args.batch, "dtype": args.dtype, "repeats": args.repeats,
           "iters": args.iters, "cpu": platform.processor() or platform.machine(),
           "load_avg_1m": os.getloadavg()[0], "results": {}}
    only = set(filter(None, args.only.split(",")))
    for name, call in CALLS.items():
        if only and name not in only:
            continue
        for mode in ("forward",) if name in FORWARD_ONLY else ("forward", "backward"):
            runs = {"oar": [], "torch": []}
            for _ in range(args.repeats):
                for lib_name, lib in (("oar", oar), ("torch", torch)):
                    ta = lib.tensor(a).requires_grad_(mode == "backward")
                    tb = lib.tensor(b)

                    def step():
                        y = call(lib, ta, tb)
                        if mode == "backward":
                            y.sum().backward()

                    runs[lib_name].append(timed(step, args.iters))
            med = {k: statistics.median(v) for k, v in runs.items()}
            out["results"][f"{name}_{mode}"] = {
                **{f"{k}_ms": round(1e3 * med[k], 4) for k in med},
                **{f"{k}_min_max_ms": [round(1e3 * min(v), 4), round(1e3 * max(v), 4)] for k, v in runs.items()},
                "oar_over_torch": round(med["oar"] / med["torch"], 3)}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
