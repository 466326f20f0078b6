"""Writes the ONNX package's own backend node cases for the given operators (model.onnx and
test_data_set_0/{input,output}_N.pb, as the backend runner reads them; expected outputs from
ONNX's numpy reference) into OUT/<case>, and a row per case (case, operator) in OUT/index.tsv,
which `oar onnx-test` reads to count per operator. Used for operators the shared conformance set lacks
(Resize, Upsample, If, Loop, the sequence and optional operators; one operator per run:
collect_testcases caches its first answer). Sequence and optional data are written as the
backend runner writes them (SequenceProto, OptionalProto). Usage: node_cases.py OUT OP [OP...].
Exit 77 without onnx and numpy."""
import os
import sys
import warnings

try:
    import numpy as np
    from onnx import OptionalProto, numpy_helper
except ImportError as e:
    print(f"node_cases: skipped: {e}")
    sys.exit(77)
warnings.simplefilter("ignore")
# onnx 1.12's case modules use NumPy aliases that NumPy 1.24 removed
for alias, t in (("complex", complex), ("float", float), ("int", int), ("bool", bool), ("object", object)):
    if alias not in np.__dict__:
        setattr(np, alias, t)
from onnx.backend.test.case import node  # noqa: E402

out = sys.argv[1]
n = 0
index_path = os.path.join(out, "index.tsv")
index = {}
if os.path.exists(index_path):
    with open(index_path) as f:
        index = dict(line.rstrip("\n").split("\t")[:2] for line in f.readlines()[1:] if "\t" in line)


def proto(x, type_proto, name):
    """x as the file the backend runner writes for a value of that type."""
    which = type_proto.WhichOneof("value")
    if which == "optional_type":
        elem = type_proto.optional_type.elem_type
        kind = OptionalProto.SEQUENCE if elem.WhichOneof("value") == "sequence_type" else OptionalProto.TENSOR
        return numpy_helper.from_optional(x, name, kind)
    if which == "sequence_type":
        return numpy_helper.from_list(x, name)
    return numpy_helper.from_array(x, name)


for op in sys.argv[2:]:
    for case in node.collect_testcases(op):
        inputs, outputs = case.data_sets[0]
        d = os.path.join(out, case.name, "test_data_set_0")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(out, case.name, "model.onnx"), "wb") as f:
            f.write(case.model.SerializeToString())
        for j, x in enumerate(inputs):
            with open(os.path.join(d, f"input_{j}.pb"), "wb") as f:
                v = case.model.graph.input[j]
                f.write(proto(x, v.type, v.name).SerializeToString())
        for j, y in enumerate(outputs):
            with open(os.path.join(d, f"output_{j}.pb"), "wb") as f:
                v = case.model.graph.output[j]
                f.write(proto(y, v.type, v.name).SerializeToString())
        index[case.name] = op
        n += 1
os.makedirs(out, exist_ok=True)
with open(index_path, "w") as f:
    f.write("case\toperator\n")
    for name in sorted(index):
        f.write(f"{name}\t{index[name]}\n")
print(f"node_cases: {n} cases for {', '.join(sys.argv[2:])} in {out}")
