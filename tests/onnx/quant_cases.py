"""Writes quantized ONNX cases for `oar onnx-test`, in the layout of the backend node cases:
OUT/test_<name>/model.onnx and test_data_set_N/{input,output}_K.pb, plus OUT/index.tsv (case ->
operator). The expected outputs are onnxruntime's (all graph optimizations: its QDQ fusion runs
QLinearConv/MatMulIntegerToFloat kernels). Every model has static shapes, so `oar inspect` prints
its program: quant_cases.sh checks that the cases named *_int8 run on qconv2d/qlinear.
Covered: the QDQ form (DequantizeLinear of a quantized input and of i8 weights, per tensor and
per output channel, with the int32 bias as DequantizeLinear) around Conv [+ Add residual] [+ Relu]
+ QuantizeLinear, Gemm, MatMul, MaxPool; the QOperator form (QLinearConv with u8 and i8 data,
stride, pads, groups, int32 bias; QLinearMatMul; ConvInteger; MatMulInteger); and cases the int8
ops cannot express (u8 weights with a zero point, asymmetric pads), which keep the float path.
Also writes malformed models to BAD/<name>.onnx with BAD/expected.txt and copies them to
CORPUS/quant_<name>.onnx (the fuzz corpus, replayed by test_onnx).

Usage: quant_cases.py OUT BAD CORPUS   (a python with onnx and onnxruntime). Exit 77 without them."""
import os
import shutil
import sys

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:
    print(f"quant_cases: skipped: {e}")
    sys.exit(77)

F, U8, I8, I32 = TensorProto.FLOAT, TensorProto.UINT8, TensorProto.INT8, TensorProto.INT32
OPSET = 13
rng = np.random.default_rng(1818)


def vi(name, t, shape):
    return helper.make_tensor_value_info(name, t, shape)


def const(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def model(nodes, inputs, outputs, inits=(), check=True):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="quant_cases.py")
    m.ir_version = 8
    if check:
        onnx.checker.check_model(m, full_check=True)
    return m


