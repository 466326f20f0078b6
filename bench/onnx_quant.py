"""Quantized ONNX models in oar and onnxruntime (docs/onnx.md, "Quantized models"): a float model
is quantized by onnxruntime.quantization.quantize_static (u8 activations, i8 weights per output
channel; QDQ and QOperator formats), then run by onnxruntime (all graph optimizations: its int8
kernels) and by oar (`oar infer`: the import runs it on qconv2d/qlinear). Per model and format,
one JSON line: top-1 agreement and the largest output difference in steps of the output's
quantization scale, the accuracy of both on labelled data where there is some, which ops oar's
program has (`oar inspect` of a fixed-batch copy: int8 and float convolutions/linears), and the
speed of oar int8, onnxruntime int8 and oar fp32 in the same run (medians of --steps timed runs,
10th-90th percentile spread, ratios > 1: oar int8 faster); with --cpu also the CPU time per run
(user + system; steadier than wall time on a shared machine).

Models: lenet (oar's, trained here on Fashion-MNIST for --train-steps: accuracy on its test set),
resnet20 (oar's, trained likewise on Fashion-MNIST, 1 channel) and resnet18 (torchvision, batch
norm statistics randomized as tests/onnx/torch_models.py does; random inputs: agreement only).

usage: python bench/onnx_quant.py --oar build/oar [--models lenet,resnet20,resnet18] [--eval 512]
       [--batch 32] [--threads 1] [--steps 10] [--check] [--cpu]
--check: exit 1 unless every model agrees (top-1 >= 99%) and runs on the int8 ops (CTest
onnx_quant_real). Needs onnx >= 1.13 and onnxruntime (a venv), and ../shared/data's
Fashion-MNIST for lenet and resnet20; exits 77 (skipped) without them."""
import argparse
import gzip
import json
import os
import re
import resource
import struct
import subprocess
import sys
import tempfile
import time

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
except ImportError as e:
    print(f"onnx_quant: skipped: {e}")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))


from bench_common import cpu_name, timed  # noqa: E402


def fashion(shared, split, n):
    d = os.path.join(shared, "data", "fashion-mnist")
    img = os.path.join(d, "t10k-images-idx3-ubyte.gz" if split == "test" else "train-first20000-images-idx3-ubyte.gz")
    lab = img.replace("images-idx3", "labels-idx1")
    if not os.path.exists(img):
        return None, None
    with gzip.open(img) as f:
        _, count, rows, cols = struct.unpack(">IIII", f.read(16))
        x = np.frombuffer(f.read(n * rows * cols), np.uint8).reshape(n, 1, rows, cols)
    with gzip.open(lab) as f:
        f.read(8)
        y = np.frombuffer(f.read(n), np.uint8)
    return ((x / 255.0 - 0.2860) / 0.3530).astype(np.float32), y.astype(np.int64)


class Reader(CalibrationDataReader):
    def __init__(self, name, batches):
        self.it = iter([{name: b} for b in batches])

    def get_next(self):
        return next(self.it, None)


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()[-2000:]}")
    return r.stdout


def oar_model(a, tmp, name):
    """oar's zoo model trained on Fashion-MNIST, exported to ONNX (dynamic batch)."""
    ck = os.path.join(tmp, name + ".safetensors")
    env = dict(os.environ, OAR_SHARED_DIR=a.shared)
    extra = ["--in-channels", "1", "--image-size", "28"] if name == "resnet20" else []
    steps = a.train_steps or (3000 if name == "lenet" else 150)
    run([a.oar, "train", "--model", name, "--data", "fashion-mnist", "--epochs", "1", "--steps", str(steps),
         "--batch", "32", "--seed", "1", "--threads", "2", "--quiet", "--checkpoint", ck], env=env)
    path = os.path.join(tmp, name + ".onnx")
    run([a.oar, "export", "--format", "onnx", "--model", name, "--checkpoint", ck, "--out", path] + extra, env=env)
    return path


def torch_model(tmp, name, batch):
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "onnx"))
    import torch
    import torch_models
    model, x = torch_models.build(name, batch)
    model.eval()
    path = os.path.join(tmp, name + ".onnx")
    torch.onnx.export(model, (x,), path, input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}}, opset_version=17)
    return path


def fixed_batch(src, dst, batch):
    m = onnx.load(src)
    for v in list(m.graph.input) + list(m.graph.output):
        d = v.type.tensor_type.shape.dim
        if len(d) and not d[0].HasField("dim_value"):
            d[0].Clear()
            d[0].dim_value = batch
    onnx.save(m, dst)


