"""The torch and JAX targets: the optimized routines as `torch.*` / `jax.numpy` code.

Both print the same optimized, CSE'd steps as the NumPy target, with the same formula
docstrings; only the spelling of each step differs:

- **torch**: elementwise steps are printed by `NumpyPrinter` and translated call by call into
  torch's names (`numpy.arctan2` -> `torch.atan2`; `numpy.maximum(x, 0.0)`, whose scalar torch
  refuses, -> `torch.clamp_min(x, 0.0)`), the stable primitives call torch's own accurate
  kernels where torch has one (`torch.sigmoid`, `torch.special.erfcx`, `torch.special.log_ndtr`,
  ...) and small torch helpers otherwise (`_softplus`, `_logsumexp`, `_taylor_at_zero`);
  structural ops have their own lowering table (`TORCH_STRUCTURAL`: `torch.sum(x, dim=...,
  keepdim=...)`, `g.sum_to_size(shape)`, `torch.gather`, ...). Everything runs on the inputs'
  device and dtype; no data leaves the device and no step branches on values, so
  `torch.compile(fullgraph=True)` accepts the functions.
- **jax**: jax.numpy mirrors NumPy's names, so the NumPy target's lines are reused with
  `numpy.` spelled `jnp.` (as the CUDA target spells it `cupy.`); helpers that write in place
  or branch on values have jit-safe versions here.

Generating either module imports neither framework (they are optional extras).

Rooms: the spelling of a line (`torch_text`, `jax_text`, `_jax_line`) is in
emit/framework_text.py; the torch statements (the structural lowering table, the in-place
pass, `torch_lines` and sg.scan's torch loops) in emit/torch_lines.py; the parts of both
targets' scan loops they share and the jax loops in emit/framework_scan.py. This module holds
the helpers the generated modules carry and renders them (`emit_torch`, `emit_jax`); it
re-exports the moved names.
"""
from __future__ import annotations

import re

from .._version import __version__
from ..errors import CompileError
from ..ops import stable
from . import (_constants_text, depends_context, framework_scan, release_after,
               routine_context, routine_interface)
from .framework_text import (  # noqa: F401  (re-exported: moved there)
    _call_span, _NUMBER, _is_number, TORCH_RENAMED, TORCH_SAME, TORCH_TENSOR_ARGS, TORCH_NATIVE,
    torch_text, jax_text, JAX_NATIVE, _jax_line)
from .torch_lines import (  # noqa: F401  (re-exported: moved there)
    _TorchShapes, _all_dims, _reduce, _arg_reduce, _sum_to, _unreduce, _permute, _permute_back,
    _squeeze, _unsqueeze, _getitem, _cumsum, _flip, _matmul_grad_a, _matmul_grad_b, _expand, _gather,
    _attrs_call, TORCH_STRUCTURAL, _numel, _INPLACE_BINARY, _TORCH_FRESH, _TORCH_INPLACE_UNARY,
    _TORCH_INPLACE_CLAMP, _FRESH_HELPERS, _Value, _broadcast, _torch_func_name, _InPlace,
    copy_ast, _dotted, _strip_negation, _one_minus_square, torch_in_place, _in_place_facts,
    torch_lines, _int_names, _float_ints, _torch_shape, _TORCH_DEFS, torch_scan_call,
    torch_scan_part_back, _torch_loop, _torch_define, torch_scan_helpers, _reachable)
from .render import render

