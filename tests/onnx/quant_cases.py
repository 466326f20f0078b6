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
import sys

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    from case_writer import const, make_model, vi, write_bad, write_index
    from case_writer import write_case as write_any_case
except ImportError as e:
    print(f"quant_cases: skipped: {e}")
    sys.exit(77)

F, U8, I8, I32 = TensorProto.FLOAT, TensorProto.UINT8, TensorProto.INT8, TensorProto.INT32
OPSET = 13
rng = np.random.default_rng(1818)


def model(nodes, inputs, outputs, inits=(), check=True):
    return make_model(nodes, inputs, outputs, inits, opset=OPSET, producer="quant_cases.py", check=check)


def write_case(out, name, op, m, data_sets, index, expected=None, definition=False):
    """definition: the expected outputs are onnxruntime's with graph optimizations off (each node as
    the file writes it: ONNX's definition in float), not its int8 kernels (see qdq_residual_add)."""
    write_any_case(out, name, op, m, data_sets, index, expected=expected, optimize=not definition)


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
             const("ws", ws), const("wz", np.full(M, wz, np.uint8 if wdt == U8 else np.int8)),
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
    write_case(out, "convinteger_u8_weights_int8", "ConvInteger", m, [{"x": x}], index)
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


MS = "com.microsoft"
MS_DIFF = []  # (case, codes where onnxruntime's kernel differs from the definition, outputs)


def ms_model(nodes, inputs, outputs, inits=()):
    m = make_model(nodes, inputs, outputs, inits, opset=OPSET, producer="quant_cases.py", check=False,
                   opsets=[(MS, 1)])
    onnx.checker.check_model(m)  # the full check does not know the com.microsoft schemas
    return m


def qrange(dt):
    return (0, 255) if dt == U8 else (-128, 127)


def np_dt(dt):
    return np.uint8 if dt == U8 else np.int8


def deq(x, s, z):
    """DequantizeLinear in f32: the difference exact, the product rounded once."""
    return (x.astype(np.int32) - int(z)).astype(np.float32) * np.float32(s)


def req(v, s, z, dt):
    """QuantizeLinear of f32 v: v / s in f32, rounded half to even, + z, saturated."""
    lo, hi = qrange(dt)
    t = np.rint((np.asarray(v, np.float32) / np.float32(s)).astype(np.float64))
    return np.clip(t + int(z), lo, hi).astype(np_dt(dt))


def req64(v, s, z, dt):
    lo, hi = qrange(dt)
    return np.clip(np.rint(v / np.float64(s)) + int(z), lo, hi).astype(np_dt(dt))


def ms_case(out, name, op, m, feeds, index, definition):
    """The expected outputs are the definition (numpy); onnxruntime's codes are counted against it."""
    exp = [[definition(f)] for f in feeds]
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in m.graph.input]
    diff = sum(int((sess.run(None, {k: f[k] for k in names})[0] != e[0]).sum()) for f, e in zip(feeds, exp))
    MS_DIFF.append((name, diff, sum(e[0].size for e in exp)))
    write_case(out, name, op, m, feeds, index, expected=exp)


def qx(shape, dt):
    lo, hi = qrange(dt)
    return rng.integers(lo, hi + 1, size=shape).astype(np_dt(dt))


def ms_binary(name, index, out, op, shape_b, dt=U8):
    A, (as_, az), (bs, bz), (cs, cz) = (2, 3, 5, 4), (0.02, 120), (0.03, 130), (0.04 if op == "QLinearAdd" else 0.3, 128)
    if dt == I8:
        az, bz, cz = az - 128, bz - 128, cz - 128
    inits = [const("as", np.float32(as_)), const("az", np_dt(dt)(az)), const("bs", np.float32(bs)),
             const("bz", np_dt(dt)(bz)), const("cs", np.float32(cs)), const("cz", np_dt(dt)(cz))]
    node = helper.make_node(op, ["a", "as", "az", "b", "bs", "bz", "cs", "cz"], ["c"], domain=MS)
    m = ms_model([node], [vi("a", dt, list(A)), vi("b", dt, list(shape_b))], [vi("c", dt, list(A))], inits)
    feeds = [{"a": qx(A, dt), "b": qx(shape_b, dt)} for _ in range(2)]

    def definition(f):
        fa, fb = deq(f["a"], as_, az), deq(f["b"], bs, bz)
        return req(fa + fb if op == "QLinearAdd" else fa * fb, cs, cz, dt)
    ms_case(out, name, op, m, feeds, index, definition)


