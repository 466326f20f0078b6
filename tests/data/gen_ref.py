"""Writes the reference files test_io reads: ref.safetensors by the Python safetensors library
and ref*.npy by NumPy. Run once (python3 gen_ref.py in this directory) with safetensors and
numpy installed; the outputs are committed, so the tests never need Python or a network."""
import numpy as np
from safetensors import serialize_file
from safetensors.numpy import _flatten, save_file  # noqa: F401  (save_file: the usual entry point)
try:
    from safetensors import TensorSpec
except ImportError:  # older releases take plain dicts
    TensorSpec = None


def bf16_spec(bits, shape, keep):
    arr = np.asarray(bits, dtype="<u2")
    keep.append(arr)
    if TensorSpec is not None:
        return TensorSpec(dtype="bfloat16", shape=shape, data_ptr=arr.ctypes.data, data_len=arr.nbytes)
    return {"dtype": "bfloat16", "shape": shape, "data": arr.tobytes()}


tensors = {
    "f32": (np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5 - 1),
    "f64": np.array([np.pi, -np.e, 1e300], dtype=np.float64),
    "f16": np.array([[0.5, -2.25], [65504, 2.0 ** -14]], dtype=np.float16),
    "i8": np.array([-128, -1, 0, 127], dtype=np.int8),
    "u8": np.array([[0, 1], [200, 255]], dtype=np.uint8),
    "i32": np.array([-2147483648, 7, 2147483647], dtype=np.int32),
    "i64": np.array([[-(2 ** 62), 42, 2 ** 62 + 3]], dtype=np.int64),
    "bool": np.array([True, False, True]),
    "scalar": np.array(3.25, dtype=np.float32),
    "empty": np.zeros((0, 4), dtype=np.float32),
    "a.b.c": np.array([1, 2], dtype=np.int32),
}
keep = []
flat = _flatten(tensors, keep)
flat["bf16"] = bf16_spec([0x3F80, 0xC060, 0x3E20], (3,), keep)  # 1.0, -3.5, 0.15625
serialize_file(flat, "ref.safetensors", metadata={"framework": "numpy", "note": "h\u00e9llo \u2713"})

np.save("ref.npy", np.arange(12, dtype=np.float32).reshape(3, 4) / 4)
np.save("ref_fortran.npy", np.asfortranarray(np.arange(6, dtype=np.float64).reshape(2, 3)))
np.save("ref_be.npy", np.arange(5, dtype=">i4") * -3)
np.save("ref_bool.npy", np.array([[True, False], [False, True]]))
np.save("ref_scalar.npy", np.float64(2.5))
np.save("ref_f16.npy", np.array([1.5, -0.25, 65504], dtype=np.float16))
with open("ref_v2.npy", "wb") as f:
    np.lib.format.write_array(f, np.array([10, -20, 30], dtype=np.int64), version=(2, 0))
