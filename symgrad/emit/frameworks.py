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
"""
from __future__ import annotations

import ast
import re

import sympy

from .._version import __version__
from ..errors import CompileError
from ..ops import stable
from ..ops.structural import _concrete
from ..ops.table import numpy_aliases
from . import (_constants_text, _static_shapes, depends_context, release_after,
               routine_context, routine_interface)
from .printers import NumpyPrinter
from .render import render

# --------------------------------------------------------------------------- text helpers


def _call_span(code, start):
    """(index after the matching ')', [argument texts]) of the call whose '(' is at start."""
    depth, args, last = 0, [], start + 1
    i = start
    while i < len(code):
        ch = code[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                args.append(code[last:i].strip())
                return i + 1, args
        elif ch == "," and depth == 1:
            args.append(code[last:i].strip())
            last = i + 1
        i += 1
    raise CompileError(f"unbalanced parentheses in generated code: {code!r}")


_NUMBER = re.compile(r"^\(?-?(\d+\.?\d*(e[-+]?\d+)?|inf|nan)\)?$|^-?torch\.(inf|nan|pi)$")


def _is_number(text):
    return bool(_NUMBER.match(text.replace(" ", "")))


# numpy names torch spells differently: the op table's numpy aliases (arcsin -> torch.asin) and
# these; every other name must exist under the same name in torch (TORCH_SAME) or the
# translation refuses it
TORCH_RENAMED = {
    **{alias: f"torch.{name}" for alias, name in numpy_aliases().items()},
    "rint": "torch.round", "power": "torch.pow", "fabs": "torch.abs",
    "mod": "torch.remainder", "true_divide": "torch.div",
    "multiply": "torch.mul", "concatenate": "torch.cat",
}
TORCH_SAME = frozenset(
    "exp log log1p expm1 log2 log10 exp2 sqrt sin cos tan sinh cosh tanh abs sign square where "
    "isnan isfinite isinf floor ceil trunc copysign hypot logaddexp logaddexp2 fmod remainder "
    "floor_divide logical_and logical_or logical_not logical_xor heaviside sinc clip round "
    "signbit nextafter reciprocal negative deg2rad rad2deg less greater less_equal "
    "greater_equal equal not_equal matmul nan inf pi".split())

# functions whose arguments torch takes as tensors only
TORCH_TENSOR_ARGS = frozenset(
    "arctan2 hypot logaddexp logaddexp2 nextafter heaviside copysign fmod remainder".split())

# numpy helpers of the stable primitives that torch computes itself, accurately
TORCH_NATIVE = {
    "_sigmoid": "torch.sigmoid", "_erf": "torch.erf", "_erfc": "torch.erfc",
    "_erfcx": "torch.special.erfcx", "_log_ndtr": "torch.special.log_ndtr",
    "_lgamma": "torch.lgamma", "_digamma": "torch.digamma", "_polygamma": "torch.polygamma",
    "_erfinv": "torch.erfinv",
}


def torch_text(code: str) -> str:
    """NumPy-printed code spelled with torch's functions (see the module docstring)."""
    out, i = [], 0
    pattern = re.compile(r"(?<![\w.])(numpy\.(\w+)|(_\w+)\()")
    while True:
        m = pattern.search(code, i)
        if m is None:
            out.append(code[i:])
            return "".join(out)
        out.append(code[i:m.start()])
        if m.group(3) == "_hypot":          # the helper of numpy.hypot: torch.hypot itself
            name, after = "hypot", m.end() - 1
        elif m.group(3):                     # a helper call: _name(
            name = m.group(3)
            native = TORCH_NATIVE.get(name)
            out.append(f"{native}(" if native else f"{name}(")
            i = m.end()
            continue
        else:
            name, after = m.group(2), m.end()
        if name in ("maximum", "minimum") and code[after:after + 1] == "(":
            end, args = _call_span(code, after)
            a, b = (torch_text(x) for x in args)
            clamp = "torch.clamp_min" if name == "maximum" else "torch.clamp_max"
            if _is_number(b):
                out.append(f"{clamp}({a}, {b})")
            elif _is_number(a):
                out.append(f"{clamp}({b}, {a})")
            else:
                out.append(f"torch.{name}({a}, {b})")
            i = end
            continue
        if name in TORCH_TENSOR_ARGS and code[after:after + 1] == "(":
            # torch's binary math functions take tensors only: a number is a 0-d float64
            # tensor, which takes the other operand's dtype (0-d tensors do not promote a
            # float32 tensor) and works with a CUDA operand
            end, args = _call_span(code, after)
            args = [f"torch.tensor({float(a.strip('()'))!r}, dtype=torch.float64)" if _is_number(a) and
                    "torch." not in a else torch_text(a) for a in args]
            out.append(f"{TORCH_RENAMED.get(name, 'torch.' + name)}({', '.join(args)})")
            i = end
            continue
        if name in TORCH_RENAMED:
            out.append(TORCH_RENAMED[name])
        elif name in TORCH_SAME:
            out.append(f"torch.{name}")
        else:
            raise CompileError(f"target torch: numpy.{name} has no torch translation yet "
                               f"(in {code!r})")
        i = after