def ms_unary(name, index, out, op, dt=U8, alpha=0.1):
    X, (xs, xz), (ys, yz) = (2, 3, 4, 5), (0.05, 100), (1.0 / 256 if op == "QLinearSigmoid" else 0.03, 0 if op == "QLinearSigmoid" else 60)
    if dt == I8:
        xz, yz = xz - 128, yz - 128
    inits = [const("xs", np.float32(xs)), const("xz", np_dt(dt)(xz)), const("ys", np.float32(ys)),
             const("yz", np_dt(dt)(yz))]
    kw = {"alpha": alpha} if op == "QLinearLeakyRelu" else {}
    node = helper.make_node(op, ["x", "xs", "xz", "ys", "yz"], ["y"], domain=MS, **kw)
    m = ms_model([node], [vi("x", dt, list(X))], [vi("y", dt, list(X))], inits)
    feeds = [{"x": qx(X, dt)} for _ in range(2)]

    def definition(f):
        v = deq(f["x"], xs, xz)
        if op == "QLinearSigmoid":
            v = (1.0 / (1.0 + np.exp(-v.astype(np.float64)))).astype(np.float32)
        else:
            v = np.where(v < 0, v * np.float32(alpha), v).astype(np.float32)
        return req(v, ys, yz, dt)
    ms_case(out, name, op, m, feeds, index, definition)


def ms_pool(name, index, out, glob, dt=U8, channels_last=0, include_pad=0):
    N, C, H, W = 2, 3, 7, 6
    shape = [N, H, W, C] if channels_last else [N, C, H, W]
    xs, xz, ys, yz = 0.05, (100 if dt == U8 else -20), 0.045, (90 if dt == U8 else -30)
    inits = [const("xs", np.float32(xs)), const("xz", np_dt(dt)(xz)), const("ys", np.float32(ys)),
             const("yz", np_dt(dt)(yz))]
    if glob:
        node = helper.make_node("QLinearGlobalAveragePool", ["x", "xs", "xz", "ys", "yz"], ["y"], domain=MS,
                                channels_last=channels_last)
        oshape = [N, 1, 1, C] if channels_last else [N, C, 1, 1]
    else:
        node = helper.make_node("QLinearAveragePool", ["x", "xs", "xz", "ys", "yz"], ["y"], domain=MS,
                                kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                                count_include_pad=include_pad, channels_last=channels_last)
        oshape = [N, 2 * 0 + 4, 3, C] if channels_last else [N, C, 4, 3]
    m = ms_model([node], [vi("x", dt, shape)], [vi("y", dt, oshape)], inits)
    feeds = [{"x": qx(shape, dt)} for _ in range(2)]

    def definition(f):
        x = f["x"].astype(np.float64) - xz
        if channels_last:
            x = x.transpose(0, 3, 1, 2)
        if glob:
            mean = x.sum(axis=(2, 3), keepdims=True) / (H * W)
        else:
            xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
            ones = np.pad(np.ones((H, W)), 1)
            mean = np.zeros((N, C, 4, 3))
            for i in range(4):
                for j in range(3):
                    win = xp[:, :, 2 * i:2 * i + 3, 2 * j:2 * j + 3]
                    cnt = 9 if include_pad else ones[2 * i:2 * i + 3, 2 * j:2 * j + 3].sum()
                    mean[:, :, i, j] = win.sum(axis=(2, 3)) / cnt
        if channels_last:
            mean = mean.transpose(0, 2, 3, 1)
        return req64(mean * np.float64(np.float32(xs)), np.float32(ys), yz, dt)
    ms_case(out, name, node.op_type, m, feeds, index, definition)


def ms_concat(name, index, out, same=False):
    dt, shapes = U8, [(2, 3, 4), (2, 5, 4)]
    ys, yz = 0.04, 100
    params = [(ys, yz), (ys, yz)] if same else [(0.02, 120), (0.05, 10)]
    inits = [const("ys", np.float32(ys)), const("yz", np.uint8(yz))]
    ins = ["ys", "yz"]
    for i, (s_, z_) in enumerate(params):
        inits += [const(f"s{i}", np.float32(s_)), const(f"z{i}", np.uint8(z_))]
        ins += [f"x{i}", f"s{i}", f"z{i}"]
    node = helper.make_node("QLinearConcat", ins, ["y"], domain=MS, axis=1)
    m = ms_model([node], [vi(f"x{i}", dt, list(sh)) for i, sh in enumerate(shapes)], [vi("y", dt, [2, 8, 4])],
                 inits)
    feeds = [{f"x{i}": qx(sh, dt) for i, sh in enumerate(shapes)} for _ in range(2)]

    def definition(f):
        v = np.concatenate([deq(f[f"x{i}"], *params[i]) for i in range(2)], axis=1)
        return req(v, ys, yz, dt)
    ms_case(out, name, "QLinearConcat", m, feeds, index, definition)


