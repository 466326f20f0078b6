"""Builds the oar._C extension against the liboar built by CMake (docs/python.md):

    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j --target oar
    pip install ./python                   # OAR_BUILD_DIR=<dir> if the build is elsewhere

The extension is C over oar's public API (include/oar.h); it links liboar.so and records
where it lies (rpath), so keep the build folder (or install liboar where the loader finds it)."""
import glob
import os

from setuptools import Extension, setup

here = os.path.dirname(os.path.abspath(__file__))
root = os.environ.get("OAR_SOURCE_DIR", os.path.dirname(here))
build = os.path.abspath(os.environ.get("OAR_BUILD_DIR", os.path.join(root, "build")))
if not glob.glob(os.path.join(build, "liboar.so*")):
    raise SystemExit(f"oar: liboar.so not found in {build}; build it first (cmake --build build --target oar) or "
                     "set OAR_BUILD_DIR to the CMake build folder")

setup(ext_modules=[Extension(
    "oar._C",
    sources=sorted(os.path.relpath(p, here) for p in glob.glob(os.path.join(here, "oar", "_C", "*.c"))),
    include_dirs=[os.path.join(root, "include")],
    library_dirs=[build],
    libraries=["oar"],
    runtime_library_dirs=[build],
    extra_compile_args=["-std=c11", "-fvisibility=hidden"],
)])
