"""The tracer's functions of several values or of a shape: full_like / zeros_like / ones_like,
cat, stack, einsum, tensordot. Moved verbatim from trace.py (which re-exports every name).
"""
from __future__ import annotations

import numbers

import sympy

from .errors import DimensionError, ShapeError, TraceError


# Names of trace.py used below. trace.py imports this module before it defines them, so it
# binds them here once it has (trace._bind_moved_names).
_FROM_TRACE = ("SymbolicTensor", "_at", "_dims", "user_site",)
(SymbolicTensor, _at, _dims, user_site,) = (None,) * len(_FROM_TRACE)


def _keyword_only_shape(op, positional, named, names, site):
    """torch's keyword spelling of a *shape argument: x.reshape(shape=(2, 3)),
    x.view(size=...), x.permute(dims=...), x.expand(size=...)."""
    if not named:
        return positional
    unknown = [k for k in named if k not in names]
    if unknown or len(named) > 1 or positional:
        what = (f"an unexpected keyword argument '{unknown[0]}'" if unknown else
                f"the shape twice ({', '.join(named)}{' and positionally' if positional else ''})")
        raise TraceError(f"{op}() got {what}{_at(site)}")
    return (next(iter(named.values())),)


def full_like(value, fill_value):
    """torch.full_like of a traced value: a constant of its shape (no gradient flows)."""
    site = user_site()
    if not isinstance(fill_value, (bool, int, float)):
        raise TraceError(f"full_like: fill_value must be a Python number, got "
                         f"{type(fill_value).__name__}{_at(site)}")
    return SymbolicTensor(value.tracer, sympy.Float(fill_value) if isinstance(fill_value, float)
                          else sympy.Integer(int(fill_value)), value.shape, "float", site=site)


def zeros_like(value):
    return full_like(value, 0.0)


def ones_like(value):
    return full_like(value, 1.0)


def _joined(tensors, what, site):
    """(tracer, traced values) of the tensors that cat / stack join."""
    tensors = list(tensors)
    tracer = next((t.tracer for t in tensors if isinstance(t, SymbolicTensor)), None)
    if not tensors or tracer is None:
        raise TraceError(f"{what}: expected a non-empty list of traced values{_at(site)}")
    return tracer, [tracer.lift(t, site) for t in tensors]


def cat(tensors, dim=0):
    """torch.cat over traced values (and constants): joined along an existing dim."""
    site = user_site()
    tracer, values = _joined(tensors, "cat", site)
    shapes = [v.shape for v in values]
    if not all(isinstance(s, tuple) for s in shapes):
        raise TraceError(f"cat needs known shapes, which a shape-generic trace does not have"
                         f"{_at(site)}; give example inputs: sg.compile(fn, *arrays), "
                         "`--shape NAME=2,3` on the command line, or an `example_inputs` "
                         "staticmethod on the Function")
    ndim = len(shapes[0])
    if ndim == 0:
        raise ShapeError(f"cat: zero-dimensional tensor cannot be concatenated{_at(site)}")
    (d,) = _dims(dim, ndim, "cat", site)
    for i, s in enumerate(shapes):
        if len(s) != ndim or s[:d] + s[d + 1:] != shapes[0][:d] + shapes[0][d + 1:]:
            raise ShapeError(f"cat: sizes of tensors must match except in dimension {d}: "
                             f"tensor 0 has shape {shapes[0]}, tensor {i} has shape {s}{_at(site)}")
    if len(values) == 1:
        return values[0]
    return tracer.structural("cat", values, site=site, dim=d)


def stack(tensors, dim=0):
    """torch.stack over traced values: joined along a new dim."""
    site = user_site()
    _, values = _joined(tensors, "stack", site)
    shapes = [v.shape for v in values]
    if any(s != shapes[0] for s in shapes):
        bad = next(i for i, s in enumerate(shapes) if s != shapes[0])
        raise ShapeError(f"stack expects each tensor to be equal size, but got {shapes[0]} at "
                         f"entry 0 and {shapes[bad]} at entry {bad}{_at(site)}")
    ndim = len(shapes[0]) + 1
    if not -ndim <= dim < ndim:
        raise DimensionError(f"stack: dimension out of range (expected to be in range of "
                         f"[{-ndim}, {ndim - 1}], but got {dim}){_at(site)}")
    return cat([v.unsqueeze(dim % ndim) for v in values], dim % ndim)


_LETTERS = "abcdefghijklmnopqrstuvwxyABCDEFGHIJKLMNOPQRSTUVWXYZ"   # 'z' is inner()'s


def _traced_operands(values, op, site):
    values = list(values)
    tracer = next((v.tracer for v in values if isinstance(v, SymbolicTensor)), None)
    if tracer is None:
        raise TraceError(f"{op}: expected traced values as operands{_at(site)}")
    return tracer, [tracer.lift(v, site) for v in values]