# --------------------------------------------------------------------------- torch helpers
TORCH_HELPERS: dict[str, str] = {
    "_dtype_device": '''\
def _dtype_device(*tensors):
    """(the promoted dtype of the float arguments, the device of the first tensor)."""
    dtype = device = None
    for a in tensors:
        if isinstance(a, torch.Tensor):
            if dtype is None:
                dtype, device = a.dtype, a.device
            elif a.dtype is not dtype:      # (dtypes are singletons; promote only on a change)
                dtype = torch.promote_types(dtype, a.dtype)
    return (dtype if dtype is not None else torch.get_default_dtype()), device
''',
    "_records": '''\
def _records(*tensors):
    """Whether torch's autograd records the steps on these tensors."""
    return torch.is_grad_enabled() and any(
        isinstance(a, torch.Tensor) and a.requires_grad for a in tensors)
''',
    "_same_dtype": '''\
def _same_dtype(dtype, *tensors):
    """The float tensors in dtype (the promoted one), the others as they are."""
    return tuple(a.to(dtype) if isinstance(a, torch.Tensor) and a.dtype is not dtype and
                 a.is_floating_point() else a for a in tensors)
''',
    "_cast": '''\
def _cast(a, dtype, device):
    """a as a tensor of dtype (None: its own) on device (a Python number from a constant)."""
    if isinstance(a, torch.Tensor):
        return a if dtype is None or a.dtype == dtype else a.to(dtype)
    return torch.as_tensor(a, dtype=dtype, device=device)
''',
    "_softplus": '''\
def _softplus(x):
    """log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)): torch's softplus kernel with threshold
    37, i.e. log1p(exp(x)) up to x = 37 (exp does not overflow) and x above, where
    log1p(exp(-x)) < x * 2**-53 no longer changes x even in float64 -- the same value to
    within an ulp, at a fifth of torch.logaddexp's time (1e6 float32); its autograd
    derivative is torch's softplus_backward, sigmoid(x) also at 0 (a clamp's is 1 there)."""
    return torch.nn.functional.softplus(x, 1.0, 37.0)
''',
    "_tanh_softplus": '''\
def _tanh_softplus(x):
    """tanh(softplus(x)) = n / (n + 2), n = e * (e + 2), e = exp(min(x, 20)) (mish's gate);
    in place on its own temporaries unless torch's autograd records it."""
    if torch.is_grad_enabled() and x.requires_grad:
        e = torch.exp(torch.clamp_max(x, 20.0))
        n = e * (e + 2.0)
        return n / (n + 2.0)
    e = torch.clamp_max(x, 20.0).exp_()
    n = (e + 2.0).mul_(e)
    return n.div_(n + 2.0)
''',
    "_sigmoid2": '''\
def _sigmoid2(x):
    """(sigmoid(x), sigmoid(-x))."""
    return torch.sigmoid(x), torch.sigmoid(-x)
''',
    "_logsumexp": '''\
def _logsumexp(*terms):
    """log(sum(exp(terms))), shifted by the elementwise max (clipped to the finite range, as
    t - max is nan where the max is +-inf) so no exp overflows."""
    terms = [t if isinstance(t, torch.Tensor) else torch.tensor(float(t), dtype=torch.float64)
             for t in terms]   # a number: a 0-d tensor, which takes the others' dtype
    m = terms[0]
    for t in terms[1:]:
        m = torch.maximum(m, t)
    big = torch.finfo(m.dtype).max
    m = torch.clamp(m, -big, big)
    total = 0.0
    for t in terms:
        total = total + torch.exp(t - m)
    return m + torch.log(total)
''',
    "_log1mexp": '''\
def _log1mexp(x):
    """log(1 - exp(-x)) for x > 0: log(-expm1(-x)) below log(2), log1p(-exp(-x)) above."""
    return torch.where(x < 0.6931471805599453, torch.log(-torch.expm1(-x)),
                       torch.log1p(-torch.exp(-x)))
''',
    "_div_square": '''\
def _div_square(a, b):
    """a / b**2 without forming b*b when b is as large as a (b*b under- or overflows)."""
    if b.numel() >= a.numel():
        return a / b / b
    return a / (b * b)
''',
    "_taylor_at_zero": '''\
def _taylor_at_zero(u, far, coeffs, cut, parity=None):
    """A function with a removable singularity at 0: far(u) where |u| >= cut, its Taylor
    polynomial below (coeffs in u, or in u*u times u**parity)."""
    out = far(u)
    v = torch.clamp(u, -cut, cut)
    w = v * v if parity is not None else v
    p = coeffs[-1]
    for c in coeffs[-2::-1]:
        p = p * w + c
    if parity == 1:
        p = p * v
    return torch.where(torch.abs(u) < cut, p, out)
''',
    "_bessel_i": '''\
def _bessel_i(order, x, scaled):
    """I0 / I1 (order 0 / 1), times exp(-|x|) if scaled."""
    fn = {(0, False): torch.special.i0, (0, True): torch.special.i0e,
          (1, False): torch.special.i1, (1, True): torch.special.i1e}[(order, scaled)]
    return fn(x)
''',
    "_prod": '''\
def _prod(a, dims, keepdim):
    """The product over dims (an int, a tuple, or None: all), one dim at a time."""
    if dims is None:
        out = torch.prod(a)
        return out.reshape((1,) * a.dim()) if keepdim else out
    if isinstance(dims, int):
        dims = (dims,)
    for d in sorted({d % max(a.dim(), 1) for d in dims}, reverse=True):
        a = torch.prod(a, dim=d, keepdim=keepdim)
    return a
''',
    "_prod_others": '''\
def _prod_others(x, dims):
    """For each element, the product of the others along dims; exact when x holds zeros."""
    if x.dim() == 0:
        return torch.ones_like(x)
    if dims is None:
        dims = tuple(range(x.dim()))
    elif isinstance(dims, int):
        dims = (dims,)
    dims = tuple(sorted(d % x.dim() for d in dims))
    rest = tuple(d for d in range(x.dim()) if d not in dims)
    moved = torch.permute(x, rest + dims)
    flat = torch.reshape(moved, tuple(moved.shape[:len(rest)]) + (-1,))
    ones = torch.ones_like(flat[..., :1])
    before = torch.cumprod(torch.cat([ones, flat[..., :-1]], dim=-1), dim=-1)
    after = torch.flip(torch.cumprod(
        torch.cat([ones, torch.flip(flat, (-1,))[..., :-1]], dim=-1), dim=-1), (-1,))
    out = torch.reshape(before * after, moved.shape)
    order = rest + dims
    return torch.permute(out, tuple(sorted(range(len(order)), key=order.__getitem__)))
''',
    "_prod_others_vjp": '''\
def _prod_others_vjp(g, x, dims):
    """d/dx of sum(g * _prod_others(x, dims)): the eps-part of the product of the others in
    dual numbers x_k + eps*g_k, by prefix and suffix products (no division: exact with
    zeros); built out of place, so torch's autograd can differentiate it too."""
    if x.dim() == 0:
        return torch.zeros_like(x)
    if dims is None:
        dims = tuple(range(x.dim()))
    elif isinstance(dims, int):
        dims = (dims,)
    g = g.expand(x.shape)
    dims = tuple(sorted(d % x.dim() for d in dims))
    rest = tuple(d for d in range(x.dim()) if d not in dims)
    order = rest + dims
    moved = torch.permute(x, order)
    fx = torch.reshape(moved, tuple(moved.shape[:len(rest)]) + (-1,))
    fg = torch.reshape(torch.permute(g, order), fx.shape)
    n = fx.shape[-1]
    one, zero = torch.ones_like(fx[..., 0]), torch.zeros_like(fx[..., 0])
    pv, pe = [one], [zero]            # products of the elements before j: value, eps part
    for k in range(1, n):
        pe.append(pe[-1] * fx[..., k - 1] + pv[-1] * fg[..., k - 1])
        pv.append(pv[-1] * fx[..., k - 1])
    sv, se = [one], [zero]            # after j, built from the end
    for j in range(n - 2, -1, -1):
        se.append(se[-1] * fx[..., j + 1] + sv[-1] * fg[..., j + 1])
        sv.append(sv[-1] * fx[..., j + 1])
    sv.reverse()
    se.reverse()
    out = torch.stack([pv[j] * se[j] + pe[j] * sv[j] for j in range(n)], dim=-1)
    out = torch.reshape(out, moved.shape)
    return torch.permute(out, tuple(sorted(range(len(order)), key=order.__getitem__)))
''',
    "_unreduce": '''\
def _unreduce(g, shape, dims, keepdim, mean=False):
    """Put reduced dims back into g and broadcast it to shape (the adjoint of sum / mean)."""
    shape = tuple(shape)
    if dims is None:
        dims = tuple(range(len(shape)))
    elif isinstance(dims, int):
        dims = (dims,)
    dims = sorted({d % max(len(shape), 1) for d in dims})
    if mean:
        count = 1
        for d in dims:
            count *= shape[d] if len(shape) else 1
        g = g / count
    if not keepdim and len(shape):
        for d in dims:
            g = torch.unsqueeze(g, d)
    return g.expand(shape)
''',
    "_index_back": '''\
def _index_back(g, idx, shape, dim, keepdim):
    """Zeros of shape holding g at the arg-max / arg-min indices along dim."""
    if not len(shape):
        return g
    if not keepdim:
        g = torch.unsqueeze(g, dim)
        idx = torch.unsqueeze(idx, dim)
    return torch.zeros(shape, dtype=g.dtype, device=g.device).scatter(dim, idx, g)
''',
    "_take_dim": '''\
def _take_dim(u, idx, dim, keepdim):
    """u at the indices along dim (the adjoint of _index_back)."""
    if u.dim() == 0:
        return u
    if not keepdim:
        idx = torch.unsqueeze(idx, dim)
    out = torch.gather(u, dim, idx)
    return out if keepdim else torch.squeeze(out, dim)
''',
    "_matmul_grad_a": '''\
def _matmul_grad_a(g, a, b):
    """d<g, a @ b>/da under matmul's 1-D and batch-broadcast rules."""
    if b.dim() == 1:
        g = torch.unsqueeze(g, -1)
    if a.dim() == 1:
        g = torch.unsqueeze(g, -2)
    b2 = torch.reshape(b, (-1, 1)) if b.dim() == 1 else b
    grad = torch.matmul(g, b2.mT)
    if a.dim() == 1:
        grad = torch.squeeze(grad, -2)
    return grad.sum_to_size(a.shape)
''',
    "_matmul_grad_b": '''\
def _matmul_grad_b(g, a, b):
    """d<g, a @ b>/db under matmul's 1-D and batch-broadcast rules."""
    if b.dim() == 1:
        g = torch.unsqueeze(g, -1)
    if a.dim() == 1:
        g = torch.unsqueeze(g, -2)
    a2 = torch.reshape(a, (1, -1)) if a.dim() == 1 else a
    grad = torch.matmul(a2.mT, g)
    if b.dim() == 1:
        grad = torch.squeeze(grad, -1)
    return grad.sum_to_size(b.shape)
''',
    "_index_put_zeros": '''\
def _index_put_zeros(g, shape, index):
    """Zeros of shape with g written at a basic index (the adjoint of indexing)."""
    out = torch.zeros(shape, dtype=g.dtype, device=g.device)
    out[index] = g
    return out
''',
    "_getitem_negative_step": '''\
def _getitem_negative_step(x, index):
    """x[index] where a slice steps backwards (torch slices only step forwards): the slice
    of the flipped dim."""
    items = index if isinstance(index, tuple) else (index,)
    fixed, dim = [], 0
    for s in items:
        if isinstance(s, slice) and s.step is not None and s.step < 0:
            n = x.shape[dim]
            start, stop, step = s.indices(n)
            x = torch.flip(x, (dim,))
            s = slice(n - 1 - start, n - 1 - stop if stop >= -1 else None, -step)
        fixed.append(s)
        dim += 0 if s is None else 1
    return x[tuple(fixed)]
''',
    "_expand_dims": '''\
def _expand_dims(x, dims):
    """numpy.expand_dims: new size-1 dims at the positions dims of the result."""
    if isinstance(dims, int):
        dims = (dims,)
    n = x.dim() + len(dims)
    for d in sorted(d % n for d in dims):
        x = torch.unsqueeze(x, d)
    return x
''',
    "_inverse_permutation": '''\
def _inverse_permutation(dims):
    return tuple(sorted(range(len(dims)), key=list(dims).__getitem__))
''',
    "_untile": '''\
def _untile(g, shape, reps):
    """The sum of the tiled copies in g, in shape (the adjoint of torch.tile)."""
    shape, reps = tuple(shape), tuple(reps)
    n = max(len(shape), len(reps))
    full = (1,) * (n - len(shape)) + shape
    reps = (1,) * (n - len(reps)) + reps
    split = tuple(k for pair in zip(reps, full) for k in pair)
    total = torch.sum(torch.reshape(g, split), dim=tuple(range(0, 2 * n, 2)))
    return torch.reshape(total, shape)
''',
    "_repeat_interleave_sum": '''\
def _repeat_interleave_sum(g, shape, repeats, dim):
    """Each run of repeats copies in g summed (the adjoint of repeat_interleave)."""
    shape = tuple(shape)
    if dim is None:
        return torch.reshape(torch.sum(torch.reshape(g, (-1, repeats)), dim=1), shape)
    d = dim % len(shape)
    split = shape[:d] + (shape[d], repeats) + shape[d + 1:]
    return torch.sum(torch.reshape(g, split), dim=d + 1)
''',
    "_take_along_dim": '''\
def _take_along_dim(x, idx, dim):
    """torch.take_along_dim, negative indices counting from the end."""
    idx = torch.where(idx < 0, idx + x.shape[dim], idx)
    return torch.take_along_dim(x, idx, dim)
''',
    "_gather_back": '''\
def _gather_back(g, idx, shape, dim):
    """Zeros of shape with g added at the places gather read (repeated indices add up)."""
    shape = tuple(shape)
    if not len(shape):
        return torch.sum(g) + torch.zeros(shape, dtype=g.dtype, device=g.device)
    d = dim % len(shape)
    idx = torch.where(idx < 0, idx + shape[d], idx).expand(g.shape)
    full = tuple(n if i == d else max(n, m) for i, (n, m) in enumerate(zip(shape, g.shape)))
    out = torch.zeros(full, dtype=g.dtype, device=g.device).scatter_add(d, idx, g)
    return out.sum_to_size(shape)
''',
}

