"""The op table: one entry per op, from which the lists the other layers keep are made.

Three kinds of entry, in three tuples: `ELEMENTWISE` (the elementwise ops of one operand),
`BINARY` (the elementwise ops of two operands, and the three of three: `lerp`, `addcmul`,
`addcdiv`) and `STRUCTURAL` (reductions, movement, products, scans: what the tracer records as
a structural node or the runtime runs as one). An entry says what the layers above need to know
about one op:

- `name`: torch's name. The traced value's method (`x.sinh()`), the runtime Tensor's and the
  function `sg.sinh` all use it.
- `formula`: how the tracer computes an elementwise op, as the dotted name of a function of its
  operands: `sympy.<f>`, `ew.<f>` (`symgrad.ops.elementwise`), `stable.<f>` or `specfun.<f>`.
  The tracer makes its method from it (`SymbolicTensor.<name>` and every alias). None: the
  tracer's method is written by hand (a formula that is not one function call, or one with
  parameters). The function itself is one SymPy class: forward, derivative (`fdiff`) and
  printers (`_numpycode`, `_ccode`) together, as JAX's primitive and PyTensor's op.
- `aliases`: numpy's spellings of the same op (`arcsinh`); every layer gets them too.
- `builtin`: the op has a checked-in generated module, `symgrad/_generated/<name>.py`
  (`symgrad._builtins.UNARY` / `BINARY`, in the order of this table; `python -m
  symgrad._builtins` regenerates them).
- `cost`: the relative cost of one NumPy pass of its function (a multiply is 1), which
  `symgrad.optimize.OP_COST` (`STRUCTURAL_COST` for a structural op) uses to decide what to
  save for the backward; keyed by the name of the SymPy function the formula prints as
  (`cost_key`, default `name`).
- `node`: torch's name of the backward node (`y.grad_fn.name()`); default `<Name>Backward0`
  (`log_sigmoid` -> `LogSigmoidBackward0`). A tuple where torch has several, by the call's
  form (`sum`: over every dim, over some; `pow`: tensor ** number, tensor ** tensor,
  number ** tensor; `sub`: a - b, number - b; a composite's pair: its last operand a number,
  a tensor, as `fmod(a, 2.0)` FmodBackward0 and `fmod(a, b)` FmodBackward1).
- `runtime`: how the runtime runs it. "fast": a function of `symgrad._runtime_ops` made from the
  entry over the generated module (`sg.exp`, `Tensor.exp`), with `saves` (what torch saves for
  the backward: "input", "output", "inputs", "condition", "nothing") and `to_float` (an integer
  input is computed in the default float dtype); "own": a runtime function written by hand
  (keyword arguments, several torch nodes), which reads its node name and `saves` here;
  "composite": a forward-only Function whose forward is the traced method and whose backward
  is generated on first use per signature (`symgrad._composite_ops`); "ir": a node of the
  compiler's IR only, with no public spelling (`sum_to`, `max_dim`).
- `integral`: torch keeps an integer input's dtype (`floor`, `fmod`, `flip`); the others
  compute in floats.
- `arity`: the number of tensor operands that promote together (2 for `atan2`, `outer`).
- `tensors`: (an op of several operands) the positions torch accepts only as a Tensor, as its
  parameter names: a Python number there is torch's TypeError (`torch.maximum(x, 2.0)`,
  `torch.fmod(2.0, x)`); the other positions take numbers (`torch.pow(2.0, x)`).
- `function`: `sg.<name>(x, ...)` is `x.<name>(...)` (False where `sg.<name>` is something
  else: `sg.trace` is the tracer, `sg.polygamma(n, x)` takes torch's order).
- `hot`: (a fast-path op) `Tensor.<name>` is the runtime function itself, one Python frame
  less per call; the other fast-path ops' Tensor methods forward to it.
- `traced`: (a structural op) the traced value has the method too (not `as_strided`, a
  memory-layout op).
- `libmvec`: the C function of this name has a vector variant in glibc's libmvec
  (`symgrad.emit.c.VECTOR_MATH`: the generated C declares it `omp declare simd`). The CUDA
  target prints through the same C printer (same spellings); the NumPy spelling is the SymPy
  function's `_numpycode`.

Adding an op whose formula is one function is one entry here (the function itself, its
derivative and its printers live in `symgrad.ops.elementwise` / `stable` / `specfun` when SymPy
has none). tests/test_op_table.py checks that the derived lists are the table's, and adds a
synthetic binary op in one entry to check that it reaches every layer.

What cannot be one entry, and why (tests/test_op_table.py checks this list):

- A structural op's shape rule, NumPy lowering and adjoint are a `Structural` class of
  `symgrad.ops.structural` (its VJP is a sub-graph of other structural ops, not a formula);
  its entry here holds its spellings, torch node, dtype rule and cost.
- `EXCEPTIONS` below: ops whose runtime function, tracer method or torch spelling is code
  rather than data, kept where that code lives.

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
    node: str | tuple[str, ...] | None = None
    runtime: str = "composite"
    saves: str | None = None
    to_float: bool = True
    integral: bool = False
    arity: int = 1
    function: bool = True
    libmvec: bool = False
    hot: bool = False
    tensors: tuple[str, ...] = ()


@dataclass(frozen=True)
class Structural:
    name: str
    aliases: tuple[str, ...] = ()
    node: str | tuple[str, ...] | None = None
    cost: int | None = None
    runtime: str = "composite"
    integral: bool = False
    arity: int = 1
    function: bool = True
    traced: bool = True


E = Elementwise
# The built-in ops first, in the order of their generated modules (symgrad._builtins.UNARY).
ELEMENTWISE: tuple[Elementwise, ...] = (
    # the runtime's fast paths: (hot) Tensor.exp is the function sg.exp itself
    E("abs", aliases=("absolute",), builtin=True,   # method by hand: also __abs__
      runtime="fast", saves="input", to_float=False, hot=True),
    E("exp", "sympy.exp", builtin=True, cost=8,
      runtime="fast", saves="output", hot=True, libmvec=True),
    E("log", builtin=True, cost=12,                 # method by hand: log(det(A)) -> logdet(A)
      runtime="fast", saves="input", hot=True, libmvec=True),
    E("log1p", builtin=True, cost=12, node="Log1PBackward0",   # stable primitive
      runtime="fast", saves="input", libmvec=True),
    E("expm1", builtin=True, cost=10,               # stable primitive
      runtime="fast", saves="output", libmvec=True),
    E("sqrt", "sympy.sqrt", builtin=True, cost=3,
      runtime="fast", saves="output", hot=True),
    E("rsqrt", builtin=True,                        # 1 / sqrt(x)
      runtime="fast", saves="output"),
    E("sin", "sympy.sin", builtin=True, cost=10,
      runtime="fast", saves="input", hot=True, libmvec=True),
    E("cos", "sympy.cos", builtin=True, cost=10,
      runtime="fast", saves="input", hot=True, libmvec=True),
    E("tan", "sympy.tan", builtin=True, cost=12,
      runtime="fast", saves="output", libmvec=True),
    E("tanh", "sympy.tanh", builtin=True, cost=20,
      runtime="fast", saves="output", hot=True, libmvec=True),
    E("sigmoid", builtin=True, cost=10,             # stable primitive
      runtime="fast", saves="output", hot=True),
    E("relu", "ew.relu", builtin=True,
      runtime="fast", saves="output", to_float=False, hot=True),
    E("erf", builtin=True, cost=40,                 # stable primitive
      runtime="fast", saves="input", libmvec=True),
    E("neg", builtin=True,                          # -x
      runtime="fast", saves="nothing", to_float=False, hot=True),
    E("sign", "sympy.sign", builtin=True, runtime="own"),   # bool and int inputs: by hand
    E("asin", "sympy.asin", ("arcsin",), builtin=True, cost=12, libmvec=True),
    E("acos", "sympy.acos", ("arccos",), builtin=True, cost=12, libmvec=True),
    E("atan", "sympy.atan", ("arctan",), builtin=True, cost=12, libmvec=True),
    E("sinh", "sympy.sinh", builtin=True, cost=12, libmvec=True),
    E("cosh", "sympy.cosh", builtin=True, cost=12, libmvec=True),
    E("softplus", builtin=True, cost=14),           # stable primitive, beta and threshold
    E("log_sigmoid", builtin=True, cost=14),        # stable primitive
    E("square", builtin=True, node="PowBackward0",  # x * x; the runtime's is pow(x, 2)
      runtime="own"),
    E("reciprocal", builtin=True),                  # 1 / x
    # traced and run as composites (symgrad._composite_ops): no generated module of their own
    E("asinh", "sympy.asinh", ("arcsinh",), libmvec=True),
    E("acosh", "sympy.acosh", ("arccosh",), libmvec=True),
    E("atanh", "sympy.atanh", ("arctanh",), libmvec=True),
    E("log2", libmvec=True),                        # log(x) / log(2)
    E("log10", libmvec=True),                       # log(x) / log(10)
    E("exp2", libmvec=True),                        # 2 ** x
    E("floor", "sympy.floor", integral=True),       # piecewise constant: gradient 0, as torch
    E("ceil", "sympy.ceiling", integral=True),
    E("trunc", "ew.trunc", ("fix",), integral=True),
    E("erfc", cost=40, libmvec=True),               # stable primitive
    # methods by hand (formulas of several functions, parameters)
    E("round", integral=True),                      # decimals=
    E("frac"),                                      # x - trunc(x)
    E("logit"),                                     # eps=
    E("sinc"),                                      # stable.sinc(pi x)
    E("deg2rad", node="Deg2RadBackward0"),
    E("rad2deg", node="Rad2DegBackward0"),
    # special functions (symgrad.ops.specfun; the tracer's _special)
    E("lgamma"),
    E("digamma"),
    E("polygamma", function=False),                 # sg.polygamma(n, input): torch's order
    E("erfinv"),
    E("i0"),
    E("i0e", node="SpecialI0EBackward0"),
    E("i1", node="SpecialI1Backward0"),
    E("i1e", node="SpecialI1EBackward0"),
    E("mvlgamma"),                                  # p=
    E("nan_to_num", integral=True),                 # nan=, posinf=, neginf=
)

# Two operands (lerp, addcmul, addcdiv: three). The built-in ops first, in the order of their
# generated modules (symgrad._builtins.BINARY).
BINARY: tuple[Elementwise, ...] = (
    E("add", builtin=True, runtime="own", saves="nothing", integral=True, arity=2),   # alpha=
    E("sub", builtin=True, node=("SubBackward0", "RsubBackward1"), runtime="own",
      saves="nothing", integral=True, arity=2),
    E("mul", builtin=True, runtime="own", saves="condition", integral=True, arity=2),
    E("div", builtin=True, runtime="own", saves="inputs", arity=2),   # rounding_mode=
    E("pow", builtin=True, cost=12, cost_key="Pow",
      node=("PowBackward0", "PowBackward1", "PowBackward2"), runtime="own", saves="input",
      arity=2, libmvec=True),
    E("maximum", "ew.maximum", builtin=True, runtime="fast", saves="inputs", arity=2,
      tensors=("input", "other")),
    E("minimum", "ew.minimum", builtin=True, runtime="fast", saves="inputs", arity=2,
      tensors=("input", "other")),
    E("atan2", "ew.atan2", ("arctan2",), builtin=True, cost=14, arity=2, libmvec=True,
      tensors=("input", "other")),
    # traced and run as composites
    E("hypot", "ew.hypot", arity=2, libmvec=True, tensors=("input", "other")),
    E("fmax", "ew.fmax", integral=True, arity=2, tensors=("input", "other")),   # NaN-ignoring
    E("fmin", "ew.fmin", integral=True, arity=2, tensors=("input", "other")),
    E("ldexp", arity=2, tensors=("input", "other")),   # input * exp2(other)
    E("logaddexp", "stable.logaddexp", cost=16, arity=2, tensors=("input", "other")),
    E("logaddexp2", arity=2, tensors=("input", "other")),   # logaddexp of operands * log(2)
    E("fmod", "ew.fmod", node=("FmodBackward0", "FmodBackward1"), integral=True, arity=2,
      tensors=("input",)),
    E("remainder", "ew.remainder", node=("RemainderBackward0", "RemainderBackward1"),
      integral=True, arity=2),                      # also x % y
    E("floor_divide", integral=True, arity=2),      # floor(a / b); also x // y
    E("xlogy", "ew.xlogy", node=("XlogyBackward2", "XlogyBackward0"), arity=2),
    E("clamp_min", node=("ClampMinBackward0", "ClampMinBackward1"), integral=True,
      arity=2, tensors=("input",)),                 # clamp(min=)
    E("clamp_max", node=("ClampMaxBackward0", "ClampMaxBackward1"), integral=True, arity=2,
      tensors=("input",)),
    E("lerp", node=("LerpBackward0", "LerpBackward1"),   # input + weight * (end - input)
      arity=2, tensors=("input", "end")),
    E("addcmul", arity=3, tensors=("input", "tensor1", "tensor2")),   # value=
    E("addcdiv", arity=3, tensors=("input", "tensor1", "tensor2")),
    # their runtime functions by hand (symgrad._runtime_views: mpmath-free series in NumPy)
    E("igamma", "specfun.igamma", runtime="own", arity=2, tensors=("input", "other")),
    E("igammac", "specfun.igammac", runtime="own", arity=2, tensors=("input", "other")),
)
del E

S = Structural
STRUCTURAL: tuple[Structural, ...] = (
    # reductions
    S("sum", node=("SumBackward0", "SumBackward1"), cost=3, runtime="own", integral=True),
    S("mean", node=("MeanBackward0", "MeanBackward1"), cost=3, runtime="own"),
    S("prod", node=("ProdBackward0", "ProdBackward1"), cost=3, runtime="own", integral=True),
    S("amax", cost=3, integral=True),
    S("amin", cost=3, integral=True),
    S("argmax", cost=3, runtime="own"),
    S("argmin", cost=3, runtime="own"),
    S("max_dim", cost=3, runtime="ir"),             # x.max(dim): values and indices
    S("min_dim", cost=3, runtime="ir"),
    S("all", runtime="own"),
    S("any", runtime="own"),
    S("var"),
    S("std"),
    S("norm", node="LinalgVectorNormBackward0"),
    S("logsumexp"),
    S("softmax"),
    S("log_softmax"),
    S("cumsum", integral=True),
    S("cumprod", integral=True),
    S("logcumsumexp"),
    S("cummax"),
    S("cummin"),
    # products
    S("matmul", node=("MmBackward0", "DotBackward0", "MvBackward0", "UnsafeViewBackward0"),
      cost=24, runtime="own", arity=2),     # 2-D @ 2-D (or 1-D @ 2-D), 1-D @ 1-D, 2-D @ 1-D, N-D
    S("outer", node="MulBackward0", integral=True, arity=2),
    S("ger", node="MulBackward0", integral=True, arity=2),
    S("dot", integral=True, arity=2),
    S("vdot", integral=True, arity=2),
    S("inner", node="ViewBackward0", integral=True, arity=2),
    S("cross", node="LinalgCrossBackward0", integral=True, arity=2),
    S("kron", node="UnsafeViewBackward0", integral=True, arity=2),
    # movement and views run by the runtime itself (symgrad._runtime_views)
    S("reshape", node=("ViewBackward0", "UnsafeViewBackward0"), runtime="own"),   # view, copy
    S("view", runtime="own", node="ViewBackward0"),
    S("flatten", node=("ViewBackward0", "UnsafeViewBackward0"), runtime="own"),   # reshape's
    S("permute", runtime="own"),
    S("transpose", ("swapaxes",), runtime="own"),
    S("swapdims", node="TransposeBackward0", runtime="own", traced=False),   # Tensor's alias
    S("t", node="TBackward0", runtime="own"),
    S("expand", runtime="own"),
    S("squeeze", node=("SqueezeBackward0", "SqueezeBackward1", "SqueezeBackward2"),
      runtime="own"),                       # every dim, one dim, several dims
    S("unsqueeze", runtime="own"),
    S("split", node=("SplitBackward0", "SplitWithSizesBackward0"), runtime="own"),
    S("chunk", node="SplitBackward0", runtime="own"),   # split's
    S("unbind", runtime="own"),
    S("as_strided", node="AsStridedBackward0", runtime="own", traced=False),   # memory layout
    S("cat", runtime="own", function=False),        # sg.cat(tensors, dim): no method
    S("stack", runtime="own", function=False),
    # movement, triangles, diagonals
    S("flip", integral=True),
    S("roll", integral=True),
    S("repeat", integral=True, function=False),     # a method only (torch has no torch.repeat)
    S("tile", node="RepeatBackward0", integral=True),
    S("repeat_interleave", node="ViewBackward0", integral=True),
    S("tril", integral=True),
    S("triu", integral=True),
    S("diagonal", integral=True),
    S("diag_embed", integral=True),
    S("diag", node="DiagEmbedBackward0", integral=True),
    S("trace", integral=True, function=False),      # sg.trace(fn, ...) is the tracer
    S("narrow", node="SliceBackward0", integral=True),
    S("unflatten", node="ViewBackward0", integral=True),
    S("movedim", node="PermuteBackward0", integral=True),
    S("moveaxis", node="PermuteBackward0", integral=True),   # numpy's name: its own Function
    S("diff", node="SubBackward0", integral=True),
    # sorting and gathering
    S("sort"),
    S("argsort"),
    S("msort", node="SortBackward0"),
    S("topk"),
    S("kthvalue"),
    S("gather"),
    S("take_along_dim", node="GatherBackward0"),
    S("index_select"),
    # the compiler's own nodes: sum a broadcast gradient down; scatter an indexed gradient back
    S("sum_to", cost=3, runtime="ir"),
    S("index_back", cost=3, runtime="ir"),
)
del S

# Ops whose definition is code rather than an entry, where that code lives (see the module
# docstring); tests/test_op_table.py checks that each exists and has no entry above.
EXCEPTIONS = {
    # public-layer functions composed of other ops (symgrad._functions), methods of both kinds
    # of tensor through symgrad._methods
    "copysign": "symgrad._functions: |input| with other's sign bit (a runtime branch on -0.0)",
    "heaviside": "symgrad._functions: a where() of two comparisons",
    "xlog1py": "symgrad._functions: x * log1p(y), 0 where x == 0",
    "float_power": "symgrad._functions: pow in float64",
    # torch's sign of complex numbers; of real ones sign (the runtime's Tensor.sgn is
    # Tensor.sign, symgrad._composite_ops.ALIASES); the traced value's method is x.sign()
    "sgn": "symgrad._trace_elementwise: a method calling sign()",
    # several outputs or index operands, parameters that choose the graph
    "where": "symgrad._runtime_ops / Tracer.where: a bool condition operand, no gradient to it",
    "clamp": "symgrad._runtime_ops: number or tensor bounds choose ClampBackward0/1",
    "max": "symgrad._runtime_ops: a full reduction or (values, indices) by dim (max_dim)",
    "min": "symgrad._runtime_ops: a full reduction or (values, indices) by dim (min_dim)",
}


def _all():
    return (*ELEMENTWISE, *BINARY, *STRUCTURAL)


def builtin_names() -> tuple[str, ...]:
    """The ops with a generated module, in table order (symgrad._builtins.UNARY)."""
    return tuple(op.name for op in ELEMENTWISE if op.builtin)


def binary_builtin_names() -> tuple[str, ...]:
    """The two-operand ops with a generated module, in table order (symgrad._builtins.BINARY)."""
    return tuple(op.name for op in BINARY if op.builtin)


def costs() -> dict[str, int]:
    """{SymPy function name: cost} of the elementwise ops that have one (part of
    optimize.OP_COST)."""
    return {op.cost_key or op.name: op.cost for op in (*ELEMENTWISE, *BINARY)
            if op.cost is not None}


def structural_costs() -> dict[str, int]:
    """{IR op: cost} of the structural ops that have one (optimize.STRUCTURAL_COST)."""
    return {op.name: op.cost for op in STRUCTURAL if op.cost is not None}


def traced_formulas(entries=None) -> dict[str, tuple[str, str]]:
    """{method name: (module, function)} of the tracer's table-made methods, aliases included:
    module "sympy", "ew" (symgrad.ops.elementwise), "stable" or "specfun". `entries`: default
    the one-operand ops (BINARY for the two-operand ones)."""
    out = {}
    for op in ELEMENTWISE if entries is None else entries:
        if op.formula is not None:
            module, function = op.formula.split(".")
            for name in (op.name, *op.aliases):
                out[name] = (module, function)
    return out


def node_name(op) -> str | tuple[str, ...]:
    """torch's backward node name(s) of entry `op` (see the module docstring)."""
    if op.node is not None:
        return op.node
    return "".join(part.capitalize() for part in op.name.split("_")) + "Backward0"


