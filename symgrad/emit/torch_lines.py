"""The torch target's lines: how one optimized routine is printed as torch statements.

- the lowering of structural steps (`TORCH_STRUCTURAL`: `torch.sum(x, dim=..., keepdim=...)`,
  `g.sum_to_size(shape)`, `torch.gather`, ...),
- the in-place pass (`torch_in_place`: a statement writes into the temporaries it creates
  itself, `(a * b).mul_(c)`),
- `torch_lines`, the routine's statements with both, and the integer tensors cast where a
  step computes a float,
- sg.scan's torch loop functions (`torch_scan_call`, `torch_scan_helpers`): a loop's body is
  printed by `torch_lines`, and a scan inside it is lowered by `TORCH_STRUCTURAL`, so the two
  live in one module; the parts both targets' loops share (the loop's layout, docstring and
  optimized body) are emit/framework_scan.py's.

emit/frameworks.py renders the module around these lines and re-exports these names.
"""
from __future__ import annotations

import ast
import re

import sympy

from ..errors import CompileError
from ..ops.structural import _concrete
from . import _static_shapes
from .framework_scan import CALL, _docstring, _parts, _routine
from .framework_text import torch_text
from .printers import NumpyPrinter
from .render import py_comment
from .scan import helper_name

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
    "scan": lambda node, a, p: torch_scan_call(node, a),
    "scan_part": lambda node, a, p: (
        f"{a[0]}[{node.attr('offset')}:{node.attr('offset') + _numel(node.attr('shape'))}]"
        f".reshape({tuple(node.attr('shape'))!r})"),
    "scan_part_back": lambda node, a, p: torch_scan_part_back(node, a, p),
}


def _numel(shape):
    n = 1
    for s in shape:
        n *= int(s)
    return n


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
# structural steps whose torch.matmul is always a new tensor (never a view of an operand)
_FRESH_STRUCTURAL = frozenset(("matmul", "matmul_grad_a", "matmul_grad_b"))
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
    def __init__(self, shapes, floats, dying=frozenset()):
        self.shapes, self.floats = shapes, floats
        self.dying = dying     # temporaries this statement reads last (and once): writable
        self.changed = False

    def base(self, v, shape):
        """v can take the result of shape in place."""
        return v.fresh and v.flt and v.shape is not None and v.shape == shape and shape != ()

    def visit(self, node):
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
                and not isinstance(node.value, bool):
            return node, _Value(num=True, shape=())
        if isinstance(node, ast.Name):
            return node, _Value(fresh=node.id in self.dying, shape=self.shapes.get(node.id),
                                flt=node.id in self.floats)
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
                shape = _broadcast(av.shape, bv.shape)
                if isinstance(a2, ast.Name) and self.base(av, shape):
                    # A a dying temporary of the result's shape: the kernel writes into it
                    # (its out= form, the whole tensor in place: no new array, as .mul_)
                    call = ast.Call(func=_dotted("torch.ops.aten.tanh_backward.grad_input"),
                                    args=[a2, b2],
                                    keywords=[ast.keyword(arg="grad_input", value=copy_ast(a2))])
                else:
                    call = ast.Call(func=_dotted("torch.ops.aten.tanh_backward"), args=[a2, b2],
                                    keywords=[])
                return call, _Value(fresh=True, shape=shape, flt=True)
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


def torch_in_place(code, shapes, floats, dying=frozenset(), fresh=None):
    """(code with the operations on its own temporaries done in place (see above), whether
    its value is a float tensor of the routine's dtype); the code itself where nothing
    changes. `shapes`: name -> static shape; `floats`: the names of such float tensors;
    `dying`: names of temporaries (new tensors no other name refers to) that no later
    statement reads: one read once here is written in place like the statement's own
    temporaries (`t54 = t80 / x0; del t80` -> `t54 = t80.div_(x0)`). `fresh`: a list that
    receives whether the value is a new tensor (or such a temporary's)."""
    try:
        tree = ast.parse(code, mode="eval")
    except SyntaxError:
        if fresh is not None:
            fresh.append(False)
        return code, False
    if dying:
        reads = [n.id for n in ast.walk(tree) if isinstance(n, ast.Name)]
        dying = frozenset(n for n in dying if reads.count(n) == 1)
    pass_ = _InPlace(shapes, floats, dying)
    body, value = pass_.visit(tree.body)
    if fresh is not None:
        fresh.append(value.fresh and not isinstance(body, ast.Name))
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


