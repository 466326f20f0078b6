"""Tensors of other kinds than oar.Tensor, kept as plain Python objects over oar tensors:
quantized (_qtensor.QTensor: codes and their affine map) and complex (_complex.ComplexTensor: a
real and an imaginary part). The C ops take neither (an op given one refuses it with a TypeError),
so nothing computes on codes or on half a complex number by mistake. Each kind's module lists the
torch functions it implements (`implements`); those functions begin with one type check and hand
such an input to `other` (torch dispatches on the tensor's type; this is that step, and it costs
the plain path one dictionary lookup)."""

CLASSES = {}  # class -> kind name
_HINTS = {}  # class -> what to do with one where it is not taken
_IMPLS = {}  # (torch function name, class) -> implementation


def register_as(kind, hint):
    """class decorator: cls is the tensor class of this kind"""
    def add(cls):
        CLASSES[cls], _HINTS[cls] = kind, hint
        return cls

    return add


def implements(cls, table):
    """{torch function name: implementation} for tensors of class cls"""
    for name, impl in table.items():
        _IMPLS[(name, cls)] = impl


def other(name, input, *args, **kwargs):
    """torch function `name` called with an input that is not an oar.Tensor"""
    impl = _IMPLS.get((name, type(input)))
    if impl is not None:
        return impl(input, *args, **kwargs)
    kind = CLASSES.get(type(input))
    if kind is not None:
        supported = sorted(n for n, c in _IMPLS if c is type(input))
        raise TypeError(f"{name}(): {kind} tensors are not supported here; {_HINTS[type(input)]} (the functions "
                        f"that take them: {', '.join(supported)})")
    raise TypeError(f"{name}(): argument 'input' must be Tensor, not {type(input).__name__}")