def write_case(out, name, op, m, data_sets, index, expected=None, definition=False):
    """definition: the expected outputs are onnxruntime's with graph optimizations off (each node as
    the file writes it: ONNX's definition in float), not its int8 kernels (see qdq_residual_add)."""
    d = os.path.join(out, "test_" + name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    with open(os.path.join(d, "model.onnx"), "wb") as f:
        f.write(m.SerializeToString())
    so = ort.SessionOptions()
    so.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_DISABLE_ALL if definition else
                                   ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
    sess = None if expected else ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    for s, feeds in enumerate(data_sets):
        sd = os.path.join(d, f"test_data_set_{s}")
        os.makedirs(sd)
        names = [i.name for i in m.graph.input]
        for k, nm in enumerate(names):
            with open(os.path.join(sd, f"input_{k}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(np.asarray(feeds[nm]), nm).SerializeToString())
        got = expected[s] if expected else sess.run(None, {nm: np.asarray(feeds[nm]) for nm in names})
        for k, y in enumerate(got):
            with open(os.path.join(sd, f"output_{k}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(np.asarray(y), m.graph.output[k].name).SerializeToString())
    index.append((f"test_{name}", op))


def qweights(shape, per_channel=True):
    """i8 weights (symmetric, zero point 0) and their f32 scales, per output channel (axis 0)."""
    w = rng.integers(-127, 128, size=shape, dtype=np.int64).astype(np.int8)
    w.flat[0] = -128  # the extreme code
    s = (rng.random(shape[0] if per_channel else 1) * 0.02 + 0.002).astype(np.float32)
    return w, (s if per_channel else s.reshape(()))


def wzero(name, ws):
    return const(name, np.zeros(np.shape(ws), np.int8))


def f32(*shape, lo=-1.0, hi=1.0):
    return (rng.random(shape) * (hi - lo) + lo).astype(np.float32)


def qdq_conv(name, index, out, residual=False, relu=True, per_channel=True, pads=(1, 1, 1, 1), group=1, xdt=U8):
    C, M, H = (group, 2 * group, 7) if group > 1 else (3, 8, 7)  # group > 1: depthwise, multiplier 2
    cg = C // group
    w, ws = qweights((M, cg, 3, 3), per_channel)
    xs, x_zp = np.float32(2.0 / 255), (np.uint8(128) if xdt == U8 else np.int8(0))
    ys, y_zp = np.float32(0.03), (np.uint8(10) if xdt == U8 else np.int8(-5))
    b32 = rng.integers(-500, 500, size=M).astype(np.int32)
    bs = (xs * ws).astype(np.float32) if per_channel else np.float32(xs * ws)
    inits = [const("xs", xs), const("xz", x_zp), const("w", w), const("ws", ws), const("b", b32), const("bs", bs),
             const("ys", ys), const("yz", y_zp)]
    inits.append(wzero("wz", ws))
    wdq = helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wf"], axis=0) if per_channel else \
        helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wf"])
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xf"]), wdq,
             helper.make_node("DequantizeLinear", ["b", "bs"], ["bf"],
                              **({"axis": 0} if per_channel else {})),
             helper.make_node("Conv", ["xf", "wf", "bf"], ["c"], pads=list(pads), group=group)]
    last = "c"
    Ho = H + pads[0] + pads[2] - 2
    Wo = H + pads[1] + pads[3] - 2
    inputs = [vi("x", F, [2, C, H, H])]
    feeds = [{"x": f32(2, C, H, H)} for _ in range(2)]
    if residual:
        nodes += [helper.make_node("QuantizeLinear", ["r", "ys", "yz"], ["rq"]),
                  helper.make_node("DequantizeLinear", ["rq", "ys", "yz"], ["rf"]),
                  helper.make_node("Add", [last, "rf"], ["a"])]
        last = "a"
        inputs.append(vi("r", F, [2, M, Ho, Wo]))
        for f in feeds:
            f["r"] = f32(2, M, Ho, Wo)
    if relu:
        nodes.append(helper.make_node("Relu", [last], ["rl"]))
        last = "rl"
    nodes.append(helper.make_node("QuantizeLinear", [last, "ys", "yz"], ["y"]))
    m = model(nodes, inputs, [vi("y", xdt, [2, M, Ho, Wo])], inits)
    write_case(out, name, "QDQ Conv", m, feeds, index)


def qdq_gemm(name, index, out, matmul=False, xdt=U8):
    K, N = 24, 10
    w, ws = qweights((N, K), per_channel=not matmul)
    xs, x_zp = np.float32(2.0 / 255), (np.uint8(128) if xdt == U8 else np.int8(0))
    ys, y_zp = np.float32(0.05), (np.uint8(128) if xdt == U8 else np.int8(0))
    inits = [const("xs", xs), const("xz", x_zp), const("ys", ys), const("yz", y_zp)]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xf"])]
    if matmul:  # W as [K, N], per tensor
        inits += [const("w", np.ascontiguousarray(w.T)), const("ws", ws), wzero("wz", ws)]
        nodes += [helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wf"]),
                  helper.make_node("MatMul", ["xf", "wf"], ["g"])]
    else:  # Linear: W [N, K] with transB, per output channel, int32 bias
        b32 = rng.integers(-2000, 2000, size=N).astype(np.int32)
        inits += [const("w", w), const("ws", ws), const("b", b32), const("bs", (xs * ws).astype(np.float32)),
                  wzero("wz", ws)]
        nodes += [helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wf"], axis=0),
                  helper.make_node("DequantizeLinear", ["b", "bs"], ["bf"], axis=0),
                  helper.make_node("Gemm", ["xf", "wf", "bf"], ["g"], transB=1)]
    nodes.append(helper.make_node("QuantizeLinear", ["g", "ys", "yz"], ["y"]))
    m = model(nodes, [vi("x", F, [5, K])], [vi("y", xdt, [5, N])], inits)
    write_case(out, name, "QDQ " + ("MatMul" if matmul else "Gemm"), m, [{"x": f32(5, K)} for _ in range(2)], index)


def qdq_pool(name, index, out):
    """conv -> relu -> Q -> DQ -> MaxPool -> Q -> DQ -> conv -> Q: the pooling on u8 data."""
    w1, s1 = qweights((6, 2, 3, 3))
    w2, s2 = qweights((4, 6, 1, 1))
    xs, xz, a, az = np.float32(1 / 127), np.uint8(128), np.float32(0.02), np.uint8(0)
    inits = [const("xs", xs), const("xz", xz), const("w1", w1), const("s1", s1), const("w2", w2), const("s2", s2),
             const("a", a), const("az", az), const("ys", np.float32(0.04)), const("yz", np.uint8(100)),
             wzero("z1", s1), wzero("z2", s2)]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xf"]),
             helper.make_node("DequantizeLinear", ["w1", "s1", "z1"], ["w1f"], axis=0),
             helper.make_node("Conv", ["xf", "w1f"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("QuantizeLinear", ["r1", "a", "az"], ["q1"]),
             helper.make_node("DequantizeLinear", ["q1", "a", "az"], ["d1"]),
             helper.make_node("MaxPool", ["d1"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("QuantizeLinear", ["p", "a", "az"], ["q2"]),
             helper.make_node("DequantizeLinear", ["q2", "a", "az"], ["d2"]),
             helper.make_node("DequantizeLinear", ["w2", "s2", "z2"], ["w2f"], axis=0),
             helper.make_node("Conv", ["d2", "w2f"], ["c2"]),
             helper.make_node("QuantizeLinear", ["c2", "ys", "yz"], ["y"])]
    m = model(nodes, [vi("x", F, [3, 2, 8, 8])], [vi("y", U8, [3, 4, 4, 4])], inits)
    write_case(out, name, "QDQ Conv+MaxPool", m, [{"x": f32(3, 2, 8, 8)} for _ in range(2)], index)


def qlinear_conv(name, index, out, xdt=U8, stride=1, pads=(1, 1, 1, 1), group=1, bias=True, wdt=I8, wz=0):
    C, M = (4, 6) if group == 1 else (4, 4)
    w, ws = qweights((M, C // group, 3, 3))
    if wdt == U8:
        w = (w.astype(np.int64) + 128).astype(np.uint8)
    x = rng.integers(0, 256, size=(2, C, 9, 9)).astype(np.uint8) if xdt == U8 else \
        rng.integers(-128, 128, size=(2, C, 9, 9)).astype(np.int8)
    np_x = np.uint8 if xdt == U8 else np.int8
    inits = [const("xs", np.float32(0.0173)), const("xz", np_x(120 if xdt == U8 else -3)), const("w", w),
             const("ws", ws), const("wz", (np.full(M, wz, np.uint8) if wdt == U8 else np.zeros(M, np.int8))),
             const("ys", np.float32(0.061)), const("yz", np_x(7))]
    ins = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"]
    if bias:
        inits.append(const("b", rng.integers(-3000, 3000, size=M).astype(np.int32)))
        ins.append("b")
    Ho = (9 + pads[0] + pads[2] - 3) // stride + 1
    Wo = (9 + pads[1] + pads[3] - 3) // stride + 1
    nodes = [helper.make_node("QLinearConv", ins, ["y"], strides=[stride, stride], pads=list(pads), group=group)]
    m = model(nodes, [vi("x", xdt, [2, C, 9, 9])], [vi("y", xdt, [2, M, Ho, Wo])], inits)
    write_case(out, name, "QLinearConv", m, [{"x": x}], index)


def qlinear_matmul(name, index, out, xdt=U8):
    K, N = 20, 7
    b, bs = qweights((N, K))
    np_x = np.uint8 if xdt == U8 else np.int8
    a = rng.integers(0, 256, size=(3, 4, K)).astype(np.uint8) if xdt == U8 else \
        rng.integers(-128, 128, size=(3, 4, K)).astype(np.int8)
    inits = [const("as", np.float32(0.011)), const("az", np_x(100 if xdt == U8 else 2)),
             const("b", np.ascontiguousarray(b.T)), const("bs", bs), const("bz", np.zeros(N, np.int8)),
             const("ys", np.float32(0.09)), const("yz", np_x(50))]
    nodes = [helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"])]
    m = model(nodes, [vi("a", xdt, [3, 4, K])], [vi("y", xdt, [3, 4, N])], inits)
    write_case(out, name, "QLinearMatMul", m, [{"a": a}], index)


def conv_int(x, w, xz, pad):
    """The exact int64 convolution (stride 1) of x - xz by w: the reference for i8 weights, which
    onnxruntime's ConvInteger does not take."""
    xp = np.pad(x.astype(np.int64) - int(xz), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    N, C, H, W = xp.shape
    M, _, kh, kw = w.shape
    y = np.zeros((N, M, H - kh + 1, W - kw + 1), np.int64)
    for i in range(kh):
        for j in range(kw):
            y += np.einsum("nchw,mc->nmhw", xp[:, :, i:i + y.shape[2], j:j + y.shape[3]], w[:, :, i, j].astype(np.int64))
    return y.astype(np.int32)


def integer_ops(index, out):
    w, _ = qweights((5, 3, 3, 3))
    x = rng.integers(0, 256, size=(2, 3, 6, 6)).astype(np.uint8)
    m = model([helper.make_node("ConvInteger", ["x", "w", "xz"], ["y"], pads=[1, 1, 1, 1])],
              [vi("x", U8, [2, 3, 6, 6])], [vi("y", I32, [2, 5, 6, 6])], [const("w", w), const("xz", np.uint8(131))])
    write_case(out, "convinteger_int8", "ConvInteger", m, [{"x": x}], index, expected=[[conv_int(x, w, 131, 1)]])
    wu = (w.astype(np.int64) + 128).astype(np.uint8)  # u8 weights with a zero point: the float path, onnxruntime's
    m = model([helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], pads=[1, 1, 1, 1])],
              [vi("x", U8, [2, 3, 6, 6])], [vi("y", I32, [2, 5, 6, 6])],
              [const("w", wu), const("xz", np.uint8(131)), const("wz", np.uint8(128))])
    write_case(out, "convinteger_u8_weights_float", "ConvInteger", m, [{"x": x}], index)
    b, _ = qweights((6, 16))
    a = rng.integers(-128, 128, size=(4, 16)).astype(np.int8)
    m = model([helper.make_node("MatMulInteger", ["a", "b", "az"], ["y"])], [vi("a", I8, [4, 16])],
              [vi("y", I32, [4, 6])], [const("b", np.ascontiguousarray(b.T)), const("az", np.int8(-7))])
    write_case(out, "matmulinteger_int8", "MatMulInteger", m, [{"a": a}], index)


def qdq_residual_add(name, index, out, relu=False, xdt=U8):
    """quantize_static's residual in ResNet: Conv -> Q -> DQ, DQ of the shortcut, Add [-> Relu] -> Q
    (onnxruntime fuses it into QLinearConv + QLinearAdd; oar into qconv2d + qadd). Expected: the
    file's definition (onnxruntime unoptimized), which oar's qadd computes exactly; onnxruntime's
    own u8 QLinearAdd kernel is one code off in about 3% of the outputs here (docs/onnx.md)."""
    C, M, H = 4, 4, 6
    w, ws = qweights((M, C, 3, 3))
    z = (lambda v: np.uint8(v)) if xdt == U8 else (lambda v: np.int8(v - 128))
    xs, cs, rs, ys = np.float32(2.0 / 255), np.float32(0.02), np.float32(0.015), np.float32(0.03)
    inits = [const("xs", xs), const("xz", z(128)), const("w", w), const("ws", ws), wzero("wz", ws),
             const("cs", cs), const("cz", z(120)), const("rs", rs), const("rz", z(130)), const("ys", ys),
             const("yz", z(0 if relu else 100))]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xf"]),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wf"], axis=0),
             helper.make_node("Conv", ["xf", "wf"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("QuantizeLinear", ["c", "cs", "cz"], ["cq"]),
             helper.make_node("DequantizeLinear", ["cq", "cs", "cz"], ["cf"]),
             helper.make_node("QuantizeLinear", ["r", "rs", "rz"], ["rq"]),
             helper.make_node("DequantizeLinear", ["rq", "rs", "rz"], ["rf"]),
             helper.make_node("Add", ["cf", "rf"], ["a"])]
    last = "a"
    if relu:
        nodes.append(helper.make_node("Relu", ["a"], ["rl"]))
        last = "rl"
    nodes.append(helper.make_node("QuantizeLinear", [last, "ys", "yz"], ["y"]))
    inputs = [vi("x", F, [2, C, H, H]), vi("r", F, [2, M, H, H])]
    m = model(nodes, inputs, [vi("y", xdt, [2, M, H, H])], inits)
    write_case(out, name, "QDQ Add", m, [{"x": f32(2, C, H, H), "r": f32(2, M, H, H)} for _ in range(2)], index,
               definition=True)


def cases(out):
    index = []
    qdq_conv("qdq_conv_relu_int8", index, out)
    qdq_conv("qdq_conv_residual_relu_int8", index, out, residual=True)
    qdq_conv("qdq_conv_per_tensor_int8", index, out, per_channel=False, relu=False)
    qdq_conv("qdq_conv_s8_depthwise_int8", index, out, group=4, xdt=I8)
    qdq_conv("qdq_conv_asymmetric_pads_float", index, out, pads=(1, 0, 0, 1))
    qdq_gemm("qdq_gemm_int8", index, out)
    qdq_gemm("qdq_matmul_s8_int8", index, out, matmul=True, xdt=I8)
    qdq_pool("qdq_conv_maxpool_int8", index, out)
    qlinear_conv("qlinearconv_u8_int8", index, out)
    qlinear_conv("qlinearconv_s8_stride_int8", index, out, xdt=I8, stride=2)
    qlinear_conv("qlinearconv_group_nobias_int8", index, out, group=2, bias=False, pads=(0, 0, 0, 0))
    qlinear_conv("qlinearconv_u8_weights_float", index, out, wdt=U8, wz=128)
    qlinear_matmul("qlinearmatmul_u8_int8", index, out)
    qlinear_matmul("qlinearmatmul_s8_int8", index, out, xdt=I8)
    integer_ops(index, out)
    qdq_residual_add("qdq_residual_add_int8", index, out)
    qdq_residual_add("qdq_residual_add_relu_int8", index, out, relu=True)
    qdq_residual_add("qdq_residual_add_s8_int8", index, out, xdt=I8)
    with open(os.path.join(out, "index.tsv"), "w") as f:
        f.write("case\toperator\n")
        for name, op in index:
            f.write(f"{name}\t{op}\n")
    return len(index)


def bad(bad_dir, corpus):
    items = []
    x = [vi("x", F, [1, 2, 4, 4])]
    w, ws = qweights((3, 2, 3, 3))

    def add(name, nodes, expect, inputs=x, outputs=None, inits=()):
        outs = outputs or [vi("y", F, None)]
        items.append((name, model(nodes, inputs, outs, inits, check=False), expect))

    dq = helper.make_node("DequantizeLinear", ["w", "ws"], ["wf"], axis=0)
    conv = helper.make_node("Conv", ["x", "wf"], ["y"])
    add("scale_wrong_shape", [dq, conv], "expected a scale of one value or of dim 0's size 3",
        inits=[const("w", w), const("ws", np.ones(2, np.float32))])
    add("zero_point_dtype", [helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wf"], axis=0), conv],
        "expected x_zero_point of x's dtype i8, got u8",
        inits=[const("w", w), const("ws", ws), const("wz", np.zeros(3, np.uint8))])
    add("zero_scale", [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])],
        "expected a positive finite y_scale, got y_scale[0] = 0", outputs=[vi("y", U8, None)],
        inits=[const("s", np.float32(0)), const("z", np.uint8(0))])
    qin = ["xq", "xs", "xz", "w", "ws", "wz", "ys", "yz"]
    qinits = [const("xs", np.float32(0.1)), const("xz", np.uint8(0)), const("w", w), const("wz", np.zeros(3, np.int8)),
              const("ys", np.float32(0.1)), const("yz", np.uint8(0))]
    add("qlinearconv_w_scale_shape", [helper.make_node("QLinearConv", qin, ["y"])],
        "expected w_scale of one value or of w's 3 output channels, got 2 values",
        inputs=[vi("xq", U8, [1, 2, 4, 4])], outputs=[vi("y", U8, None)],
        inits=qinits + [const("ws", np.ones(2, np.float32))])
    add("qlinearconv_zero_w_scale", [helper.make_node("QLinearConv", qin, ["y"])],
        "expected a positive finite w_scale, got w_scale[1] = 0", inputs=[vi("xq", U8, [1, 2, 4, 4])],
        outputs=[vi("y", U8, None)], inits=qinits + [const("ws", np.array([1, 0, 1], np.float32))])
    add("qlinearconv_x_zero_point_dtype", [helper.make_node("QLinearConv", qin, ["y"])],
        "expected x_zero_point of x's dtype u8, got i8", inputs=[vi("xq", U8, [1, 2, 4, 4])],
        outputs=[vi("y", U8, None)],
        inits=[const("xz", np.int8(0))] + [i for i in qinits if i.name != "xz"] + [const("ws", ws)])
    os.makedirs(bad_dir, exist_ok=True)
    with open(os.path.join(bad_dir, "expected.txt"), "w") as f:
        f.write("# model<TAB>a part of the error oar_onnx_load must give (written by quant_cases.py)\n")
        for name, m, expect in items:
            data = m.SerializeToString()
            for path in (os.path.join(bad_dir, name + ".onnx"), os.path.join(corpus, "quant_" + name + ".onnx")):
                with open(path, "wb") as g:
                    g.write(data)
            f.write(f"{name}\t{expect}\n")
    return len(items)


if __name__ == "__main__":
    out, bad_dir, corpus = sys.argv[1:4]
    n = cases(out)
    nb = bad(bad_dir, corpus)
    print(f"quant_cases: {n} cases in {out}, {nb} malformed models in {bad_dir} and {corpus}")
