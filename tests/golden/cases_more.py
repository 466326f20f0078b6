# Golden cases beyond elementwise ops, executed by gen_golden.py (which defines case() and the
# input makers). Attribute text follows oar's schemas (`oar ops --json` lists them).

# ---- linear algebra
case("matmul", "", [randn(2, 1, 3, 4), randn(5, 4, 2)], torch.matmul)
case("matmul", "", [randn(4), randn(4, 3)], torch.matmul)
case("linear", "", [randn(2, 3, 4), randn(5, 4), randn(5)], F.linear)
case("einsum", "equation=bij,bjk->bik", [randn(2, 3, 4), randn(2, 4, 5)],
     lambda a, b: torch.einsum("bij,bjk->bik", a, b))
# ---- convolution and pooling
case("conv2d", "stride=2,1 padding=1,0 dilation=1,1 groups=1", [randn(1, 2, 5, 5), randn(3, 2, 3, 3), randn(3)],
     lambda x, w, b: F.conv2d(x, w, b, stride=(2, 1), padding=(1, 0)))
case("conv2d", "stride=1,1 padding=1,1 dilation=2,2 groups=4", [randn(1, 4, 6, 6), randn(4, 1, 3, 3), None],
     lambda x, w, b: F.conv2d(x, w, None, padding=1, dilation=2, groups=4))
case("conv1d", "stride=2 padding=1 dilation=1 groups=1", [randn(2, 3, 8), randn(4, 3, 3), randn(4)],
     lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1))
case("conv_transpose2d", "stride=2,2 padding=1,1 output_padding=1,1 dilation=1,1 groups=1",
     [randn(1, 2, 3, 3), randn(2, 3, 3, 3), randn(3)],
     lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1))
case("max_pool2d", "kernel=2,2 stride=2,2 padding=0,0 dilation=1,1 ceil_mode=1", [distinct(1, 2, 5, 5)],
     lambda x: F.max_pool2d(x, 2, 2, ceil_mode=True))
case("avg_pool2d", "kernel=3,3 stride=2,2 padding=1,1 ceil_mode=0 count_include_pad=0", [randn(1, 2, 5, 5)],
     lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False))
case("adaptive_avg_pool2d", "output_size=3,4", [randn(1, 2, 5, 7)], lambda x: F.adaptive_avg_pool2d(x, (3, 4)))
# ---- normalization, softmax, embedding
case("softmax", "dim=1", [randn(3, 5)], lambda x: torch.softmax(x, 1))
case("log_softmax", "dim=0", [randn(3, 5)], lambda x: torch.log_softmax(x, 0))
case("layer_norm", "normalized_ndim=2 eps=1e-05", [randn(2, 3, 4), randn(3, 4), randn(3, 4)],
     lambda x, w, b: F.layer_norm(x, (3, 4), w, b, 1e-5))
case("group_norm", "groups=3 eps=1e-05", [randn(2, 6, 3), randn(6), randn(6)],
     lambda x, w, b: F.group_norm(x, 3, w, b, 1e-5))
case("batch_norm", "training=1 momentum=0.1 eps=1e-05",
     [randn(4, 3, 2, 2), randn(3), randn(3), torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)],
     lambda x, w, b, rm, rv: F.batch_norm(x, rm, rv, w, b, True, 0.1, 1e-5), nograd=[3, 4])
case("batch_norm", "training=0 momentum=0.1 eps=1e-05",
     [randn(4, 3), randn(3), randn(3), randn(3), pos(3)],
     lambda x, w, b, rm, rv: F.batch_norm(x, rm, rv, w, b, False, 0.1, 1e-5), nograd=[3, 4])