_TORCH_DEPENDS = {}


def _required(source, helpers, depends):
    wanted = set()
    for name in helpers:
        if re.search(rf"(?<![\w.]){name}\(", source):
            wanted.add(name)
            wanted.update(depends.get(name, ()))
    return [name for name in helpers if name in wanted]


def _torch_routine(routine, doc_title):
    ctx = routine_context(routine, doc_title)
    signature, float_args, returns = routine_interface(
        routine, cast_float="_cast({}, dtype, device)", cast_other="_cast({}, None, device)")
    ctx.update({
        "dtype_args": ", ".join(float_args),
        "returns": returns,
        "returns_text": "(" + " ".join(f"{r}," for r in returns) + ")",
    })
    _torch_bodies(ctx, routine, float_args)
    return ctx


def _torch_bodies(ctx, routine, float_args, outputs=None, known=None):
    """ctx["lines"]: the routine's statements with in-place steps (torch_in_place); where any
    step is in place, ctx["recorded"]: the lines without them, for `_<name>_recorded`, which
    the routine calls when torch's autograd records (an in-place step would overwrite a value
    an earlier step saved for its backward), and ctx["same_dtype"]: the float arguments cast
    to one dtype first (an in-place step keeps its temporary's dtype, where a new tensor
    would promote)."""
    keep = set(routine.returns) | set(routine.args)
    plain = torch_lines(routine, outputs=outputs, known=known)
    # what each statement reads last (the last statement's too: release_after leaves the
    # return to free those, hence the line after it)
    dying = [set(d) for d in release_after(plain + [("_", "", "")], keep)[:-1]]
    fast = torch_lines(routine, outputs=outputs, in_place=True, known=known, dying=dying)
    ctx["lines"] = [(t, c, m, d) for (t, c, m), d in zip(fast, release_after(fast, keep))]
    ctx["recorded"] = None
    ctx["same_dtype"] = None
    if fast != plain:
        ctx["recorded"] = [(t, c, m, d) for (t, c, m), d in
                           zip(plain, release_after(plain, keep))]
        names = list(routine.args) + [f"{p}={p}" for p in routine.params]
        ctx["call_args"] = ", ".join(names)
        ctx["record_args"] = ", ".join(routine.args)
        if len(float_args) > 1:
            ctx["same_dtype"] = (f"{', '.join(float_args)}, = _same_dtype(dtype, "
                                 f"{', '.join(float_args)})")


