"""Writes 3-D ConvTranspose cases beyond the onnx package's one (which has unit strides, no pads,
one group) into OUT/test_oar_convtranspose_3d_<name> in the backend node case layout, with
ONNX's reference outputs (onnx.reference) as the expected ones, as node_cases.py (onnxruntime's
for groups and output_shape, which the reference of onnx 1.14 does not implement or checks wrongly), and adds them to OUT/index.tsv (kept sorted, other rows
kept): strides, asymmetric pads, dilations, groups, bias and output_padding together; SAME_UPPER
and SAME_LOWER; output_shape. Each model passes onnx.checker (full). onnxruntime 1.16.3 agrees except for
SAME_LOWER with a kernel shorter than the stride, where it gives the uncropped size 5 rather than
the input size times the stride, 6, which the operator's definition and its reference give. Usage:
convtranspose3d_cases.py OUT (a python with onnx and onnxruntime; exit 77 without them)."""
import os
import sys

try:
    import numpy as np
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator

    from case_writer import const, make_model, vi, write_case
except ImportError as e:
    print(f"convtranspose3d_cases: skipped: {e}")
    sys.exit(77)

out = sys.argv[1]
rng = np.random.default_rng(183)
F = TensorProto.FLOAT


def case(name, x_shape, w_shape, bias, **attrs):
    inits = [const("w", rng.standard_normal(w_shape).astype(np.float32))]
    ins = ["x", "w"]
    if bias:
        inits.append(const("b", rng.standard_normal(w_shape[1] * attrs.get("group", 1)).astype(np.float32)))
        ins.append("b")
    m = make_model([helper.make_node("ConvTranspose", ins, ["y"], **attrs)], [vi("x", F, list(x_shape))],
                   [vi("y", F, ["n", "m", "d", "h", "w"])], inits, opset=17, producer="convtranspose3d_cases.py")
    x = rng.standard_normal(x_shape).astype(np.float32)
    by_ort = attrs.get("group", 1) > 1 or "output_shape" in attrs
    want = None if by_ort else [ReferenceEvaluator(m).run(None, {"x": x})]
    write_case(out, "oar_convtranspose_3d_" + name, "ConvTranspose", m, [{"x": x}], index, expected=want)


index = []
case("strided", (2, 4, 3, 4, 3), (4, 3, 2, 3, 2), True, strides=[2, 1, 3], pads=[1, 0, 2, 0, 1, 1],
     dilations=[1, 2, 1], group=2, output_padding=[1, 0, 2])
case("same_upper", (1, 2, 3, 3, 2), (2, 3, 3, 2, 3), False, strides=[2, 2, 1], auto_pad="SAME_UPPER")
case("same_lower", (1, 2, 2, 3, 3), (2, 1, 2, 3, 2), True, strides=[3, 1, 2], auto_pad="SAME_LOWER")
case("output_shape", (1, 3, 2, 2, 3), (3, 2, 3, 2, 2), False, strides=[2, 3, 1], output_shape=[4, 5, 3])
path = os.path.join(out, "index.tsv")
rows = {}
with open(path) as f:
    rows = dict(line.rstrip("\n").split("\t")[:2] for line in f.readlines()[1:] if "\t" in line)
rows.update(dict(index))
with open(path, "w") as f:
    f.write("case\toperator\n")
    for name in sorted(rows):
        f.write(f"{name}\t{rows[name]}\n")
print(f"convtranspose3d_cases: {len(index)} cases in {out}")