def jax_text(code: str) -> str:
    """NumPy-printed code spelled for jax.numpy (`jnp.`), as the CUDA target spells cupy."""
    return re.sub(r"(?<![\w.])numpy\.", "jnp.", code)


# --------------------------------------------------------------------------- torch lowering
class _TorchShapes:
    """What a torch lowering asks of the routine: operand shapes (static tuples, else the
    tensor's own `.shape`) and parameters."""

    def __init__(self, routine):
        self.routine = routine

    def shape_of(self, node):
        if node.shape is not None:
            return repr(tuple(node.shape))
        return f"{self.routine.name_of(node)}.shape"

    def param(self, node, key):
        return repr(node.attr(key))


def _all_dims(node, a):
    shape = node.args[0].shape
    if isinstance(shape, tuple):
        return repr(tuple(range(len(shape))))
    return f"tuple(range({a}.dim()))"


def _reduce(fn):
    def lower(node, a, p):
        dims = node.attr("dims") if "dims" in dict(node.attrs) else node.attr("dim")
        keep = node.attr("keepdim")
        if dims is None:
            if not keep:
                return f"torch.{fn}({a[0]})"
            return f"torch.{fn}({a[0]}, dim={_all_dims(node, a[0])}, keepdim=True)"
        if dims == ():
            return a[0]
        return f"torch.{fn}({a[0]}, dim={dims!r}, keepdim={keep!r})"
    return lower


def _arg_reduce(fn):
    def lower(node, a, p):
        dim = node.attr("dim")
        if dim is None:
            return f"torch.{fn}({a[0]})"
        return f"torch.{fn}({a[0]}, dim={dim!r}, keepdim={node.attr('keepdim')!r})"
    return lower


def _sum_to(node, a, p):
    have, want = node.args[0].shape, node.args[1].shape
    if _concrete(have, want) and have == want:
        return a[0]
    return f"{a[0]}.sum_to_size({p.shape_of(node.args[1])})"


def _unreduce(node, a, p):
    """The adjoint of sum / mean. Over all dims of a static shape, g (0-d, or all ones with
    keepdim) is expanded in the statement itself, as torch's MeanBackward does: the helper's
    Python cost a few microseconds per call (a tenth of mlp_loss's gap to eager at 1e5)."""
    source = node.args[1]
    if node.attr("dims") is None and isinstance(source.shape, tuple) and \
            all(isinstance(d, int) for d in source.shape):
        shape = tuple(source.shape)
        if node.attr("mean"):
            return f"({a[0]} / {_numel(shape)}).expand({shape!r})"
        return f"{a[0]}.expand({shape!r})"
    return (f"_unreduce({a[0]}, {p.shape_of(source)}, {p.param(node, 'dims')}, "
            f"{p.param(node, 'keepdim')}, mean={p.param(node, 'mean')})")


def _permute(node, a, p):
    dims = node.attr("dims")
    if dims is None:
        shape = node.args[0].shape
        if isinstance(shape, tuple):
            return f"torch.permute({a[0]}, {tuple(reversed(range(len(shape))))!r})"
        return f"torch.permute({a[0]}, tuple(reversed(range({a[0]}.dim()))))"
    return f"torch.permute({a[0]}, {p.param(node, 'dims')})"


def _permute_back(node, a, p):
    dims = node.attr("dims")
    if isinstance(dims, (tuple, list)):
        inverse = tuple(sorted(range(len(dims)), key=list(dims).__getitem__))
        return f"torch.permute({a[0]}, {inverse!r})"
    return f"torch.permute({a[0]}, _inverse_permutation({p.param(node, 'dims')}))"


def _squeeze(node, a, p):
    dim = node.attr("dim")
    return f"torch.squeeze({a[0]})" if dim is None else f"torch.squeeze({a[0]}, {dim!r})"


def _unsqueeze(node, a, p):
    dim = node.attr("dim")
    if isinstance(dim, int):
        return f"torch.unsqueeze({a[0]}, {dim!r})"
    return f"_expand_dims({a[0]}, {p.param(node, 'dim')})"


def _getitem(node, a, p):
    index = node.attr("index")
    items = index if isinstance(index, tuple) else (index,)
    if any(isinstance(s, slice) and s.step is not None and s.step < 0 for s in items):
        return f"_getitem_negative_step({a[0]}, {index!r})"
    return f"{a[0]}[{index!r}]"


def _cumsum(node, a, p):
    d = node.attr("dim")
    if node.attr("reverse"):
        return f"torch.flip(torch.cumsum(torch.flip({a[0]}, ({d!r},)), dim={d!r}), ({d!r},))"
    return f"torch.cumsum({a[0]}, dim={d!r})"