def torch_lines(routine, outputs=None, in_place=False, known=None, dying=None):
    """(target, code, comment) per statement of a routine, printed for torch; in_place: with
    the steps on a statement's own temporaries done in place (torch_in_place; `known`: see
    _in_place_facts; its floats set receives the routine's float names). `dying`: per step,
    the names no later step reads (release_after of the plain lines): a temporary among them
    that the routine made (a new tensor no other name aliases) is written in place too."""
    printer = NumpyPrinter()
    sp = _TorchShapes(routine)
    outputs = set(routine.returns if outputs is None else outputs)
    shapes = _static_shapes(routine)
    bare = _expanded_by_readers(routine, outputs, _in_place_facts(routine, known)[0])
    for name in bare:
        shapes[name] = ()      # a 0-d tensor: its readers' broadcasting expands it
    if in_place:
        place_shapes, floats = _in_place_facts(routine, known)
        place_shapes.update({name: () for name in bare})
    lines = []
    ints = _int_names(routine)
    numbers = {}   # temps of a number (CSE's log(3)): read as that number, not as a name
    owned = set()  # steps' new tensors that no other name refers to (in place when dying)
    for k, step in enumerate(routine.steps):
        node = step.node
        last = owned.intersection(dying[k]) if dying is not None and in_place else ()
        fresh = []
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
                code, flt = torch_in_place(code, place_shapes, floats, last, fresh)
                if flt:
                    floats.add(step.target)
        elif node.op == "elementwise":
            code = torch_text(printer.doprint(step.expr))
            if isinstance(step.expr, sympy.Symbol) and node.attr("broadcast"):
                # a folded value (where(true, y, c) is y) keeps the broadcast shape of its
                # operands, as in the NumPy printer (fuzz seed 490 of the extreme run of
                # tests/test_fuzz_frameworks.py: torch.clone(x1) of shape (1,), not (3,))
                shape = sp.shape_of(node) if node.shape is not None else \
                    _torch_shape(routine, node)
                code = f"torch.broadcast_to({code}, {shape})"
                fresh = [False]          # a view
                if step.target in outputs:
                    code = f"torch.clone({code})"
            elif isinstance(step.expr, sympy.Symbol):
                if in_place and code in floats:
                    floats.add(step.target)
                if step.target in outputs and code not in last:
                    # an output must not alias an input (a temporary of the routine's own
                    # that nothing reads after this is returned as it is)
                    code = f"torch.clone({code})"
            elif not step.expr.free_symbols:
                shape = sp.shape_of(node) if node.shape is not None else _torch_shape(routine, node)
                code = f"torch.full({shape}, {code}, dtype=dtype, device=device)"
            else:
                if in_place:
                    code, flt = torch_in_place(code, place_shapes, floats, last, fresh)
                    if flt and node.dtype == "float":
                        floats.add(step.target)
                if node.attr("broadcast"):
                    shape = sp.shape_of(node) if node.shape is not None else \
                        _torch_shape(routine, node)
                    code = f"torch.broadcast_to({code}, {shape})"
                    fresh = [False]      # a view
        else:
            lower = TORCH_STRUCTURAL.get(node.op)
            if lower is None:
                raise CompileError(f"target torch: the structural op {node.op!r} has no torch "
                                   f"lowering yet" + (f" (from {node.site})" if node.site else ""))
            args = [routine.name_of(a) if id(a) in routine.names else "None" for a in node.args]
            code = lower(node, args, sp)
            if step.target in bare:   # g / N, 0-d: the product that reads it broadcasts
                code = f"{args[0]} / {_numel(bare[step.target])}" if node.attr("mean") \
                    else args[0]
            comment = f"{node.op}" + (f", from {node.site}" if node.site else "")
            if node.op in _FRESH_STRUCTURAL and code.startswith("torch.matmul("):
                # a new tensor no other name refers to: a later step that reads it last
                # writes into it (`torch.tanh(v0)` -> `v0.tanh_()`, one array fewer)
                fresh = [True]
            if in_place and node.dtype == "float" and any(a in floats for a in args):
                floats.add(step.target)
        if dying is not None and in_place:
            if fresh and fresh[0]:
                owned.add(step.target)
            else:   # a view or an alias of what it reads (x.sum_to_size(shape) may be x)
                owned.difference_update(re.findall(r"[A-Za-z_]\w*", code))
        lines.append((step.target, code, comment))
    if in_place and known is not None:
        known[0].update(place_shapes)
        known[1].update(floats)
    return lines


