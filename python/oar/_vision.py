"""Sampling and detection over the op table: torchvision.ops' roi_align, nms and batched_nms
(torchvision 0.14's signatures and semantics), as oar.ops.roi_align/nms/batched_nms, and
torch.nn.functional's grid_sample and affine_grid. Defaults come from the op table. Under the
torch switch, torchvision's own ops/*.py call these through torch.ops.torchvision
(_ops.TorchvisionOps)."""
import numbers

from . import _creation as _CR
from . import _dtype as D
from . import _functions as F
from ._ops import call, default as _d


def _pair(v, what):
    if isinstance(v, numbers.Integral):
        return [int(v), int(v)]
    v = [int(s) for s in v]
    if len(v) != 2:
        raise ValueError(f"roi_align: expected {what} as an int or a pair, got {len(v)} values")
    return v


def _rois(boxes, like):
    """torchvision's box formats -> one [K, 5] tensor (batch index, x1, y1, x2, y2) of like's dtype:
    a [K, 5] tensor, or a list with one [L, 4] tensor per image (its index in the list is its batch)."""
    if isinstance(boxes, (list, tuple)):
        for b in boxes:
            if b.ndim != 2 or b.shape[1] != 4:
                raise AssertionError("The shape of the tensor in the boxes list is not correct as List[Tensor[L, 4]]")
        parts = [F.cat([_CR.full((b.shape[0], 1), float(i), dtype=like.dtype, device=like.device), b.to(like.dtype)], 1)
                 for i, b in enumerate(boxes)]
        return F.cat(parts, 0) if parts else _CR.zeros(0, 5, dtype=like.dtype, device=like.device)
    if boxes.ndim != 2 or boxes.shape[1] != 5:
        raise AssertionError("The boxes tensor shape is not correct as Tensor[K, 5]")
    return boxes.to(like.dtype) if boxes.dtype != like.dtype else boxes


def roi_align(input, boxes, output_size, spatial_scale=_d("roi_align", "spatial_scale"),
              sampling_ratio=_d("roi_align", "sampling_ratio"), aligned=_d("roi_align", "aligned")):
    """torchvision.ops.roi_align: [K, C, output_size] features of the boxes; gradient for input."""
    return call("roi_align", (input, _rois(boxes, input)),
                {"output_size": _pair(output_size, "output_size"), "spatial_scale": float(spatial_scale),
                 "sampling_ratio": int(sampling_ratio), "aligned": bool(aligned)})


def nms(boxes, scores, iou_threshold):
    """torchvision.ops.nms: int64 indices of the kept boxes by decreasing score."""
    keep, count = call("nms", (boxes, scores), {"iou_threshold": float(iou_threshold)})
    return keep[:int(count.item())]


def batched_nms(boxes, scores, idxs, iou_threshold):
    """torchvision.ops.batched_nms: nms within each category of idxs, through one nms over boxes
    shifted apart per category (torchvision's coordinate trick; it also keeps every size on it,
    where torchvision runs a loop per category above 4000 CPU boxes: the same boxes are kept)."""
    if boxes.numel() == 0:
        return _CR.zeros(0, dtype=D.int64, device=boxes.device)
    offsets = idxs.to(boxes.dtype) * (boxes.max() + 1)
    return nms(boxes + offsets.reshape(-1, 1), scores, iou_threshold)


def grid_sample(input, grid, mode=_d("grid_sample", "mode"), padding_mode=_d("grid_sample", "padding_mode"),
                align_corners=None):
    """torch.nn.functional.grid_sample: 4-d inputs (bilinear, nearest, bicubic) and 5-d inputs
    (volumetric: 'bilinear' is trilinear, nearest); align_corners None is False."""
    if align_corners is None:
        align_corners = _d("grid_sample", "align_corners")
    return call("grid_sample", (input, grid), {"mode": mode, "padding_mode": padding_mode,
                                               "align_corners": bool(align_corners)})


def affine_grid(theta, size, align_corners=None):
    """torch.nn.functional.affine_grid: theta [N, 2, 3] with size (N, C, H, W) -> [N, H, W, 2], or
    theta [N, 3, 4] with size (N, C, D, H, W) -> [N, D, H, W, 3]; the base grid's (x, y[, z], 1)
    times theta transposed (a matmul: differentiable in theta)."""
    if align_corners is None:
        align_corners = _d("grid_sample", "align_corners")
    size = [int(s) for s in size]
    if len(size) not in (4, 5):
        raise NotImplementedError("affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
                                  f"respectively. Got size {tuple(size)}.")
    sd = len(size) - 2
    if theta.ndim != 3 or tuple(theta.shape[1:]) != (sd, sd + 1) or theta.shape[0] != size[0]:
        raise ValueError(f"Expected a batch of {sd}D affine matrices of shape Nx{sd}x{sd + 1} for size "
                         f"{tuple(size)}. Got {list(theta.shape)}.")
    n, spatial = size[0], size[2:]  # (H, W) or (D, H, W)

    def line(k):
        if k <= 1:
            return _CR.zeros(k, dtype=theta.dtype, device=theta.device)
        v = _CR.linspace(-1.0, 1.0, k, dtype=theta.dtype, device=theta.device)
        return v if align_corners else v * ((k - 1) / k)

    # component c (x, y, z) runs along spatial dim sd - 1 - c
    comps = []
    for c in range(sd):
        d = sd - 1 - c
        shape = [1] * sd
        shape[d] = spatial[d]
        comps.append(line(spatial[d]).reshape(*shape).expand(*spatial))
    comps.append(_CR.ones(*spatial, dtype=theta.dtype, device=theta.device))
    points = 1
    for k in spatial:
        points *= k
    base = F.stack(comps, sd).reshape(1, points, sd + 1)
    return F.matmul(base, theta.transpose(1, 2)).reshape(n, *spatial, sd)


class TorchvisionOps:
    """torch.ops.torchvision under the torch switch: what torchvision's ops/*.py call, with the
    C++ schemas' positional arguments, over oar's op table. Its other C++ ops say they are absent."""

    @staticmethod
    def nms(dets, scores, iou_threshold):
        return nms(dets, scores, iou_threshold)

    @staticmethod
    def roi_align(input, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned):
        return roi_align(input, rois, (pooled_height, pooled_width), spatial_scale, sampling_ratio, aligned)

    @staticmethod
    def _cuda_version():
        return -1  # no CUDA build: torchvision's version check passes

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise NotImplementedError(f"torch.ops.torchvision.{name}: torchvision's C++ op '{name}' is not offered by "
                                  "oar (it serves nms and roi_align)")
