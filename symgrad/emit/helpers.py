"""Helper functions that generated NumPy modules paste in when their code calls them.

They implement the array plumbing of structural adjoints (sum back to a broadcast shape, put
reduced dims back, scatter into zeros) so the generated module stays standalone: it imports
only numpy. Math helpers of the stable primitives live beside them in `symgrad.ops.stable`.

Each works on any array library that implements NumPy's dispatch protocols (NumPy, CuPy,
Dask): `numpy.<fn>(a)` routes to a's own library. Where NumPy's fast path writes in place
(`put_along_axis`, `out[index] = g`), a helper keeps it for NumPy arrays and uses an
out-of-place equivalent for others, so a Dask array stays a lazy graph.
"""
import re

def _reduction(fn: str, ufunc: str) -> str:
    """The helper `_<fn>`: numpy.<fn>, for NumPy arrays straight through numpy.<ufunc>.reduce
    without numpy.<fn>'s dispatch layers (~2 us a call at 1e3)."""
    return f'''\
def _{fn}(a, axis, keepdims, _ndarray=__import__("numpy").ndarray):
    """numpy.{fn}; for NumPy arrays without its dispatch layers (~2 us a call). A 0-d array
    reduced along dim 0 or -1 is itself, as in torch."""
    if type(a) is _ndarray:
        return numpy.{ufunc}.reduce(a, axis=axis if a.ndim else None, keepdims=keepdims)
    return numpy.{fn}(a, axis=axis if numpy.ndim(a) else None, keepdims=keepdims)
'''


