"""Shared by the Python tests: the package under test is the one on PYTHONPATH (the build's
python/ folder, set by CTest); numpy is required, torch only by the parity tests."""
import os
import sys

import pytest

np = pytest.importorskip("numpy", reason="numpy is absent (apt-get install python3-numpy)")


def torch_or_skip():
    return pytest.importorskip("torch", reason="torch is absent (apt-get install python3-torch): no oracle")


@pytest.fixture
def torch():
    return torch_or_skip()


@pytest.fixture(autouse=True)
def _seed():
    import oar

    oar.manual_seed(0)
    np.random.seed(0)
    yield
    assert oar.is_grad_enabled(), "a test left grad mode off"


def shared_dir():
    for d in (os.environ.get("OAR_SHARED_DIR"), os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared")):
        if d and os.path.isdir(d):
            return d
    return None
