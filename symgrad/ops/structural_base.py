"""The structural ops' base class and registry: `Structural` (what each op's class gives: its
shape rule, how NumPy computes it, its adjoint rule), `register` and `STRUCTURAL` (op name ->
class), the shape helpers the layers above register (`SHAPE_HELPERS`) and `reduced_shape`.

The ops are in `structural_reductions`, `structural_matmul`, `structural_movement` and
`linalg`; `symgrad.ops.structural` gathers them (import the registry from there to see them all).
"""
from __future__ import annotations

from ..errors import CompileError

STRUCTURAL: dict[str, type["Structural"]] = {}
# The shape rules run inside a trace and the adjoint rules inside differentiate; the shape
# helpers they share with those layers are registered by them when imported (the op table
# imports nothing above it): "broadcast_shapes" (symgrad.trace), "needs_sum_to"
# (symgrad.differentiate).
SHAPE_HELPERS: dict = {}


def register(cls):
    STRUCTURAL[cls.op] = cls
    return cls


def _concrete(*shapes):
    return all(isinstance(s, tuple) for s in shapes)


def reduced_shape(shape, dims, keepdim):
    if dims is None:
        return tuple(1 for _ in shape) if keepdim else ()
    return tuple(1 if i in dims else n for i, n in enumerate(shape) if keepdim or i not in dims)


class Structural:
    op = ""
    out_dtype = None                   # None: the dtype of the first operand
    differentiable = True              # False: the output carries no gradient from its operands
    shape_args: tuple[int, ...] = ()   # operands read only for their shape
    # operands the output is not a differentiable function of, besides shape_args (its vjp
    # gives them None; read whole, e.g. for their shape): Graph.dependencies skips them
    constant_args: tuple[int, ...] = ()

    @staticmethod
    def shape(shapes, attrs):
        return shapes[0]

    @staticmethod
    def numpy(node, a, p) -> str:
        # every registered op overrides this; reaching it means a new op lacks its lowering
        raise CompileError(f"structural op {node.op!r} has no NumPy lowering")

    @staticmethod
    def vjp(node, g, args):
        raise CompileError(f"no derivative rule for {node.op}")
