"""Lifetimes: reference cycles through hooks and modules are collected, and a long training
loop does not grow the process (resident memory measured over 3000 steps)."""
import gc
import os
import weakref

import pytest

import oar


def rss_kib():
    with open(f"/proc/{os.getpid()}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def test_hook_cycle_is_collected():
    x = oar.ones(3, requires_grad=True)
    x.register_hook(lambda g: x and g)  # the hook refers to the tensor that holds it
    ref = weakref.ref(x)
    del x
    gc.collect()
    assert ref() is None


def test_module_cycle_is_collected():
    m = oar.nn.Linear(4, 4)
    m.me = [m]
    m.register_forward_hook(lambda mod, i, o: m)
    ref = weakref.ref(m)
    del m
    gc.collect()
    assert ref() is None


def test_parameter_attributes_cycle():
    p = oar.nn.Parameter(oar.ones(2))
    p.owner = p  # tensors carry a __dict__ that the collector traverses
    ref = weakref.ref(p)
    del p
    gc.collect()
    assert ref() is None


@pytest.mark.skipif(os.environ.get("OAR_PY_SANITIZED") == "1",
                    reason="under the sanitizers freed memory waits in a quarantine: RSS says nothing")
def test_training_loop_does_not_leak():
    oar.manual_seed(0)
    model = oar.nn.Sequential(oar.nn.Linear(16, 256), oar.nn.ReLU(), oar.nn.Linear(256, 4))
    opt = oar.optim.Adam(model.parameters(), lr=1e-3)
    x, y = oar.randn(8, 16), oar.randint(0, 4, (8,))

    def steps(n):
        for _ in range(n):
            opt.zero_grad()
            loss = oar.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            h = x.detach().numpy()  # interop objects too
            oar.from_numpy(h)

    steps(300)  # warm the allocator caches
    gc.collect()
    before = rss_kib()
    steps(3000)
    gc.collect()
    grown = rss_kib() - before
    assert grown < 4096, f"resident memory grew by {grown} KiB over 3000 steps"