def einsum(equation, *operands):
    """torch.einsum over traced values: diagonals of repeated letters and size-1 letters are
    taken and expanded here, so the recorded einsum op has unique letters of one size each."""
    site = user_site()
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not isinstance(equation, str):
        raise TraceError(f"einsum: the first argument must be the equation string, got "
                         f"{type(equation).__name__}{_at(site)}")
    tracer, values = _traced_operands(operands, "einsum", site)
    eq = equation.replace(" ", "")
    if eq.count("->") > 1:
        raise ShapeError(f"einsum: the equation {equation!r} has more than one '->'{_at(site)}")
    lhs, arrow, out = eq.partition("->")
    subs = lhs.split(",")
    if len(subs) != len(values):
        more = "fewer" if len(values) < len(subs) else "more"
        raise ShapeError(f"einsum: {more} operands were provided ({len(values)}) than the "
                         f"equation {equation!r} specifies ({len(subs)}){_at(site)}")
    for part in subs + ([out] if arrow else []):
        rest = part.replace("...", "", 1)
        bad = next((c for c in rest if c not in _LETTERS + "z"), None)
        if bad is not None:
            raise ShapeError(f"einsum: invalid subscript {bad!r} in the equation {equation!r}: "
                             f"subscripts are letters a-z and A-Z, with at most one '...' per "
                             f"operand{_at(site)}")
    used = set(eq)
    if any("..." in s for s in subs + [out]):
        if any(v._rank() is None for v in values):
            raise TraceError(f"einsum: '...' needs the operands' ranks, which a shape-generic "
                             f"trace does not have{_at(site)}; give example inputs: "
                             "sg.compile(fn, *arrays), `--shape NAME=2,3` on the command line, "
                             "or an `example_inputs` staticmethod on the Function")
        counts = []
        for i, (s, v) in enumerate(zip(subs, values)):
            k = v._rank() - (len(s) - 3 if "..." in s else len(s))
            if "..." in s and k < 0:
                raise ShapeError(f"einsum: operand {i} has {v._rank()} dimensions, fewer than "
                                 f"the subscripts {s!r} name{_at(site)}")
            counts.append(k if "..." in s else 0)
        ell = "".join([c for c in _LETTERS if c not in used][:max(counts)])
        subs = [s.replace("...", ell[len(ell) - k:]) for s, k in zip(subs, counts)]
        if arrow:
            out = out.replace("...", ell)
        else:
            out = ell
    else:
        out = out if arrow else None
    letters = "".join(subs)
    if out is None or (not arrow and "..." in eq):
        singles = sorted(c for c in set(letters) if letters.count(c) == 1 and c not in (out or ""))
        out = (out or "") + "".join(singles)
    if len(set(out)) != len(out):
        c = next(c for c in out if out.count(c) > 1)
        raise ShapeError(f"einsum: output subscript {c!r} appears more than once in the output "
                         f"of {equation!r}{_at(site)}")
    missing = next((c for c in out if c not in letters), None)
    if missing is not None:
        raise ShapeError(f"einsum: output subscript {missing!r} does not appear in the "
                         f"equation {equation!r} for any input operand{_at(site)}")
    size = {}
    for i, (s, v) in enumerate(zip(subs, values)):
        if v._rank() is None:
            continue
        if len(s) != v._rank():
            raise ShapeError(f"einsum: the number of subscripts in the equation ({len(s)}) "
                             f"does not match the number of dimensions ({v._rank()}) for "
                             f"operand {i} (shape {v.shape}) and no ellipsis was given"
                             f"{_at(site)}")
        for c, n in zip(s, v.shape):
            if size.get(c, 1) != 1 and n != 1 and size[c] != n:
                raise ShapeError(f"einsum: subscript {c!r} has size {size[c]} in one operand "
                                 f"and size {n} in operand {i} (shape {v.shape}) of "
                                 f"{equation!r}{_at(site)}")
            if n != 1 or c not in size:
                size[c] = n
    for i, (s, v) in enumerate(zip(subs, values)):
        while len(set(s)) != len(s):   # a repeated letter: its diagonal, as a last dim
            c = next(c for c in s if s.count(c) > 1)
            p = s.index(c)
            q = s.index(c, p + 1)
            if v._rank() is not None and v.shape[p] != v.shape[q]:
                raise ShapeError(f"einsum: subscript {c!r} is repeated for operand {i} but the "
                                 f"sizes don't match, {v.shape[p]} != {v.shape[q]}{_at(site)}")
            v = v.diagonal(0, p, q)
            s = s[:p] + s[p + 1:q] + s[q + 1:] + c
        if v._rank() is not None and any(n != size[c] for c, n in zip(s, v.shape)):
            v = v.expand(tuple(size[c] for c in s))
        subs[i], values[i] = s, v
    return tracer.structural("einsum", values, site=site, subscripts=",".join(subs) + "->" + out)


def tensordot(a, b, dims=2):
    """torch.tensordot: contract the last `dims` dims of a with the first of b (or the given
    lists of dims)."""
    site = user_site()
    _, (a, b) = _traced_operands((a, b), "tensordot", site)
    na, nb = a.ndim, b.ndim
    if isinstance(dims, numbers.Integral):
        if dims < 0 or dims > min(na, nb):
            raise ShapeError(f"tensordot: dims ({dims}) must be between 0 and the smaller rank "
                             f"({min(na, nb)}){_at(site)}")
        da, db = list(range(na - dims, na)), list(range(dims))
    else:
        da, db = ([d] if isinstance(d, numbers.Integral) else list(d) for d in dims)
        if len(da) != len(db):
            raise ShapeError(f"tensordot: both dimension lists should have the same length, "
                             f"got {da} and {db}{_at(site)}")
        da = [_dims(d, na, "tensordot", site)[0] for d in da]
        db = [_dims(d, nb, "tensordot", site)[0] for d in db]
    la = _LETTERS[:na]
    lb = [_LETTERS[na + i] for i in range(nb)]
    for p, q in zip(da, db):
        lb[q] = la[p]
    lb = "".join(lb)
    out = "".join(c for i, c in enumerate(la) if i not in da) + "".join(
        c for i, c in enumerate(lb) if i not in db)
    return einsum(f"{la},{lb}->{out}", a, b)
