"""torch 1.13's quantization hooks: each rank quantizes its bucket to 8-bit codes with its own scale
and zero point (per tensor, or per channel of bucket_size elements), the ranks all-gather the
quantization parameters and the codes, and each rank dequantizes every rank's codes and averages them.
The arithmetic is torch's (MinMaxObserver's quint8 parameters; codes round(x / scale) + zero_point
clamped to [0, 255]); torch runs it on CUDA only, oar on the host tensors of its buckets. All-gather
moves world_size times the codes, so these hooks are slower than allreduce: torch marks them
experimental too."""
from ... import all_gather_into_tensor, get_rank, group
from .... import clamp, float32, stack, tensor, uint8, zeros, zeros_like
from ....ao.quantization import MinMaxObserver, PerChannelMinMaxObserver
from ....nn import functional as F

__all__ = ["quantization_pertensor_hook", "quantization_perchannel_hook"]


def _codes(x, scale, zero_point):
    """8-bit codes of x; scale and zero_point broadcast against x (per channel: shaped [channels, 1])."""
    return clamp((x / scale).round() + zero_point, 0, 255).to(uint8)


def _quantize_allgather_mean(process_group, observed, s_and_z, reshape_out):
    """The hooks' common flow on observed (the flat bucket, or its channels as rows): the ranks'
    s_and_z ([scale, zero point], each a scalar or one per row) gathered, this rank's codes gathered, every
    rank's codes dequantized with its own parameters and averaged."""
    world = (process_group if process_group is not None else group.WORLD).size()
    rank = process_group.rank() if process_group is not None else get_rank()
    gathered = zeros((world,) + tuple(s_and_z.shape), dtype=float32)
    fut = all_gather_into_tensor(gathered, s_and_z.unsqueeze(0), group=process_group, async_op=True).get_future()

    def qparams(r):   # rank r's scale and zero point, broadcasting against observed
        s, z = gathered[r][0], gathered[r][1]
        return (s.reshape(-1, 1), z.reshape(-1, 1)) if observed.dim() == 2 else (s, z)

    def quantize_and_allgather(fut):
        codes = _codes(observed, *qparams(rank))
        out = zeros((world,) + tuple(codes.shape), dtype=uint8)
        all_gather_into_tensor(out, codes.unsqueeze(0), group=process_group)
        return out

    def dequantize_and_average(fut):
        codes = fut.value()
        total = zeros_like(observed, dtype=float32)
        for r in range(world):
            scale, zero_point = qparams(r)
            total += scale * (codes[r].to(float32) - zero_point)
        return reshape_out(total) / world

    return fut.then(quantize_and_allgather).then(dequantize_and_average)


def quantization_pertensor_hook(process_group, bucket):
    """The bucket quantized with one scale and zero point per rank (MinMaxObserver's), all-gathered,
    dequantized and averaged."""
    flat = bucket.buffer()
    observer = MinMaxObserver()
    observer(flat)
    s, z = observer.calculate_qparams()
    params = tensor([float(s), float(z)], dtype=float32)
    return _quantize_allgather_mean(process_group, flat, params, lambda t: t)


def quantization_perchannel_hook(process_group, bucket, bucket_size=512):
    """As quantization_pertensor_hook with a scale and zero point per channel of bucket_size elements
    (the bucket zero-padded to whole channels; torch pads a whole extra channel when the size divides)."""
    flat = bucket.buffer()
    n = flat.numel()
    channels = F.pad(flat, (0, bucket_size - n % bucket_size), mode="constant", value=0).view(-1, bucket_size)
    observer = PerChannelMinMaxObserver()
    observer(channels)
    s, z = observer.calculate_qparams()
    params = stack((s.to(float32), z.to(float32)))
    return _quantize_allgather_mean(process_group, channels, params, lambda t: t.flatten()[:n])
