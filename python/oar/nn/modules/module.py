"""nn.Module, as torch.nn.Module: parameters, buffers and children registered by attribute,
recursive traversal, state_dict / load_state_dict with torch's key report, hooks."""
import itertools
from collections import OrderedDict, namedtuple

from ... import _C
from ..parameter import Parameter

_IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


class _RemovableHandle:
    _ids = itertools.count()

    def __init__(self, hooks):
        self.hooks, self.id = hooks, next(self._ids)

    def remove(self):
        self.hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.remove()


class Module:
    training = True
    _version = 1

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got unexpected arguments")
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = OrderedDict()
        d["_buffers"] = OrderedDict()
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = OrderedDict()
        d["_forward_hooks"] = OrderedDict()
        d["_forward_pre_hooks"] = OrderedDict()

    def forward(self, *input):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args, **kwargs):
        for hook in list(self._forward_pre_hooks.values()):
            r = hook(self, args)
            if r is not None:
                args = r if isinstance(r, tuple) else (r,)
        out = self.forward(*args, **kwargs)
        for hook in list(self._forward_hooks.values()):
            r = hook(self, args, out)
            if r is not None:
                out = r
        return out

    # ---- registration
    def _check_init(self):
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameters, buffers or modules before Module.__init__() call")

    def register_parameter(self, name, param):
        self._check_init()
        if "." in name or name == "":
            raise KeyError(f'parameter name can\'t contain "." or be empty, got "{name}"')
        if isinstance(getattr(type(self), name, None), property):   # a parametrized tensor's name, as torch
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                            "(torch.nn.Parameter or None required)")
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        self._check_init()
        if tensor is not None and not isinstance(tensor, _C.TensorBase):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                            "(torch Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name, module):
        self._check_init()
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._modules[name] = module

    register_module = add_module

    def __setattr__(self, name, value):
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            self._check_init()
            for k in ("_buffers", "_modules"):
                d[k].pop(name, None)
            d.pop(name, None)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                "(torch.nn.Parameter or None expected)")
            params[name] = None
        elif isinstance(value, Module):
            self._check_init()
            for k in ("_parameters", "_buffers"):
                d[k].pop(name, None)
            d.pop(name, None)
            self._modules[name] = value
        elif d.get("_modules") is not None and name in d["_modules"]:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module '{name}'")
            d["_modules"][name] = None
        elif d.get("_buffers") is not None and name in d["_buffers"]:
            if value is not None and not isinstance(value, _C.TensorBase):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}'")
            d["_buffers"][name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name):
        d = self.__dict__
        for k in ("_parameters", "_buffers", "_modules"):
            if k in d and name in d[k]:
                return d[k][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for k in ("_parameters", "_buffers", "_modules"):
            if name in self.__dict__.get(k, {}):
                del self.__dict__[k][name]
                return
        object.__delattr__(self, name)

    def __dir__(self):
        return sorted(set(object.__dir__(self)) | set(self._parameters) | set(self._buffers) | set(self._modules))

    # ---- traversal
    def _named_members(self, get, prefix="", recurse=True, remove_duplicate=True):
        seen = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for mp, m in mods:
            for k, v in get(m):
                if v is None or (remove_duplicate and id(v) in seen):
                    continue
                if remove_duplicate:
                    seen.add(id(v))
                yield (mp + ("." if mp else "") + k, v)

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        return self._named_members(lambda m: m._parameters.items(), prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        return self._named_members(lambda m: m._buffers.items(), prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def named_children(self):
        seen = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        if memo is None:
            memo = set()
        if id(self) in memo and remove_duplicate:
            return
        if remove_duplicate:
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            yield from m.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def get_submodule(self, target):
        m = self
        for part in target.split(".") if target else []:
            if part not in m._modules:
                raise AttributeError(f"{type(m).__name__} has no attribute `{part}`")
            m = m._modules[part]
        return m

    def get_parameter(self, target):
        mod, _, name = target.rpartition(".")
        return getattr(self.get_submodule(mod), name)

    def apply(self, fn):
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # ---- modes and moves
    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            p.grad = None

    def _apply_to_tensors(self, fn):
        for m in self.modules():
            for k, p in m._parameters.items():
                if p is not None:
                    q = fn(p)
                    if q is not p:
                        m._parameters[k] = Parameter(q, p.requires_grad)
            for k, b in m._buffers.items():
                if b is not None:
                    m._buffers[k] = fn(b)
        return self

    def _to_device(self, dev):
        """every parameter, gradient and buffer onto device code dev, in place: the Parameter
        objects stay (an optimizer made before keeps them), as torch's Module.to"""
        from ... import _device as _dev

        from ..._grad_mode import no_grad

        with no_grad():
            for m in self.modules():
                for p in m._parameters.values():
                    if p is not None and p._device != dev:
                        p.data = _dev.move(p.detach(), dev)
                        if p.grad is not None:
                            p.grad = _dev.move(p.grad, dev)
                for k, b in m._buffers.items():
                    if b is not None and b._device != dev:
                        m._buffers[k] = _dev.move(b, dev)
        return self

    def to(self, *args, **kwargs):
        """to(dtype), to(device[, dtype]), to(tensor), with dtype= / device= keywords"""
        from ... import _device as _dev

        dtype, dev = kwargs.get("dtype"), None
        if kwargs.get("device") is not None:
            dev = _dev.code(kwargs["device"], "Module.to")
        for a in args:
            if isinstance(a, _C.TensorBase):
                dtype, dev = a.dtype, a._device
            elif hasattr(a, "is_floating_point"):
                dtype = a
            elif a is not None and not isinstance(a, bool):
                dev = _dev.code(a, "Module.to")
        if dev is not None:
            self._to_device(dev)
        if dtype is None:
            return self
        return self._apply_to_tensors(lambda t: t.detach().to(dtype) if t.is_floating_point() else t)

    def float(self):
        from ... import float32

        return self.to(float32)

    def double(self):
        from ... import float64

        return self.to(float64)

    def half(self):
        from ... import float16

        return self.to(float16)

    def cpu(self):
        from ... import _device as _dev

        return self._to_device(_dev.CPU)

    def cuda(self, device=None):
        from ... import _device as _dev

        index = None
        if device is not None:
            kind, index = _dev.parse(device, "Module.cuda")
            if kind != "cuda":
                raise RuntimeError(f"Module.cuda: expected a CUDA device, got '{device}'")
        _dev.check_cuda("Module.cuda", index)
        return self._to_device(_dev.CUDA)

    def type(self, dst_type):
        return self.to(dst_type)

    # ---- hooks
    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False):
        h = _RemovableHandle(self._forward_hooks)
        self._forward_hooks[h.id] = hook
        if prepend:
            self._forward_hooks.move_to_end(h.id, last=False)
        return h

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        h = _RemovableHandle(self._forward_pre_hooks)
        self._forward_pre_hooks[h.id] = hook
        if prepend:
            self._forward_pre_hooks.move_to_end(h.id, last=False)
        return h

    # ---- state
    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        if args:  # torch's old positional form
            destination = args[0]
            prefix = args[1] if len(args) > 1 else prefix
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()
        if hasattr(destination, "_metadata"):  # torch's: each module's version, for _load_from_state_dict
            destination._metadata[prefix[:-1]] = {"version": self._version}
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        hook = self.__dict__.get("_state_dict_hook")  # oar.amp.decorate's: f32 masters for low parameters
        if hook is not None:
            hook(self, destination, prefix)
        return destination

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        """torch's per-module step of load_state_dict: this module's own parameters and persistent buffers
        from state_dict[prefix + name]. Modules whose state is not plain tensors (the quantized ones) take
        their own keys out of state_dict first, then call this."""
        from ..._grad_mode import no_grad

        local = OrderedDict((k, v) for k, v in itertools.chain(self._parameters.items(), self._buffers.items())
                            if v is not None and k not in self._non_persistent_buffers_set)
        for name, dst in local.items():
            key = prefix + name
            if key not in state_dict:
                missing_keys.append(key)
                continue
            src = state_dict[key]
            if not isinstance(src, _C.TensorBase):
                if hasattr(src, "__dlpack__") or hasattr(src, "__array_interface__"):
                    from ..._creation import tensor

                    src = tensor(src.detach().cpu().numpy() if hasattr(src, "detach") else src)
                else:
                    error_msgs.append(f'While copying the parameter named "{key}", expected torch.Tensor or '
                                      f"Tensor-like object from checkpoint but received {type(src)}")
                    continue
            if tuple(src.shape) != tuple(dst.shape):
                error_msgs.append(f"size mismatch for {key}: copying a param with shape {src.shape} from checkpoint, "
                                  f"the shape in current model is {dst.shape}.")
                continue
            with no_grad():
                dst.copy_(src.detach().to(dst.dtype))
        if strict:
            for key in state_dict:
                if key.startswith(prefix):
                    head = key[len(prefix):].split(".", 1)[0]
                    if head not in self._modules and head not in local:
                        unexpected_keys.append(key)

    def load_state_dict(self, state_dict, strict=True):
        if not hasattr(state_dict, "keys"):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        metadata = getattr(state_dict, "_metadata", None) or {}
        state_dict = OrderedDict(state_dict)  # modules take their keys out of it: the caller's dict stays whole
        missing, unexpected, errors = [], [], []

        def load(module, prefix):
            # a dict without torch's metadata (built by hand, or from a file) is taken as of the module's version
            local = metadata.get(prefix[:-1], {"version": module._version})
            module._load_from_state_dict(state_dict, prefix, local, True, missing, unexpected, errors)
            for name, child in module._modules.items():
                if child is not None:
                    load(child, prefix + name + ".")

        load(self, "")
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ". ")
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ". ")
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" + "\n\t".join(errors))
        hook = self.__dict__.get("_load_state_dict_hook")  # oar.amp.decorate's: the masters from the values
        if hook is not None:
            hook(self, state_dict)
        return _IncompatibleKeys(missing, unexpected)

    # ---- printing
    def extra_repr(self):
        return ""

    def _get_name(self):
        return type(self).__name__

    def __repr__(self):
        lines = []
        extra = self.extra_repr()
        if extra:
            lines = extra.split("\n")
        for name, m in self._modules.items():
            r = repr(m).replace("\n", "\n  ")
            lines.append(f"({name}): {r}")
        main = self._get_name() + "("
        if lines:
            if len(lines) == 1 and not self._modules:
                main += lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"