def _cast_returns(names, outputs):
    return ["None" if name is None else
            (f"_cast({name}, dtype, device)" if node.dtype == "float" else
             f"_cast({name}, None, device)") for name, node in zip(names, outputs)]


def _torch_saving_contexts(plan):
    """forward_saving / backward_saved (see _saving_plan.saving_plan) printed for torch: the
    NumPy contexts (signatures, docstrings) with torch lines and returns."""
    from . import saving_contexts

    fctx, bctx = saving_contexts(plan)
    f, b = plan.forward, plan.backward
    known = ({}, set())   # the shapes and float names of the saved values, from forward_saving
    for ctx, routine, outputs in ((fctx, f, f.returns[:plan.n_outputs]), (bctx, b, None)):
        if "numpy" in ctx["dtype_args"]:
            ctx["dtype_args"] = ""
        _torch_bodies(ctx, routine, [a for a in ctx["dtype_args"].split(", ") if a],
                      outputs=outputs, known=known)
        saved = set(plan.saved)
        known = ({k: v for k, v in known[0].items() if k in saved},
                 {k for k in known[1] if k in saved})
    outs = _cast_returns(f.returns[:plan.n_outputs], f.graph.outputs)
    saved = list(plan.saved)
    fctx["returns_text"] = (f"(({' '.join(o + ',' for o in outs)}), "
                            f"({' '.join(v + ',' for v in saved)}))")
    bouts = _cast_returns(b.returns, b.graph.outputs)
    bctx["returns_text"] = "(" + " ".join(f"{r}," for r in bouts) + ")"
    return fctx, bctx


