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

With --model lstm or gru: torch's quantize_dynamic of one float LSTM/GRU (lstm-lm's 2 x 200 by
default, 35 steps) beside oar's (nn.quantized.dynamic on the C core's int8 layer), both in this
process, and the float layers of both for scale; the same interleaving and figures. torch's
qnnpack engine logs a reduce_range warning on stderr at each dynamic product (glog, before its
flags are read): `2>&1 | grep -v qlinear_dynamic` keeps the JSON and the table.

Usage: PYTHONPATH=build/python /usr/bin/python3 bench/python_quantized_vs_torch.py
           [--model resnet18] [--batches 1 8] [--size 224] [--threads 1] [--reps 5] [--steps 5]
       ... --model lstm|gru [--hidden 200] [--layers 2] [--seq 35] [--batches 1 8 32]
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


def recurrent(args):
    """dynamic int8 LSTM/GRU: torch's engines and its float layer, oar's int8 and float layers, per repetition
    back to back"""
    import numpy as np
    import torch

    import oar

    sys.path.insert(0, TESTS)
    from bench_common import cpu_name

    kind = {"lstm": "LSTM", "gru": "GRU"}[args.model]
    torch.set_num_threads(args.threads)
    oar.set_num_threads(args.threads)
    torch.manual_seed(0)
    tm = torch.nn.Sequential(getattr(torch.nn, kind)(args.hidden, args.hidden, args.layers)).eval()
    om = oar.nn.Sequential(getattr(oar.nn, kind)(args.hidden, args.hidden, args.layers)).eval()
    om.load_state_dict({k: oar.from_numpy(v.detach().numpy().copy()) for k, v in tm.state_dict().items()})
    engines = [e for e in ("qnnpack", "onednn", "fbgemm", "x86") if e in torch.backends.quantized.supported_engines]
    tq = {}
    for e in engines:
        torch.backends.quantized.engine = e
        tq[e] = torch.ao.quantization.quantize_dynamic(tm)
    oq = oar.ao.quantization.quantize_dynamic(om)
    rng = np.random.default_rng(0)
    rows = []
    for batch in args.batches:
        x = rng.standard_normal((args.seq, batch, args.hidden)).astype(np.float32)
        tx, ox = torch.from_numpy(x), oar.from_numpy(x)
        runs = {e: (lambda e=e: tq[e](tx)) for e in engines}
        runs.update({"torch float": lambda: tm(tx), "oar int8": lambda: oq(ox), "oar float": lambda: om(ox)})
        times = {k: [] for k in runs}
        load = [os.getloadavg()[0]]
        with torch.no_grad(), oar.no_grad():
            for _ in range(args.reps):
                for k, fn in runs.items():
                    if k in engines:
                        torch.backends.quantized.engine = k
                    fn()  # warm
                    times[k].append(median_call(fn, args.steps))
        load.append(os.getloadavg()[0])
        med = {k: statistics.median(v) for k, v in times.items()}
        best = min(engines, key=lambda e: med[e])
        row = {"model": f"dynamic int8 {kind} {args.layers}x{args.hidden}", "batch": batch, "seq": args.seq,
               "threads": args.threads, "oar_ms": round(med["oar int8"], 3),
               "oar_spread_ms": [round(min(times["oar int8"]), 3), round(max(times["oar int8"]), 3)],
               "torch_best_engine": best, "torch_ms": round(med[best], 3),
               "torch_spread_ms": [round(min(times[best]), 3), round(max(times[best]), 3)],
               "torch_engines_ms": {e: round(med[e], 3) for e in engines},
               "ratio_torch_over_oar": round(med[best] / med["oar int8"], 3),
               "oar_float_ms": round(med["oar float"], 3), "torch_float_ms": round(med["torch float"], 3),
               "reps": args.reps, "steps": args.steps, "load": [round(v, 2) for v in load], "cpu": cpu_name()}
        rows.append(row)
        print(json.dumps(row), flush=True)
    print("| batch | oar int8 ms | torch int8 ms (best engine) | torch / oar | oar float ms | torch float ms |",
          file=sys.stderr)
    print("|---|---|---|---|---|---|", file=sys.stderr)
    for r in rows:
        print(f"| {r['batch']} | {r['oar_ms']} | {r['torch_ms']} ({r['torch_best_engine']}) | "
              f"{r['ratio_torch_over_oar']} | {r['oar_float_ms']} | {r['torch_float_ms']} |", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--hidden", type=int, default=200)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--seq", type=int, default=35)
    ap.add_argument("--worker")
    args = ap.parse_args()
    if args.worker:
        return worker(args.worker)
    if args.model in ("lstm", "gru"):
        return recurrent(args)

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
