"""Writes ONNX sequence and optional cases for `oar onnx-test`, in the layout of the backend node
cases (OUT/test_<name>/model.onnx, test_data_set_N/{input,output}_K.pb, a sequence as a
SequenceProto; OUT/index.tsv: case -> operator). Each model passes onnx.checker (full check); the
expected outputs are onnxruntime's. Also writes malformed or unsupported models to BAD/<name>.onnx
with BAD/expected.txt (name, then a part of the error oar must give) and copies them to
CORPUS/seq_<name>.onnx (the fuzz corpus, replayed by test_onnx).

Usage: seq_cases.py OUT BAD CORPUS   (a python with onnx and onnxruntime). Exit 77 without them."""
import sys

try:
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    from case_writer import const, make_model, vi, write_bad, write_index
    from case_writer import write_case as write_any_case
except ImportError as e:
    print(f"seq_cases: skipped: {e}")
    sys.exit(77)

F, I64, I32, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32, TensorProto.BOOL
OPSET = 17
rng = np.random.default_rng(18)


def seq_vi(name, t, shape=None):
    return helper.make_tensor_sequence_value_info(name, t, shape)


def model(nodes, inputs, outputs, inits=(), check=True):
    return make_model(nodes, inputs, outputs, inits, opset=OPSET, producer="seq_cases.py", check=check)


def as_proto(x, v):
    if v.type.WhichOneof("value") == "sequence_type":
        return numpy_helper.from_list([np.asarray(e) for e in x], v.name)
    return numpy_helper.from_array(np.asarray(x), v.name)


