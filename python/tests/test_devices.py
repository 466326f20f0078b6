"""Devices from Python: what a build or machine without CUDA answers (oar.cuda, device objects,
moves to 'cpu' that change nothing, the errors that say why 'cuda' cannot be used), and, where a
GPU is present, gpu_check.py's model, moves and vision ops (cuda == cpu)."""
import os
import sys

import pytest

import oar
import oar.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_check  # noqa: E402

NO_CUDA = not oar.cuda.is_available()


def test_cuda_namespace_answers_from_the_build_and_the_machine():
    built, count = oar._C.cuda_info()
    assert oar.cuda.is_built() == built
    assert oar.cuda.device_count() == count
    assert oar.cuda.is_available() == (built and count > 0)
    oar.cuda.synchronize()  # nothing to wait for, never an error
    oar.cuda.empty_cache()  # nothing to release, never an error (torch's)
    oar.cuda.manual_seed(3)
    oar.cuda.manual_seed_all(3)


def test_device_objects_like_torch():
    assert str(oar.device("cpu")) == "cpu" and repr(oar.device("cpu")) == "device(type='cpu')"
    assert str(oar.device("cuda")) == "cuda" and oar.device("cuda").index is None
    assert oar.device("cuda:0") == oar.device("cuda", 0) == oar.device(0) == "cuda:0"
    assert repr(oar.device("cuda", 0)) == "device(type='cuda', index=0)"
    assert oar.device(oar.device("cuda:0")).index == 0
    assert len({oar.device("cpu"), oar.device("cpu")}) == 1
    with pytest.raises(RuntimeError, match="expected a device of type 'cpu' or 'cuda'.*got 'tpu'"):
        oar.device("tpu")
    with pytest.raises(RuntimeError, match="invalid device string 'cuda:a'"):
        oar.device("cuda:a")


def test_host_tensors_and_moves_to_the_host():
    t = oar.ones(2, 3)
    assert t.device == oar.device("cpu") and str(t.device) == "cpu" and not t.is_cuda and t.get_device() == -1
    assert t.cpu() is t and t.to("cpu") is t and t.to(oar.device("cpu")) is t and t.to(device="cpu") is t
    assert t.to(t) is t  # another host tensor of the same dtype
    d = t.to("cpu", oar.float64)
    assert d.dtype == oar.float64 and not d.is_cuda
    assert t.to("cpu", copy=True) is not t
    for f in (oar.zeros, oar.ones, oar.empty, oar.rand, oar.randn):
        assert f(2, device="cpu").device == oar.device("cpu")
    assert oar.tensor([1.0], device=oar.device("cpu")).tolist() == [1.0]
    assert oar.zeros_like(t).device == t.device and oar.full_like(t, 2.0, device="cpu").tolist()[0] == [2.0] * 3
    assert oar.arange(3, device="cpu").tolist() == [0, 1, 2] and oar.randperm(3, device="cpu").numel() == 3
    m = nn.Linear(3, 2)
    w = m.weight
    assert m.cpu() is m and m.to("cpu") is m and m.weight is w  # in place: an optimizer's parameters stay
    m.to("cpu", oar.float64)
    assert m.weight.dtype == oar.float64


@pytest.mark.skipif(not NO_CUDA, reason="a GPU is present: these are the errors of machines without one")
def test_cuda_refused_with_the_reason():
    built = oar.cuda.is_built()
    why = "no CUDA device: oar was built with CUDA but this machine has no GPU" if built else \
        "oar was built without CUDA, so device 'cuda' cannot be used; rebuild oar with the CUDA toolkit"
    t = oar.ones(2)
    calls = {"Tensor.cuda": lambda: t.cuda(), "Tensor.to": lambda: t.to("cuda"), "zeros": lambda: oar.zeros(
        2, device="cuda"), "tensor": lambda: oar.tensor([1.0], device="cuda:0"), "Module.cuda": lambda: nn.Linear(
        2, 2).cuda(), "Module.to": lambda: nn.Linear(2, 2).to("cuda"), "randn": lambda: oar.randn(
        2, device=oar.device("cuda")), "oar.cuda.current_device": lambda: oar.cuda.current_device(),
        "oar.cuda.memory_stats": lambda: oar.cuda.memory_allocated(),
        "oar.cuda.reset_peak_memory_stats": lambda: oar.cuda.reset_peak_memory_stats()}
    for fn, call in calls.items():
        with pytest.raises(RuntimeError, match=f"^{fn}: {why}"):
            call()
    with pytest.raises(RuntimeError, match="Tensor.to: oar was built without CUDA|Tensor.to: no CUDA device"):
        t.to(0)  # an int names a CUDA device, as in torch


def test_bad_device_arguments():
    t = oar.ones(2)
    with pytest.raises(RuntimeError, match="Tensor.to: expected a device of type 'cpu' or 'cuda'.*got 'xla'"):
        t.to("xla")
    with pytest.raises(TypeError, match="zeros: expected a device as a str, device or int, got list"):
        oar.zeros(2, device=["cuda"])
    with pytest.raises(RuntimeError, match="Tensor.cuda: expected a CUDA device, got 'cpu'"):
        t.cuda("cpu")
    with pytest.raises(RuntimeError, match="expected a non-negative device index, got -1"):
        t.to(-1)


@pytest.mark.skipif(NO_CUDA, reason="oar.cuda.is_available() is False: no GPU tensors to check "
                                    "(tests/cuda/run_on_device.sh runs gpu_check.py on a GPU machine)")
def test_gpu_moves_and_factories():
    gpu_check.check_moves_and_factories()


@pytest.mark.skipif(NO_CUDA, reason="oar.cuda.is_available() is False (tests/cuda/run_on_device.sh runs it on a GPU)")
def test_gpu_model_matches_cpu():
    gpu_check.check_model_matches_cpu()


@pytest.mark.skipif(NO_CUDA, reason="oar.cuda.is_available() is False (tests/cuda/run_on_device.sh runs it on a GPU)")
def test_gpu_vision_ops_match_cpu():
    gpu_check.check_vision_matches_cpu()


def test_gpu_check_script_skips_without_a_gpu():
    if NO_CUDA:
        assert gpu_check.main() == 77
