"""torch.special's names (`sg.special.expit`, `sg.special.ndtr`, ...), from symgrad's stable
primitives. Each works on runtime tensors (with autograd) and in a traced forward.

Importing this module imports no SymPy.
"""
from __future__ import annotations

import math

from ._api_helpers import _run, _where, _xlog1py_op, with_out
from ._runtime_ops import igamma as _igamma, igammac as _igammac   # sg.igamma's function
from ._spellings import _method

_xlogy = _method("xlogy")   # sg.xlogy's kind: x.xlogy(other) (a number first: made a tensor)

__all__ = ["expit", "logit", "erf", "erfc", "log1p", "expm1", "exp2", "xlogy", "xlog1py",
           "sinc", "logsumexp", "softmax", "log_softmax", "ndtr", "log_ndtr", "erfcx", "entr",
           "gammaln", "digamma", "psi", "polygamma", "multigammaln", "erfinv", "i0", "i0e",
           "i1", "i1e", "gammainc", "gammaincc"]


@with_out
def expit(input):
    """torch.special.expit: sigmoid."""
    return input.sigmoid()


@with_out
def logit(input, eps=None):
    """torch.special.logit: log(x / (1 - x)), x clamped to [eps, 1 - eps] when eps is given."""
    return input.logit(eps)


@with_out
def erf(input):
    """torch.special.erf."""
    return input.erf()


@with_out
def erfc(input):
    """torch.special.erfc (exact in the tail)."""
    return input.erfc()


@with_out
def log1p(input):
    """torch.special.log1p."""
    return input.log1p()


@with_out
def expm1(input):
    """torch.special.expm1."""
    return input.expm1()


@with_out
def exp2(input):
    """torch.special.exp2."""
    return input.exp2()


@with_out
def xlogy(input, other):
    """torch.special.xlogy: input * log(other), 0 where input is 0 (other not NaN)."""
    return _xlogy(input, other)


@with_out
def xlog1py(input, other):
    """torch.special.xlog1py: input * log1p(other), 0 where input is 0 (other not NaN)."""
    return _xlog1py_op(input, other)


@with_out
def sinc(input):
    """torch.special.sinc: sin(pi x) / (pi x), 1 at 0."""
    return input.sinc()


@with_out
def logsumexp(input, dim, keepdim=False):
    """torch.special.logsumexp."""
    return input.logsumexp(dim, keepdim)


def softmax(input, dim, *, dtype=None):
    """torch.special.softmax."""
    from .nn.functional import softmax as _softmax

    return _softmax(input, dim, dtype=dtype)


def log_softmax(input, dim, *, dtype=None):
    """torch.special.log_softmax."""
    from .nn.functional import log_softmax as _log_softmax

    return _log_softmax(input, dim, dtype=dtype)


_SQRT1_2 = math.sqrt(0.5)


def _ndtr(x):
    return 0.5 * (x * -_SQRT1_2).erfc()


@with_out
def ndtr(input):
    """torch.special.ndtr: the standard normal CDF, erfc(-x / sqrt 2) / 2 (exact in the lower
    tail)."""
    return _run("ndtr", "MulBackward1", _ndtr, input)


def _log_ndtr(x):
    # the stable primitive (finite down to -1e300, exact near 0 for large x)
    return x._stable("log_ndtr")


@with_out
def log_ndtr(input):
    """torch.special.log_ndtr: log of the standard normal CDF, finite for every finite x."""
    return _run("log_ndtr", "SpecialLogNdtrBackward0", _log_ndtr, input)


def _erfcx(x):
    # the stable primitive: exp(x**2) * erfc(x), finite where erfc underflows (x > 26.5)
    return x._stable("erfcx")


@with_out
def erfcx(input):
    """torch.special.erfcx: the scaled complementary error function exp(x**2) * erfc(x)
    (~ 1 / (x sqrt(pi)) for large x, where erfc underflows), derivative
    2 x erfcx(x) - 2 / sqrt(pi)."""
    return _run("erfcx", "SpecialErfcxBackward0", _erfcx, input)


def _entr(x):
    # -inf below 0 as log(relu(x)) (a -inf constant cannot be traced), with torch's NaN slope
    return _where(x < 0, x.relu().log(), -x.xlogy(x))


@with_out
def entr(input):
    """torch.special.entr: -x log x for x > 0, 0 at 0, -inf below."""
    return _run("entr", "SpecialEntrBackward0", _entr, input)


# the special functions of symgrad.ops.specfun (Tensor methods and traced methods alike)
@with_out
def gammainc(input, other):
    """torch.special.gammainc: the regularized lower incomplete gamma function P(a, x)
    (torch.igamma); gradient in x only, as torch."""
    return _igamma(input, other)


@with_out
def gammaincc(input, other):
    """torch.special.gammaincc: the regularized upper incomplete gamma function Q(a, x)
    (torch.igammac); gradient in x only, as torch."""
    return _igammac(input, other)


@with_out
def gammaln(input):
    """torch.special.gammaln: log|Gamma(x)| (torch.lgamma)."""
    return input.lgamma()


@with_out
def digamma(input):
    """torch.special.digamma: d/dx log Gamma(x)."""
    return input.digamma()


@with_out
def psi(input):
    """torch.special.psi: digamma."""
    return input.digamma()


@with_out
def polygamma(n, input):
    """torch.special.polygamma(n, input): the n-th derivative of digamma (n a non-negative int)."""
    return input.polygamma(n)


@with_out
def multigammaln(input, p):
    """torch.special.multigammaln: log of the multivariate gamma function (torch.mvlgamma)."""
    return input.mvlgamma(p)


@with_out
def erfinv(input):
    """torch.special.erfinv: the inverse error function."""
    return input.erfinv()


@with_out
def i0(input):
    """torch.special.i0: modified Bessel function of the first kind, order 0."""
    return input.i0()


@with_out
def i0e(input):
    """torch.special.i0e: exp(-|x|) i0(x)."""
    return input.i0e()


@with_out
def i1(input):
    """torch.special.i1: modified Bessel function of the first kind, order 1."""
    return input.i1()


@with_out
def i1e(input):
    """torch.special.i1e: exp(-|x|) i1(x)."""
    return input.i1e()
