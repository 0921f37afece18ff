"""Structural ops: reductions, matmul and movement. One class per op holds its shape rule, how
NumPy computes it, and its adjoint rule (`vjp`), written with other structural ops so that a
backward is again a graph of the same kinds and can be differentiated once more.

`vjp(node, g, args)` receives the traced adjoint `g` of the node's output and the traced values
of its operands (`SymbolicTensor`s in the derivative's trace) and returns one adjoint (or None)
per operand. Shape rules return None when the trace is generic (shapes known only at run time).
"""
from __future__ import annotations

from ..errors import CompileError, ShapeError
from . import Param

# One module per kind of op: the base class and registry (structural_base), reductions and
# broadcasting (structural_reductions), products (structural_matmul), movement
# (structural_movement), linear algebra (linalg). Importing this module registers them all.
from .structural_base import (STRUCTURAL, SHAPE_HELPERS, register, _concrete, reduced_shape,
                              Structural)  # noqa: F401
from .structural_reductions import (Sum, Mean, Unreduce, Amax, Amin, MaxDim, MinDim, ArgMax,
                                    ArgMin, IndexBack, TakeDim, Prod, ProdOthers, ProdOthersVjp,
                                    ProdOthersDual, _summed_to, SumTo, BroadcastLike, Expand)  # noqa: F401
from .structural_matmul import (_matmul_shape, Matmul, _plain_matmul_grad, _transposed, _product,
                                MatmulGradA, MatmulGradB, EINSUM_OPTIMIZE_WORK, Einsum)  # noqa: F401
from .structural_movement import (Reshape, ReshapeLike, Permute, SwapAxes, PermuteBack, Squeeze,
                                  Unsqueeze, GetItem, IndexPutZeros, Cat, Cumsum, Flip, ZerosLike,
                                  StopGradient, _tile_shapes, Roll, Tile, Untile, RepeatInterleave,
                                  RepeatInterleaveSum, Tril, Triu, ArgSort, Gather, GatherBack,
                                  Diagonal, DiagonalBack, DiagEmbed)  # noqa: F401

from . import linalg as _linalg  # noqa: E402,F401  (registers the linear-algebra ops)
