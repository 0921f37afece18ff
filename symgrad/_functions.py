"""torch's free functions that are no Tensor method: `sg.einsum`, `sg.tensordot`,
`sg.normalize`, `sg.cosine_similarity`, `sg.var_mean`, `sg.std_mean`.

On traced values they trace (`symgrad.trace.einsum`, ...). On runtime tensors `einsum` and
`tensordot` are forward-only Functions whose forward is the traced function (their backward is
generated on first use per signature, as for the composite ops); the others are compositions
of Tensor ops, so they run the same way in both.
"""
from __future__ import annotations


def _is_traced(x):
    return hasattr(x, "tracer") and hasattr(x, "expr")


def _tensors(values):
    from . import tensor as _tm

    return [v if isinstance(v, _tm.Tensor) else _tm.tensor(v) for v in values]


def _einsum_forward(equation, *operands):
    from .trace import einsum as traced

    return traced(equation, *operands)


def _tensordot_forward(a, b, dims=2):
    from .trace import tensordot as traced

    return traced(a, b, dims)


def einsum(equation, *operands):
    """torch.einsum(equation, *operands) (or a list of operands)."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if _is_traced(equation) or any(_is_traced(v) for v in operands):
        return _einsum_forward(equation, *operands)
    from ._composite_ops import function

    return function("einsum", _einsum_forward).apply(equation, *_tensors(operands))


def tensordot(a, b, dims=2):
    """torch.tensordot(a, b, dims): dims an int (the last of a with the first of b) or a pair
    of dim lists."""
    if _is_traced(a) or _is_traced(b):
        return _tensordot_forward(a, b, dims)
    from ._composite_ops import function

    if not isinstance(dims, int):
        dims = tuple(d if isinstance(d, int) else tuple(d) for d in dims)
    a, b = _tensors((a, b))
    return function("tensordot", _tensordot_forward).apply(a, b, dims)


def normalize(input, p=2.0, dim=1, eps=1e-12):
    """torch.nn.functional.normalize: input / max(norm_p(input, dim), eps)."""
    return input / input.norm(p, dim, keepdim=True).clamp_min(eps)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """torch.nn.functional.cosine_similarity: sum((x1 / |x1|) * (x2 / |x2|), dim), each norm
    at least eps."""
    n1 = x1.norm(2, dim, keepdim=True).clamp_min(eps)
    n2 = x2.norm(2, dim, keepdim=True).clamp_min(eps)
    return ((x1 / n1) * (x2 / n2)).sum(dim)


def _renamed_warnings(fn, old, new):
    """fn(), its warnings re-issued with ``old`` (an op name) replaced by ``new``."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn()
    for w in caught:
        warnings.warn(str(w.message).replace(old, new, 1), w.category, stacklevel=3)
    return out


def var_mean(input, dim=None, unbiased=True, keepdim=False, *, correction=None):
    """torch.var_mean: (var, mean)."""
    var = _renamed_warnings(lambda: input.var(dim, unbiased, keepdim, correction=correction),
                            "var():", "var_mean():")
    return var, input.mean(dim, keepdim=keepdim)


def std_mean(input, dim=None, unbiased=True, keepdim=False, *, correction=None):
    """torch.std_mean: (std, mean)."""
    std = _renamed_warnings(lambda: input.std(dim, unbiased, keepdim, correction=correction),
                            "std():", "std_mean():")
    return std, input.mean(dim, keepdim=keepdim)


__all__ = ["einsum", "tensordot", "normalize", "cosine_similarity", "var_mean", "std_mean"]