STRUCTURAL_HELPERS: dict[str, str] = {
    "_sum": _reduction("sum", "add"),
    "_mean": '''\
def _mean(a, axis, keepdims, _ndarray=__import__("numpy").ndarray):
    """numpy.mean; for float32/float64 NumPy arrays the same pairwise sum divided by the count,
    without numpy.mean's dispatch and bookkeeping (~4 us a call). Empty: nan, silently."""
    if type(a) is _ndarray and a.dtype.char in "fd":
        total = numpy.add.reduce(a, axis=axis if a.ndim else None, keepdims=keepdims)
        return total / (a.size // total.size if total.size else 1)
    return numpy.mean(a, axis=axis if numpy.ndim(a) else None, keepdims=keepdims)
''',
    "_max": _reduction("max", "maximum"),
    "_min": _reduction("min", "minimum"),
    "_sum_to": '''\
def _sum_to(a, shape, _ndarray=__import__("numpy").ndarray):
    """Sum a broadcast gradient back down to `shape` (the adjoint of broadcasting).
    (_ndarray is NumPy's own, also where the CUDA target spells numpy as cupy.)"""
    shape = tuple(shape)
    have = numpy.shape(a)
    if have == shape:
        return a
    lead = len(have) - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and have[lead + i] != 1)
    if not axes:
        return numpy.reshape(a, shape)
    if type(a) is _ndarray:  # numpy.sum's dispatch layers cost ~2 us a call
        return numpy.add.reduce(a, axis=axes, keepdims=True).reshape(shape)
    return numpy.reshape(numpy.sum(a, axis=axes, keepdims=True), shape)
''',
    "_unreduce": '''\
def _unreduce(g, shape, dims, keepdim, mean=False, _ndarray=__import__("numpy").ndarray,
              _generic=__import__("numpy").generic, _host_array=__import__("numpy").asarray):
    """Put reduced dims back into g and broadcast it to `shape` (the adjoint of sum / mean).
    (_ndarray is NumPy's own, also where the CUDA target spells numpy as cupy.)"""
    shape = tuple(shape)
    if dims is None:
        dims = tuple(range(len(shape)))
    elif isinstance(dims, int):
        dims = (dims,)
    dims = {d % max(len(shape), 1) for d in dims}
    if mean:
        count = 1
        for d in dims:
            count *= shape[d] if len(shape) else 1
        g = g / count
    if isinstance(g, _generic):   # a NumPy scalar (a full mean's adjoint): its 0-d array
        g = _host_array(g)
    if type(g) is _ndarray and g.flags.c_contiguous:
        # the zero-stride view numpy.broadcast_to returns, without its checks (~3 us at 1e3)
        kept = iter(zip(g.shape, g.strides))
        strides = []
        for i, m in enumerate(shape):
            n, s = (1, 0) if not keepdim and i in dims else next(kept, (None, 0))
            if n != 1 and n != m:
                break
            strides.append(0 if n != m else s)
        else:
            if next(kept, None) is None:
                out = _ndarray(shape, g.dtype, g, 0, tuple(strides))
                out.flags.writeable = False
                return out
    if not keepdim and len(shape):
        g = numpy.expand_dims(g, tuple(sorted(dims)))
    return numpy.broadcast_to(g, shape)
''',
    "_index_back": '''\
def _index_back(g, idx, shape, dim, keepdim):
    """Zeros of `shape` holding g at the arg-max / arg-min indices along dim."""
    if not keepdim and len(shape):
        g = numpy.expand_dims(g, dim)
        idx = numpy.expand_dims(idx, dim)
    if not isinstance(idx, (numpy.ndarray, numpy.generic)):  # CuPy, Dask: out of place
        if not len(shape):
            return g
        at = numpy.arange(shape[dim], like=idx).reshape((-1,) + (1,) * (len(shape) - dim % len(shape) - 1))
        return numpy.where(at == idx, g, 0.0)
    out = numpy.zeros(shape, dtype=numpy.result_type(g))
    if len(shape):  # put_along_axis's own index building costs ~4 us at 1e3
        d = dim % len(shape)
        out[tuple(idx if i == d else numpy.arange(n).reshape((-1,) + (1,) * (len(shape) - i - 1))
                  for i, n in enumerate(shape))] = g
    else:
        out[...] = g
    return out
''',
    "_take_dim": '''\
def _take_dim(u, idx, dim, keepdim):
    """u at the indices along dim (the adjoint of _index_back)."""
    if numpy.ndim(u) == 0:
        return u
    if not keepdim:
        idx = numpy.expand_dims(idx, dim)
    if not isinstance(idx, (numpy.ndarray, numpy.generic)):  # CuPy, Dask: a masked sum
        at = numpy.arange(numpy.shape(u)[dim], like=idx).reshape(
            (-1,) + (1,) * (numpy.ndim(u) - dim % numpy.ndim(u) - 1))
        return numpy.sum(numpy.where(at == idx, u, 0.0), axis=dim, keepdims=keepdim)
    out = numpy.take_along_axis(u, idx, axis=dim)
    return out if keepdim else numpy.squeeze(out, dim)
''',
    "_prod_others": '''\
def _prod_others(x, dims):
    """For each element, the product of the others along `dims`; exact when x holds zeros."""
    if dims is None:
        dims = tuple(range(numpy.ndim(x)))
    elif isinstance(dims, int):
        dims = (dims,)
    if numpy.ndim(x) == 0:
        return numpy.ones_like(x)
    dims = tuple(sorted(d % numpy.ndim(x) for d in dims))
    rest = tuple(d for d in range(numpy.ndim(x)) if d not in dims)
    moved = numpy.transpose(x, rest + dims)
    flat = numpy.reshape(moved, moved.shape[:len(rest)] + (-1,))
    ones = numpy.ones_like(flat[..., :1])
    before = numpy.cumprod(numpy.concatenate([ones, flat[..., :-1]], axis=-1), axis=-1)
    after = numpy.flip(numpy.cumprod(
        numpy.concatenate([ones, numpy.flip(flat, -1)[..., :-1]], axis=-1), axis=-1), -1)
    out = numpy.reshape(before * after, moved.shape)
    order = rest + dims
    return numpy.transpose(out, tuple(sorted(range(len(order)), key=order.__getitem__)))
''',
    "_prod_others_dual": '''\
def _prod_others_dual(x, *gs, dims=None):
    """For each element m, the eps_1...eps_k part of the product over the others along `dims`
    of the dual numbers x + eps_1*g_1 + ... + eps_k*g_k (eps_i**2 = 0): prefix and suffix
    products over the 2**k parts (bit i of a part's index: eps_i), no division, exact with
    zeros."""
    if dims is None:
        dims = tuple(range(numpy.ndim(x)))
    elif isinstance(dims, int):
        dims = (dims,)
    k = len(gs)
    full = (1 << k) - 1
    if numpy.ndim(x) == 0:
        return numpy.zeros_like(x) if k else numpy.ones_like(x)
    dims = tuple(sorted(d % numpy.ndim(x) for d in dims))
    rest = tuple(d for d in range(numpy.ndim(x)) if d not in dims)
    order = rest + dims
    moved = numpy.transpose(x, order)
    shape = moved.shape
    fx = numpy.reshape(moved, shape[:len(rest)] + (-1,))
    fg = [numpy.reshape(numpy.transpose(numpy.broadcast_to(g, numpy.shape(x)), order), fx.shape)
          for g in gs]
    n = fx.shape[-1]

    def times(parts, m):   # parts * (x_m + sum_i eps_i g_i,m)
        out = []
        for s in range(full + 1):
            c = parts[s] * fx[..., m]
            for i in range(k):
                if s >> i & 1:
                    c = c + parts[s ^ (1 << i)] * fg[i][..., m]
            out.append(c)
        return out

    unit = [numpy.ones_like(fx[..., 0])] + [numpy.zeros_like(fx[..., 0])] * full
    prefix = [unit]                    # prefix[m]: product over l < m
    for m in range(n - 1):
        prefix.append(times(prefix[-1], m))
    suffix = [unit]                    # built from the end; reversed, suffix[m]: over l > m
    for m in range(n - 1, 0, -1):
        suffix.append(times(suffix[-1], m))
    suffix.reverse()
    out = numpy.empty(fx.shape, numpy.result_type(fx, *fg))
    for m in range(n):
        p, q = prefix[m], suffix[m]
        out[..., m] = sum(p[t] * q[full ^ t] for t in range(full + 1))
    out = numpy.reshape(out, shape)
    return numpy.transpose(out, tuple(sorted(range(len(order)), key=order.__getitem__)))
''',
    "_prod_others_vjp": '''\
def _prod_others_vjp(g, x, dims):
    """d/dx of sum(g * _prod_others(x, dims)): for each j, sum over i != j of g_i times the
    product of x over k not in {i, j}. The eps-part of the product of the others in dual
    numbers x_k + eps*g_k (prefix and suffix products, no division: exact with zeros)."""
    if dims is None:
        dims = tuple(range(numpy.ndim(x)))
    elif isinstance(dims, int):
        dims = (dims,)
    if numpy.ndim(x) == 0:
        return numpy.zeros_like(x)
    g = numpy.broadcast_to(g, numpy.shape(x))
    dims = tuple(sorted(d % numpy.ndim(x) for d in dims))
    rest = tuple(d for d in range(numpy.ndim(x)) if d not in dims)
    order = rest + dims
    moved_x = numpy.transpose(x, order)
    shape = moved_x.shape
    fx = numpy.reshape(moved_x, shape[:len(rest)] + (-1,))
    fg = numpy.reshape(numpy.transpose(g, order), fx.shape)
    n = fx.shape[-1]
    pv = numpy.ones_like(fx)        # prefix products, value and eps parts (elements before j)
    pe = numpy.zeros_like(fx)
    sv = numpy.ones_like(fx)        # suffix products (elements after j)
    se = numpy.zeros_like(fx)
    for k in range(1, n):
        pv[..., k] = pv[..., k - 1] * fx[..., k - 1]
        pe[..., k] = pe[..., k - 1] * fx[..., k - 1] + pv[..., k - 1] * fg[..., k - 1]
        j = n - 1 - k
        sv[..., j] = sv[..., j + 1] * fx[..., j + 1]
        se[..., j] = se[..., j + 1] * fx[..., j + 1] + sv[..., j + 1] * fg[..., j + 1]
    out = numpy.reshape(pv * se + pe * sv, shape)
    return numpy.transpose(out, tuple(sorted(range(len(order)), key=order.__getitem__)))
''',
    "_matmul_grad_a": '''\
def _matmul_grad_a(g, a, b):
    """d<g, a @ b>/da under matmul's 1-D and batch-broadcast rules."""
    if numpy.ndim(b) == 1:
        g = numpy.expand_dims(g, -1)          # the column dim that b's 1-D form dropped
    if numpy.ndim(a) == 1:
        g = numpy.expand_dims(g, -2)          # the row dim that a's 1-D form dropped
    b2 = numpy.reshape(b, (-1, 1)) if numpy.ndim(b) == 1 else b
    grad = numpy.matmul(g, numpy.swapaxes(b2, -1, -2))
    if numpy.ndim(a) == 1:
        grad = numpy.squeeze(grad, -2)
    return _sum_to(grad, numpy.shape(a))
''',
    "_matmul_grad_b": '''\
def _matmul_grad_b(g, a, b):
    """d<g, a @ b>/db under matmul's 1-D and batch-broadcast rules."""
    if numpy.ndim(b) == 1:
        g = numpy.expand_dims(g, -1)
    if numpy.ndim(a) == 1:
        g = numpy.expand_dims(g, -2)
    a2 = numpy.reshape(a, (1, -1)) if numpy.ndim(a) == 1 else a
    grad = numpy.matmul(numpy.swapaxes(a2, -1, -2), g)
    if numpy.ndim(b) == 1:
        grad = numpy.squeeze(grad, -1)
    return _sum_to(grad, numpy.shape(b))
''',
    "_index_put_zeros": '''\
def _index_put_zeros(g, shape, index):
    """Zeros of `shape` with g written at a basic index (the adjoint of indexing)."""
    if isinstance(g, (numpy.ndarray, numpy.generic, float, int)):
        out = numpy.zeros(shape, dtype=numpy.result_type(g))
    else:  # CuPy, Dask: zeros in g's library; Dask item assignment stays lazy
        out = numpy.zeros_like(g, shape=shape)
    out[index] = g
    return out
''',
    "_untile": '''\
def _untile(g, shape, reps):
    """The sum of the tiled copies in g, in `shape` (the adjoint of numpy.tile / torch.tile)."""
    shape, reps = tuple(shape), tuple(reps)
    n = max(len(shape), len(reps))
    full = (1,) * (n - len(shape)) + shape
    reps = (1,) * (n - len(reps)) + reps
    split = tuple(k for pair in zip(reps, full) for k in pair)
    total = numpy.sum(numpy.reshape(g, split), axis=tuple(range(0, 2 * n, 2)))
    return numpy.reshape(total, shape)
''',
    "_repeat_interleave_sum": '''\
def _repeat_interleave_sum(g, shape, repeats, dim):
    """Each run of `repeats` copies in g summed (the adjoint of numpy.repeat), in `shape`."""
    shape = tuple(shape)
    if dim is None:
        return numpy.reshape(numpy.sum(numpy.reshape(g, (-1, repeats)), axis=1), shape)
    d = dim % len(shape)
    split = shape[:d] + (shape[d], repeats) + shape[d + 1:]
    return numpy.sum(numpy.reshape(g, split), axis=d + 1)
''',
    "_argsort": '''\
def _argsort(x, dim, descending):
    """The indices that sort x along dim, stably; descending: largest first, equal elements in
    their order and NaN first (torch's order)."""
    if numpy.ndim(x) == 0:
        return numpy.zeros((), dtype=numpy.int64)
    if not descending:
        return numpy.argsort(x, axis=dim, kind="stable").astype(numpy.int64)
    n = numpy.shape(x)[dim]
    back = numpy.argsort(numpy.flip(x, dim), axis=dim, kind="stable")
    return (n - 1 - numpy.flip(back, dim)).astype(numpy.int64)
''',
    "_gather": '''\
def _gather(x, idx, dim, sliced, what,
            IndexError=type("IndexError", (IndexError, RuntimeError), {"__module__": "builtins"})):
    """x at the indices idx along dim: torch.gather (sliced: the other dims are idx's leading
    block of x) or torch.take_along_dim (x and idx broadcast together; negative indices
    count from the end). A bad index raises an IndexError that is also a RuntimeError (torch
    raises RuntimeError there)."""
    if numpy.ndim(x) == 0:
        x = numpy.reshape(x, (1,))
        idx = numpy.reshape(idx, (-1,))
        return numpy.reshape(_gather(x, idx, 0, sliced, what), numpy.shape(idx))
    if numpy.ndim(idx) != numpy.ndim(x):
        raise IndexError(f"{what}: index has {numpy.ndim(idx)} dimensions, the input "
                         f"{numpy.ndim(x)}; they must have the same number of dimensions")
    if getattr(idx, "dtype", numpy.dtype(float)).kind not in "iu":
        raise IndexError(f"{what}: index must be an integer tensor, got {idx.dtype}")
    shape, d = numpy.shape(x), dim % numpy.ndim(x)
    n = shape[d]
    if isinstance(idx, numpy.ndarray) and idx.size:
        low, high = int(idx.min()), int(idx.max())
        lowest = 0 if sliced else -n
        if low < lowest or high >= n:
            bad = low if low < lowest else high
            raise IndexError(f"{what}: index {bad} is out of bounds for dimension {d} with "
                             f"size {n}")
    if sliced:
        if any(k > m for i, (k, m) in enumerate(zip(numpy.shape(idx), shape)) if i != d):
            raise IndexError(f"{what}: index {numpy.shape(idx)} is larger than the input "
                             f"{shape} in a dimension other than {d}")
        x = x[tuple(slice(None) if i == d else slice(0, k)
                    for i, k in enumerate(numpy.shape(idx)))]
    return numpy.take_along_axis(x, idx, axis=d)
''',
    "_gather_back": '''\
def _gather_back(g, idx, shape, dim):
    """Zeros of `shape` with g added at the places _gather read (repeated indices add up)."""
    shape = tuple(shape)
    if not len(shape):
        return numpy.sum(g) + numpy.zeros(shape, dtype=numpy.result_type(g))
    d = dim % len(shape)
    out_shape = numpy.shape(g)
    index = []
    for i, n in enumerate(shape):
        if i == d:
            index.append(numpy.where(idx < 0, idx + n, idx))
        else:
            at = numpy.arange(out_shape[i]) if n != 1 else numpy.zeros(out_shape[i], numpy.int64)
            index.append(numpy.reshape(at, (-1,) + (1,) * (len(shape) - i - 1)))
    out = numpy.zeros(shape, dtype=numpy.result_type(g))
    g = numpy.broadcast_to(g, out_shape)
    if hasattr(numpy.add, "at"):
        numpy.add.at(out, tuple(index), g)
    else:   # CuPy before ufunc.at
        __import__("cupyx").scatter_add(out, tuple(index), g)
    return out
''',
    "_diagonal_back": '''\
def _diagonal_back(g, shape, offset, dim1, dim2):
    """Zeros of `shape` with g on the diagonal (offset, dim1, dim2): the adjoint of
    numpy.diagonal, whose diagonal is g's last dim."""
    out = numpy.zeros(shape, dtype=numpy.result_type(g))
    view = numpy.moveaxis(out, (dim1, dim2), (-2, -1))
    k = numpy.shape(g)[-1]
    rows = numpy.arange(k) + max(-offset, 0)
    view[..., rows, rows + offset] = g
    return out
''',
    "_diag_embed": '''\
def _diag_embed(x, offset, dim1, dim2):
    """torch.diag_embed: x's last dim on the diagonal (offset) of new dims dim1, dim2."""
    shape = numpy.shape(x)
    n = shape[-1] + abs(offset)
    out = numpy.zeros(shape[:-1] + (n, n), dtype=numpy.result_type(x))
    rows = numpy.arange(shape[-1]) + max(-offset, 0)
    out[..., rows, rows + offset] = x
    return numpy.moveaxis(out, (-2, -1), (dim1, dim2))
''',
    "_einsum": '''\
def _einsum(subscripts, *operands):
    """numpy.einsum; through its optimized path (tensordot: BLAS) above 1e5 multiply-adds."""
    size = {}
    for sub, a in zip(subscripts.split("->")[0].split(","), operands):
        size.update(zip(sub, numpy.shape(a)))
    work = 1
    for n in size.values():
        work *= n
    return numpy.einsum(subscripts, *operands,
                        optimize=work > 100000 or len(operands) > 2)
''',
    "_asarray": '''\
def _asarray(a, dtype=None, _ndarray=numpy.ndarray, _host=(numpy.ndarray, numpy.generic, float, int)):
    """a as an array (of dtype), left in its own array library: NumPy, CuPy, Dask, ..."""
    if type(a) is _ndarray and (dtype is None or a.dtype == dtype):
        return a
    if isinstance(a, _host) or not hasattr(a, "astype"):
        return numpy.asarray(a, dtype=dtype)
    return a if dtype is None or a.dtype == dtype else a.astype(dtype)
''',
    "_copy": '''\
def _copy(a):
    """A copy of a that does not alias it, in a's own array library (numpy.copy computes Dask)."""
    if isinstance(a, (numpy.ndarray, numpy.generic, float, int)):
        return numpy.copy(a)
    return a.copy()
''',
    "_expand": '''\
def _expand(x, sizes):
    """torch's expand: -1 keeps a dimension's size."""
    lead = len(sizes) - numpy.ndim(x)
    shape = tuple(numpy.shape(x)[i - lead] if n == -1 else n for i, n in enumerate(sizes))
    return numpy.broadcast_to(x, shape)
''',
    "_worth_blocking": '''\
def _worth_blocking(*args, min_bytes):
    """Whether an elementwise function should run _in_blocks: its array arguments are NumPy
    arrays of one shape, at least min_bytes each (the others numbers or None). Whole-array
    temporaries of that size stream through main memory at every step; a block's stay in
    cache. Dask and CuPy arrays, and arrays that broadcast, run whole."""
    shape, nbytes = None, 0
    for a in args:
        if type(a) is numpy.ndarray and a.ndim:
            if shape is None:
                shape = a.shape
            elif a.shape != shape:
                return False
            nbytes = max(nbytes, a.nbytes)
        elif not (a is None or isinstance(a, (float, int, numpy.generic, numpy.ndarray))):
            return False
    return nbytes >= min_bytes
''',
    "_in_blocks": '''\
def _in_blocks(fn, args, kwargs, block=65536):
    """fn(*args, **kwargs) for an elementwise fn, `block` elements at a time (arrays as
    _worth_blocking accepted them): each array result is written into its place in a
    whole-size array; a result that is not per-element (from number arguments only) is kept."""
    _sg_blocks = True   # each block's call skips the shape check (_check_shapes)
    big = next(a for a in args if type(a) is numpy.ndarray and a.ndim)
    shape, n = big.shape, big.size
    flat = [a.reshape(-1) if type(a) is numpy.ndarray and a.ndim else a for a in args]
    first = whole = first_leaves = None
    for start in range(0, n, block):
        stop = min(start + block, n)
        part = fn(*[a[start:stop] if type(a) is numpy.ndarray and a.ndim else a for a in flat],
                  **kwargs)
        leaves = list(_leaves(part))
        if whole is None:
            first, first_leaves = part, leaves
            whole = [numpy.empty(n, p.dtype) if type(p) is numpy.ndarray and p.ndim else None
                     for p in leaves]
        for w, p in zip(whole, leaves):
            if w is not None:
                w[start:stop] = p
    return _rebuild(first, iter([p if w is None else w.reshape(shape)
                                 for w, p in zip(whole, first_leaves)]))


def _leaves(t):
    """The non-tuple values of a nested tuple, depth first."""
    if isinstance(t, tuple):
        for item in t:
            yield from _leaves(item)
    else:
        yield t


def _rebuild(t, values):
    """A nested tuple shaped as t, holding the next of values for each leaf."""
    if isinstance(t, tuple):
        return tuple(_rebuild(item, values) for item in t)
    return next(values)
''',
}

_DEPENDS = {"_matmul_grad_a": ("_sum_to",), "_matmul_grad_b": ("_sum_to",),
            "_in_blocks": ("_worth_blocking",)}


from ..ops.linalg import LINALG_DEPENDS, LINALG_HELPERS  # noqa: E402

STRUCTURAL_HELPERS.update(LINALG_HELPERS)
_DEPENDS.update(LINALG_DEPENDS)


# the names called in printed code: `name(` not preceded by a word character or a dot
_CALLED = re.compile(r"(?<![\w.])(\w+)\(")


def required_helpers(source: str) -> tuple[str, ...]:
    """Names of the structural helpers the printed code calls, dependencies first."""
    wanted = set()
    called = set(_CALLED.findall(source))   # one pass over a large program's source
    for name in STRUCTURAL_HELPERS:
        if name in called:
            wanted.add(name)
            wanted.update(_DEPENDS.get(name, ()))
    return tuple(name for name in STRUCTURAL_HELPERS if name in wanted)