def _flip(node, a, p):
    dims = node.attr("dims")
    if isinstance(dims, int):
        dims = (dims,)
    return f"torch.flip({a[0]}, {dims!r})"


def _matmul_grad_a(node, a, p):
    from ..ops.structural import _plain_matmul_grad

    g, x, y = (arg.shape for arg in node.args)
    if _plain_matmul_grad(g, y, x, transpose_second=True):
        return f"torch.matmul({a[0]}, {a[2]}.mT)"
    return f"_matmul_grad_a({a[0]}, {a[1]}, {a[2]})"


def _matmul_grad_b(node, a, p):
    from ..ops.structural import _plain_matmul_grad

    g, x, y = (arg.shape for arg in node.args)
    if _plain_matmul_grad(x, g, y, transpose_second=False):
        return f"torch.matmul({a[1]}.mT, {a[0]})"
    return f"_matmul_grad_b({a[0]}, {a[1]}, {a[2]})"


def _expand(node, a, p):
    if isinstance(node.shape, tuple):
        return f"torch.broadcast_to({a[0]}, {node.shape!r})"
    return f"{a[0]}.expand({p.param(node, 'sizes')})"


def _gather(node, a, p):
    d = node.attr("dim")
    if node.attr("sliced"):
        return f"torch.gather({a[0]}, {d!r}, {a[1]})"
    return f"_take_along_dim({a[0]}, {a[1]}, {d!r})"


def _attrs_call(fn, *keys, shape_arg=None):
    def lower(node, a, p):
        parts = list(a[:1] if shape_arg is not None else a)
        if shape_arg is not None:
            parts.append(p.shape_of(node.args[shape_arg]))
        parts += [p.param(node, k) for k in keys]
        return f"{fn}({', '.join(parts)})"
    return lower


TORCH_STRUCTURAL = {
    "sum": _reduce("sum"),
    "mean": _reduce("mean"),
    "amax": _reduce("amax"),
    "amin": _reduce("amin"),
    "max_dim": _reduce("amax"),
    "min_dim": _reduce("amin"),
    "argmax": _arg_reduce("argmax"),
    "argmin": _arg_reduce("argmin"),
    "prod": lambda node, a, p: f"_prod({a[0]}, {p.param(node, 'dims')}, "
                               f"{p.param(node, 'keepdim')})",
    "prod_others": lambda node, a, p: f"_prod_others({a[0]}, {p.param(node, 'dims')})",
    "prod_others_vjp": lambda node, a, p: (f"_prod_others_vjp({a[0]}, {a[1]}, "
                                           f"{p.param(node, 'dims')})"),
    "unreduce": _unreduce,
    "index_back": lambda node, a, p: (f"_index_back({a[0]}, {a[1]}, {p.shape_of(node.args[2])}, "
                                      f"{p.param(node, 'dim')}, {p.param(node, 'keepdim')})"),
    "take_dim": lambda node, a, p: (f"_take_dim({a[0]}, {a[1]}, {p.param(node, 'dim')}, "
                                    f"{p.param(node, 'keepdim')})"),
    "sum_to": _sum_to,
    "broadcast_like": lambda node, a, p: f"torch.broadcast_to({a[0]}, "
                                         f"{p.shape_of(node.args[1])})",
    "expand": _expand,
    "matmul": lambda node, a, p: f"torch.matmul({a[0]}, {a[1]})",
    "matmul_grad_a": _matmul_grad_a,
    "matmul_grad_b": _matmul_grad_b,
    "reshape": lambda node, a, p: f"torch.reshape({a[0]}, "
                                  f"{node.shape if isinstance(node.shape, tuple) else node.attr('shape')!r})",
    "reshape_like": lambda node, a, p: f"torch.reshape({a[0]}, {p.shape_of(node.args[1])})",
    "permute": _permute,
    "swapaxes": lambda node, a, p: "torch.swapaxes({}, {!r}, {!r})".format(a[0], *node.attr("dims")),
    "permute_back": _permute_back,
    "squeeze": _squeeze,
    "unsqueeze": _unsqueeze,
    "getitem": _getitem,
    "index_put_zeros": lambda node, a, p: (f"_index_put_zeros({a[0]}, "
                                           f"{p.shape_of(node.args[1])}, {p.param(node, 'index')})"),
    "cat": lambda node, a, p: f"torch.cat(({', '.join(a)},), dim={p.param(node, 'dim')})",
    "cumsum": _cumsum,
    "flip": _flip,
    "zeros_like": lambda node, a, p: f"torch.zeros_like({a[0]})",
    "stop_gradient": lambda node, a, p: f"{a[0]}.detach()",
    "roll": lambda node, a, p: (f"torch.roll({a[0]}, {p.param(node, 'shifts')}, "
                                f"{p.param(node, 'dims')})"),
    "tile": lambda node, a, p: f"torch.tile({a[0]}, {p.param(node, 'reps')})",
    "untile": _attrs_call("_untile", "reps", shape_arg=1),
    "repeat_interleave": lambda node, a, p: (
        f"torch.repeat_interleave({a[0]}, {p.param(node, 'repeats')})"
        if node.attr("dim") is None else
        f"torch.repeat_interleave({a[0]}, {p.param(node, 'repeats')}, dim={p.param(node, 'dim')})"),
    "repeat_interleave_sum": _attrs_call("_repeat_interleave_sum", "repeats", "dim", shape_arg=1),
    "tril": lambda node, a, p: f"torch.tril({a[0]}, {p.param(node, 'diagonal')})",
    "triu": lambda node, a, p: f"torch.triu({a[0]}, {p.param(node, 'diagonal')})",
    "argsort": lambda node, a, p: (f"torch.argsort({a[0]}, dim={p.param(node, 'dim')}, "
                                   f"descending={p.param(node, 'descending')}, stable=True)"),
    "gather": _gather,
    "gather_back": lambda node, a, p: (f"_gather_back({a[0]}, {a[1]}, "
                                       f"{p.shape_of(node.args[2])}, {p.param(node, 'dim')})"),
    "diagonal": lambda node, a, p: (f"torch.diagonal({a[0]}, {p.param(node, 'offset')}, "
                                    f"{p.param(node, 'dim1')}, {p.param(node, 'dim2')})"),
    "diagonal_back": lambda node, a, p: (
        f"torch.diagonal_scatter(torch.zeros({p.shape_of(node.args[1])}, dtype={a[0]}.dtype, "
        f"device={a[0]}.device), {a[0]}, {p.param(node, 'offset')}, {p.param(node, 'dim1')}, "
        f"{p.param(node, 'dim2')})"),
    "diag_embed": lambda node, a, p: (f"torch.diag_embed({a[0]}, {p.param(node, 'offset')}, "
                                      f"{p.param(node, 'dim1')}, {p.param(node, 'dim2')})"),
    "einsum": lambda node, a, p: f"torch.einsum({p.param(node, 'subscripts')}, {', '.join(a)})",
    # sg.scan: a call of the loop function (emit/framework_scan.py) and the parts of its value
    "scan": lambda node, a, p: _framework_scan().torch_scan_call(node, a),
    "scan_part": lambda node, a, p: (
        f"{a[0]}[{node.attr('offset')}:{node.attr('offset') + _numel(node.attr('shape'))}]"
        f".reshape({tuple(node.attr('shape'))!r})"),
    "scan_part_back": lambda node, a, p: _framework_scan().torch_scan_part_back(node, a, p),
}


