"""Writes ONNX control-flow cases (If, Loop, Scan) for `oar onnx-test`, in the layout of the backend node
cases: OUT/test_<name>/model.onnx and test_data_set_N/{input,output}_K.pb, plus OUT/index.tsv
(case -> operator). Each model passes onnx.checker (full check); the expected outputs are
onnxruntime's. Also writes malformed models to BAD/<name>.onnx with BAD/expected.txt (name, then
a part of the error oar must give) and copies them to CORPUS/control_<name>.onnx (the fuzz
corpus, replayed by test_onnx).

Usage: control_cases.py OUT BAD CORPUS   (a python with onnx and onnxruntime, e.g. a venv made
with --system-site-packages and `pip install onnxruntime`). Exit 77 without them."""
import sys

try:
    import numpy as np
    from onnx import TensorProto, helper

    from case_writer import const, make_model, vi, write_bad, write_case, write_index
except ImportError as e:
    print(f"control_cases: skipped: {e}")
    sys.exit(77)

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
OPSET = 17
rng = np.random.default_rng(18)


def model(nodes, inputs, outputs, inits=(), name="g", check=True):
    return make_model(nodes, inputs, outputs, inits, opset=OPSET, producer="control_cases.py", name=name, check=check)


def x34(sign=1.0):
    return (sign * (rng.random((3, 4), dtype=np.float32) + 0.1)).astype(np.float32)