def _expanded_by_readers(routine, outputs, shapes):
    """{target: shape} of the unreduce steps (the adjoint of a sum / mean over all dims of a
    static shape, of a 0-d gradient) that need no expand: every step that reads one is
    elementwise arithmetic whose other operands broadcast to a shape the unreduce's fits
    in, so `(g / N) * (2*v2 - 2*y)` has the same shape and values as with
    `(g / N).expand(shape)`, one view and one torch call fewer per backward (mlp_loss's
    mean). Not for a returned value nor one a structural step reads."""
    import numpy

    cands = {}
    for step in routine.steps:
        node = step.node
        if node is not None and node.op == "unreduce" and node.attr("dims") is None and \
                node.args[0].shape == () and step.target not in outputs and \
                isinstance(node.args[1].shape, tuple) and \
                all(isinstance(d, int) for d in node.args[1].shape):
            cands[step.target] = tuple(node.args[1].shape)
    if not cands:
        return cands
    for step in routine.steps:
        node = step.node
        if node is not None and (node.op != "elementwise" or node.attr("broadcast")):
            for a in node.args:
                if id(a) in routine.names:
                    cands.pop(routine.names[id(a)], None)
            if node.op != "elementwise":
                continue
        if step.expr is None:
            continue
        names = {str(x) for x in getattr(step.expr, "free_symbols", ())}
        for name in names & cands.keys():
            others = [shapes.get(n) for n in names if n != name]
            try:
                ok = all(o is not None for o in others) and others and \
                    numpy.broadcast_shapes(*others, cands[name]) == \
                    numpy.broadcast_shapes(*others)
            except ValueError:
                ok = False
            if not ok or name == step.target:
                cands.pop(name, None)
    return cands


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


_TORCH_DEFS: dict[str, str] = {}   # loop name -> its torch text


# --------------------------------------------------------------------------- torch
def torch_scan_call(node, args, p=None) -> str:
    """The torch lowering of a scan node: a call of its loop function (defined once)."""
    name = helper_name(node)
    if name not in _TORCH_DEFS:
        _TORCH_DEFS[name] = _torch_define(name, node)
    return f"{name}({', '.join(args)}, dtype, device)"


def torch_scan_part_back(node, a, p) -> str:
    o, n = node.attr("offset"), _numel(node.attr("shape"))
    size = _numel(node.args[1].shape)
    return f"torch.nn.functional.pad(torch.ravel({a[0]}), ({o}, {size - o - n}))"


def _torch_loop(node, routine, lines, floats):
    body = node.attr("body")
    k, m = body.n_carry, body.n_x
    T, reverse = node.attr("length"), node.attr("reverse")
    args = list(routine.args)
    carries, xs = args[:k], args[k:k + m]
    parts, size = _parts(node)
    order = f"range({T} - 1, -1, -1)" if reverse else f"range({T})"
    out = []
    if floats:
        out.append(f"    {', '.join(floats)}, = _same_dtype(dtype, {', '.join(floats)})")
    out.append(f"    _out = torch.empty({size}, dtype=dtype, device=device)")
    for j, (offset, shape) in enumerate(parts[k:]):
        out.append(f"    _ys{j} = _out[{offset}:{offset + _numel(shape)}].view({shape!r})")
    out.append(f"    for _t in {order}:")
    for x in xs:
        out.append(f"        {x} = _xs_{x}[_t]")
    for target, code, comment in lines:
        out.append(f"        {target} = {code}" + (f"  # {py_comment(comment)}" if comment else ""))
    returns = list(routine.returns)
    for j, y in enumerate(returns[k:]):
        out.append(f"        _ys{j}[_t] = {y}")
    if carries:
        out.append(f"        {', '.join(carries)}, = {', '.join(returns[:k])},")
    for i, c in enumerate(carries):
        offset, shape = parts[i]
        out.append(f"    _out[{offset}:{offset + _numel(shape)}] = torch.ravel({c})")
    out.append("    return _out")
    return out


def _torch_define(name, node) -> str:
    graph, routine = _routine(node, name)
    body = node.attr("body")
    k, m = body.n_carry, body.n_x
    args = list(routine.args)
    params = args[:k] + [f"_xs_{x}" for x in args[k:k + m]] + args[k + m:]
    signature = ", ".join(params + ["dtype", "device"])
    floats = [p for p, n in zip(params, graph.inputs) if n.dtype == "float"]
    plain = torch_lines(routine, outputs=())
    fast = torch_lines(routine, outputs=(), in_place=True)
    site = f"  # sg.scan at {py_comment(node.site)}" if node.site else ""
    out = [f"def {name}({signature}):{site}"] + _docstring(node, graph)
    if fast != plain:
        out += [f"    if _records({', '.join(params)}):",
                f"        return {name}_recorded({signature})"]
    out += _torch_loop(node, routine, fast, floats)
    if fast != plain:
        out += ["", "", f"def {name}_recorded({signature}):",
                f'    """{name} without in-place steps, for torch\'s autograd to record."""']
        out += _torch_loop(node, routine, plain, floats)
    return "\n".join(out) + "\n"


def torch_scan_helpers(source: str) -> list[str]:
    """The torch texts of the loop functions `source` calls, nested ones first."""
    return _reachable(source, _TORCH_DEFS)


def _reachable(source, defs):
    order, seen = [], set()

    def visit(text):
        for name in CALL.findall(text):
            if name in seen or name not in defs:
                continue
            seen.add(name)
            visit(defs[name])
            order.append(name)

    visit(source)
    return [defs[n] for n in order]
