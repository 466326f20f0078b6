"""Writes hand-made cases beyond the onnx package's own into OUT/test_oar_<name>, in the backend
node case layout, and adds them to OUT/index.tsv (kept sorted, other rows kept). Expected outputs
are ONNX's reference outputs (onnx.reference) as node_cases.py's, or onnxruntime's where the
reference of onnx 1.14 lacks the case (groups) or checks it wrongly (output_shape). Each model
passes onnx.checker (full).
- 3-D ConvTranspose (the onnx package has one, with unit strides, no pads, one group): strides,
  asymmetric pads, dilations, groups, bias and output_padding together; SAME_UPPER and SAME_LOWER;
  output_shape. onnxruntime 1.16.3 agrees except for SAME_LOWER with a kernel shorter than the
  stride, where it gives the uncropped size 5 rather than the input size times the stride, 6,
  which the operator's definition and its reference give.
- ScatterElements of whole slices in an eagerly run model (NonZero makes it eager): indices
  from an Expand of [k, 1, 1], negative ones, repeated ones (the last update kept), and none.
Usage: extra_node_cases.py OUT (a python with onnx and onnxruntime; exit 77 without them)."""
import os
import sys

try:
    import numpy as np
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator

    from case_writer import const, make_model, vi, write_case
except ImportError as e:
    print(f"extra_node_cases: skipped: {e}")
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
                   [vi("y", F, ["n", "m", "d", "h", "w"])], inits, opset=17, producer="extra_node_cases.py")
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

# ScatterElements of slices: data [5, 4, 3], rows picked by a bool mask through NonZero, indices
# made negative (minus 5) and expanded over the other dims; y2 scatters each row twice (src, then
# -src: the second kept)
I64, B = TensorProto.INT64, TensorProto.BOOL
nodes = [helper.make_node("NonZero", ["sel"], ["nz"]),
         helper.make_node("Reshape", ["nz", "col"], ["i"]),
         helper.make_node("Sub", ["i", "five"], ["ineg"]),
         helper.make_node("Expand", ["ineg", "wide"], ["e"]),
         helper.make_node("Reshape", ["nz", "flat"], ["rows"]),
         helper.make_node("Gather", ["src", "rows"], ["u"], axis=0),
         helper.make_node("ScatterElements", ["data", "e", "u"], ["y"], axis=0),
         helper.make_node("Concat", ["e", "e"], ["e2"], axis=0),
         helper.make_node("Neg", ["u"], ["un"]),
         helper.make_node("Concat", ["u", "un"], ["u2"], axis=0),
         helper.make_node("ScatterElements", ["data", "e2", "u2"], ["y2"], axis=0)]
m = make_model(nodes, [vi("data", F, [5, 4, 3]), vi("src", F, [5, 4, 3]), vi("sel", B, [5])],
               [vi("y", F, [5, 4, 3]), vi("y2", F, [5, 4, 3])],
               [const("col", np.array([-1, 1, 1], np.int64)), const("five", np.int64(5)),
                const("wide", np.array([1, 4, 3], np.int64)), const("flat", np.array([-1], np.int64))],
               opset=17, producer="extra_node_cases.py")
sets = [{"data": rng.standard_normal((5, 4, 3)).astype(np.float32),
         "src": rng.standard_normal((5, 4, 3)).astype(np.float32), "sel": np.array(s)}
        for s in ([True, False, False, True, True], [False] * 5, [True] * 5)]
ref = ReferenceEvaluator(m)
write_case(out, "oar_scatter_elements_slices_eager", "ScatterElements", m, sets, index,
           expected=[ref.run(None, d) for d in sets])
path = os.path.join(out, "index.tsv")
rows = {}
with open(path) as f:
    rows = dict(line.rstrip("\n").split("\t")[:2] for line in f.readlines()[1:] if "\t" in line)
rows.update(dict(index))
with open(path, "w") as f:
    f.write("case\toperator\n")
    for name in sorted(rows):
        f.write(f"{name}\t{rows[name]}\n")
print(f"extra_node_cases: {len(index)} cases in {out}")
