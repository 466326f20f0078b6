"""ONNX inference speed: oar (the imported model, compiled with its passes; `oar onnx-bench`)
beside onnxruntime (all graph optimizations, the same thread count) and PyTorch eager, in the
same run, on the models of tests/onnx/torch_models.py. One JSON line per (model, batch,
threads): medians of the timed runs in ms, 10th-90th percentile spread, and ratios (> 1: oar is
faster). Also oar's load time and first run (trace + passes + planning), and both runtimes' CPU
time per run (all their threads; ort_over_oar_cpu: at 1 thread the ratio a loaded machine moves
least, since waiting for a core is not counted; at 2 threads onnxruntime's spinning threads count).

usage: python bench/onnx_vs_ort.py --oar build/oar [--models resnet18,...] [--batches 1,32]
       [--threads 1,2] [--steps 10] [--oar-before OTHER_OAR]
--oar-before times a second oar binary (e.g. built before a change) in the same run, alternating
with the first, and adds oar_before_ms and before_over_oar (> 1: the change made oar faster), and
its CPU time per run (oar_before_cpu_ms, before_over_oar_cpu).
Needs torch/torchvision (Debian's python3) and onnxruntime (PyPI), e.g. a venv made with
`/usr/bin/python3 -m venv --system-site-packages V && V/bin/pip install onnxruntime`."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "onnx"))
import torch_models  # noqa: E402


from bench_common import cpu_name, timed, timed_cpu  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--oar", required=True)
    ap.add_argument("--models", default=",".join(torch_models.MODELS))
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--oar-before", default=None)
    a = ap.parse_args()
    import onnxruntime as ort

    tmp = tempfile.mkdtemp()
    for name in a.models.split(","):
        for batch in [int(b) for b in a.batches.split(",")]:
            model, x = torch_models.build(name, batch)
            model.eval()
            path = os.path.join(tmp, f"{name}.onnx")
            torch.onnx.export(model, (x,), path, input_names=["input"], output_names=["output"],
                              dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}}, opset_version=17)
            xpath = os.path.join(tmp, f"{name}.x.npy")
            np.save(xpath, x.numpy())
            for threads in [int(t) for t in a.threads.split(",")]:
                r = subprocess.run([a.oar, "onnx-bench", path, "--input", xpath, "--threads", str(threads),
                                    "--steps", str(a.steps)], capture_output=True, text=True)
                if r.returncode != 0:
                    print(json.dumps({"model": name, "batch": batch, "threads": threads, "error": r.stderr.strip()}))
                    continue
                o = json.loads(r.stdout.strip().splitlines()[-1])
                ob = None
                if a.oar_before:
                    rb = subprocess.run([a.oar_before, "onnx-bench", path, "--input", xpath, "--threads", str(threads),
                                         "--steps", str(a.steps)], capture_output=True, text=True)
                    ob = json.loads(rb.stdout.strip().splitlines()[-1]) if rb.returncode == 0 else None
                so = ort.SessionOptions()
                so.intra_op_num_threads = threads
                so.inter_op_num_threads = 1
                so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
                sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
                feed = {"input": x.numpy()}
                ort_t = timed_cpu(lambda: sess.run(None, feed), a.steps)
                torch.set_num_threads(threads)
                with torch.no_grad():
                    torch_t = timed(lambda: model(x), a.steps)
                print(json.dumps({
                    "model": name, "batch": batch, "threads": threads, "steps": a.steps, "cpu": cpu_name(),
                    "oar_ms": o["median_ms"], "oar_p10_p90": [o["p10_ms"], o["p90_ms"]],
                    "ort_ms": round(ort_t[0], 4), "ort_p10_p90": [round(ort_t[1], 4), round(ort_t[2], 4)],
                    "torch_ms": round(torch_t[0], 4), "torch_p10_p90": [round(torch_t[1], 4), round(torch_t[2], 4)],
                    "ort_over_oar": round(ort_t[0] / o["median_ms"], 3),
                    **({"oar_cpu_ms": o["cpu_ms"], "ort_cpu_ms": round(ort_t[3], 4),
                        "ort_over_oar_cpu": round(ort_t[3] / o["cpu_ms"], 3)} if o.get("cpu_ms") else {}),
                    "torch_over_oar": round(torch_t[0] / o["median_ms"], 3),
                    "oar_load_ms": o["load_ms"], "oar_first_run_ms": o["first_run_ms"],
                    "onnxruntime": ort.__version__, "torch": torch.__version__, "loadavg": os.getloadavg()[0],
                    **({"oar_before_ms": ob["median_ms"], "oar_before_p10_p90": [ob["p10_ms"], ob["p90_ms"]],
                        "before_over_oar": round(ob["median_ms"] / o["median_ms"], 3)} if ob else {}),
                    **({"oar_before_cpu_ms": ob["cpu_ms"], "before_over_oar_cpu": round(ob["cpu_ms"] / o["cpu_ms"], 3)}
                       if ob and ob.get("cpu_ms") and o.get("cpu_ms") else {})}), flush=True)


if __name__ == "__main__":
    main()