def ops_of(a, path, batch, tmp):
    fb = os.path.join(tmp, "fixed.onnx")
    fixed_batch(path, fb, batch)
    out = run([a.oar, "inspect", fb])
    count = {}
    for op in re.findall(r"= ([a-z0-9_]+)\(", out):
        count[op] = count.get(op, 0) + 1
    int8 = sum(count.get(k, 0) for k in ("qconv2d", "qlinear"))
    flt = sum(count.get(k, 0) for k in ("conv2d", "conv2d_act", "linear", "linear_act", "matmul"))
    return int8, flt, count


def oar_infer(a, path, x, tmp):
    xp, yp = os.path.join(tmp, "x.npy"), os.path.join(tmp, "y.npy")
    np.save(xp, x)
    run([a.oar, "infer", path, "--input", xp, "--output", yp, "--threads", str(a.threads)])
    return np.load(yp)


def oar_bench(a, path, x, tmp):
    xp = os.path.join(tmp, "xb.npy")
    np.save(xp, x)
    o = json.loads(run([a.oar, "onnx-bench", path, "--input", xp, "--threads", str(a.threads), "--steps",
                        str(a.steps)]).strip().splitlines()[-1])
    return o["median_ms"], o["p10_ms"], o["p90_ms"]


def oar_cpu_ms(a, path, x, tmp, reps=3):
    """oar's CPU time per run (user + system, ms): `oar onnx-bench` with --steps and with 1 step,
    the difference over steps - 1 (load, compile and the first run cancel); median of reps."""
    xp = os.path.join(tmp, "xc.npy")
    np.save(xp, x)

    def cpu(steps):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        run([a.oar, "onnx-bench", path, "--input", xp, "--threads", str(a.threads), "--steps", str(steps)])
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        return (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) * 1e3
    ts = sorted((cpu(a.steps + 1) - cpu(1)) / a.steps for _ in range(reps))
    return ts[len(ts) // 2]


def ort_cpu_ms(fn, steps, reps=3):
    """onnxruntime's process CPU time per run (one intra-op thread: no pool), median of reps."""
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.process_time()
        for _ in range(steps):
            fn()
        ts.append((time.process_time() - t0) * 1e3 / steps)
    return sorted(ts)[len(ts) // 2]


def out_scale(path):
    """The scale of the last QuantizeLinear before the output (the logits' step), if any."""
    m = onnx.load(path)
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in m.graph.initializer}
    for n in reversed(m.graph.node):
        if n.op_type in ("QuantizeLinear", "QLinearMatMul", "QGemm") and len(n.input) > 1:
            s = inits.get(n.input[1] if n.op_type == "QuantizeLinear" else n.input[-3 if n.op_type == "QLinearMatMul" else 6])
            if s is not None and s.size == 1:
                return float(s)
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--oar", required=True)
    ap.add_argument("--shared", default=os.path.join(HERE, "..", "..", "shared"))
    ap.add_argument("--models", default="lenet,resnet20,resnet18")
    ap.add_argument("--eval", type=int, default=512)
    ap.add_argument("--calib", type=int, default=64)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--train-steps", type=int, default=0, help="default: 3000 for lenet, 150 for resnet20")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--cpu", action="store_true", help="also CPU time per run (robust to a loaded machine)")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp()
    bad = 0
    rng = np.random.default_rng(18)
    for name in a.models.split(","):
        if name in ("lenet", "resnet20"):
            x_eval, y_eval = fashion(a.shared, "test", a.eval)
            x_cal, _ = fashion(a.shared, "train", a.calib)
            if x_eval is None:
                print(json.dumps({"model": name, "skipped": "Fashion-MNIST not found in " + a.shared}))
                if a.check:
                    sys.exit(77)
                continue
            fp32 = oar_model(a, tmp, name)
        else:
            x_eval, y_eval = rng.standard_normal((a.eval, 3, 224, 224)).astype(np.float32), None
            x_cal = rng.standard_normal((a.calib, 3, 224, 224)).astype(np.float32)
            fp32 = torch_model(tmp, name, 1)
        in_name = onnx.load(fp32).graph.input[0].name
        for fmt in ("QDQ", "QOperator"):
            q = os.path.join(tmp, f"{name}.{fmt}.onnx")
            cal = [x_cal[i:i + 16] for i in range(0, len(x_cal), 16)]
            # QOperator: every op onnxruntime quantizes, the ones outside ai.onnx as its com.microsoft
            # ops (QLinearAdd, QLinearGlobalAveragePool, QGemm: src/io/onnx/onnx_ops_ms.c)
            quantize_static(fp32, q, Reader(in_name, cal), quant_format=getattr(QuantFormat, fmt), per_channel=True,
                            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
            so = ort.SessionOptions()
            so.intra_op_num_threads = a.threads
            so.inter_op_num_threads = 1
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            sess = ort.InferenceSession(q, so, providers=["CPUExecutionProvider"])
            # onnxruntime without graph optimizations: the file's operators one by one (float
            # Conv of dequantized values for QDQ), the ONNX definition to float rounding
            so_ref = ort.SessionOptions()
            so_ref.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            ref = ort.InferenceSession(q, so_ref, providers=["CPUExecutionProvider"])
            ys_ort, ys_oar, ys_ref = [], [], []
            for i in range(0, len(x_eval), a.batch):
                xb = x_eval[i:i + a.batch]
                ys_ort.append(sess.run(None, {in_name: xb})[0])
                ys_ref.append(ref.run(None, {in_name: xb})[0])
                ys_oar.append(oar_infer(a, q, xb, tmp))
            yo, yq = np.concatenate(ys_ort), np.concatenate(ys_oar)
            agree = float((yo.argmax(1) == yq.argmax(1)).mean())
            step = out_scale(q)
            diff = np.abs(yo.astype(np.float64) - yq)
            yr = np.concatenate(ys_ref)
            dref = np.abs(yr.astype(np.float64) - yq)
            dort = np.abs(yr.astype(np.float64) - yo)
            r = {"model": name, "format": fmt, "images": len(x_eval), "top1_agreement": round(agree, 4),
                 "max_abs_diff": float(diff.max()), "output_step": step,
                 "outputs_differing": int((diff > 0).sum()), "outputs": int(diff.size),
                 "ref_vs_oar_differing": int((dref > 0).sum()), "ref_vs_oar_max": float(dref.max()),
                 "ref_vs_ort_differing": int((dort > 0).sum()), "ref_vs_ort_max": float(dort.max()),
                 "top1_agreement_ref": round(float((yr.argmax(1) == yq.argmax(1)).mean()), 4)}
            if step:
                r["max_diff_steps"] = round(float(diff.max()) / step, 3)
            if y_eval is not None:
                r["accuracy_ort"] = round(float((yo.argmax(1) == y_eval).mean()), 4)
                r["accuracy_oar"] = round(float((yq.argmax(1) == y_eval).mean()), 4)
            int8, flt, _ = ops_of(a, q, a.batch, tmp)
            r["oar_int8_ops"], r["oar_float_convs_linears"] = int8, flt
            if not a.check:
                xb = x_eval[:a.batch] if len(x_eval) >= a.batch else x_eval
                oi = oar_bench(a, q, xb, tmp)
                of = oar_bench(a, fp32, xb, tmp)
                ot = timed(lambda: sess.run(None, {in_name: xb}), a.steps)
                r.update({"batch": len(xb), "threads": a.threads, "steps": a.steps, "cpu": cpu_name(),
                          "loadavg": os.getloadavg()[0],
                          "oar_int8_ms": oi[0], "oar_int8_p10_p90": [oi[1], oi[2]],
                          "ort_int8_ms": round(ot[0], 3), "ort_int8_p10_p90": [round(ot[1], 3), round(ot[2], 3)],
                          "oar_fp32_ms": of[0], "oar_fp32_p10_p90": [of[1], of[2]],
                          "ort_int8_over_oar_int8": round(ot[0] / oi[0], 3),
                          "oar_fp32_over_oar_int8": round(of[0] / oi[0], 3), "onnxruntime": ort.__version__})
                if a.cpu:
                    ci, cf = oar_cpu_ms(a, q, xb, tmp), oar_cpu_ms(a, fp32, xb, tmp)
                    ct = ort_cpu_ms(lambda: sess.run(None, {in_name: xb}), a.steps)
                    r.update({"cpu_oar_int8_ms": round(ci, 3), "cpu_ort_int8_ms": round(ct, 3),
                              "cpu_oar_fp32_ms": round(cf, 3), "cpu_ort_int8_over_oar_int8": round(ct / ci, 3),
                              "cpu_oar_fp32_over_oar_int8": round(cf / ci, 3)})
            ok = agree >= 0.99 and int8 > 0 and (flt == 0 or fmt == "QOperator")
            r["ok"] = ok
            bad += not ok
            print(json.dumps(r), flush=True)
    sys.exit(1 if a.check and bad else 0)


if __name__ == "__main__":
    main()
