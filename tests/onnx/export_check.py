"""Checks the models test_onnx_export wrote (OAR_ONNX_EXPORT_DIR): each passes onnx.checker with
full_check (types and shapes inferred through the whole graph) and, when onnxruntime is
importable, runs there on the saved input with the oar output as the expected one
(|ort - oar| <= 1e-4 |oar| + 1e-5, or NAME.atol's absolute tolerance where the test wrote one: the
quantized models, whose float QDQ arithmetic may land a step from oar's int8 sums). A model of an
opset newer than the onnx package knows (opset 18 for integer bitwise ops; Debian's onnx 1.12 knows
17) is left to a newer one and said so. Usage: export_check.py DIR. Exit 77 without onnx."""
import glob
import os
import sys

try:
    import numpy as np
    import onnx
except ImportError as e:
    print(f"onnx_export_check: skipped: {e} (install Debian's python3-onnx and python3-numpy)")
    sys.exit(77)
try:
    import onnxruntime as ort
except ImportError:
    ort = None

d = sys.argv[1]
paths = sorted(glob.glob(os.path.join(d, "*.onnx")))
if not paths:
    print(f"onnx_export_check: no models in {d}")
    sys.exit(1)
bad = skipped = 0
for path in paths:
    name = os.path.basename(path)[:-5]
    model = onnx.load(path)
    opset = {o.domain: o.version for o in model.opset_import}[""]
    if opset > onnx.defs.onnx_opset_version():  # integer bitwise ops are opset 18 (onnx >= 1.13)
        print(f"{name}: opset {opset}, newer than onnx {onnx.__version__} knows ({onnx.defs.onnx_opset_version()}): "
              f"not checked by this python (OAR_ORT_PYTHON with onnx >= 1.13 checks it)")
        skipped += 1
        continue
    onnx.checker.check_model(model, full_check=True)
    line = f"{name}: onnx.checker (full) ok, opset {opset}, {len(model.graph.node)} nodes"
    if ort is not None:
        x, y = np.load(os.path.join(d, name + ".x.npy")), np.load(os.path.join(d, name + ".y.npy"))
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        got = sess.run(None, {sess.get_inputs()[0].name: x})[0]
        err = float(np.max(np.abs(got - y))) if y.size else 0.0
        tol_file = os.path.join(d, name + ".atol")
        atol = float(open(tol_file).read()) if os.path.exists(tol_file) else 1e-5
        ok = got.shape == y.shape and np.allclose(got, y, rtol=1e-4, atol=atol)
        bad += not ok
        line += f"; onnxruntime {ort.__version__}: max |ort - oar| {err:.3g} {'ok' if ok else 'WRONG'}"
    print(line)
if ort is None:
    print("onnx_export_check: onnxruntime not importable here, so only onnx.checker ran (set OAR_ORT_PYTHON "
          "to a python with onnxruntime, e.g. a venv made with --system-site-packages)")
sys.exit(1 if bad else 0)