case("embedding", "", [randn(5, 3), ints(0, 5, 2, 4)], lambda w, i: F.embedding(i, w))
# ---- reductions
case("mean", "dims=1 keepdim=0", [randn(3, 4)], lambda x: x.mean(1))
case("amax", "dims=0 keepdim=1", [distinct(3, 4)], lambda x: x.amax(0, keepdim=True))
case("prod", "dims=1 keepdim=0", [pos(3, 4)], lambda x: x.prod(1))
case("var", "dims=1 correction=1 keepdim=0", [randn(3, 5)], lambda x: x.var(1))
case("std", "dims= correction=0 keepdim=0", [randn(3, 5)], lambda x: x.std(unbiased=False))
case("logsumexp", "dims=1 keepdim=0", [randn(3, 5)], lambda x: torch.logsumexp(x, 1))
case("norm", "p=2 dims=1 keepdim=0", [randn(3, 5)], lambda x: torch.linalg.vector_norm(x, 2, 1))
case("norm", "p=3 dims= keepdim=0", [randn(3, 5)], lambda x: torch.linalg.vector_norm(x, 3))
case("argmax", "dim=1 keepdim=0", [distinct(3, 5)], lambda x: x.argmax(1), grad=False)
case("cumsum", "dim=1 reverse=0", [randn(3, 4)], lambda x: x.cumsum(1))
case("topk", "k=2 dim=1 largest=1 sorted=1", [distinct(3, 5)], lambda x: tuple(torch.topk(x, 2, 1)))
# ---- unary
case("gelu", "approximate=0", [randn(3, 4)], F.gelu)
case("gelu", "approximate=1", [randn(3, 4)], lambda x: F.gelu(x, approximate="tanh"))
case("softplus", "beta=2 threshold=20", [randn(3, 4)], lambda x: F.softplus(x, 2, 20))
case("elu", "alpha=1", [distinct(3, 4)], F.elu)
case("leaky_relu", "negative_slope=0.1", [distinct(3, 4)], lambda x: F.leaky_relu(x, 0.1))
case("clip", "min=-0.5 max=0.5", [distinct(3, 4)], lambda x: x.clamp(-0.5, 0.5))
case("tanh", "", [randn(6)], torch.tanh)
case("sigmoid", "", [randn(6)], torch.sigmoid)
case("silu", "", [randn(6)], F.silu)
case("erf", "", [randn(6)], torch.erf)
case("log1p", "", [pos(6)], torch.log1p)
case("rsqrt", "", [pos(6)], torch.rsqrt)
# ---- shape and index
case("index_select", "dim=0", [randn(4, 3), torch.tensor([2, 0, 2])], lambda x, i: torch.index_select(x, 0, i))
case("gather", "dim=1", [randn(3, 4), ints(0, 4, 3, 2)], lambda x, i: torch.gather(x, 1, i))
case("scatter_add", "dim=1", [randn(3, 5), ints(0, 5, 3, 2), randn(3, 2)], lambda x, i, s: x.scatter_add(1, i, s))
case("pad", "pads=1,2 mode=1 value=0", [randn(1, 2, 4)], lambda x: F.pad(x, (1, 2), mode="reflect"))
case("pad", "pads=1,1,2,0 mode=0 value=0.5", [randn(2, 3)], lambda x: F.pad(x, (1, 1, 2, 0), value=0.5))
case("concat", "dim=0", [randn(2, 3), randn(4, 3)], lambda a, b: torch.cat([a, b], 0))
case("stack", "dim=1", [randn(2, 3), randn(2, 3)], lambda a, b: torch.stack([a, b], 1))
case("split", "dim=0 split_size=2", [randn(5, 3)], lambda x: tuple(torch.split(x, 2, 0)))
case("flip", "dims=0,1", [randn(3, 4)], lambda x: torch.flip(x, (0, 1)))
case("masked_fill", "value=-2", [randn(3, 4), torch.rand(4) > 0.5], lambda x, m: x.masked_fill(m, -2.0))
case("tril", "diagonal=1", [randn(4, 5)], lambda x: torch.tril(x, 1))
case("triu", "diagonal=-1", [randn(4, 5)], lambda x: torch.triu(x, -1))
# ---- sampling and detection (grid_sample: torch; roi_align, nms: torchvision 0.14)
case("grid_sample", "mode=bilinear padding_mode=zeros align_corners=0",
     [randn(2, 3, 4, 5), torch.rand(2, 3, 2, 2, dtype=torch.float64) * 2.6 - 1.3],
     lambda x, g: F.grid_sample(x, g, "bilinear", "zeros", False))