def write_case(out, name, op, m, data_sets, index):
    write_any_case(out, name, op, m, data_sets, index, proto=as_proto)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def cases(out):
    index = []
    # split into columns (no split: pieces of 1, squeezed), the last column, erase one, insert a
    # computed tensor at the front, length, stack along a new last axis
    m = model([helper.make_node("SplitToSequence", ["x"], ["cols"], axis=1, keepdims=0),
               helper.make_node("SequenceAt", ["cols", "m1"], ["last"]),
               helper.make_node("SequenceErase", ["cols", "one"], ["s2"]),
               helper.make_node("Relu", ["last"], ["r"]),
               helper.make_node("SequenceInsert", ["s2", "r", "zero"], ["s3"]),
               helper.make_node("SequenceLength", ["s3"], ["n"]),
               helper.make_node("ConcatFromSequence", ["s3"], ["y"], axis=-1, new_axis=1)],
              [vi("x", F, [3, 4])], [vi("last", F, [3]), vi("n", I64, []), vi("y", F, [3, 4])],
              [const("m1", np.int64(-1)), const("one", np.int64(1)), const("zero", np.int32(0))])
    write_case(out, "seq_split_at_erase_insert", "SplitToSequence", m, [{"x": f32(3, 4)}], index)

    # split sizes given (a list, and a scalar with a smaller last piece), concatenated back in
    # another order along the split axis
    m = model([helper.make_node("SplitToSequence", ["x", "sizes"], ["a"], axis=1),
               helper.make_node("SplitToSequence", ["x", "three"], ["b"], axis=-1),
               helper.make_node("SequenceAt", ["b", "one"], ["b1"]),
               helper.make_node("SequenceInsert", ["a", "b1", "zero"], ["ab"]),
               helper.make_node("ConcatFromSequence", ["ab"], ["y"], axis=1)],
              [vi("x", F, [2, 5])], [vi("y", F, [2, 7])],
              [const("sizes", np.array([1, 3, 1], np.int64)), const("three", np.int64(3)), const("one", np.int64(1)),
               const("zero", np.int64(0))])
    write_case(out, "seq_split_sizes_concat", "SplitToSequence", m, [{"x": f32(2, 5)}], index)

    # SequenceConstruct of computed tensors, SequenceAt at a negative position, and the
    # sequence itself as a graph output
    m = model([helper.make_node("Tanh", ["x"], ["t"]), helper.make_node("Neg", ["x"], ["u"]),
               helper.make_node("SequenceConstruct", ["x", "t", "u"], ["s"]),
               helper.make_node("SequenceAt", ["s", "m2"], ["y"]),
               helper.make_node("SequenceErase", ["s"], ["s2"])],
              [vi("x", F, [2, 3])], [vi("y", F, [2, 3]), seq_vi("s2", F, [2, 3])], [const("m2", np.int64(-2))])
    write_case(out, "seq_construct_output", "SequenceConstruct", m, [{"x": f32(2, 3)}], index)

    # a sequence graph input (length and element shapes vary per test set) concatenated
    m = model([helper.make_node("SequenceLength", ["s"], ["n"]),
               helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0),
               helper.make_node("SequenceInsert", ["s", "x"], ["s2"])],
              [seq_vi("s", F, [None, 3]), vi("x", F, [1, 3])], [vi("n", I64, []), vi("y", F, [None, 3]),
                                                                 seq_vi("s2", F, [None, 3])])
    write_case(out, "seq_graph_input", "ConcatFromSequence", m,
               [{"s": [f32(2, 3), f32(1, 3)], "x": f32(1, 3)}, {"s": [f32(4, 3)], "x": f32(1, 3)},
                {"s": [f32(1, 3), f32(1, 3), f32(3, 3)], "x": f32(1, 3)}], index)

    # a Loop growing a sequence (trip count known at load), stacked after it: SequenceEmpty of
    # a dtype, SequenceInsert in the body, ConcatFromSequence new_axis
    body = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["fi"], to=F), helper.make_node("Mul", ["h_in", "fi"], ["p"]),
         helper.make_node("Tanh", ["p"], ["h_out"]), helper.make_node("SequenceInsert", ["s_in", "h_out"], ["s_out"]),
         helper.make_node("Identity", ["c_in"], ["c_out"])],
        "body", [vi("i", I64, []), vi("c_in", B, []), vi("h_in", F, [3]), seq_vi("s_in", F, [3])],
        [vi("c_out", B, []), vi("h_out", F, [3]), seq_vi("s_out", F, [3])])
    m = model([helper.make_node("SequenceEmpty", [], ["s0"], dtype=F),
               helper.make_node("Loop", ["M", "", "x", "s0"], ["h", "s"], body=body),
               helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0, new_axis=1)],
              [vi("x", F, [3])], [vi("h", F, [3]), vi("y", F, [5, 3])], [const("M", np.int64(5))])
    write_case(out, "seq_loop_grow", "Loop", m, [{"x": f32(3)}], index)

    # the same with the trip count a graph input (compiled per value), 0 and 3 iterations
    m = model([helper.make_node("SequenceEmpty", [], ["s0"], dtype=F),
               helper.make_node("SequenceInsert", ["s0", "x"], ["s1"]),
               helper.make_node("Loop", ["M", "", "x", "s1"], ["h", "s"], body=body),
               helper.make_node("SequenceLength", ["s"], ["n"]),
               helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0)],
              [vi("M", I64, []), vi("x", F, [3])], [vi("n", I64, []), vi("y", F, [None])])
    write_case(out, "seq_loop_trip_input", "Loop", m,
               [{"M": np.int64(3), "x": f32(3)}, {"M": np.int64(0), "x": f32(3)}], index)

    # If on a known condition giving a sequence, and an optional: Optional of a tensor,
    # OptionalHasElement, OptionalGetElement (opset 18 takes tensors too)
    then_b = helper.make_graph([helper.make_node("SequenceConstruct", ["x", "x"], ["t_s"])], "then", [],
                               [seq_vi("t_s", F, [2])])
    else_b = helper.make_graph([helper.make_node("SplitToSequence", ["x"], ["e_s"], keepdims=1)], "else", [],
                               [seq_vi("e_s", F, [1])])
    m = model([helper.make_node("If", ["c"], ["s"], then_branch=then_b, else_branch=else_b),
               helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0),
               helper.make_node("Optional", ["x"], ["o"]),
               helper.make_node("OptionalHasElement", ["o"], ["has"]),
               helper.make_node("OptionalGetElement", ["o"], ["g"]),
               helper.make_node("ReduceSum", ["y"], ["ys"], keepdims=1), helper.make_node("Add", ["g", "ys"], ["z"])],
              [vi("c", B, []), vi("x", F, [2])], [vi("has", B, []), vi("y", F, [None]), vi("z", F, [2])])
    write_case(out, "seq_if_optional", "If", m,
               [{"c": np.array(True), "x": f32(2)}, {"c": np.array(False), "x": f32(2)}], index)

    return write_index(out, index)