def emit_torch(program) -> str:
    """The standalone torch module of a program (imports only torch); with the program's
    saving plan, also forward_saving / backward_saved (sg.to_torch keeps the saved values
    for the backward, as torch's eager autograd keeps its intermediates)."""
    fwd = _torch_routine(program.forward, "Forward")
    bwd = _torch_routine(program.backward, "Backward: the vector-Jacobian product")
    routines = [fwd, bwd]
    if program.saving is not None:
        routines += list(_torch_saving_contexts(program.saving))
    body = "\n".join([c for r in routines for _, c, _, _ in r["lines"]]
                     + [r["returns_text"] for r in routines] + ["_dtype_device("]
                     + [f"{h}(" for r in routines if r["recorded"] is not None
                        for h in ("_records", "_same_dtype")])
    loops = torch_scan_helpers(body)   # sg.scan's loop functions
    body = "\n".join([body] + loops)
    missing = [n for n in re.findall(r"(?<![\w.])(_[a-z]\w*)\(", body)
               if n not in TORCH_HELPERS and not n.startswith("_scan_")]
    if missing:
        raise CompileError(f"target torch: no torch version of the helper {missing[0]} yet")
    helpers = loops + [TORCH_HELPERS[h] for h in _required(body, TORCH_HELPERS, _TORCH_DEPENDS)]
    return _render("torch", program, fwd, bwd, helpers, routines)


def _render(target, program, fwd, bwd, helpers, routines=None):
    rewrites = list(dict.fromkeys(program.forward.rewrites + program.backward.rewrites))
    return render(f"{target}/module.py.jinja", {
        "version": __version__,
        "name": program.name,
        "source": program.source,
        "options": program.options,
        "constants": _constants_text(program.constants),
        "target": target,
        "forward": fwd,
        "backward": bwd,
        "routines": routines or [fwd, bwd],
        "rewrites": rewrites,
        "helpers": helpers,
        "n_outputs": len(program.forward.returns),
        "inputs": list(program.forward.args),
        "depends": depends_context(program),
    })


