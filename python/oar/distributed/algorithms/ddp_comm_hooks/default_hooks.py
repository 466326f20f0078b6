"""The default DDP communication hooks (torch 1.13's names and arithmetic): allreduce_hook averages a
bucket as DDP does without a hook (each rank's gradients divided by the world size, then summed:
bit for bit the hookless average at 2 ranks, where dividing by 2 is exact); fp16_compress_hook and
bf16_compress_hook cast the bucket to half precision, divide, allreduce the halves (summed in f32 and
rounded back after each rank's add, gloo's rule) and cast the result back into the bucket. The
wrappers compress around any hook. bf16 runs on the CPU here (torch 1.13 asks for CUDA and NCCL)."""
from ... import all_reduce, group
from .... import bfloat16, float16

__all__ = ["allreduce_hook", "fp16_compress_hook", "bf16_compress_hook", "fp16_compress_wrapper",
           "bf16_compress_wrapper"]


def _allreduce_fut(process_group, tensor):
    """tensor divided by the group's size, allreduced: a Future of the average (tensor itself)."""
    g = process_group if process_group is not None else group.WORLD
    tensor.div_(g.size())
    return all_reduce(tensor, group=process_group, async_op=True).get_future().then(lambda fut: fut.value()[0])


def allreduce_hook(process_group, bucket):
    """The bucket averaged over process_group (None: the world), as DDP averages without a hook."""
    return _allreduce_fut(process_group, bucket.buffer())


def _compress_hook(dtype, process_group, bucket):
    g = process_group if process_group is not None else group.WORLD
    compressed = bucket.buffer().to(dtype).div_(g.size())
    fut = all_reduce(compressed, group=process_group, async_op=True).get_future()

    def decompress(fut):
        out = bucket.buffer()
        out.copy_(fut.value()[0].to(out.dtype))   # the cast op's vector loop, then a plain copy
        return out

    return fut.then(decompress)


def fp16_compress_hook(process_group, bucket):
    """The bucket cast to float16 and divided by the group's size, allreduced, cast back: half the bytes."""
    return _compress_hook(float16, process_group, bucket)


def bf16_compress_hook(process_group, bucket):
    """As fp16_compress_hook with bfloat16 (f32's range, 8 bits of mantissa)."""
    return _compress_hook(bfloat16, process_group, bucket)


def _compress_wrapper(dtype, hook, name):
    def wrapper_hook(hook_state, bucket):
        bucket.set_buffer(bucket.buffer().to(dtype))
        fut = hook(hook_state, bucket)

        def decompress(fut):
            out = bucket.buffer()
            out.copy_(fut.value().to(out.dtype))
            return out

        return fut.then(decompress)

    wrapper_hook.__name__ = wrapper_hook.__qualname__ = name
    return wrapper_hook


def fp16_compress_wrapper(hook):
    """hook run on the bucket cast to float16; its result cast back (fp16_compress_hook is
    fp16_compress_wrapper(allreduce_hook))."""
    return _compress_wrapper(float16, hook, "fp16_compress_wrapper_hook")


def bf16_compress_wrapper(hook):
    """hook run on the bucket cast to bfloat16; its result cast back."""
    return _compress_wrapper(bfloat16, hook, "bf16_compress_wrapper_hook")