def node_names() -> dict[str, str | tuple[str, ...]]:
    """{name: torch's node name(s)} of every entry (aliases included)."""
    return {s: node_name(op) for op in _all() for s in (op.name, *op.aliases)}


def runtime(kind: str, entries=None) -> tuple:
    """The entries the runtime runs as `kind` ("fast", "own", "composite", "ir")."""
    return tuple(op for op in (_all() if entries is None else entries) if op.runtime == kind)


def composite_names() -> tuple[str, ...]:
    """The ops the runtime runs as composites (symgrad._composite_ops.COMPOSITE)."""
    return tuple(op.name for op in runtime("composite"))


def aliases() -> dict[str, str]:
    """{alias: name} of every entry."""
    return {alias: op.name for op in _all() for alias in op.aliases}


def numpy_aliases() -> dict[str, str]:
    """{numpy's name: torch's name} of the elementwise ops (arcsin: asin, fix: trunc)."""
    return {alias: op.name for op in (*ELEMENTWISE, *BINARY) for alias in op.aliases}


def spellings(predicate=lambda op: True) -> tuple[str, ...]:
    """Every spelling (name, then aliases) of the entries `predicate` takes, in table order."""
    return tuple(s for op in _all() if predicate(op) for s in (op.name, *op.aliases))


