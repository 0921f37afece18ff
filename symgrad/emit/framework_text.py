"""The framework targets' spelling of a line: a NumPy target's statement translated call by
call into torch's names (`torch_text`: `numpy.arctan2` -> `torch.atan2`, a scalar torch
refuses -> `torch.clamp_min(x, 0.0)`, the stable primitives to torch's own kernels) or into
jax.numpy's (`jax_text`, `_jax_line` with `JAX_NATIVE`: `numpy.` spelled `jnp.`, the stable
primitives to jax.nn / jax.scipy.special). emit/frameworks.py and the loops of
emit/framework_scan.py and emit/torch_lines.py print with these; emit/frameworks.py
re-exports them.
"""
from __future__ import annotations

import re

from ..errors import CompileError
from ..ops.table import numpy_aliases

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
    "isnan isfinite isinf isposinf isneginf floor ceil trunc copysign hypot logaddexp "
    "logaddexp2 fmod remainder floor_divide fmax fmin logical_and logical_or logical_not "
    "logical_xor heaviside sinc clip round "
    "signbit nextafter reciprocal negative deg2rad rad2deg less greater less_equal "
    "greater_equal equal not_equal matmul nan inf pi".split())

# functions whose arguments torch takes as tensors only
TORCH_TENSOR_ARGS = frozenset(
    "arctan2 hypot logaddexp logaddexp2 nextafter heaviside copysign fmod remainder fmax "
    "fmin".split())

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


JAX_NATIVE = {
    "_sigmoid": "jax.nn.sigmoid", "_softplus": "jax.nn.softplus",
    "_erf": "jax.scipy.special.erf", "_erfc": "jax.scipy.special.erfc",
    "_erfcx": "jax.scipy.special.erfcx", "_log_ndtr": "jax.scipy.special.log_ndtr",
    "_lgamma": "jax.scipy.special.gammaln", "_digamma": "jax.scipy.special.digamma",
    "_polygamma": "jax.scipy.special.polygamma", "_erfinv": "jax.scipy.special.erfinv",
    "_hypot": "jnp.hypot", "_copy": "", "_einsum": "jnp.einsum",
}


def _jax_line(code):
    code = jax_text(code)

    def native(m):
        name = m.group(1)
        return f"{JAX_NATIVE[name]}(" if name in JAX_NATIVE else m.group(0)
    return re.sub(r"(?<![\w.])(_\w+)\(", native, code)
