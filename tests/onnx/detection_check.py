"""torchvision detectors (SSDlite, Faster R-CNN) exported by torch 1.13 to ONNX and run by `oar
infer`. They use NonZero and NonMaxSuppression, whose output sizes depend on the data, so oar runs
them eagerly, node by node (docs/onnx.md, "Data-dependent sizes").

The reference is onnxruntime's output for the same file (stored in tests/onnx/detection_expect,
written with --write-expect by a python that has onnxruntime), not torch's eager output: torch
1.13 exports these detectors through tracing-only code paths whose results differ from its eager
ones (measured: 22 of SSD's 146 and 86 of Faster R-CNN's 100 detections), while oar and
onnxruntime agree. Weights are random and seeded, with every norm and bias randomized and the
class heads scaled so scores differ; even so the lower-ranked detections are near ties (scores a
few 1e-5 apart, equal on image borders) that rounding at another ISA reorders, so the check is:
the same number of detections, and each of the reference's 40 best (same label, score within
1e-4 relative, box within 0.1% of the image) found in oar's. Exit 77 without Debian's torch or
when the stored reference was made with another torch.

usage: detection_check.py OAR_BINARY WORK_DIR SOURCE_DIR [--write-expect ORT_PYTHON]
(WORK_DIR keeps the exported models for the next run.)"""
import os
import shutil
import subprocess
import sys
import time
import warnings

try:
    import numpy as np
    import torch
    import torchvision
except ImportError as e:
    print(f"onnx_detection: skipped: {e}")
    sys.exit(77)
warnings.simplefilter("ignore")

DETECTORS = {
    "ssdlite320_mobilenet_v3_large": {},
    "fasterrcnn_mobilenet_v3_large_320_fpn": {"box_score_thresh": 0.02},
}
TOP = 40
SIZE = 320


def randomize(model, g):
    """Fresh detectors have zero-initialized head norms and biases (every score equal, so which
    boxes survive is a matter of tie order): give every norm and bias values, and scale the class
    heads so the scores spread."""
    for m in model.modules():
        if isinstance(m, (torch.nn.BatchNorm2d, torchvision.ops.FrozenBatchNorm2d)):
            c = m.weight.shape[0]
            m.running_mean.copy_(torch.randn(c, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(c, generator=g) + 0.5)
            m.weight.data.copy_(torch.rand(c, generator=g) + 0.5)
            m.bias.data.copy_(torch.randn(c, generator=g) * 0.1)
        elif isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)) and m.bias is not None:
            m.bias.data.copy_(torch.randn(m.bias.shape, generator=g) * 0.1)
    heads = [getattr(getattr(model, "head", None), "classification_head", None),
             getattr(getattr(model, "roi_heads", None), "box_predictor", None)]
    for head in heads:
        for p in head.parameters() if head is not None else ():
            p.data.mul_(4.0)
    return model


def export(work, name, kw):
    """WORK/NAME.onnx and its input, made once: the ISA runs share them (written under temporary
    names and renamed, so runs at the same time each see whole files)."""
    path, x_path = os.path.join(work, name + ".onnx"), os.path.join(work, name + ".x.npy")
    if os.path.exists(path) and os.path.exists(x_path):
        return path
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    model = randomize(getattr(torchvision.models.detection, name)(weights=None, weights_backbone=None, **kw), g)
    model.eval()
    x = torch.rand(3, SIZE, SIZE, generator=g)
    tmp = f".{os.getpid()}.tmp"
    torch.onnx.export(model, ([x],), path + tmp, opset_version=17, input_names=["image"])
    np.save(x_path + tmp + ".npy", x.numpy())
    os.replace(x_path + tmp + ".npy", x_path)
    os.replace(path + tmp, path)
    return path


def split(outs):
    """(boxes, scores, labels) of a detector's three outputs (the scores float, the labels int)."""
    return outs[0], next(o for o in outs[1:] if o.dtype == np.float32), next(o for o in outs[1:] if o.dtype == np.int64)


ORT = """import sys, numpy as np, onnxruntime as ort
s = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
o = s.run(None, {"image": np.load(sys.argv[2])})
np.savez(sys.argv[3], *o, torch=sys.argv[4], onnxruntime=ort.__version__)"""


def compare(name, want, got):
    (b1, s1, l1), (b2, s2, l2) = want, got
    used = np.zeros(len(s2), bool)
    missing = []
    for rank in np.argsort(-s1, kind="stable")[:TOP]:
        c = np.where((l2 == l1[rank]) & ~used & (np.abs(s2 - s1[rank]) <= 1e-4 * abs(s1[rank]) + 1e-7))[0]
        d = np.abs(b2[c] - b1[rank]).max(1) if len(c) else np.array([np.inf])
        if d.min() > 1e-3 * SIZE:
            missing.append(int(rank))
            continue
        used[c[d.argmin()]] = True
    ok = len(s1) == len(s2) and not missing and len(s1) >= TOP
    print(f"{name}: {len(s2)} detections by oar, {len(s1)} by onnxruntime ({len(np.unique(l1))} labels); of its "
          f"{TOP} best, {TOP - len(missing)} found in oar's {'ok' if ok else 'MISMATCH: missing ranks ' + str(missing)}")
    return ok


def main():
    oar, work, src = sys.argv[1:4]
    ort_python = sys.argv[5] if len(sys.argv) > 5 and sys.argv[4] == "--write-expect" else None
    expect_dir = os.path.join(src, "tests", "onnx", "detection_expect")
    os.makedirs(work, exist_ok=True)
    bad = 0
    for name, kw in DETECTORS.items():
        expect = os.path.join(expect_dir, name + ".npz")
        if ort_python is None:
            made_with = str(np.load(expect)["torch"])
            if made_with != torch.__version__:
                print(f"onnx_detection: skipped: the reference was made from torch {made_with}'s export, this is "
                      f"torch {torch.__version__}")
                sys.exit(77)
        path = export(work, name, kw)
        x = os.path.join(work, name + ".x.npy")
        if ort_python:
            os.makedirs(expect_dir, exist_ok=True)
            subprocess.run([ort_python, "-c", ORT, path, x, expect, torch.__version__], check=True)
        ref = np.load(expect)
        want = split([ref[f"arr_{k}"] for k in range(3)])
        out = os.path.join(work, f"{name}.out.{os.getpid()}")
        os.makedirs(out, exist_ok=True)
        t = time.time()
        r = subprocess.run([oar, "infer", path, "--input", x, "--outputs", out], capture_output=True, text=True)
        if r.returncode:
            print(f"{name}: oar infer failed:\n{r.stdout}{r.stderr}")
            bad += 1
            continue
        print(f"{name}: oar infer took {time.time() - t:.1f} s (eager, node by node)")
        bad += not compare(name, want, split([np.load(os.path.join(out, f"output_{k}.npy")) for k in range(3)]))
        shutil.rmtree(out, ignore_errors=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