# --------------------------------------------------------------------------- JAX
JAX_HELPERS: dict[str, str] = {
    "_sigmoid2": '''\
def _sigmoid2(x):
    """(sigmoid(x), sigmoid(-x)) from one exp(-|x|) and one division, as the NumPy module (XLA
    computes each jax.nn.sigmoid with its own exp: gelu_tanh's gradient at 1e6 float32 took
    5.28 ms so, 4.60 ms shared, against 4.50 ms for jax.grad of the naive tanh form)."""
    t = jnp.exp(-jnp.abs(x))
    r = 1.0 / (1.0 + t)
    tr = t * r
    return jnp.where(x >= 0, r, tr), jnp.where(x <= 0, r, tr)
''',
    "_erfc_exp": '''\
def _erfc_exp(z, e):
    """erfc(z) given e = exp(-z**2), which the same line computes already (XLA merges the two
    exps): float32 erfc(z) = e * t * P(t), t = 1/(1 + |z|/2), P a degree-10 fit of
    erfcx(|z|)/t (max relative error 1.2e-8 on [0, inf)), and 2 - that for z < 0. One exp is
    spent where XLA's erfc spends its own exp and an erf: gelu_erf's gradient at 1e6 float32
    took 1.59 ms with XLA's erfc, 0.97 ms so, 0.95 ms for jax.grad of the naive 1 + erf.
    float64 (the fit is float32-accurate only) keeps XLA's erfc."""
    if jnp.result_type(z, e) != jnp.float32:
        return jax.scipy.special.erfc(z)
    t = 1.0 / (1.0 + 0.5 * jnp.abs(z))
    p = 0.04319931335342259
    p = p * t + -0.23475349725926314
    p = p * t + 0.49373854207852835
    p = p * t + -0.45502725173111086
    p = p * t + 0.13221674409425407
    p = p * t + -0.059229939911195656
    p = p * t + 0.09346785079089873
    p = p * t + 0.17531503405777504
    p = p * t + 0.24688466389751035
    p = p * t + 0.28209374997862097
    p = p * t + 0.28209479523667563
    r = e * (t * p)
    return jnp.where(z < 0, 2.0 - r, r)
''',
    "_asarray": '''\
def _asarray(a, dtype=None):
    return jnp.asarray(a, dtype=dtype)
''',
    "_sum": '''\
def _sum(a, axis, keepdims):
    return jnp.sum(a, axis=axis, keepdims=keepdims)
''',
    "_mean": '''\
def _mean(a, axis, keepdims):
    return jnp.mean(a, axis=axis, keepdims=keepdims)
''',
    "_max": '''\
def _max(a, axis, keepdims):
    return jnp.max(a, axis=axis, keepdims=keepdims)
''',
    "_min": '''\
def _min(a, axis, keepdims):
    return jnp.min(a, axis=axis, keepdims=keepdims)
''',
    "_sum_to": '''\
def _sum_to(a, shape):
    """Sum a broadcast gradient back down to shape (the adjoint of broadcasting)."""
    shape = tuple(shape)
    have = jnp.shape(a)
    if have == shape:
        return a
    lead = len(have) - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and have[lead + i] != 1)
    return jnp.reshape(jnp.sum(a, axis=axes, keepdims=True), shape)
''',
    "_unreduce": '''\
def _unreduce(g, shape, dims, keepdim, mean=False):
    """Put reduced dims back into g and broadcast it to shape (the adjoint of sum / mean)."""
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
    if not keepdim and len(shape):
        g = jnp.expand_dims(g, tuple(sorted(dims)))
    return jnp.broadcast_to(g, shape)
''',
    "_index_back": '''\
def _index_back(g, idx, shape, dim, keepdim):
    """Zeros of shape holding g at the arg-max / arg-min indices along dim."""
    if not len(shape):
        return g
    if not keepdim:
        g = jnp.expand_dims(g, dim)
        idx = jnp.expand_dims(idx, dim)
    d = dim % len(shape)
    at = jnp.arange(shape[d]).reshape((-1,) + (1,) * (len(shape) - d - 1))
    return jnp.where(at == idx, g, jnp.zeros((), g.dtype))
''',
    "_take_dim": '''\
def _take_dim(u, idx, dim, keepdim):
    """u at the indices along dim (the adjoint of _index_back)."""
    if jnp.ndim(u) == 0:
        return u
    if not keepdim:
        idx = jnp.expand_dims(idx, dim)
    out = jnp.take_along_axis(u, idx, axis=dim)
    return out if keepdim else jnp.squeeze(out, dim)
''',
    "_prod_others_vjp": '''\
def _prod_others_vjp(g, x, dims):
    """d/dx of sum(g * _prod_others(x, dims)): the eps-part of the product of the others in
    dual numbers x_k + eps*g_k, by prefix and suffix products (no division: exact with
    zeros); built out of place (the NumPy helper writes in place: not jit-safe)."""
    if jnp.ndim(x) == 0:
        return jnp.zeros_like(x)
    if dims is None:
        dims = tuple(range(jnp.ndim(x)))
    elif isinstance(dims, int):
        dims = (dims,)
    g = jnp.broadcast_to(g, jnp.shape(x))
    dims = tuple(sorted(d % jnp.ndim(x) for d in dims))
    rest = tuple(d for d in range(jnp.ndim(x)) if d not in dims)
    order = rest + dims
    moved = jnp.transpose(x, order)
    fx = jnp.reshape(moved, tuple(moved.shape[:len(rest)]) + (-1,))
    fg = jnp.reshape(jnp.transpose(g, order), fx.shape)
    n = fx.shape[-1]
    one, zero = jnp.ones_like(fx[..., 0]), jnp.zeros_like(fx[..., 0])
    pv, pe = [one], [zero]            # products of the elements before j: value, eps part
    for k in range(1, n):
        pe.append(pe[-1] * fx[..., k - 1] + pv[-1] * fg[..., k - 1])
        pv.append(pv[-1] * fx[..., k - 1])
    sv, se = [one], [zero]            # after j, built from the end
    for j in range(n - 2, -1, -1):
        se.append(se[-1] * fx[..., j + 1] + sv[-1] * fg[..., j + 1])
        sv.append(sv[-1] * fx[..., j + 1])
    sv.reverse()
    se.reverse()
    out = jnp.stack([pv[j] * se[j] + pe[j] * sv[j] for j in range(n)], axis=-1)
    out = jnp.reshape(out, moved.shape)
    return jnp.transpose(out, tuple(sorted(range(len(order)), key=order.__getitem__)))
''',
    "_index_put_zeros": '''\
def _index_put_zeros(g, shape, index):
    """Zeros of shape with g written at a basic index (the adjoint of indexing)."""
    return jnp.zeros(shape, dtype=jnp.result_type(g)).at[index].set(g)
''',
    "_argsort": '''\
def _argsort(x, dim, descending):
    """The indices that sort x along dim, stably (descending: largest first)."""
    if jnp.ndim(x) == 0:
        return jnp.zeros((), dtype=int)
    return jnp.argsort(x, axis=dim, stable=True, descending=descending)
''',
    "_gather": '''\
def _gather(x, idx, dim, sliced, what):
    """x at the indices idx along dim (torch.gather / torch.take_along_dim)."""
    if jnp.ndim(x) == 0:
        return jnp.reshape(jnp.take(jnp.reshape(x, (1,)), jnp.reshape(idx, (-1,))),
                           jnp.shape(idx))
    d = dim % jnp.ndim(x)
    if sliced:
        x = x[tuple(slice(None) if i == d else slice(0, k)
                    for i, k in enumerate(jnp.shape(idx)))]
    idx = jnp.where(idx < 0, idx + jnp.shape(x)[d], idx)
    return jnp.take_along_axis(x, idx, axis=d)
''',
    "_gather_back": '''\
def _gather_back(g, idx, shape, dim):
    """Zeros of shape with g added at the places _gather read (repeated indices add up)."""
    shape = tuple(shape)
    if not len(shape):
        return jnp.sum(g) + jnp.zeros(shape, dtype=jnp.result_type(g))
    d = dim % len(shape)
    out_shape = jnp.shape(g)
    index = []
    for i, n in enumerate(shape):
        if i == d:
            index.append(jnp.where(idx < 0, idx + n, idx))
        else:
            at = jnp.arange(out_shape[i]) if n != 1 else jnp.zeros(out_shape[i], int)
            index.append(jnp.reshape(at, (-1,) + (1,) * (len(shape) - i - 1)))
    return jnp.zeros(shape, dtype=jnp.result_type(g)).at[tuple(index)].add(g)
''',
    "_diagonal_back": '''\
def _diagonal_back(g, shape, offset, dim1, dim2):
    """Zeros of shape with g on the diagonal (offset, dim1, dim2)."""
    out = jnp.zeros(shape, dtype=jnp.result_type(g))
    view = jnp.moveaxis(out, (dim1, dim2), (-2, -1))
    k = jnp.shape(g)[-1]
    rows = jnp.arange(k) + max(-offset, 0)
    view = view.at[..., rows, rows + offset].set(g)
    return jnp.moveaxis(view, (-2, -1), (dim1, dim2))
''',
    "_diag_embed": '''\
def _diag_embed(x, offset, dim1, dim2):
    """torch.diag_embed: x's last dim on the diagonal (offset) of new dims dim1, dim2."""
    shape = jnp.shape(x)
    n = shape[-1] + abs(offset)
    out = jnp.zeros(shape[:-1] + (n, n), dtype=jnp.result_type(x))
    rows = jnp.arange(shape[-1]) + max(-offset, 0)
    out = out.at[..., rows, rows + offset].set(x)
    return jnp.moveaxis(out, (-2, -1), (dim1, dim2))
''',
    "_bessel_i": '''\
def _bessel_i(order, x, scaled):
    """I0 / I1 (order 0 / 1), times exp(-|x|) if scaled."""
    fn = {(0, False): jax.scipy.special.i0, (0, True): jax.scipy.special.i0e,
          (1, False): jax.scipy.special.i1, (1, True): jax.scipy.special.i1e}[(order, scaled)]
    return fn(x)
''',
}