def _framework_scan():
    from . import framework_scan

    return framework_scan


def _numel(shape):
    n = 1
    for s in shape:
        n *= int(s)
    return n


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


# --------------------------------------------------------------------------- torch in place
# Each torch operation allocates its result; a NumPy expression `a * b * c` reuses the
# temporary `a * b` for the second product (NumPy's temporary elision), torch's does not. So
# the torch target writes into the temporaries a statement creates itself: `(a * b).mul_(c)`,
# `torch.exp(u * v).neg_()` -- never into a variable (an input, a saved or returned value,
# another name's alias), only into a value no one else can see, of the statement's own
# shape and float dtype (routines cast float arguments to one dtype first, see _same_dtype).
_INPLACE_BINARY = {ast.Add: "add_", ast.Sub: "sub_", ast.Mult: "mul_", ast.Div: "div_"}
# torch functions of tensors that return a new tensor of the broadcast shape of their tensor
# arguments (float when a float tensor goes in), and those with an in-place method
_TORCH_FRESH = frozenset(
    "exp log log1p expm1 log2 log10 exp2 sqrt rsqrt sin cos tan sinh cosh tanh asin acos atan "
    "asinh acosh atanh abs sigmoid erf erfc erfinv lgamma digamma square reciprocal floor ceil "
    "trunc round sign atan2 hypot logaddexp logaddexp2 pow where clamp_min clamp_max clamp "
    "maximum minimum copysign fmod remainder special.erfcx special.log_ndtr special.expit "
    "special.ndtr sinc".split())
_TORCH_INPLACE_UNARY = frozenset(
    "exp log log1p expm1 log2 log10 sqrt rsqrt sin cos tan sinh cosh tanh asin acos atan "
    "asinh acosh atanh abs sigmoid erf erfc erfinv lgamma digamma square reciprocal floor "
    "ceil trunc sign sinc".split())
_TORCH_INPLACE_CLAMP = frozenset(("clamp_min", "clamp_max"))
_FRESH_HELPERS = frozenset(("_softplus", "_tanh_softplus", "_log1mexp", "_div_square"))