def bad(bad_dir, corpus):
    """Malformed or unsupported models: each written unchecked."""
    items = []
    x = [vi("x", F, [3, 4])]

    def add(name, nodes, expect, inputs=x, outputs=None, inits=()):
        m = model(nodes, inputs, outputs or [vi("y", F, None)], inits, check=False)
        items.append((name, m, expect))

    split = helper.make_node("SplitToSequence", ["x"], ["s"], axis=1, keepdims=0)
    add("seq_at_out_of_range", [split, helper.make_node("SequenceAt", ["s", "p"], ["y"])],
        "position 4 is out of range for a sequence of 4 tensors", inits=[const("p", np.int64(4))])
    add("seq_at_negative_out_of_range", [split, helper.make_node("SequenceAt", ["s", "p"], ["y"])],
        "position -5 is out of range", inits=[const("p", np.int64(-5))])
    add("seq_insert_dtype", [split, helper.make_node("Cast", ["x"], ["xi"], to=I64),
                             helper.make_node("SequenceInsert", ["s", "xi"], ["s2"]),
                             helper.make_node("ConcatFromSequence", ["s2"], ["y"], axis=0)],
        "a sequence's tensors share one dtype")
    add("seq_construct_dtype", [helper.make_node("Cast", ["x"], ["xi"], to=I32),
                                helper.make_node("SequenceConstruct", ["x", "xi"], ["s"]),
                                helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0)],
        "a sequence's tensors share one dtype")
    add("seq_concat_no_axis", [split, helper.make_node("ConcatFromSequence", ["s"], ["y"])],
        "the attribute axis is required")
    add("seq_concat_empty", [helper.make_node("SequenceEmpty", [], ["s"], dtype=F),
                             helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0)],
        "the sequence is empty")
    add("seq_erase_empty", [helper.make_node("SequenceEmpty", [], ["s"], dtype=F),
                            helper.make_node("SequenceErase", ["s"], ["s2"]),
                            helper.make_node("ConcatFromSequence", ["s2"], ["y"], axis=0)],
        "nothing to erase")
    add("seq_split_sum", [helper.make_node("SplitToSequence", ["x", "sz"], ["s"], axis=1),
                          helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=1)],
        "split sums to 5; dim 1 has 4", inits=[const("sz", np.array([2, 3], np.int64))])
    add("seq_into_tensor_op", [split, helper.make_node("Relu", ["s"], ["y"])], "Relu takes tensors")
    add("seq_at_of_tensor", [helper.make_node("SequenceAt", ["x", "p"], ["y"])],
        "input 0 must be a sequence of tensors, got a tensor", inits=[const("p", np.int64(0))])
    opt_t = helper.make_tensor_type_proto(F, [3, 4])
    add("optional_get_empty", [helper.make_node("Optional", [], ["o"], type=opt_t),
                               helper.make_node("OptionalGetElement", ["o"], ["y"])],
        "the optional has no element")
    add("optional_no_type", [helper.make_node("Optional", [], ["o"]),
                             helper.make_node("OptionalGetElement", ["o"], ["y"])],
        "the attribute type is required")
    # an If giving a sequence on a condition computed from the input: refused, saying why
    then_b = helper.make_graph([helper.make_node("SequenceConstruct", ["x"], ["t_s"])], "then", [], [seq_vi("t_s", F)])
    else_b = helper.make_graph([helper.make_node("SplitToSequence", ["x"], ["e_s"])], "else", [], [seq_vi("e_s", F)])
    pre = [helper.make_node("ReduceSum", ["x"], ["r"], keepdims=0), helper.make_node("Greater", ["r", "zero"], ["c"])]
    add("seq_if_data_cond", pre + [helper.make_node("If", ["c"], ["s"], then_branch=then_b, else_branch=else_b),
                                   helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0)],
        "needs a condition known when the model is compiled", inits=[const("zero", np.float32(0))])
    # the branches disagree: a sequence of f32 and a sequence of i64
    else_i = helper.make_graph([helper.make_node("Cast", ["x"], ["xi"], to=I64),
                                helper.make_node("SequenceConstruct", ["xi"], ["e_s"])], "else", [], [seq_vi("e_s", I64)])
    add("seq_if_branch_types", [helper.make_node("If", ["c"], ["s"], then_branch=then_b, else_branch=else_i),
                                helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0)],
        "is f32 in then_branch and i64 in else_branch", inputs=x, inits=[const("c", np.array(True))])
    # a sequence in one branch, a tensor in the other
    else_t = helper.make_graph([helper.make_node("Neg", ["x"], ["e_t"])], "else", [], [vi("e_t", F, [3, 4])])
    add("seq_if_branch_kinds", [helper.make_node("If", ["c"], ["s"], then_branch=then_b, else_branch=else_t),
                                helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0)],
        "the branches must agree", inputs=x, inits=[const("c", np.array(True))])
    # a Loop carrying a sequence whose trip count is computed from the data: refused, saying why
    body = helper.make_graph(
        [helper.make_node("SequenceInsert", ["s_in", "x"], ["s_out"]), helper.make_node("Identity", ["c_in"], ["c_out"])],
        "body", [vi("i", I64, []), vi("c_in", B, []), seq_vi("s_in", F)], [vi("c_out", B, []), seq_vi("s_out", F)])
    add("seq_loop_data_trips", [helper.make_node("ReduceSum", ["x"], ["r"], keepdims=0),
                                helper.make_node("Abs", ["r"], ["a"]), helper.make_node("Cast", ["a"], ["M"], to=I64),
                                helper.make_node("SequenceEmpty", [], ["s0"], dtype=F),
                                helper.make_node("Loop", ["M", "", "s0"], ["s"], body=body),
                                helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0)],
        "carries a sequence or optional")
    return write_bad(bad_dir, corpus, "seq_", items, "seq_cases.py")


if __name__ == "__main__":
    out, bad_dir, corpus = sys.argv[1:4]
    n = cases(out)
    nb = bad(bad_dir, corpus)
    print(f"seq_cases: {n} cases in {out}, {nb} malformed models in {bad_dir} and {corpus}")