def ms_qgemm(name, index, out, float_out=False, per_column=True, trans_b=1, b_zp=0):
    M, K, N = 3, 20, 6
    a_s, az = 0.02, 130
    b = qx((N, K) if trans_b else (K, N), I8)
    bs = (rng.random(N) * 0.01 + 0.002).astype(np.float32) if per_column else np.float32(0.005)
    bz = np.full(np.shape(bs), b_zp, np.int8)
    c32 = rng.integers(-300, 300, size=N).astype(np.int32)
    ys, yz = 0.1, 128
    inits = [const("as", np.float32(a_s)), const("az", np.uint8(az)), const("b", b), const("bs", bs),
             const("bz", bz), const("c", c32)]
    ins = ["a", "as", "az", "b", "bs", "bz", "c"]
    if not float_out:
        inits += [const("ys", np.float32(ys)), const("yz", np.uint8(yz))]
        ins += ["ys", "yz"]
    node = helper.make_node("QGemm", ins, ["y"], domain=MS, transB=trans_b, alpha=1.0)
    m = ms_model([node], [vi("a", U8, [M, K])], [vi("y", F if float_out else U8, [M, N])], inits)
    feeds = [{"a": qx((M, K), U8)} for _ in range(2)]

    def definition(f):
        bb = b.T if trans_b else b
        acc = (f["a"].astype(np.int64) - az) @ (bb.astype(np.int64) - b_zp) + c32
        v = acc * (np.float64(np.float32(a_s)) * bs.astype(np.float64))
        return v.astype(np.float32) if float_out else req64(v, np.float32(ys), yz, U8)
    if float_out:  # f32 outputs: compared with the backend tolerances, against onnxruntime's
        write_case(out, name, "QGemm", m, feeds, index)
    else:
        ms_case(out, name, "QGemm", m, feeds, index, definition)


def dynamic_quantize_linear(name, index, out, x):
    """DynamicQuantizeLinear: y, y_scale and y_zero_point as onnxruntime's kernel gives them."""
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "ys", "yz"])
    m = model([node], [vi("x", F, list(x.shape))], [vi("y", U8, list(x.shape)), vi("ys", F, []), vi("yz", U8, [])])
    write_case(out, name, "DynamicQuantizeLinear", m, [{"x": x}], index)


def dynamic_cases(index, out):
    x = f32(3, 4, 5)
    x.flat[:2] = (-1.0, 1.0)
    dynamic_quantize_linear("dynamicquantizelinear", index, out, x)
    dynamic_quantize_linear("dynamicquantizelinear_min_adjusted", index, out, f32(2, 6, lo=0.5, hi=3.0))
    dynamic_quantize_linear("dynamicquantizelinear_max_adjusted", index, out, f32(2, 6, lo=-3.0, hi=-0.5))
    dynamic_quantize_linear("dynamicquantizelinear_zeros", index, out, np.zeros((2, 3), np.float32))
    # scale 1: the zero point -min / scale = 0.5 and x / scale = 2.5 are ties (half to even: 0 and 2)
    dynamic_quantize_linear("dynamicquantizelinear_ties", index, out,
                            np.array([-0.5, 254.5, 2.5, 3.5, -0.25, 100.0], np.float32))


def ms_dynamic_matmul(name, index, out, bdt=I8, b_zp=0, per_column=True, bias=True, a_shape=(2, 3, 20)):
    """com.microsoft DynamicQuantizeMatMul (A quantized per call, constant B): onnxruntime's f32 outputs."""
    K, N = a_shape[-1], 6
    b = qx((K, N), bdt)
    bs = (rng.random(N) * 0.01 + 0.002).astype(np.float32) if per_column else np.float32(0.005)
    inits = [const("b", b), const("bs", bs), const("bz", np.full(np.shape(bs), b_zp, np_dt(bdt)))]
    ins = ["a", "b", "bs", "bz"]
    if bias:
        inits.append(const("bias", f32(N)))
        ins.append("bias")
    node = helper.make_node("DynamicQuantizeMatMul", ins, ["y"], domain=MS)
    m = ms_model([node], [vi("a", F, list(a_shape))], [vi("y", F, list(a_shape[:-1]) + [N])], inits)
    write_case(out, name, "DynamicQuantizeMatMul", m, [{"a": f32(*a_shape)} for _ in range(2)], index)


