"""torch.jit.isinstance, kept in a module of its own: defined in oar/jit.py it would shadow the
builtin for every function there (the compiled functions' per-call code among them)."""
import builtins
import typing


def isinstance(obj, target_type):
    """torch.jit.isinstance: isinstance that also checks the contents of typing's containers
    (List[int], Dict[str, Tensor], Optional[str], Tuple[int, ...], Union[...])."""
    origin, args = typing.get_origin(target_type), typing.get_args(target_type)
    if origin is None:
        return builtins.isinstance(obj, target_type)
    if origin is typing.Union:
        return any(isinstance(obj, a) for a in args)
    if not builtins.isinstance(obj, origin):
        return False
    if origin in (list, set, frozenset):
        return not args or all(isinstance(v, args[0]) for v in obj)
    if origin is dict:
        return not args or all(isinstance(k, args[0]) and isinstance(v, args[1]) for k, v in obj.items())
    if origin is tuple:
        if not args:
            return True
        if len(args) == 2 and args[1] is Ellipsis:
            return all(isinstance(v, args[0]) for v in obj)
        return len(obj) == len(args) and all(isinstance(v, a) for v, a in zip(obj, args))
    return True
