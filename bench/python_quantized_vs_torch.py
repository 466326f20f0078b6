#!/usr/bin/env python3
"""A torchvision quantized model put through PyTorch's own eager quantization flow (fuse_model,
prepare, calibrate, convert: python/tests/quant_flow_util.py), run by torch 1.13 (each quantized
engine it has: qnnpack, onednn) and, from the same model file under the torch switch, by oar
eagerly and compiled (oar.jit.to_static). Inference, no_grad.

oar runs in a worker interpreter (the switch makes `import torch` give oar there) that times on
request, so every repetition times torch's engines and then oar's modes back to back and machine
noise hits them alike. A figure is the median over repetitions of each repetition's median call
(wall ms), with the min-max spread. Prints one JSON object per line (the ratio is torch's best
engine over oar's mode: above 1, oar is faster) and a Markdown table on stderr.

Usage: PYTHONPATH=build/python /usr/bin/python3 bench/python_quantized_vs_torch.py
           [--model resnet18] [--batches 1 8] [--size 224] [--threads 1] [--reps 5] [--steps 5]
"""
import argparse
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(HERE, "..", "python", "tests")


def median_call(fn, steps):
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return 1e3 * statistics.median(times)


def worker(request_path):
    """The oar side: builds the quantized model through the same flow, then answers 'MODE BATCH' lines
    with one median call in ms."""
    import oar

    oar.mock_torch()
    import torch  # noqa: F401  (oar)
    import torchvision

    sys.path.insert(0, TESTS)
    from quant_flow_util import quantized_model

    with open(request_path, "rb") as f:
        req = pickle.load(f)
    oar.set_num_threads(req["threads"])
    model = quantized_model(oar, torchvision, req["model"], req["kwargs"], req["state_dict"], req["calib"])
    compiled = oar.jit.to_static(model.forward)
    inputs = {b: oar.from_numpy(x) for b, x in req["inputs"].items()}
    print("ready", flush=True)
    for line in sys.stdin:
        mode, batch = line.split()
        fn = compiled if mode == "static" else model
        x = inputs[int(batch)]
        with oar.no_grad():
            fn(x)  # warm (the first compiled call traces)
            ms = median_call(lambda: fn(x), req["steps"])
        print(f"{ms:.4f}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--worker")
    args = ap.parse_args()
    if args.worker:
        return worker(args.worker)

    import numpy as np
    import torch
    import torchvision

    sys.path.insert(0, TESTS)
    from bench_common import cpu_name
    from quant_flow_util import quantized_model

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    kwargs = ({"init_weights": args.model == "googlenet", "aux_logits": False}
              if args.model in ("googlenet", "inception_v3") else {})
    float_model = getattr(torchvision.models.quantization, args.model)(weights=None, quantize=False, **kwargs).eval()
    sd = {k: v.detach().numpy().copy() for k, v in float_model.state_dict().items()}
    rng = np.random.default_rng(0)
    calib = rng.standard_normal((4, 3, args.size, args.size)).astype(np.float32)
    inputs = {b: rng.standard_normal((b, 3, args.size, args.size)).astype(np.float32) for b in args.batches}
    engines = [e for e in ("qnnpack", "onednn", "fbgemm", "x86") if e in torch.backends.quantized.supported_engines]
    models = {}
    for e in engines:
        torch.backends.quantized.engine = e
        models[e] = quantized_model(torch, torchvision, args.model, kwargs, sd, calib)

    with tempfile.TemporaryDirectory() as tmp:
        req_path = os.path.join(tmp, "req.pkl")
        with open(req_path, "wb") as f:
            pickle.dump({"model": args.model, "kwargs": kwargs, "state_dict": sd, "calib": calib, "inputs": inputs,
                         "threads": args.threads, "steps": args.steps}, f)
        env = dict(os.environ, OAR_NUM_THREADS=str(args.threads))
        env.pop("OAR_MOCK_TORCH", None)
        oar_side = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", req_path], env=env,
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if oar_side.stdout.readline().strip() != "ready":
            raise SystemExit("the oar worker failed to start (see its error above)")

        def oar_ms(mode, batch):
            oar_side.stdin.write(f"{mode} {batch}\n")
            oar_side.stdin.flush()
            return float(oar_side.stdout.readline())

        rows = []
        for batch in args.batches:
            tx = torch.from_numpy(inputs[batch])
            times = {k: [] for k in engines + ["oar eager", "oar static"]}
            load = [os.getloadavg()[0]]
            for _ in range(args.reps):
                for e in engines:
                    torch.backends.quantized.engine = e
                    with torch.no_grad():
                        models[e](tx)
                        times[e].append(median_call(lambda: models[e](tx), args.steps))
                times["oar eager"].append(oar_ms("eager", batch))
                times["oar static"].append(oar_ms("static", batch))
            load.append(os.getloadavg()[0])
            med = {k: statistics.median(v) for k, v in times.items()}
            best = min(engines, key=lambda e: med[e])
            for mode in ("oar eager", "oar static"):
                row = {"model": f"quantized {args.model}", "batch": batch, "size": args.size, "threads": args.threads,
                       "oar": mode, "oar_ms": round(med[mode], 3),
                       "oar_spread_ms": [round(min(times[mode]), 3), round(max(times[mode]), 3)],
                       "torch_best_engine": best, "torch_ms": round(med[best], 3),
                       "torch_spread_ms": [round(min(times[best]), 3), round(max(times[best]), 3)],
                       "torch_engines_ms": {e: round(med[e], 3) for e in engines},
                       "ratio_torch_over_oar": round(med[best] / med[mode], 3), "reps": args.reps,
                       "steps": args.steps, "load": [round(v, 2) for v in load], "cpu": cpu_name()}
                rows.append(row)
                print(json.dumps(row), flush=True)
        oar_side.stdin.close()
        oar_side.wait()
    print("| batch | oar | oar ms | torch (best engine) ms | torch / oar |", file=sys.stderr)
    print("|---|---|---|---|---|", file=sys.stderr)
    for r in rows:
        print(f"| {r['batch']} | {r['oar']} | {r['oar_ms']} | {r['torch_ms']} ({r['torch_best_engine']}) | "
              f"{r['ratio_torch_over_oar']} |", file=sys.stderr)


if __name__ == "__main__":
    main()
