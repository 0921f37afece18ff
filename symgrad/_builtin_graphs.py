"""The built-in tensor ops' traced graphs: the op table's ops with a generated module, and
each one's forward traced *shape-generically* (shapes known only at run time; structural
parameters such as `dim` become keyword parameters of the generated functions), so one
generated module serves every shape.

It sits below the compiler, which compiles a built-in op's graph on demand for a higher order
(`compiler.builtin_compiled`); `symgrad/_builtins.py`, above the compiler, writes the checked-in
modules of `symgrad/_generated/` (`python -m symgrad._builtins`). The graphs are traced in this
file: trace.py's user sites skip it (a built-in op has no user line). Their `source` stays
`symgrad/_builtins.py:<op>`, the name the generated modules and the runtime know them by.
"""
from __future__ import annotations

from .graph import Graph, Param
from .ops.table import binary_builtin_names, builtin_names

UNARY = builtin_names()   # the op table's elementwise ops with a generated module, in its order


def _binary_forward(name):
    return lambda a, b: getattr(a, name)(b)   # a.add(b) is a + b, a.pow(b) is a ** b


# the op table's two-operand ops with a generated module, in its order: {name: forward}
BINARY = {name: _binary_forward(name) for name in binary_builtin_names()}
REDUCTIONS = {"sum": "sum", "mean": "mean", "prod": "prod", "max": "amax", "min": "amin"}
# op name -> (structural op, input names, parameter names)
STRUCTURAL_OPS = {
    "max_dim": ("max_dim", ("x",), ("dim", "keepdim")),
    "min_dim": ("min_dim", ("x",), ("dim", "keepdim")),
    "matmul": ("matmul", ("a", "b"), ()),
    "reshape": ("reshape", ("x",), ("shape",)),
    "permute": ("permute", ("x",), ("dims",)),
    "expand": ("expand", ("x",), ("sizes",)),
    "getitem": ("getitem", ("x",), ("index",)),
    "squeeze": ("squeeze", ("x",), ("dim",)),
    "unsqueeze": ("unsqueeze", ("x",), ("dim",)),
}

OPS = UNARY + tuple(BINARY) + ("pow_scalar",) + tuple(REDUCTIONS) + ("where", "clamp") \
    + tuple(STRUCTURAL_OPS)

# Built-in ops whose torch backward is differentiable in the operand of its mask: relu's is
# threshold_backward(grad, result), so with create_graph its gradient requires grad when the
# input does (where, maximum, clamp and max mask with a bool tensor: theirs do not), and so
# do its higher derivatives. Their derivative modules, of every order, count every operand as
# a dependence (Graph.dependencies(every_operand=True)).
MASK_DIFFERENTIABLE = ("relu",)


def builtin_graph(op: str) -> Graph:
    """The generic traced graph of built-in `op`."""
    from .trace import Tracer

    tr = Tracer(generic=True)
    params: tuple[str, ...] = ()
    constant: tuple[str, ...] = ()
    if op == "pow_scalar":
        # x ** p for a Python number p (torch's PowBackward0): no gradient for p, so its
        # backward is p * x**(p - 1) alone (pow's also computes p's, x**p * log(x), and masks
        # both where p is 0, which the runtime sends to pow)
        inputs = (tr.input("a", None), tr.input("b", None))
        outs = (inputs[0] ** inputs[1],)
        constant = ("b",)
    elif op in UNARY:
        x = tr.input("x", None)
        inputs = (x,)
        out = -x if op == "neg" else getattr(x, op)()
        outs = (out,)
    elif op in BINARY:
        inputs = (tr.input("a", None), tr.input("b", None))
        outs = (BINARY[op](*inputs),)
    elif op == "where":
        inputs = (tr.input("condition", None, "bool"), tr.input("a", None), tr.input("b", None))
        outs = (tr.where(*inputs),)
    elif op == "clamp":
        inputs = (tr.input("x", None), tr.input("min", None), tr.input("max", None))
        outs = (inputs[0].clamp(inputs[1], inputs[2]),)
    elif op in REDUCTIONS:
        x = tr.input("x", None)
        inputs = (x,)
        params = ("dim", "keepdim")
        outs = (tr.structural(REDUCTIONS[op], (x,), dims=Param("dim"), keepdim=Param("keepdim")),)
    elif op in STRUCTURAL_OPS:
        kind, names, params = STRUCTURAL_OPS[op]
        inputs = tuple(tr.input(n, None) for n in names)
        attrs = {p: Param(p) for p in params}
        if kind == "max_dim" or kind == "min_dim":
            arg = "argmax" if kind == "max_dim" else "argmin"
            outs = (tr.structural(kind, inputs, **attrs), tr.structural(arg, inputs, **attrs))
        else:
            outs = (tr.structural(kind, inputs, **attrs),)
    else:
        raise KeyError(f"no built-in op {op!r}")
    nodes = [tr.materialize(o) for o in outs]
    names = ("out",) if len(nodes) == 1 else ("values", "indices")
    return Graph(name=op, inputs=tuple(i.node for i in inputs), outputs=tuple(nodes),
                 output_names=names, source=f"symgrad/_builtins.py:{op}", params=params,
                 constant_inputs=constant,
                 mask_orders=float("inf") if op in MASK_DIFFERENTIABLE else 0,
                 generic=True, returns_tuple=len(nodes) > 1)
