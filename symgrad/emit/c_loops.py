"""The C target's building blocks: its type names, the libm functions glibc's libmvec
vectorizes, the names a C variable cannot take, the size up to which a matmul runs in C, and
the index arithmetic of the loops it writes (contiguous, broadcast and reduced strides,
coalesced loop dims, a loop nest's lines, with its SIMD and OpenMP pragmas).

Moved verbatim out of `symgrad/emit/c.py` (which re-exports every name); the planner
(`emit/c_plan.py`), the segment writer (`emit/c_segment.py`) and the emitter (`emit/c.py`)
use it.
"""
from __future__ import annotations

import re

from ..ops.table import libmvec

C_TYPES = {"bool": "unsigned char", "int": "int64_t"}
NUMPY_TYPES = {"bool": "numpy.bool_", "int": "numpy.int64", "float": "dtype"}

# libm functions with a libmvec variant in glibc >= 2.35 (x86_64): (name, number of arguments).
# Declaring any other function `declare simd` would link against a vector symbol that is absent.
# The op table's entries marked libmvec (symgrad/ops/table.py), and two glibc functions no entry
# names: cbrt (the C99 printer's x**(1/3)) and exp10.
VECTOR_MATH = {**libmvec(), "cbrt": 1, "exp10": 1}

# Names a variable cannot take in C (keywords, and math.h names the kernels may call).
_C_RESERVED = frozenset("""
auto break case char const continue default do double else enum extern float for goto if inline
int long register restrict return short signed sizeof static struct switch typedef union
unsigned void volatile while _Bool _Complex _Imaginary bool true false NAN INFINITY
fabs fabsf fmax fmaxf fmin fminf sqrt sqrtf copysign copysignf floor floorf ceil ceilf round
j0 j1 jn y0 y1 yn erf erff erfc erfcf gamma lgamma tgamma pow powf main
""".split()) | frozenset(VECTOR_MATH) | frozenset(n + "f" for n in VECTOR_MATH)


# Matmuls up to this many multiply-adds run as C loops inside a fused segment; larger ones are
# NumPy (BLAS) calls, whose fixed cost (~5 us from Python) is then small against the work.
MATMUL_C_MAX = 1 << 18

# Names the generated C functions use for their own locals; a variable with one of these
# names is renamed (suffix "_") in C.
_INTERNAL = re.compile(r"^(?:[ik]\d+|acc\d*|best|seen_nan|at|scratch|val|size|part|r_\w+)$")


# --------------------------------------------------------------------------- C text
def _cname(name):
    return name + "_" if name in _C_RESERVED or _INTERNAL.match(name) else name


def _contiguous(shape):
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def _is_contiguous(val):
    return all(n == 1 or s == c for n, s, c in zip(val.shape, val.strides,
                                                    _contiguous(val.shape)))


# The shape of a shape-generic segment's one loop: `size` elements, a parameter of its C function.
GENERIC = ("size",)


def _size(shape):
    if shape == GENERIC:
        return GENERIC[0]
    n = 1
    for d in shape:
        n *= d
    return n


def _broadcast_strides(val, shape):
    """val's strides read as an operand of `shape` (0 along padded and broadcast dims)."""
    pad = len(shape) - len(val.shape)
    return tuple(0 if d < pad or val.shape[d - pad] == 1 else val.strides[d - pad]
                 for d in range(len(shape)))


def _reduced_strides(val, shape, dims, keepdim):
    """Strides over `shape` of a value whose `dims` were reduced away (0 along them)."""
    if keepdim:
        return tuple(0 if d in dims or val.shape[d] == 1 else val.strides[d]
                     for d in range(len(shape)))
    out, j = [], 0
    for d in range(len(shape)):
        if d in dims:
            out.append(0)
        else:
            out.append(0 if val.shape[j] == 1 else val.strides[j])
            j += 1
    return tuple(out)


def _kept_strides(shape, dims):
    """Strides of a C-contiguous reduction result over `shape` reduced along `dims`, per dim
    of `shape` (0 along the reduced dims)."""
    kept = [d for d in range(len(shape)) if d not in dims]
    out = [0] * len(shape)
    for d, st in zip(kept, _contiguous([shape[d] for d in kept])):
        out[d] = st
    return out


def _loops(extents, strides_of, index):
    """Coalesced loop dims: [(extent, [stride per operand])] over the dims of size > 1.

    Adjacent dims merge when every operand steps through them as through one dim.
    """
    groups = []
    for d, n in enumerate(extents):
        if n == 1:
            continue
        st = [s[d] for s in strides_of]
        if groups and all(prev == s * n for prev, s in zip(groups[-1][1], st)):
            groups[-1] = (groups[-1][0] * n, st)
        else:
            groups.append((n, st))
    return [(index.format(k), n, st) for k, (n, st) in enumerate(groups)]


def _at(loops, j, extra=""):
    """Index expression of operand j in the loop nest."""
    terms = []
    for name, _, st in loops:
        if st[j] == 1:
            terms.append(name)
        elif st[j]:
            terms.append(f"{name}*{st[j]}")
    if extra:
        terms.append(extra)
    return " + ".join(terms) or "0"


def _nest(loops, body, inner_pragma="SYMGRAD_SIMD", threads_if=None):
    """Lines of a loop nest around `body`; the innermost loop gets `inner_pragma`, and with
    `threads_if` (an element count) the outermost is split over SYMGRAD_THREADS threads."""
    lines = []
    for k, (name, n, _) in enumerate(loops):
        pad = "    " * k
        innermost = k == len(loops) - 1
        if k == 0 and threads_if is not None:
            simd = " simd" if innermost and inner_pragma else ""
            if str(threads_if).isdigit():
                # a static size decides at compile time: a small loop keeps its plain SIMD
                # form (with an if() clause gcc left a 64-element loop unvectorized)
                lines += [f"#if SYMGRAD_THREADS > 1 && {threads_if} >= SYMGRAD_PARALLEL_MIN",
                          f"#pragma omp parallel for{simd} schedule(static) "
                          f"num_threads(symgrad_threads) if(symgrad_threads > 1)"]
            else:
                lines += ["#if SYMGRAD_THREADS > 1",
                          f"#pragma omp parallel for{simd} schedule(static) "
                          f"num_threads(symgrad_threads) if(symgrad_threads > 1 && "
                          f"{threads_if} >= SYMGRAD_PARALLEL_MIN)"]
            if simd:
                lines += ["#else", pad + inner_pragma]
            lines.append("#endif")
            if simd:
                inner_pragma = None
        if innermost and inner_pragma:
            lines.append(pad + inner_pragma)
        lines.append(pad + f"for (int64_t {name} = 0; {name} < {n}; {name}++) {{")
    pad = "    " * len(loops)
    lines += [pad + b for b in body]
    for k in reversed(range(len(loops))):
        lines.append("    " * k + "}")
    return lines