def cases(out):
    index = []
    # If on a condition computed from the input; both branches read the outer x, the then branch
    # also an outer initializer and a value computed in the outer graph; two outputs
    then_b = helper.make_graph(
        [helper.make_node("Mul", ["x", "w"], ["t0"]), helper.make_node("Add", ["t0", "xr"], ["t_y"]),
         helper.make_node("ReduceMax", ["x"], ["t_z"], keepdims=0)],
        "then", [], [vi("t_y", F, [3, 4]), vi("t_z", F, [])])
    else_b = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["e_y"]), helper.make_node("ReduceMin", ["x"], ["e_z"], keepdims=0)],
        "else", [], [vi("e_y", F, [3, 4]), vi("e_z", F, [])])
    m = model([helper.make_node("Relu", ["x"], ["xr"]), helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
               helper.make_node("Greater", ["s", "zero"], ["c"]),
               helper.make_node("If", ["c"], ["y", "z"], then_branch=then_b, else_branch=else_b)],
              [vi("x", F, [3, 4])], [vi("y", F, [3, 4]), vi("z", F, [])],
              [const("w", rng.standard_normal((3, 4)).astype(np.float32)), const("zero", np.float32(0))])
    write_case(out, "if_both_branches", "If", m, [{"x": x34()}, {"x": x34(-1)}], index)

    # If on a constant condition (taken at load) whose branches differ in shape, as ONNX allows
    then_b = helper.make_graph([helper.make_node("Slice", ["x", "st", "en"], ["t_y"])], "then", [],
                               [vi("t_y", F, ["r", 4])], [const("st", [0]), const("en", [2])])
    else_b = helper.make_graph([helper.make_node("Identity", ["x"], ["e_y"])], "else", [], [vi("e_y", F, ["r", 4])])
    m = model([helper.make_node("If", ["c"], ["y"], then_branch=then_b, else_branch=else_b)],
              [vi("x", F, [3, 4])], [vi("y", F, ["r", 4])], [const("c", np.array(True))])
    write_case(out, "if_const_cond_shapes_differ", "If", m, [{"x": x34()}], index)

    # Loop with M only (a for loop): y = y * 0.5 + x + i, the body reading the outer x
    def body_m():
        return helper.make_graph(
            [helper.make_node("Cast", ["i"], ["fi"], to=F), helper.make_node("Mul", ["y_in", "half"], ["h"]),
             helper.make_node("Add", ["h", "x"], ["h2"]), helper.make_node("Add", ["h2", "fi"], ["y_out"]),
             helper.make_node("Identity", ["c_in"], ["c_out"])],
            "body", [vi("i", I64, []), vi("c_in", B, []), vi("y_in", F, [3, 4])],
            [vi("c_out", B, []), vi("y_out", F, [3, 4])], [const("half", np.float32(0.5))])
    m = model([helper.make_node("Loop", ["M", "", "y0"], ["y"], body=body_m())],
              [vi("x", F, [3, 4]), vi("y0", F, [3, 4])], [vi("y", F, [3, 4])], [const("M", np.int64(5))])
    write_case(out, "loop_m_only", "Loop", m, [{"x": x34(), "y0": x34(-1)}], index)

    # the same with M as an input: zero iterations give the initial value
    m = model([helper.make_node("Loop", ["M", "", "y0"], ["y"], body=body_m())],
              [vi("M", I64, []), vi("x", F, [3, 4]), vi("y0", F, [3, 4])], [vi("y", F, [3, 4])])
    write_case(out, "loop_m_input", "Loop", m,
               [{"M": np.int64(3), "x": x34(), "y0": x34()}, {"M": np.int64(0), "x": x34(), "y0": x34()},
                {"M": np.int64(1), "x": x34(), "y0": x34()}], index)

    # Loop with cond only (a while loop): y doubles while its sum is below a limit; the trip
    # count carried out as a second loop-carried value
    body = helper.make_graph(
        [helper.make_node("Mul", ["y_in", "two"], ["y_out"]), helper.make_node("Add", ["n_in", "one"], ["n_out"]),
         helper.make_node("ReduceSum", ["y_out"], ["s"], keepdims=0),
         helper.make_node("Less", ["s", "limit"], ["c_out"])],
        "body", [vi("i", I64, []), vi("c_in", B, []), vi("y_in", F, [3, 4]), vi("n_in", I64, [])],
        [vi("c_out", B, []), vi("y_out", F, [3, 4]), vi("n_out", I64, [])],
        [const("two", np.float32(2)), const("one", np.int64(1))])
    m = model([helper.make_node("ReduceSum", ["x"], ["s0"], keepdims=0),
               helper.make_node("Less", ["s0", "limit"], ["c0"]),
               helper.make_node("Loop", ["", "c0", "x", "n0"], ["y", "n"], body=body)],
              [vi("x", F, [3, 4])], [vi("y", F, [3, 4]), vi("n", I64, [])],
              [const("limit", np.float32(100)), const("n0", np.int64(0))])
    write_case(out, "loop_cond_only", "Loop", m, [{"x": x34()}, {"x": 50 * x34()}, {"x": 0.01 * x34()}], index)

    # Loop with M and cond (a for loop with a break): stops at M or when the max passes 3
    body = helper.make_graph(
        [helper.make_node("Add", ["y_in", "x"], ["y_out"]), helper.make_node("ReduceMax", ["y_out"], ["mx"], keepdims=0),
         helper.make_node("Less", ["mx", "three"], ["c_out"])],
        "body", [vi("i", I64, []), vi("c_in", B, []), vi("y_in", F, [3, 4])],
        [vi("c_out", B, []), vi("y_out", F, [3, 4])], [const("three", np.float32(3))])
    m = model([helper.make_node("Loop", ["M", "c0", "x"], ["y"], body=body)],
              [vi("M", I64, []), vi("c0", B, []), vi("x", F, [3, 4])], [vi("y", F, [3, 4])])
    write_case(out, "loop_m_and_cond", "Loop", m,
               [{"M": np.int64(10), "c0": np.array(True), "x": x34()},
                {"M": np.int64(2), "c0": np.array(True), "x": 0.2 * x34()},
                {"M": np.int64(10), "c0": np.array(False), "x": x34()}], index)

    # Loop with scan outputs (unrolled: the trip count is known); a carried running sum and
    # per-iteration slices stacked
    body = helper.make_graph(
        [helper.make_node("Gather", ["x", "i"], ["row"], axis=0), helper.make_node("Add", ["acc_in", "row"], ["acc_out"]),
         helper.make_node("Mul", ["acc_out", "acc_out"], ["sq"]), helper.make_node("Identity", ["c_in"], ["c_out"])],
        "body", [vi("i", I64, []), vi("c_in", B, []), vi("acc_in", F, [4])],
        [vi("c_out", B, []), vi("acc_out", F, [4]), vi("sq", F, [4])])
    m = model([helper.make_node("Loop", ["M", "", "acc0"], ["acc", "sqs"], body=body)],
              [vi("x", F, [3, 4])], [vi("acc", F, [4]), vi("sqs", F, [3, 4])],
              [const("M", np.int64(3)), const("acc0", np.zeros(4, np.float32))])
    write_case(out, "loop_scan", "Loop", m, [{"x": x34()}], index)

    # zero iterations with a scan output: [0, 4] from the body's declared shape
    m = model([helper.make_node("Loop", ["M", "", "acc0"], ["acc", "sqs"], body=body)],
              [vi("x", F, [3, 4])], [vi("acc", F, [4]), vi("sqs", F, [None, 4])],
              [const("M", np.int64(0)), const("acc0", np.ones(4, np.float32))])
    write_case(out, "loop_scan_zero_iterations", "Loop", m, [{"x": x34()}], index)

    # an If nested in a Loop: on even iterations add the outer x, on odd ones subtract the
    # carried value's mean; the branches read the body's values and the main graph's
    inner_then = helper.make_graph([helper.make_node("Add", ["y_in", "x"], ["t_y"])], "then", [], [vi("t_y", F, [3, 4])])
    inner_else = helper.make_graph(
        [helper.make_node("ReduceMean", ["y_in"], ["mu"], keepdims=1), helper.make_node("Sub", ["y_in", "mu"], ["d"]),
         helper.make_node("Mul", ["d", "w"], ["e_y"])],
        "else", [], [vi("e_y", F, [3, 4])])
    body = helper.make_graph(
        [helper.make_node("Div", ["i", "two"], ["h"]),
         helper.make_node("Mul", ["h", "two"], ["h2"]), helper.make_node("Equal", ["h2", "i"], ["even"]),
         helper.make_node("If", ["even"], ["y_out"], then_branch=inner_then, else_branch=inner_else),
         helper.make_node("Identity", ["c_in"], ["c_out"])],
        "body", [vi("i", I64, []), vi("c_in", B, []), vi("y_in", F, [3, 4])],
        [vi("c_out", B, []), vi("y_out", F, [3, 4])], [const("two", np.int64(2))])
    m = model([helper.make_node("Loop", ["M", "", "x"], ["y"], body=body)],
              [vi("M", I64, []), vi("x", F, [3, 4])], [vi("y", F, [3, 4])],
              [const("w", np.float32(1.5))])
    write_case(out, "loop_nested_if", "Loop", m,
               [{"M": np.int64(5), "x": x34()}, {"M": np.int64(2), "x": x34(-1)}], index)

    # a Loop nested in a Loop (the inner trip count the outer iteration number)
    inner = helper.make_graph(
        [helper.make_node("Add", ["z_in", "x"], ["z_out"]), helper.make_node("Identity", ["ci"], ["co"])],
        "inner", [vi("j", I64, []), vi("ci", B, []), vi("z_in", F, [3, 4])], [vi("co", B, []), vi("z_out", F, [3, 4])])
    body = helper.make_graph(
        [helper.make_node("Loop", ["i", "", "y_in"], ["y_out"], body=inner), helper.make_node("Identity", ["c_in"], ["c_out"])],
        "outer", [vi("i", I64, []), vi("c_in", B, []), vi("y_in", F, [3, 4])], [vi("c_out", B, []), vi("y_out", F, [3, 4])])
    m = model([helper.make_node("Loop", ["M", "", "x"], ["y"], body=body)],
              [vi("M", I64, []), vi("x", F, [3, 4])], [vi("y", F, [3, 4])])
    write_case(out, "loop_nested_loop", "Loop", m, [{"M": np.int64(4), "x": x34()}], index)

    # Scan: two states, two scanned inputs (one along axis 1, read in reverse), two scan outputs
    # (one stacked along axis 1, one written in reverse); the body reads an outer initializer
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "a"], ["sa"]), helper.make_node("Mul", ["sa", "w"], ["s_out"]),
         helper.make_node("Mul", ["p_in", "b"], ["p_out"]), helper.make_node("Sub", ["s_out", "p_out"], ["o1"]),
         helper.make_node("Tanh", ["s_out"], ["o2"])],
        "body", [vi("s_in", F, [4]), vi("p_in", F, [4]), vi("a", F, [4]), vi("b", F, [4])],
        [vi("s_out", F, [4]), vi("p_out", F, [4]), vi("o1", F, [4]), vi("o2", F, [4])])
    m = model([helper.make_node("Scan", ["s0", "p0", "xa", "xb"], ["s", "p", "y1", "y2"], body=body, num_scan_inputs=2,
                                scan_input_axes=[0, 1], scan_input_directions=[0, 1], scan_output_axes=[1, 0],
                                scan_output_directions=[0, 1])],
              [vi("s0", F, [4]), vi("p0", F, [4]), vi("xa", F, [5, 4]), vi("xb", F, [4, 5])],
              [vi("s", F, [4]), vi("p", F, [4]), vi("y1", F, [4, 5]), vi("y2", F, [5, 4])],
              [const("w", np.float32(0.9))])
    f4 = lambda *shape: rng.standard_normal(shape).astype(np.float32)
    write_case(out, "scan_axes_directions", "Scan", m,
               [{"s0": f4(4), "p0": np.ones(4, np.float32), "xa": f4(5, 4), "xb": f4(4, 5)}], index)

    return write_index(out, index)