# helpers whose NumPy source is jit-safe once spelled jnp (no in-place writes, no branch on
# values); a NumPy helper's value-dependent shortcut (`if isinstance(y, numpy.ndarray) and
# not (...).any(): return ...`) is dropped
_JAX_TRANSLATED = ("_tanh_softplus", "_logsumexp", "_log1mexp", "_div_square",
                   "_taylor_at_zero", "_prod_others", "_matmul_grad_a", "_matmul_grad_b",
                   "_untile", "_repeat_interleave_sum", "_expand")
_JAX_DEPENDS = {"_matmul_grad_a": ("_sum_to",), "_matmul_grad_b": ("_sum_to",)}
_SHORTCUT = re.compile(r"\n( +)if isinstance\([^\n]*numpy\.ndarray\) and not [^\n]*:\n\1 +return"
                       r"[^\n]*\n")


def _jax_helpers():
    from .helpers import STRUCTURAL_HELPERS

    helpers = dict(JAX_HELPERS)
    for name in _JAX_TRANSLATED:
        source = stable.NUMPY_HELPERS.get(name) or STRUCTURAL_HELPERS[name]
        helpers[name] = jax_text(_SHORTCUT.sub("\n", source))
    return helpers


_ERFC_CALL = re.compile(r"(?<![\w.])_erfc\(")
_EXP_CALL = re.compile(r"(?<![\w.])numpy\.exp\(")


def _calls(pattern, code):
    """(start, end, argument text) of each call matched by pattern in a line."""
    out = []
    for m in pattern.finditer(code):
        depth, i = 1, m.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(code[i], 0)
            i += 1
        out.append((m.start(), i, code[m.end():i - 1]))
    return out


def _equal_values(a, b, defined):
    """Whether two printed NumPy expressions are the same function of the routine's inputs
    (the earlier lines they read substituted), checked at three random points to 1e-12.
    defined: target name -> its line's code."""
    import random

    import sympy

    def parse(code, depth=0):
        code = re.sub(r"(?<![\w.])numpy\.", "", code)
        names = set(re.findall(r"(?<![\w.])[A-Za-z_]\w*(?!\w|\s*\()", code))
        expr = sympy.sympify(code, locals={n: sympy.Symbol(n) for n in names} | {"exp": sympy.exp})
        if depth < 50:
            expr = expr.subs({sympy.Symbol(n): parse(defined[n], depth + 1)
                              for n in names if n in defined})
        return expr

    try:
        ea, eb = parse(a), parse(b)
        free = sorted(ea.free_symbols | eb.free_symbols, key=str)
        rng = random.Random(0)
        for _ in range(3):
            point = {s: rng.uniform(0.3, 1.7) for s in free}
            va, vb = complex(ea.evalf(subs=point)), complex(eb.evalf(subs=point))
            if abs(va - vb) > 1e-12 * max(1.0, abs(va)):
                return False
        return True
    except (sympy.SympifyError, SyntaxError, TypeError, ValueError, AttributeError, NameError,
            RecursionError):   # what SymPy cannot read or evaluate (a helper call): not shared
        return False


def _share_erfc_exp(lines):
    """`_erfc(u)` in a line that also computes `numpy.exp(w)` with w = -u**2 becomes
    `_erfc_exp(u, numpy.exp(w))`: the same exp text, so XLA computes it once and the erfc
    costs a rational in |u| (see the helper). The derivative of x*erfc(u) is such a line
    (gelu's, the normal cdf's). Only lines holding both calls are read with SymPy."""
    defined, out = {}, []
    for t, c, m, d in lines:
        if "_erfc(" in c and "numpy.exp(" in c:
            exps = _calls(_EXP_CALL, c)
            for start, end, arg in reversed(_calls(_ERFC_CALL, c)):
                match = next((e for e in exps
                              if _equal_values(e[2], f"-({arg})**2", defined)), None)
                if match is not None:
                    c = f"{c[:start]}_erfc_exp({arg}, {c[match[0]:match[1]]}){c[end:]}"
        out.append((t, c, m, d))
        if re.fullmatch(r"[A-Za-z_]\w*", str(t)):
            defined[str(t)] = c
    return out


