"""What the ONNX case generators (control_cases.py, quant_cases.py, seq_cases.py) share: small
model builders, the writer of a case in the layout of the backend node cases
(OUT/test_<name>/model.onnx, test_data_set_N/{input,output}_K.pb; OUT/index.tsv: case -> operator)
with onnxruntime's outputs as the expected ones, and the writer of malformed models
(BAD/<name>.onnx, BAD/expected.txt, and a copy in the fuzz corpus). Importing it needs numpy, onnx
and onnxruntime; the generators turn an ImportError into a skip."""
import os
import shutil

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper


def vi(name, t, shape):
    return helper.make_tensor_value_info(name, t, shape)


def const(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def make_model(nodes, inputs, outputs, inits=(), *, opset, producer, name="g", check=True, opsets=()):
    """A model of one graph at ONNX opset `opset` (plus (domain, version) pairs in opsets), IR 8;
    check: onnx.checker with its full check."""
    g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    imports = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in opsets]
    m = helper.make_model(g, opset_imports=imports, producer_name=producer)
    m.ir_version = 8
    if check:
        onnx.checker.check_model(m, full_check=True)
    return m


def tensor_proto(x, value_info):
    return numpy_helper.from_array(np.asarray(x), value_info.name)


def session(m, optimize=True):
    so = ort.SessionOptions()
    so.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimize else
                                   ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])


def write_case(out, name, op, m, data_sets, index, expected=None, optimize=True, proto=tensor_proto):
    """Case test_<name> of operator op: model m and, per data set (a dict input name -> value), the
    inputs and the expected outputs (expected[s] when given, else onnxruntime's, with or without
    its graph optimizations). proto(value, value_info) writes a value (a sequence needs its own)."""
    d = os.path.join(out, "test_" + name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    with open(os.path.join(d, "model.onnx"), "wb") as f:
        f.write(m.SerializeToString())
    sess = None if expected else session(m, optimize)
    for s, feeds in enumerate(data_sets):
        sd = os.path.join(d, f"test_data_set_{s}")
        os.makedirs(sd)
        for k, v in enumerate(m.graph.input):
            with open(os.path.join(sd, f"input_{k}.pb"), "wb") as f:
                f.write(proto(feeds[v.name], v).SerializeToString())
        feed = {k: (x if isinstance(x, list) else np.asarray(x)) for k, x in feeds.items()}
        got = expected[s] if expected else sess.run(None, feed)
        for k, y in enumerate(got):
            with open(os.path.join(sd, f"output_{k}.pb"), "wb") as f:
                f.write(proto(y, m.graph.output[k]).SerializeToString())
    index.append((f"test_{name}", op))


def write_index(out, index):
    with open(os.path.join(out, "index.tsv"), "w") as f:
        f.write("case\toperator\n")
        for name, op in index:
            f.write(f"{name}\t{op}\n")
    return len(index)


def write_bad(bad_dir, corpus, prefix, items, producer):
    """items: (name, model, a part of the error oar_onnx_load must give), written unchecked."""
    os.makedirs(bad_dir, exist_ok=True)
    with open(os.path.join(bad_dir, "expected.txt"), "w") as f:
        f.write(f"# model<TAB>a part of the error oar_onnx_load must give (written by {producer})\n")
        for name, m, expect in items:
            data = m.SerializeToString()
            for path in (os.path.join(bad_dir, name + ".onnx"), os.path.join(corpus, prefix + name + ".onnx")):
                with open(path, "wb") as g:
                    g.write(data)
            f.write(f"{name}\t{expect}\n")
    return len(items)
