"""The package as users get it: `pip install ./python` builds the extension against the CMake
build's liboar and the installed package works (run on a copy of python/, so the source tree
stays clean)."""
import os
import shutil
import subprocess
import sys

import pytest


def test_pip_install(tmp_path):
    build = os.environ.get("OAR_BUILD_DIR")
    src = os.path.join(os.path.dirname(__file__), "..")
    if not build:
        pytest.skip("OAR_BUILD_DIR is not set (CTest sets it to the CMake build folder)")
    if subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode != 0:
        pytest.skip("pip is absent for this interpreter (apt-get install python3-pip)")
    copy = tmp_path / "python"
    shutil.copytree(src, copy, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "tests"))
    env = dict(os.environ, OAR_BUILD_DIR=build, OAR_SOURCE_DIR=os.path.abspath(os.path.join(src, "..")))
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "--no-index",
                        "--target", str(tmp_path / "site"), str(copy)], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    code = "import oar; print(oar.__file__); print((oar.ones(2) * 3).tolist())"
    r = subprocess.run([sys.executable, "-c", code], cwd=str(tmp_path), capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(tmp_path / "site")))
    assert r.returncode == 0, r.stderr
    assert str(tmp_path / "site") in r.stdout and "[3.0, 3.0]" in r.stdout


def test_pyproject_lists_every_subpackage():
    """pyproject.toml names its packages one by one: a subpackage left out would be missing from
    the installed package (and import of oar, or of that part, would fail there)."""
    import re

    root = os.path.join(os.path.dirname(__file__), "..")
    with open(os.path.join(root, "pyproject.toml")) as f:
        listed = set(re.findall(r'"(oar(?:\.[\w.]+)?)"', f.read().split("packages", 1)[1].split("]", 1)[0]))
    found = {os.path.relpath(d, root).replace(os.sep, ".") for d, _, files in os.walk(os.path.join(root, "oar"))
             if "__init__.py" in files and "__pycache__" not in d}
    assert found - listed == set(), f"pyproject.toml's packages lack {sorted(found - listed)}"