def bad(bad_dir, corpus):
    """Malformed models: each written unchecked (the checker would refuse most)."""
    items = []
    x = [vi("x", F, [3, 4])]

    def branch(nodes, outs, inputs=()):
        return helper.make_graph(nodes, "b", list(inputs), outs)

    neg = lambda o="e_y": branch([helper.make_node("Neg", ["x"], [o])], [vi(o, F, [3, 4])])
    rel = lambda o="t_y": branch([helper.make_node("Relu", ["x"], [o])], [vi(o, F, [3, 4])])
    pre = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0), helper.make_node("Greater", ["s", "zero"], ["c"])]
    zero = [const("zero", np.float32(0))]

    def add(name, nodes, expect, inputs=x, outputs=None, inits=zero):
        m = model(nodes, inputs, outputs or [vi("y", F, [3, 4])], inits, check=False)
        items.append((name, m, expect))

    add("if_missing_else", pre + [helper.make_node("If", ["c"], ["y"], then_branch=rel())], "has no 'else_branch' attribute")
    two = branch([helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["x"], ["b"])],
                 [vi("a", F, [3, 4]), vi("b", F, [3, 4])])
    add("if_output_count", pre + [helper.make_node("If", ["c"], ["y"], then_branch=two, else_branch=neg())],
        "then_branch has 2 outputs; expected 1")
    as_int = branch([helper.make_node("Cast", ["x"], ["e_y"], to=I64)], [vi("e_y", I64, [3, 4])])
    add("if_output_type", pre + [helper.make_node("If", ["c"], ["y"], then_branch=rel(), else_branch=as_int)],
        "is f32 in then_branch and i64 in else_branch")
    short = branch([helper.make_node("Slice", ["x", "st", "en"], ["e_y"])], [vi("e_y", F, None)])
    add("if_shape_mismatch", pre + [helper.make_node("If", ["c"], ["y"], then_branch=rel(), else_branch=short)],
        "same dtype and shape", inits=zero + [const("st", [0]), const("en", [2])])
    add("if_unknown_name", pre + [helper.make_node("If", ["c"], ["y"], then_branch=rel(),
                                                   else_branch=branch([helper.make_node("Neg", ["nowhere"], ["e_y"])],
                                                                      [vi("e_y", F, [3, 4])]))],
        "reads 'nowhere'")
    add("if_cycle", pre + [helper.make_node("If", ["c"], ["y"], then_branch=rel(),
                                            else_branch=branch([helper.make_node("Neg", ["y"], ["e_y"])],
                                                               [vi("e_y", F, [3, 4])]))],
        "cycle through node")
    add("if_not_graph", pre + [helper.make_node("If", ["c"], ["y"], then_branch=rel(), else_branch=1)],
        "'else_branch' is not a graph")

    def body(ins, outs, nodes):
        return helper.make_graph(nodes, "body", ins, outs)

    ok_nodes = [helper.make_node("Relu", ["y_in"], ["y_out"]), helper.make_node("Identity", ["c_in"], ["c_out"])]
    ok_ins = [vi("i", I64, []), vi("c_in", B, []), vi("y_in", F, [3, 4])]
    ok_outs = [vi("c_out", B, []), vi("y_out", F, [3, 4])]
    m3 = [const("M", np.int64(3))]
    add("loop_body_inputs", [helper.make_node("Loop", ["M", "", "x"], ["y"], body=body(ok_ins[1:], ok_outs, ok_nodes))],
        "the body has 2 inputs; expected 3", inits=m3)
    add("loop_body_outputs", [helper.make_node("Loop", ["M", "", "x"], ["y"], body=body(ok_ins, ok_outs[1:], ok_nodes))],
        "the body has 1 outputs", inits=m3)
    add("loop_body_types", [helper.make_node("Loop", ["M", "", "x"], ["y"],
                                             body=body([vi("i", F, [])] + ok_ins[1:], ok_outs, ok_nodes))],
        "expected the iteration number (int64)", inits=m3)
    add("loop_missing_body", [helper.make_node("Loop", ["M", "", "x"], ["y"])], "has no 'body' attribute", inits=m3)
    add("loop_never_ends", [helper.make_node("Loop", ["", "", "x"], ["y"], body=body(ok_ins, ok_outs, ok_nodes))],
        "never ends")
    grow = [helper.make_node("Concat", ["y_in", "y_in"], ["y_out"], axis=0), helper.make_node("Identity", ["c_in"], ["c_out"])]
    add("loop_carried_shape_changes", [helper.make_node("Loop", ["M", "", "x"], ["y"],
                                                        body=body(ok_ins, [ok_outs[0], vi("y_out", F, None)], grow))],
        "fixed dtype and shape", inputs=x + [vi("M", I64, [])], inits=[])
    add("loop_unknown_name", [helper.make_node("Loop", ["M", "", "x"], ["y"],
                                               body=body(ok_ins, ok_outs, [helper.make_node("Add", ["y_in", "ghost"], ["y_out"]),
                                                                           ok_nodes[1]]))],
        "reads 'ghost'", inits=m3)
    cyc = [helper.make_node("Add", ["y_in", "b"], ["a"]), helper.make_node("Relu", ["a"], ["b"]),
           helper.make_node("Identity", ["b"], ["y_out"]), ok_nodes[1]]
    add("loop_body_cycle", [helper.make_node("Loop", ["M", "", "x"], ["y"], body=body(ok_ins, ok_outs, cyc))],
        "cycle through node", inits=m3)
    scan_body = body(ok_ins[2:], ok_outs[1:], [ok_nodes[0]])
    add("scan_num_inputs", [helper.make_node("Scan", ["x"], ["y"], body=scan_body, num_scan_inputs=3)],
        "num_scan_inputs is 3; expected 1 to 1")
    return write_bad(bad_dir, corpus, "control_", items, "control_cases.py")


if __name__ == "__main__":
    out, bad_dir, corpus = sys.argv[1:4]
    n = cases(out)
    nb = bad(bad_dir, corpus)
    print(f"control_cases: {n} cases in {out}, {nb} malformed models in {bad_dir} and {corpus}")