def ort_quantize_dynamic(name, index, out, k=16, n=8):
    """A MatMul + Add model through onnxruntime.quantization.quantize_dynamic (i8 weights): the
    DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul chain it writes."""
    import os
    import tempfile

    from onnxruntime.quantization import QuantType, quantize_dynamic
    w, bias = f32(k, n), f32(n)
    fp = model([helper.make_node("MatMul", ["x", "w"], ["t"]), helper.make_node("Add", ["t", "b"], ["y"])],
               [vi("x", F, [4, k])], [vi("y", F, [4, n])], [const("w", w), const("b", bias)])
    with tempfile.TemporaryDirectory() as d:
        src, dst = os.path.join(d, "fp32.onnx"), os.path.join(d, "int8.onnx")
        onnx.save(fp, src)
        quantize_dynamic(src, dst, weight_type=QuantType.QInt8)
        m = onnx.load(dst)
    ops = sorted({n.op_type for n in m.graph.node})
    assert "DynamicQuantizeLinear" in ops and "MatMulInteger" in ops, ops
    write_case(out, name, "DynamicQuantizeLinear", m, [{"x": f32(4, k)} for _ in range(2)], index)


def matmul_integer_large_k(name, index, out, k=1000):
    """MatMulInteger with sums far above 2^24 (K 1000, full-range bytes): the exact int32 sums."""
    a = rng.integers(0, 256, size=(3, k)).astype(np.uint8)
    b = rng.integers(-128, 128, size=(k, 5)).astype(np.int8)
    a[0], b[:, 0] = 255, -128  # the largest magnitude: 1000 * 255 * 128
    m = model([helper.make_node("MatMulInteger", ["a", "b", "az"], ["y"])], [vi("a", U8, [3, k])],
              [vi("y", I32, [3, 5])], [const("b", b), const("az", np.uint8(0))])
    exact = (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32)
    write_case(out, name, "MatMulInteger", m, [{"a": a}], index, expected=[[exact]])