class _Value:
    """What the in-place pass knows of a subexpression: a Python number (num), a new tensor
    no name refers to (fresh), its shape (None: unknown) and whether it is a float tensor of
    the routine's dtype (flt)."""
    __slots__ = ("num", "fresh", "shape", "flt")

    def __init__(self, num=False, fresh=False, shape=None, flt=False):
        self.num, self.fresh, self.shape, self.flt = num, fresh, shape, flt


def _broadcast(*shapes):
    import numpy

    if any(s is None for s in shapes):
        return None
    try:
        return tuple(numpy.broadcast_shapes(*shapes))
    except ValueError:
        return None


def _torch_func_name(node):
    """'exp' for torch.exp, 'special.erfcx' for torch.special.erfcx, '_softplus' for a helper,
    else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        if not parts:
            return node.id if node.id in _FRESH_HELPERS else None
        if node.id == "torch":
            return ".".join(reversed(parts))
    return None


class _InPlace:
    def __init__(self, shapes, floats):
        self.shapes, self.floats = shapes, floats
        self.changed = False

    def base(self, v, shape):
        """v can take the result of shape in place."""
        return v.fresh and v.flt and v.shape is not None and v.shape == shape and shape != ()

    def visit(self, node):
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
                and not isinstance(node.value, bool):
            return node, _Value(num=True, shape=())
        if isinstance(node, ast.Name):
            return node, _Value(shape=self.shapes.get(node.id), flt=node.id in self.floats)
        if isinstance(node, ast.Lambda):     # its parameters are not the routine's names
            return node, _Value()
        if isinstance(node, ast.UnaryOp):
            operand, v = self.visit(node.operand)
            node.operand = operand
            if v.num:
                return node, v
            if isinstance(node.op, ast.USub):
                if self.base(v, v.shape):
                    self.changed = True
                    return self.method(operand, "neg_", []), v
                return node, _Value(fresh=True, shape=v.shape, flt=v.flt)
            return node, _Value(fresh=True, shape=v.shape)
        if isinstance(node, ast.BinOp):
            fused = self.fused(node)
            if fused is not None:
                return fused
            left, lv = self.visit(node.left)
            right, rv = self.visit(node.right)
            return self.binop(node.op, left, lv, right, rv)
        if isinstance(node, ast.Call):
            values = []
            new_args = []
            for a in node.args:
                if isinstance(a, ast.Starred):
                    new_args.append(a)
                    values.append(_Value())
                    continue
                a2, v = self.visit(a)
                new_args.append(a2)
                values.append(v)
            node.args = new_args
            for kw in node.keywords:
                kw.value = self.visit(kw.value)[0]
            name = _torch_func_name(node.func)
            if name is None or node.keywords or not (name in _TORCH_FRESH or
                                                     name in _FRESH_HELPERS):
                return node, _Value()     # a call that may return a view or a number
            tensors = [v for v in values if not v.num]
            data = values[1:] if name == "where" else values
            shape = _broadcast(*[v.shape for v in values]) if values else None
            out = _Value(fresh=bool(tensors), shape=shape,
                         flt=any(v.flt for v in data))
            if not tensors:
                return node, _Value()
            if name in _TORCH_INPLACE_UNARY and len(values) == 1 and \
                    self.base(values[0], shape):
                self.changed = True
                return self.method(node.args[0], name + "_", []), out
            if name in _TORCH_INPLACE_CLAMP and len(values) == 2 and values[1].num and \
                    self.base(values[0], shape):
                self.changed = True
                return self.method(node.args[0], name + "_", [node.args[1]]), out
            return node, out
        # comparisons, boolean operators, subscripts, anything else: visit the operands, and
        # what it returns is not a temporary to write into
        for field, value in ast.iter_fields(node):
            if isinstance(value, ast.expr):
                setattr(node, field, self.visit(value)[0])
            elif isinstance(value, list):
                setattr(node, field, [self.visit(v)[0] if isinstance(v, ast.expr) else v
                                      for v in value])
        return node, _Value(fresh=True)

    def binop(self, op_node, left, lv, right, rv):
        """left <op> right of visited operands, in place where one is a temporary."""
        node = ast.BinOp(left=left, op=op_node, right=right)
        if lv.num and rv.num:
            return node, _Value(num=True, shape=())
        shape = _broadcast(lv.shape, rv.shape)
        out = _Value(fresh=True, shape=shape, flt=lv.flt or rv.flt)
        op = type(op_node)
        if op not in _INPLACE_BINARY:
            return node, out
        if self.base(lv, shape):
            self.changed = True
            return self.method(left, _INPLACE_BINARY[op], [right]), out
        if self.base(rv, shape):
            if op in (ast.Add, ast.Mult):        # IEEE + and * commute exactly
                self.changed = True
                return self.method(right, _INPLACE_BINARY[op], [left]), out
            if op is ast.Div and lv.num and isinstance(left, ast.Constant) and left.value == 1:
                self.changed = True
                return self.method(right, "reciprocal_", []), out
        return node, out

    def fused(self, node):
        """torch's one-pass kernels for the same arithmetic, or None:
        T + B*C, T - B*C -> T.addcmul_(B, C[, value=-1]) (T + b*C -> T.add_(C, alpha=b)),
        T a temporary of the result's shape; A * (1 - B*B) -> aten.tanh_backward(A, B)
        (tanh's derivative; the kernel computes a * (1 - b * b))."""
        op = type(node.op)
        if op is ast.Mult:
            for a, other in ((node.left, node.right), (node.right, node.left)):
                b = _one_minus_square(other)
                if b is None:
                    continue
                before = self.changed
                a2, av = self.visit(copy_ast(a))
                b2, bv = self.visit(copy_ast(b))
                if av.num or bv.num or not (av.flt and bv.flt):
                    self.changed = before
                    return None
                self.changed = True
                call = ast.Call(func=_dotted("torch.ops.aten.tanh_backward"), args=[a2, b2],
                                keywords=[])
                return call, _Value(fresh=True, shape=_broadcast(av.shape, bv.shape), flt=True)
            return None
        if op not in (ast.Add, ast.Sub):
            return None
        if op is ast.Add:
            # -A + B -> B - A: one kernel (torch's neg then add_ is two); the same value
            # (IEEE: -a + b and b - a round alike, +0 where they cancel)
            for neg, other in ((node.left, node.right), (node.right, node.left)):
                if isinstance(neg, ast.UnaryOp) and isinstance(neg.op, ast.USub) and \
                        not isinstance(neg.operand, ast.Constant):
                    self.changed = True
                    return self.visit(ast.BinOp(left=other, op=ast.Sub(), right=neg.operand))
        pairs = [(node.left, node.right)] + ([(node.right, node.left)] if op is ast.Add else [])
        for t, prod in pairs:
            if not (isinstance(prod, ast.BinOp) and isinstance(prod.op, ast.Mult)):
                continue
            stripped = _strip_negation(prod)
            if stripped is not None:
                # T + (-a)*b -> T - a*b, T - (-a)*b -> T + a*b (exact): the sign goes into
                # the fused kernel instead of a neg pass
                self.changed = True
                flipped = ast.Sub() if op is ast.Add else ast.Add()
                return self.visit(ast.BinOp(left=t, op=flipped, right=stripped))
            before = self.changed
            t2, tv = self.visit(copy_ast(t))
            b2, bv = self.visit(copy_ast(prod.left))
            c2, cv = self.visit(copy_ast(prod.right))
            shape = _broadcast(tv.shape, bv.shape, cv.shape)
            # tensors of the routine's float dtype, or one of them a Python number (a name
            # can hold a number: a step of constants only)
            factors = bv.flt and cv.flt or bv.num and cv.flt or bv.flt and cv.num
            if factors and tv.flt and not tv.num and not self.base(tv, shape):
                # T a name (or a temporary of another shape): torch.addcmul(T, B, C) /
                # torch.add(T, C, alpha=b), one new tensor in one pass ((B * C).add_(T)
                # was two)
                self.changed = True
                out = _Value(fresh=True, shape=shape, flt=True)
                if bv.num or cv.num:
                    num, ten = (b2, c2) if bv.num else (c2, b2)
                    fn = "torch.sub" if op is ast.Sub else "torch.add"
                    return ast.Call(func=_dotted(fn), args=[t2, ten],
                                    keywords=[ast.keyword(arg="alpha", value=num)]), out
                keywords = [ast.keyword(arg="value", value=ast.Constant(-1))] \
                    if op is ast.Sub else []
                return ast.Call(func=_dotted("torch.addcmul"), args=[t2, b2, c2],
                                keywords=keywords), out
            if not self.base(tv, shape) or not factors:
                self.changed = before   # nothing taken: visit the plain way
                continue
            self.changed = True
            out = _Value(fresh=True, shape=shape, flt=True)
            if bv.num or cv.num:
                num, ten = (b2, c2) if bv.num else (c2, b2)
                if op is ast.Sub:
                    return self.method(t2, "sub_", [ten], alpha=num), out
                return self.method(t2, "add_", [ten], alpha=num), out
            if op is ast.Sub:
                return self.method(t2, "addcmul_", [b2, c2], value=ast.Constant(-1)), out
            return self.method(t2, "addcmul_", [b2, c2]), out
        return None

    @staticmethod
    def method(obj, name, args, **keywords):
        return ast.Call(func=ast.Attribute(value=obj, attr=name, ctx=ast.Load()), args=args,
                        keywords=[ast.keyword(arg=k, value=v) for k, v in keywords.items()])


def copy_ast(node):
    import copy

    return copy.deepcopy(node)


def _dotted(text):
    parts = text.split(".")
    node = ast.Name(id=parts[0], ctx=ast.Load())
    for part in parts[1:]:
        node = ast.Attribute(value=node, attr=part, ctx=ast.Load())
    return node


def _strip_negation(prod):
    """a*b*... for a product (-a)*b*... whose leftmost factor is a negated tensor (a copy),
    else None."""
    spine = prod
    while isinstance(spine, ast.BinOp) and isinstance(spine.op, ast.Mult):
        if isinstance(spine.left, ast.UnaryOp) and isinstance(spine.left.op, ast.USub) and \
                not isinstance(spine.left.operand, ast.Constant):
            out = copy_ast(prod)
            node = out
            while node.left is not None and not isinstance(node.left, ast.UnaryOp):
                node = node.left
            node.left = node.left.operand
            return out
        spine = spine.left
    return None


def _one_minus_square(node):
    """B where node is 1 - B*B, else None."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub) and \
            isinstance(node.left, ast.Constant) and node.left.value == 1 and \
            isinstance(node.right, ast.BinOp) and isinstance(node.right.op, ast.Mult) and \
            ast.dump(node.right.left) == ast.dump(node.right.right):
        return node.right.left
    return None


def torch_in_place(code, shapes, floats):
    """(code with the operations on its own temporaries done in place (see above), whether
    its value is a float tensor of the routine's dtype); the code itself where nothing
    changes. `shapes`: name -> static shape; `floats`: the names of such float tensors."""
    try:
        tree = ast.parse(code, mode="eval")
    except SyntaxError:
        return code, False
    pass_ = _InPlace(shapes, floats)
    body, value = pass_.visit(tree.body)
    if not pass_.changed:
        return code, value.flt
    return ast.unparse(ast.fix_missing_locations(ast.Expression(body=body))), value.flt


def _in_place_facts(routine, known):
    """(name -> static shape, names of float tensors) of a routine's inputs and steps, for
    torch_in_place; `known`: (shapes, floats) of arguments that are not graph inputs (the
    values backward_saved receives from forward_saving)."""
    import numpy

    shapes, floats = (dict(known[0]), set(known[1])) if known else ({}, set())
    aligned = len(routine.args) == len(routine.graph.inputs)
    for i, node in enumerate(routine.graph.inputs):
        name = routine.names.get(id(node))
        if name is None and aligned:      # forward_saving: the forward graph's own inputs
            name = routine.args[i]
        if name is not None and name in routine.args:
            if isinstance(node.shape, tuple):
                shapes[name] = node.shape
            if node.dtype == "float":
                floats.add(name)
    for step in routine.steps:
        if step.node is not None:
            if isinstance(step.node.shape, tuple):
                shapes[step.target] = step.node.shape
        elif step.expr is not None:
            operands = [shapes.get(str(s)) for s in step.expr.free_symbols]
            if all(o is not None for o in operands):
                try:
                    shapes[step.target] = tuple(numpy.broadcast_shapes(*operands)) \
                        if operands else ()
                except ValueError:
                    pass
    return shapes, floats


def torch_lines(routine, outputs=None, in_place=False, known=None):
    """(target, code, comment) per statement of a routine, printed for torch; in_place: with
    the steps on a statement's own temporaries done in place (torch_in_place; `known`: see
    _in_place_facts; its floats set receives the routine's float names)."""
    printer = NumpyPrinter()
    sp = _TorchShapes(routine)
    outputs = set(routine.returns if outputs is None else outputs)
    shapes = _static_shapes(routine)
    if in_place:
        place_shapes, floats = _in_place_facts(routine, known)
    lines = []
    ints = _int_names(routine)
    numbers = {}   # temps of a number (CSE's log(3)): read as that number, not as a name
    for step in routine.steps:
        node = step.node
        comment = f"from {node.site}" if node is not None and node.site else ""
        if numbers and step.expr is not None and getattr(step.expr, "free_symbols", None):
            # torch's binary functions (logaddexp, hypot, ...) take a number only as a
            # literal, which torch_text makes a 0-d tensor: a name bound to a float is refused
            import dataclasses

            expr = step.expr.xreplace(numbers)
            if not expr.has(sympy.zoo, sympy.nan) or step.expr.has(sympy.zoo, sympy.nan):
                step = dataclasses.replace(step, expr=expr)   # (never a folded 1/0)
        if node is None and step.expr is not None and step.expr.is_number \
                and not step.expr.free_symbols:
            numbers[sympy.Symbol(step.target)] = step.expr
        shape = shapes.get(step.target)
        printer.full_symbols = None if shape is None else frozenset(
            str(s) for s in getattr(step.expr, "free_symbols", ()) if shapes.get(str(s)) == shape)
        if step.expr is not None and (node is None or node.op == "elementwise"):
            step = _float_ints(step, node, ints)
        if node is None:
            code = torch_text(printer.doprint(step.expr))
            if in_place:
                code, flt = torch_in_place(code, place_shapes, floats)
                if flt:
                    floats.add(step.target)
        elif node.op == "elementwise":
            code = torch_text(printer.doprint(step.expr))
            if isinstance(step.expr, sympy.Symbol):
                if in_place and code in floats:
                    floats.add(step.target)
                if step.target in outputs:
                    code = f"torch.clone({code})"   # an output must not alias an input
            elif not step.expr.free_symbols:
                shape = sp.shape_of(node) if node.shape is not None else _torch_shape(routine, node)
                code = f"torch.full({shape}, {code}, dtype=dtype, device=device)"
            else:
                if in_place:
                    code, flt = torch_in_place(code, place_shapes, floats)
                    if flt and node.dtype == "float":
                        floats.add(step.target)
                if node.attr("broadcast"):
                    shape = sp.shape_of(node) if node.shape is not None else \
                        _torch_shape(routine, node)
                    code = f"torch.broadcast_to({code}, {shape})"
        else:
            lower = TORCH_STRUCTURAL.get(node.op)
            if lower is None:
                raise CompileError(f"target torch: the structural op {node.op!r} has no torch "
                                   f"lowering yet" + (f" (from {node.site})" if node.site else ""))
            args = [routine.name_of(a) if id(a) in routine.names else "None" for a in node.args]
            code = lower(node, args, sp)
            comment = f"{node.op}" + (f", from {node.site}" if node.site else "")
            if in_place and node.dtype == "float" and any(a in floats for a in args):
                floats.add(step.target)
        lines.append((step.target, code, comment))
    if in_place and known is not None:
        known[0].update(place_shapes)
        known[1].update(floats)
    return lines


def _int_names(routine):
    """The names of the routine's integer tensors (inputs; structural steps of int dtype)."""
    ints = set()
    for i, node in enumerate(routine.graph.inputs):
        name = routine.names.get(id(node))
        if name is None and len(routine.args) == len(routine.graph.inputs):
            name = routine.args[i]
        if name is not None and node.dtype == "int":
            ints.add(name)
    return ints


def _float_ints(step, node, ints):
    """The step with its integer tensors cast to the routine's dtype (`n.to(dtype)`) where
    it computes a float: torch computes `0.05 * n` of an int64 tensor n in its default dtype
    (float32), where NumPy (and the NumPy target) promote to float64. A step that stays an
    integer (`n + 1`) is left alone and its name joins `ints`."""
    import dataclasses

    expr = step.expr
    names = {str(x): x for x in expr.free_symbols}
    mine = [x for name, x in names.items() if name in ints]
    if node is not None:
        is_float = node.dtype == "float"
        if node.dtype == "int":
            ints.add(step.target)
    else:
        is_float = bool(expr.atoms(sympy.Float) or expr.atoms(sympy.Function)
                        or any(not r.is_integer for r in expr.atoms(sympy.Rational))
                        or any(name not in ints for name in names))
        if not is_float:
            ints.add(step.target)
    if not mine or not is_float:
        return step
    cast = {x: sympy.Symbol(f"{x}.to(dtype)") for x in mine}
    return dataclasses.replace(step, expr=expr.xreplace(cast))


def _torch_shape(routine, node):
    shapes = ", ".join(f"{routine.name_of(a)}.shape" for a in node.args)
    return f"torch.broadcast_shapes({shapes})" if len(node.args) != 1 else \
        f"{routine.name_of(node.args[0])}.shape"


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
    plain = torch_lines(routine, outputs=outputs)
    fast = torch_lines(routine, outputs=outputs, in_place=True, known=known)
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
    """forward_saving / backward_saved (see optimize.saving_plan) printed for torch: the
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
    loops = _framework_scan().torch_scan_helpers(body)   # sg.scan's loop functions
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
JAX_NATIVE = {
    "_sigmoid": "jax.nn.sigmoid", "_softplus": "jax.nn.softplus",
    "_erf": "jax.scipy.special.erf", "_erfc": "jax.scipy.special.erfc",
    "_erfcx": "jax.scipy.special.erfcx", "_log_ndtr": "jax.scipy.special.log_ndtr",
    "_lgamma": "jax.scipy.special.gammaln", "_digamma": "jax.scipy.special.digamma",
    "_polygamma": "jax.scipy.special.polygamma", "_erfinv": "jax.scipy.special.erfinv",
    "_hypot": "jnp.hypot", "_copy": "", "_einsum": "jnp.einsum",
}

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


def _jax_line(code):
    code = jax_text(code)

    def native(m):
        name = m.group(1)
        return f"{JAX_NATIVE[name]}(" if name in JAX_NATIVE else m.group(0)
    return re.sub(r"(?<![\w.])(_\w+)\(", native, code)


def _jax_routine(routine, doc_title):
    ctx = routine_context(routine, doc_title)
    ctx["lines"] = [(t, _jax_line(c), m, d) for t, c, m, d in ctx["lines"]]
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
    scan = _framework_scan()
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
