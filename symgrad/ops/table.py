"""The elementwise math ops, one entry each: the lists other layers keep are made from here.

An entry says what the layers above need to know about one op:

- `name`: torch's name. The traced value's method (`x.sinh()`), the runtime Tensor's and the
  function `sg.sinh` all use it.
- `formula`: how the tracer computes it, as the dotted name of a one-argument function:
  `sympy.<f>` or `ew.<f>` (`symgrad.ops.elementwise`). The tracer makes its method from it
  (`SymbolicTensor.<name>` and every alias). None: the tracer's method is written by hand
  (a formula that is not one function call, or a stable primitive of `symgrad.ops.stable`).
- `aliases`: numpy's spellings of the same op (`arcsinh`); the traced value gets them too.
- `builtin`: the op has a checked-in generated module, `symgrad/_generated/<name>.py`
  (`symgrad._builtins.UNARY`, in the order of this table; `python -m symgrad._builtins`
  regenerates them).
- `cost`: the relative cost of one NumPy pass of its function (a multiply is 1), which
  `symgrad.optimize.OP_COST` uses to decide what to save for the backward; keyed by the name
  of the SymPy function the formula prints as (`cost_key`, default `name`).

Adding an elementwise op whose formula is one function is one entry here (the function itself,
its derivative and its printers live in `symgrad.ops.elementwise` / `stable` when SymPy has
none). tests/test_op_table.py checks that the derived lists are the table's.

This module imports nothing: `import symgrad` reads it without SymPy.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Elementwise:
    name: str
    formula: str | None = None
    aliases: tuple[str, ...] = ()
    builtin: bool = False
    cost: int | None = None
    cost_key: str | None = None


E = Elementwise
# The built-in ops first, in the order of their generated modules (symgrad._builtins.UNARY).
ELEMENTWISE: tuple[Elementwise, ...] = (
    E("abs", builtin=True),                         # method by hand: also __abs__
    E("exp", "sympy.exp", builtin=True, cost=8),
    E("log", builtin=True, cost=12),                # method by hand: log(det(A)) -> logdet(A)
    E("log1p", builtin=True, cost=12),              # stable primitive
    E("expm1", builtin=True, cost=10),              # stable primitive
    E("sqrt", "sympy.sqrt", builtin=True, cost=3),
    E("rsqrt", builtin=True),                       # 1 / sqrt(x)
    E("sin", "sympy.sin", builtin=True, cost=10),
    E("cos", "sympy.cos", builtin=True, cost=10),
    E("tan", "sympy.tan", builtin=True, cost=12),
    E("tanh", "sympy.tanh", builtin=True, cost=20),
    E("sigmoid", builtin=True, cost=10),            # stable primitive
    E("relu", "ew.relu", builtin=True),
    E("erf", builtin=True, cost=40),                # stable primitive
    E("neg", builtin=True),                         # -x
    E("sign", "sympy.sign", builtin=True),
    E("asin", "sympy.asin", ("arcsin",), builtin=True, cost=12),
    E("acos", "sympy.acos", ("arccos",), builtin=True, cost=12),
    E("atan", "sympy.atan", ("arctan",), builtin=True, cost=12),
    E("sinh", "sympy.sinh", builtin=True, cost=12),
    E("cosh", "sympy.cosh", builtin=True, cost=12),
    E("softplus", builtin=True, cost=14),           # stable primitive, beta and threshold
    E("log_sigmoid", builtin=True, cost=14),        # stable primitive
    E("square", builtin=True),                      # x * x
    E("reciprocal", builtin=True),                  # 1 / x
    # traced and run as composites (symgrad._composite_ops): no generated module of their own
    E("asinh", "sympy.asinh", ("arcsinh",)),
    E("acosh", "sympy.acosh", ("arccosh",)),
    E("atanh", "sympy.atanh", ("arctanh",)),
    E("log2"),                                      # log(x) / log(2)
    E("log10"),                                     # log(x) / log(10)
    E("exp2"),                                      # 2 ** x
    E("floor", "sympy.floor"),                      # piecewise constant: gradient 0, as torch
    E("ceil", "sympy.ceiling"),
    E("trunc", "ew.trunc", ("fix",)),
    E("erfc", cost=40),                             # stable primitive
)
del E


def builtin_names() -> tuple[str, ...]:
    """The ops with a generated module, in table order (symgrad._builtins.UNARY)."""
    return tuple(op.name for op in ELEMENTWISE if op.builtin)


def costs() -> dict[str, int]:
    """{SymPy function name: cost} of the ops that have one (part of optimize.OP_COST)."""
    return {op.cost_key or op.name: op.cost for op in ELEMENTWISE if op.cost is not None}


def traced_formulas() -> dict[str, tuple[str, str]]:
    """{method name: (module, function)} of the tracer's table-made methods, aliases included:
    module "sympy" or "ew" (symgrad.ops.elementwise)."""
    out = {}
    for op in ELEMENTWISE:
        if op.formula is not None:
            module, function = op.formula.split(".")
            for name in (op.name, *op.aliases):
                out[name] = (module, function)
    return out