def _shared_reciprocals(lines, args, skip=frozenset()):
    """Divisions by a name (an input or an earlier step) that the routine divides by at least
    RECIPROCAL_MIN times become products with its reciprocal, computed once right after the
    name is defined (`x / h` -> `x * h_inv`, `1/h` -> `h_inv`).

    Why, for JAX only: XLA prices a float division as expensive, so it never duplicates one
    into several fusions; each division read by several steps ends a fusion, and the cheap
    values around it (sin, cos, products) are then recomputed in every fusion that reads
    them. oscillator8's backward had 36 divisions in 39 fusions (jax.jit(jax.grad) of the
    naive forward: 19 in 28); with its 5 shared denominators as reciprocals, 7 in 21, and
    the cell went from 1.18-1.27x to 0.83-0.85x jit(grad) (docs/pytorch-and-jax.md).
    Numerics: x * (1/h) is within an ulp or so of x / h, and the IEEE special values agree
    (1/0 = inf, 0 * inf = nan = 0/0, x * (1/inf) = 0); they differ only where 1/h is
    subnormal (|h| > 2**126 in float32), which XLA on CPU flushes to zero. `skip`: names
    left alone (integer ones: 1/n of an int64 n is float64, and x * (1/n) would promote a
    float32 x where x / n does not)."""
    import ast

    parsed, defined, count, names, blocked = [], {}, {}, set(args), set()
    for k, (t, c, m, d) in enumerate(lines):
        try:
            tree = ast.parse(c, mode="eval")
        except SyntaxError:
            tree = None
        parsed.append(tree)
        t = str(t)
        names.add(t)
        if re.fullmatch(r"[A-Za-z_]\w*", t):
            defined[t] = k if t not in defined else None    # (defined twice: leave it)
        if tree is None:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                names.add(node.id)
            elif isinstance(node, ast.Lambda):    # its parameters are not the routine's names
                blocked.update(a.arg for a in node.args.args)
            elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and \
                    isinstance(node.right, ast.Name):
                count[node.right.id] = count.get(node.right.id, 0) + 1
    shared = {}
    for n, times in count.items():
        # an input or a step defined once (an input redefined by a step: left alone)
        if times < RECIPROCAL_MIN or n in blocked or n in skip or \
                not (n not in defined if n in args else defined.get(n) is not None):
            continue
        inv = f"{n}_inv"
        while inv in names:
            inv += "_"
        names.add(inv)
        shared[n] = inv
    if not shared:
        return lines

    class Rewrite(ast.NodeTransformer):
        changed = False

        def visit_BinOp(self, node):
            self.generic_visit(node)
            if isinstance(node.op, ast.Div) and isinstance(node.right, ast.Name) and \
                    node.right.id in shared:
                self.changed = True
                inv = ast.Name(id=shared[node.right.id], ctx=ast.Load())
                if isinstance(node.left, ast.Constant) and node.left.value == 1 and \
                        not isinstance(node.left.value, bool):
                    return inv
                return ast.BinOp(left=node.left, op=ast.Mult(), right=inv)
            return node

    after = {}    # line index (-1: before the first) -> reciprocals defined after it
    for n, inv in shared.items():
        after.setdefault(defined[n] if n not in args else -1, []).append((inv, n))
    out = [(inv, f"1/{n}", "", []) for inv, n in after.get(-1, [])]
    for k, ((t, c, m, d), tree) in enumerate(zip(lines, parsed)):
        if tree is not None:
            rewrite = Rewrite()
            tree = rewrite.visit(tree)
            if rewrite.changed:
                c = ast.unparse(ast.fix_missing_locations(tree))
        out.append((t, c, m, d))
        out.extend((inv, f"1/{n}", "", []) for inv, n in after.get(k, []))
    return out


# a name divided by this many times or more is multiplied by its reciprocal (see above)
RECIPROCAL_MIN = 2


def _non_float_names(routine):
    """The routine's integer and bool values: inputs, steps of such a node, and CSE temps
    that read only those."""
    names = set(_int_names(routine))
    for i, node in enumerate(routine.graph.inputs):
        if node.dtype != "float" and len(routine.args) == len(routine.graph.inputs):
            names.add(routine.names.get(id(node)) or routine.args[i])
    for step in routine.steps:
        if step.node is not None:
            if step.node.dtype != "float":
                names.add(step.target)
        elif step.expr is not None:
            free = {str(x) for x in getattr(step.expr, "free_symbols", ())}
            if free and free <= names:
                names.add(step.target)
    return names


def _jax_routine(routine, doc_title):
    ctx = routine_context(routine, doc_title)
    lines = _shared_reciprocals(_share_erfc_exp(ctx["lines"]), set(routine.args),
                                _non_float_names(routine))
    ctx["lines"] = [(t, _jax_line(c), m, d) for t, c, m, d in lines]
    ctx["returns"] = [_jax_line(r) for r in ctx["returns"]]
    ctx["returns_text"] = _jax_line(ctx["returns_text"])
    ctx["dtype_args"] = _jax_line(ctx["dtype_args"])
    return ctx


def emit_jax(program) -> str:
    """The standalone JAX module of a program (imports only jax and jax.numpy)."""
    fwd = _jax_routine(program.forward, "Forward")
    bwd = _jax_routine(program.backward, "Backward: the vector-Jacobian product")
    routines = [fwd, bwd]
    body = "\n".join([c for r in routines for _, c, _, _ in r["lines"]]
                     + [r["returns_text"] for r in routines])
    scan = framework_scan
    loops = scan.jax_scan_helpers(body)   # sg.scan's loop functions (jax.lax.scan)
    body = "\n".join([body] + loops)
    available = _jax_helpers()
    if loops:
        available["_full"] = scan.JAX_FULL
    names = _required(body, available, _JAX_DEPENDS)
    missing = [n for n in re.findall(r"(?<![\w.])(_[a-z]\w*)\(", body)
               if n not in available and n not in JAX_NATIVE and not n.startswith("_scan_")
               and n != "_step"]
    if missing:
        raise CompileError(f"target jax: no JAX version of the helper {missing[0]} yet")
    return _render("jax", program, fwd, bwd, loops + [available[n] for n in names])
