"""SymbolicTensor's reductions (sum, mean, prod, amax, logsumexp, softmax, var, norm, ...) and
its linear algebra (matmul, mm): a mixin of `trace.SymbolicTensor`, moved verbatim from trace.py.
"""
from __future__ import annotations

import math
import numbers

import sympy

from .errors import TraceError
from .graph import Param
from .ops import elementwise as ew
from ._linalg_trace import log_rewrite, matmul_rewrite


# Names of trace.py used below. trace.py imports this module before it defines them, so it
# binds them here once it has (trace._bind_moved_names).
_FROM_TRACE = ("GenericShape", "SymbolicTensor", "_MinMax", "_at", "_dims", "_number",
    "broadcast_shapes", "ones_like", "user_site",)
(GenericShape, SymbolicTensor, _MinMax, _at, _dims, _number, broadcast_shapes, ones_like,
    user_site,) = (None,) * len(_FROM_TRACE)


class _ReductionMethods:
    """SymbolicTensor's reductions and matrix products (see the module docstring)."""

    # ---- reductions
    def _reduce(self, op, dim, keepdim):
        site = user_site()
        ndim = len(self.shape) if isinstance(self.shape, tuple) else None
        dims = _dims(dim, ndim, op, site)
        if ndim == 0 and not isinstance(dims, Param):
            dims = None   # torch: dim 0 (or -1) of a 0-d tensor is the tensor itself
        x = self
        if self.dtype == "bool":
            # sum / mean of a mask counts: over 1.0 / 0.0 (a bool-typed sum was read back as
            # a bool, 1.0 for any count)
            x = SymbolicTensor(self.tracer, self.arith(), self.shape, "float", site=site)
        return self.tracer.structural(op, (x,), site=site, dims=dims, keepdim=bool(keepdim))

    def sum(self, dim=None, keepdim=False, dtype=None):
        return self._reduce("sum", dim, keepdim)

    def mean(self, dim=None, keepdim=False, dtype=None):
        return self._reduce("mean", dim, keepdim)

    # ops whose value in an exponent means the user already shifted it (x - max(x))
    _SHIFTS = frozenset({"amax", "amin", "max_dim", "min_dim", "stop_gradient"})

    def _exp_reduction(self, shifts=True):
        """When this value is sum(exp(u)) or mean(exp(u)) (u not already shifted by a max,
        unless not `shifts`): (u, the exp node, the reduction node), else None."""
        node = self.node
        if node is None or node.op not in ("sum", "mean") or len(node.args) != 1:
            return None
        arg = node.args[0]
        if arg.op != "elementwise" or arg.dtype != "float" or not isinstance(arg.expr, sympy.exp):
            return None
        u_expr = arg.expr.args[0]
        tr = self.tracer
        leaves = [tr.symbol_node.get(s) for s in u_expr.free_symbols]
        if not leaves or any(n is None for n in leaves):
            return None
        if shifts == any(n.op in self._SHIFTS for n in leaves):
            return None
        shape = arg.shape
        if shape is None:
            shape = GenericShape(())
            for leaf in leaves:
                shape = broadcast_shapes(shape, tr._leaf_value(leaf).shape)
        return SymbolicTensor(tr, u_expr, shape, "float", site=arg.site), arg, node

    def _exp_shift(self, dims):
        """The shift of a max-shifted exp-sum over `dims` (kept): the max, without gradient
        (it cancels exactly), and 0 where the max is infinite, as torch's logsumexp: an all
        -inf slice sums exp(-inf) = 0 (log: -inf), a +inf one exp(inf) = inf (log: inf),
        where x - max would be nan. Computed on the reduced array."""
        m = self.amax(dims, keepdim=True)
        return SymbolicTensor(self.tracer, sympy.Piecewise((m.arith(), ew.isfinite(m.arith())),
                                                           (sympy.S.Zero, True)), m.shape,
                              "float", site=m.site).detach()

    def _shifted_exp_reduction(self):
        """sum(exp(u)) as (m, s) with sum(exp(u)) = exp(m) * s, s = sum(exp(u - m)),
        m = max(u) (kept dims, no gradient; 0 for an all -inf slice); None if not one."""
        parts = self._exp_reduction()
        if parts is None:
            return None
        u, _, node = parts
        attrs = dict(node.attrs)
        dims, keepdim = attrs.get("dims"), attrs.get("keepdim", False)
        m = u._exp_shift(dims)
        total = (u - m).exp()._reduce(node.op, dims, keepdim)
        return m, total, dims, keepdim

    def log(self):
        """log; log(sum(exp(u))) written out (a cross-entropy, a log-likelihood) is computed
        max-shifted, m + log(sum(exp(u - m))): it overflowed to inf at u = 800 (underflowed to
        -inf at -800), its gradient nan, as torch's."""
        if self.node is not None and self.node.op == "linalg_det":   # log(det(A)) -> logdet
            return log_rewrite(self)
        shifted = self._shifted_exp_reduction()
        if shifted is None:
            user = self._user_shifted_log()
            return user if user is not None else self._apply("log", sympy.log)
        m, total, dims, keepdim = shifted
        scale = m if keepdim else m._reduce("sum", dims, False)   # m without its kept dims
        return scale + total._apply("log", sympy.log)

    def _user_shifted_log(self):
        """log(sum(exp(x - m))) with the user's own shift m (a max or min, constant along the
        summed dims) as log(sum(exp(x - m'))) + m' - m, m' = m without gradient: the same
        value, and the user's m + log(...) (a hand-written logsumexp, log_softmax) then cancels
        m symbolically, where its gradient was computed through the max and summed to an exact
        0 (argmax, a scatter and a reduction more, as in torch); None if not that form."""
        parts = self._exp_reduction(shifts=False)
        if parts is None:
            return None
        u, _, node = parts
        attrs = dict(node.attrs)
        dims, keepdim = attrs.get("dims"), attrs.get("keepdim", False)
        tr = self.tracer
        if not isinstance(u.shape, tuple):
            return None
        summed = range(len(u.shape)) if dims is None else dims
        for term in sympy.Add.make_args(u.expr):
            coeff, m_sym = term.as_coeff_Mul()
            shift = tr.symbol_node.get(m_sym) if coeff == -1 else None
            if shift is None or shift.op not in self._SHIFTS - {"stop_gradient"} \
                    or not isinstance(shift.shape, tuple):
                continue
            lead = len(u.shape) - len(shift.shape)
            if lead < 0 or any(d >= lead and shift.shape[d - lead] != 1 for d in summed):
                continue   # not constant along the summed dims
            if not keepdim and shift.shape != ():
                continue   # m' - m would need the summed dims squeezed
            m = tr._leaf_value(shift)
            m_fixed = m.detach()
            shifted = SymbolicTensor(tr, u.expr.xreplace({m_sym: m_fixed.expr}), u.shape,
                                     "float", site=u.site)
            total = shifted.exp()._reduce(node.op, dims, keepdim)
            return total._apply("log", sympy.log) + (m_fixed - m)
        return None

    def _divide(self, o):
        """a / b; exp(u) / sum(exp(u)) (a softmax written out) is computed as
        exp(u - m) / sum(exp(u - m)): it was nan at u = 800 (inf / inf) and -800 (0 / 0)."""
        if isinstance(o, SymbolicTensor) and o.tracer is self.tracer:
            parts = o._exp_reduction()
            if parts is not None and (self.node is parts[1] or self.expr == parts[1].expr):
                m, total, dims, keepdim = o._shifted_exp_reduction()
                if keepdim or dims is None:
                    return (parts[0] - m).exp() / total
        return self._binary(o, lambda a, b: a / b, "div")

    def prod(self, dim=None, keepdim=False, dtype=None):
        return self._reduce("prod", dim, keepdim)

    def amax(self, dim=None, keepdim=False):
        return self._reduce("amax", dim, keepdim)

    def all(self, dim=None, keepdim=False):
        """torch.all: whether every element (along dim) is nonzero (NaN counts as nonzero); a
        bool value, for sg.where and masks: Python `if` on it cannot be traced."""
        return self._truth_reduce("amin", dim, keepdim)

    def any(self, dim=None, keepdim=False):
        """torch.any: whether some element (along dim) is nonzero; a bool value."""
        return self._truth_reduce("amax", dim, keepdim)

    def _truth_reduce(self, op, dim, keepdim):
        ones = SymbolicTensor(self.tracer, sympy.Piecewise((sympy.S.One, self.truth()),
                                                           (sympy.S.Zero, True)),
                              self.shape, "float", site=user_site())
        return ones._reduce(op, dim, keepdim) > 0

    def amin(self, dim=None, keepdim=False):
        return self._reduce("amin", dim, keepdim)

    def _minmax(self, kind, dim, keepdim, other):
        if other is not None or isinstance(dim, SymbolicTensor):
            return getattr(self, "maximum" if kind == "max" else "minimum")(
                other if other is not None else dim)
        if dim is None:
            return self._reduce("amax" if kind == "max" else "amin", None, keepdim)
        site = user_site()
        ndim = len(self.shape) if isinstance(self.shape, tuple) else None
        if isinstance(dim, Param):
            d = dim
        else:
            (d,) = _dims(dim, ndim, kind, site)
        values = self.tracer.structural(f"{kind}_dim", (self,), site=site, dim=d,
                                        keepdim=bool(keepdim))
        indices = self.tracer.structural(f"arg{kind}", (self,), site=site, dim=d,
                                         keepdim=bool(keepdim))
        return _MinMax(values, indices)

    def max(self, dim=None, keepdim=False, other=None):
        return self._minmax("max", dim, keepdim, other)

    def min(self, dim=None, keepdim=False, other=None):
        return self._minmax("min", dim, keepdim, other)

    def argmax(self, dim=None, keepdim=False):
        return self._minmax("max", dim, keepdim, None).indices

    def argmin(self, dim=None, keepdim=False):
        return self._minmax("min", dim, keepdim, None).indices

    def logsumexp(self, dim, keepdim=False):
        # max-shifted: exp never overflows; an infinite max shifts by 0 (-inf, inf as torch)
        m = self._exp_shift(dim)
        out = (self - m).exp().sum(dim, keepdim=True).log() + m
        return out if keepdim else out.squeeze(dim)

    def softmax(self, dim, dtype=None):
        # shifted by the max itself, as torch: nan for a row of -inf or with a +inf
        e = (self - self.amax(dim, keepdim=True).detach()).exp()
        return e / e.sum(dim, keepdim=True)

    def log_softmax(self, dim, dtype=None):
        # torch's (x - max) - log(sum(exp(x - max))): nan for a row of -inf or with a +inf
        u = self - self.amax(dim, keepdim=True).detach()
        return u - u.exp().sum(dim, keepdim=True).log()

    def var(self, dim=None, unbiased=True, keepdim=False, correction=None):
        if isinstance(dim, bool):   # torch's var(unbiased) overload: x.var(False)
            dim, unbiased = None, dim
        if correction is None:
            correction = 1 if unbiased else 0
        mu = self.mean(dim, keepdim=True)
        d = self - mu
        squares = (d * d).sum(dim, keepdim=keepdim)
        if isinstance(self.shape, tuple):
            n = self.numel() if dim is None else math.prod(
                self.shape[i] for i in _dims(dim, self.ndim, "var", None))
            if n > correction:
                return squares / (n - correction)
        # shape-generic, or no degrees of freedom left (one element, correction 1): count the
        # elements at run time and divide by max(0, n - correction), as torch: 0 gives nan
        # (0 / 0) or inf, where a constant 0 divisor would not trace
        n = ones_like(self).sum(dim, keepdim=keepdim)
        return squares / (n - correction).clamp_min(0)

    def std(self, dim=None, unbiased=True, keepdim=False, correction=None):
        # torch's subgradient: 0 where the variance is 0 (sqrt' is inf there: 0 * inf = nan)
        var = self.var(dim, unbiased, keepdim, correction)
        return var._apply("std", lambda a: ew.norm_root(a, sympy.Integer(2)))

    def norm(self, p="fro", dim=None, keepdim=False, dtype=None):
        if p is None or p == "fro":     # torch's default: the 2-norm of the flattened dims
            p = 2
        if isinstance(p, str) or isinstance(p, bool) or not isinstance(p, numbers.Real):
            raise TraceError(f"norm: p={p!r} is not supported in a traced forward (a number, "
                             f"inf, -inf or 'fro'){_at(user_site())}")
        if p == 0:                       # the count of nonzero entries (gradient 0)
            return self.tracer.where(self != 0, 1.0, 0.0).sum(dim, keepdim=keepdim)
        if p == math.inf:
            return self.abs().amax(dim, keepdim=keepdim)
        if p == -math.inf:
            return self.abs().amin(dim, keepdim=keepdim)
        # torch's subgradient: 0 at a zero vector (the root's derivative is inf there)
        if p < 1:       # torch's subgradient: 0 at a zero entry too (|x|**p is vertical there)
            s = self._apply("norm", lambda a: ew.norm_term(a, _number(p)))
            s = s.sum(dim, keepdim=keepdim)
            return s._apply("norm", lambda a: ew.norm_root(a, sympy.sympify(p)))
        if p != 2:
            s = (self.abs() ** p).sum(dim, keepdim=keepdim)
            return s._apply("norm", lambda a: ew.norm_root(a, sympy.sympify(p)))
        s = (self * self).sum(dim, keepdim=keepdim)
        return s._apply("norm", lambda a: ew.norm_root(a, sympy.Integer(2)))

    # ---- linear algebra
    def matmul(self, other):
        site = user_site()
        other = self.tracer.lift(other, site)
        x, y = self.tracer.precision_of(self), self.tracer.precision_of(other)
        if x is not None and y is not None and x != y and isinstance(self.shape, tuple) \
                and isinstance(other.shape, tuple) and self.shape and other.shape:
            from .errors import DtypeError, matmul_dtype_message

            message = matmul_dtype_message(len(self.shape), len(other.shape), x, y)
            raise DtypeError(f"matmul: {message}{_at(site)}")
        solved = matmul_rewrite(self, other, site)   # inv(S) @ B -> solve(S, B)
        if solved is not None:
            return solved
        return self.tracer.structural("matmul", (self, other), site=site)

    def mm(self, other):
        return self.matmul(other)

    bmm = mv = mm