def ms_cases(index, out):
    ms_binary("ms_qlinearadd_int8", index, out, "QLinearAdd", (2, 3, 5, 4))
    ms_binary("ms_qlinearadd_s8_int8", index, out, "QLinearAdd", (2, 3, 5, 4), dt=I8)
    ms_binary("ms_qlinearadd_broadcast", index, out, "QLinearAdd", (3, 1, 4))
    ms_binary("ms_qlinearmul", index, out, "QLinearMul", (2, 3, 5, 4))
    ms_unary("ms_qlinearsigmoid_int8", index, out, "QLinearSigmoid")
    ms_unary("ms_qlinearleakyrelu_s8_int8", index, out, "QLinearLeakyRelu", dt=I8)
    ms_pool("ms_qlinearglobalaveragepool", index, out, True)
    ms_pool("ms_qlinearglobalaveragepool_nhwc_s8", index, out, True, dt=I8, channels_last=1)
    ms_pool("ms_qlinearaveragepool", index, out, False)
    ms_pool("ms_qlinearaveragepool_pad_nhwc", index, out, False, channels_last=1, include_pad=1)
    ms_concat("ms_qlinearconcat", index, out)
    ms_qgemm("ms_qgemm_int8", index, out)
    ms_qgemm("ms_qgemm_float_out_int8", index, out, float_out=True, per_column=False, trans_b=0)
    ms_qgemm("ms_qgemm_asym_weights_float", index, out, per_column=False, b_zp=3)
    # i8 weights with a zero point of 100: w - 100 leaves [-128, 127], so the float path
    qlinear_conv("qlinearconv_s8_weights_zp_float", index, out, wz=100)
    ms_concat("ms_qlinearconcat_same_params", index, out, same=True)  # the bytes concatenated
    ms_dynamic_matmul("ms_dynamicquantizematmul_int8", index, out)
    ms_dynamic_matmul("ms_dynamicquantizematmul_per_tensor_nobias_int8", index, out, per_column=False, bias=False,
                      a_shape=(5, 20))
    ms_dynamic_matmul("ms_dynamicquantizematmul_u8_weights_int8", index, out, bdt=U8, b_zp=128)  # w - 128 in i8
    ms_dynamic_matmul("ms_dynamicquantizematmul_asym_weights_float", index, out, bdt=U8, b_zp=3)  # leaves i8


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
    qlinear_conv("qlinearconv_u8_weights_int8", index, out, wdt=U8, wz=128)  # centred onto i8: w - 128
    qlinear_matmul("qlinearmatmul_u8_int8", index, out)
    qlinear_matmul("qlinearmatmul_s8_int8", index, out, xdt=I8)
    integer_ops(index, out)
    qdq_residual_add("qdq_residual_add_int8", index, out)
    qdq_residual_add("qdq_residual_add_relu_int8", index, out, relu=True)
    qdq_residual_add("qdq_residual_add_s8_int8", index, out, xdt=I8)
    ms_cases(index, out)
    dynamic_cases(index, out)
    ort_quantize_dynamic("ort_quantize_dynamic_matmul_int8", index, out)
    ort_quantize_dynamic("ort_quantize_dynamic_matmul_k768_int8", index, out, k=768, n=32)  # sums above 2^24
    matmul_integer_large_k("matmulinteger_k1000_int8", index, out)
    for name, d, n in MS_DIFF:
        print(f"quant_cases: {name}: onnxruntime's kernel differs from the definition in {d} of {n} codes")
    return write_index(out, index)


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
    # com.microsoft ops (onnx_ops_ms.c)
    def ms_bad(name, node, expect, inputs, inits, out_t=U8):
        node.name = name
        g = helper.make_graph([node], "g", inputs, [vi("y", out_t, None)], inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(MS, 1)])
        m.ir_version = 8
        items.append((name, m, expect))

    u8_in = [vi("a", U8, [2, 3]), vi("b", U8, [2, 3])]
    p8 = [const("as", np.float32(0.1)), const("bs", np.float32(0.1)), const("cs", np.float32(0.1)),
          const("bz", np.uint8(0)), const("cz", np.uint8(0))]
    ms_bad("ms_qlinearadd_zero_point_dtype",
           helper.make_node("QLinearAdd", ["a", "as", "az", "b", "bs", "bz", "cs", "cz"], ["y"], domain=MS),
           "expected A_zero_point of A's dtype u8, got i8", u8_in, p8 + [const("az", np.int8(0))])
    ms_bad("ms_qlinearadd_zero_scale",
           helper.make_node("QLinearAdd", ["a", "as", "az", "b", "bs", "bz", "cs", "cz"], ["y"], domain=MS),
           "expected a positive finite y_scale, got y_scale[0] = 0", u8_in,
           [i for i in p8 if i.name != "cs"] + [const("az", np.uint8(0)), const("cs", np.float32(0))])
    ms_bad("ms_qlinearconcat_inputs", helper.make_node("QLinearConcat", ["cs", "cz", "a", "as"], ["y"], domain=MS,
                                                      axis=0),
           "expected Y_scale, Y_zero_point and triples (X, X_scale, X_zero_point), got 4 inputs", u8_in[:1], p8)
    ms_bad("ms_qgemm_b_scale_shape",
           helper.make_node("QGemm", ["a", "as", "az", "w", "ws", "wz"], ["y"], domain=MS, transB=1),
           "node 'ms_qgemm_b_scale_shape' (QGemm, opset 13): expected b_scale one f32 value or 4 (per column), got 3 of f32", [vi("a", U8, [2, 5])],
           [const("as", np.float32(0.1)), const("az", np.uint8(0)), const("w", np.zeros((4, 5), np.int8)),
            const("ws", np.ones(3, np.float32)), const("wz", np.zeros(3, np.int8))], out_t=F)
    ms_bad("ms_qlinearaveragepool_rank",
           helper.make_node("QLinearAveragePool", ["a", "as", "cz", "cs", "cz"], ["y"], domain=MS,
                            kernel_shape=[2]), "expected X of rank 3 or more, got rank 2", u8_in[:1], p8)
    ms_bad("ms_dynamicquantizematmul_k",
           helper.make_node("DynamicQuantizeMatMul", ["x", "w", "ws"], ["y"], domain=MS),
           "expected A [..., K] and a 2-D B [K, N] with A's last dim K, got ranks 2 and 2 (A's last dim 5, "
           "B's rows 4)", [vi("x", F, [2, 5])],
           [const("w", np.zeros((4, 4), np.int8)), const("ws", np.float32(0.1))], out_t=F)
    return write_bad(bad_dir, corpus, "quant_", items, "quant_cases.py")


if __name__ == "__main__":
    out, bad_dir, corpus = sys.argv[1:4]
    n = cases(out)
    nb = bad(bad_dir, corpus)
    print(f"quant_cases: {n} cases in {out}, {nb} malformed models in {bad_dir} and {corpus}")
