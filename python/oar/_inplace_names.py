"""torch's names that are another function in another place: Tensor.<fn>_ and torch.<fn>_ (fn's
result written into the tensor, as torch's in-place forms), and the torch.<fn> of functions that
live in torch.nn.functional with the same signature (torch.conv1d, torch.selu, ...). Installed
once the package is complete, so every function of the name is found wherever it is defined."""

# elementwise functions whose in-place form torch has as a Tensor method and at the top level
INPLACE = """abs acos arccos acosh arccosh asin arcsin asinh arcsinh atan arctan atanh arctanh ceil clamp_min
clamp_max clip cos cosh deg2rad rad2deg erf erfc exp exp2 expm1 fix floor frac log log10 log1p log2 logit
nan_to_num negative neg reciprocal round rsqrt sigmoid sin sinc sinh sqrt square tan tanh trunc xlogy
relu i0""".split()
# ... and those torch has as Tensor methods only
INPLACE_METHODS = """absolute atan2 arctan2 erfinv lgamma digamma sign sgn fmod remainder floor_divide hypot
logical_and logical_or logical_not logical_xor true_divide multiply subtract divide igamma igammac""".split()

# torch.<fn> that is torch.nn.functional.<fn> with the same arguments (the top-level losses, embedding
# and instance_norm take other arguments in torch: not aliased)
FROM_FUNCTIONAL = """conv1d conv3d conv_transpose1d conv_transpose2d conv_transpose3d avg_pool1d max_pool1d
max_pool2d max_pool3d adaptive_avg_pool1d prelu cosine_similarity pairwise_distance pixel_shuffle
pixel_unshuffle channel_shuffle selu celu threshold rrelu hardshrink alpha_dropout feature_alpha_dropout
group_norm selu_ celu_ threshold_ rrelu_ relu_""".split()


def install(namespace, tensor_class, inplace):
    """adds the missing names to the package namespace and tensor_class; inplace(self, result) writes
    result into self (torch's in-place semantics and errors)"""
    functional = namespace["nn"].functional
    for name in FROM_FUNCTIONAL:
        if name not in namespace and hasattr(functional, name):
            namespace[name] = getattr(functional, name)
    for name in INPLACE + INPLACE_METHODS:
        fn = namespace.get(name) or getattr(tensor_class, name, None)
        if fn is None:
            continue
        method = name + "_"
        if not hasattr(tensor_class, method):
            setattr(tensor_class, method, lambda self, *args, _f=fn, **kwargs: inplace(self, _f(self, *args, **kwargs)))
        if method not in namespace and name in INPLACE:
            namespace[method] = lambda input, *args, _m=method, **kwargs: getattr(input, _m)(*args, **kwargs)
