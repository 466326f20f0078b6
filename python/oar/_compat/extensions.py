"""PyTorch C++ extensions under the torch switch. A package such as torchaudio ships a library of
ops built against libtorch (loaded with torch.ops.load_library) and a pybind11 module linked to
it; neither can run inside oar. The switch lets such a package import anyway, as if it had been
built without those parts: the library's op namespace (torch.ops.<package>) answers the feature
queries packages make at import (is_..._available: False, cuda_version: None) and raises
NotImplementedError naming the op when one is called; the pybind11 module imports as a module
whose every attribute is absent, saying why. Pure-Python parts (model files) run on oar."""
import importlib.abc
import importlib.machinery
import importlib.util
import mmap
import os
import sys
import types
import warnings

_LIBTORCH_MARKS = (b"libc10.so", b"libtorch_cpu.so", b"libtorch_python.so")


def links_libtorch(path):
    """Whether a shared library names libtorch's libraries among its dependencies (in its
    dynamic string table, so the bytes of the file hold them)."""
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            return any(m.find(mark) >= 0 for mark in _LIBTORCH_MARKS)
    except (OSError, ValueError):
        return False


def package_of(path):
    """The top-level package a library file belongs to (torchaudio/lib/libtorchaudio.so ->
    torchaudio), from the sys.path entry holding it; None outside every entry."""
    path = os.path.realpath(str(path))
    for entry in sys.path:
        root = os.path.realpath(entry or ".")
        if path.startswith(root + os.sep):
            return os.path.relpath(path, root).split(os.sep)[0]
    return None


class AbsentExtensionOps:
    """torch.ops.<package> of a C++ extension library that does not run on oar."""

    def __init__(self, package, library):
        self._package, self._library = package, library

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        if name.startswith("is_") and name.endswith("_available"):
            return lambda *args, **kwargs: False  # the feature is not there: the package's own fallback runs
        if name in ("cuda_version", "_cuda_version"):
            return lambda: None  # no CUDA build to check against torch's

        def absent(*args, **kwargs):
            raise NotImplementedError(f"torch.ops.{self._package}.{name} is an op of {self._library}, a PyTorch C++ "
                                      "extension (built against libtorch) that does not run on oar")

        absent.__name__ = name
        return absent


def load_extension_library(ops_namespace, path):
    """torch.ops.load_library of a libtorch extension other than torchvision's: its package's op
    namespace becomes an AbsentExtensionOps (warning once that its ops cannot run)."""
    package = package_of(path) or os.path.basename(str(path)).split(".")[0]
    if not os.path.exists(str(path)):
        raise OSError(f"torch.ops.load_library: no such file: '{path}'")
    if not links_libtorch(path):
        raise OSError(f"torch.ops.load_library: '{path}' is not a PyTorch C++ extension library (it does not link "
                      "libtorch); oar loads no other native libraries this way")
    if package not in vars(ops_namespace):  # (torchvision's own namespace, served by oar, stays)
        warnings.warn(f"{os.path.basename(str(path))} is a PyTorch C++ extension (built against libtorch), which does "
                      f"not run on oar: {package}'s Python code runs, its C++ ops (torch.ops.{package}.*) raise "
                      "NotImplementedError when called", RuntimeWarning, stacklevel=3)
        setattr(ops_namespace, package, AbsentExtensionOps(package, os.path.basename(str(path))))


class _Classes(types.ModuleType):
    """torch.classes: TorchScript custom classes, which live in C++ extension libraries."""

    def load_library(self, path):
        from .. import _ops

        _ops.ops.load_library(path)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(f"torch.classes.{name}: TorchScript custom classes come from PyTorch C++ extensions, "
                             "which do not run on oar")


classes = _Classes("torch.classes")


class _AbsentModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(f"{self.__name__} is a PyTorch C++ extension module (built against libtorch, from "
                             f"{self.__file__}): it does not run on oar, so '{name}' is not available")


class _AbsentLoader(importlib.abc.Loader):
    def create_module(self, spec):
        m = _AbsentModule(spec.name)
        m.__file__ = spec.origin
        return m

    def exec_module(self, module):
        pass


class LibtorchExtensionFinder(importlib.abc.MetaPathFinder):
    """Placed first on sys.meta_path by the switch: a Python extension module linked to libtorch
    imports as an _AbsentModule instead of loading libtorch into the process."""

    def find_spec(self, name, path, target=None):
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or not isinstance(spec.loader, importlib.machinery.ExtensionFileLoader) or \
                not links_libtorch(spec.origin):
            return None
        return importlib.util.spec_from_loader(name, _AbsentLoader(), origin=spec.origin)


finder = LibtorchExtensionFinder()