case("grid_sample", "mode=bilinear padding_mode=reflection align_corners=1",
     [randn(1, 2, 3, 4), torch.rand(1, 2, 3, 2, dtype=torch.float64) * 3 - 1.5],
     lambda x, g: F.grid_sample(x, g, "bilinear", "reflection", True))
case("grid_sample", "mode=nearest padding_mode=border", [randn(1, 2, 3, 4), torch.rand(1, 2, 3, 2, dtype=torch.float64) * 3 - 1.5],
     lambda x, g: F.grid_sample(x, g, "nearest", "border", False))  # align_corners left to the table's default
case("roi_align", "output_size=2,3 spatial_scale=0.5 sampling_ratio=-1 aligned=1",
     [randn(2, 2, 6, 7), torch.tensor([[1, 0.5, 1.0, 9.0, 7.5], [0, -2.0, 3.0, 5.0, 14.0]], dtype=torch.float64)],
     lambda x, b: __import__("torchvision").ops.roi_align(x, b, (2, 3), 0.5, -1, True), nograd=[1])
case("roi_align", "output_size=2,2", [randn(1, 3, 5, 5), torch.tensor([[0, 1.2, 0.4, 3.9, 4.4]], dtype=torch.float64)],
     lambda x, b: __import__("torchvision").ops.roi_align(x, b, 2), nograd=[1])


def _nms_padded(b, s, thr):
    keep = __import__("torchvision").ops.nms(b, s, thr)
    return F.pad(keep, (0, len(b) - len(keep)), value=-1), torch.tensor(len(keep))


case("nms", "iou_threshold=0.4",
     [torch.tensor([[0, 0, 4, 4], [1, 1, 5, 5], [0.5, 0, 4.5, 4], [10, 10, 12, 12], [10.5, 10, 12, 12.5], [3, 3, 3, 6]],
                   dtype=torch.float64), torch.tensor([0.5, 0.9, 0.7, 0.3, 0.3, 0.8], dtype=torch.float64)],
     lambda b, s: _nms_padded(b, s, 0.4), grad=False)

# ---- grid_sample bicubic (4-d) and 5-d inputs (trilinear, nearest). Their inputs come from a
# generator of their own, so the cases above keep their values.
_gs = torch.Generator().manual_seed(14)


def _gs_in(*shape, lo=-1.4, hi=1.4):
    return torch.rand(*shape, generator=_gs, dtype=torch.float64) * (hi - lo) + lo


for _pad, _align in (("zeros", False), ("border", True), ("reflection", False), ("reflection", True)):
    case("grid_sample", f"mode=bicubic padding_mode={_pad} align_corners={int(_align)}",
         [_gs_in(2, 2, 4, 5, lo=-2, hi=2), _gs_in(2, 3, 2, 2)],
         lambda x, g, _p=_pad, _a=_align: F.grid_sample(x, g, "bicubic", _p, _a))
for _mode, _pad, _align in (("bilinear", "zeros", False), ("bilinear", "reflection", True),
                            ("bilinear", "border", False), ("nearest", "zeros", True)):
    case("grid_sample", f"mode={_mode} padding_mode={_pad} align_corners={int(_align)}",
         [_gs_in(1, 2, 3, 4, 3, lo=-2, hi=2), _gs_in(1, 2, 2, 3, 3)],
         lambda x, g, _m=_mode, _p=_pad, _a=_align: F.grid_sample(x, g, _m, _p, _a))