def public_functions() -> tuple[str, ...]:
    """The spellings `sg.<name>(x, ...)` calls as `x.<name>(...)`."""
    return spellings(lambda op: op.runtime != "ir" and op.function)


def libmvec() -> dict[str, int]:
    """{C function: number of arguments} of the ops with a libmvec vector variant."""
    return {op.name: op.arity for op in (*ELEMENTWISE, *BINARY) if op.libmvec}


def tensor_operands() -> dict[str, tuple[str, ...]]:
    """{spelling: the parameter names of the leading operands torch takes only as Tensors}
    of the ops whose entry says (`tensors`), aliases included."""
    out = {}
    for op in BINARY:
        if op.tensors:
            for name in (op.name, *op.aliases):
                out[name] = op.tensors
    return out


def number_operand_error(name: str, tensors, args, method: bool = False):
    """torch's TypeError where an operand that op `name` takes only as a Tensor (`tensors`,
    its entry's parameter names) is a Python number in `args` (its operands in order, the
    input first); None where there is none. `method`: `x.<name>(...)`, whose positions
    count from the first argument after x, as torch's do."""
    import numbers

    for position, (param, value) in enumerate(zip(tensors, args)):
        if isinstance(value, numbers.Number):
            shown = position if method else position + 1
            return TypeError(
                f"{name}(): argument '{param}' (position {shown}) must be Tensor, not "
                f"{type(value).__name__} (torch.{name} takes no Python number there: "
                f"make it a tensor, e.g. sg.full_like(x, value))")
    return None
