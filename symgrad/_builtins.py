"""The built-in tensor ops, written as forwards and compiled like any user Function: the
driver that writes their generated modules.

Each entry is traced *shape-generically* (shapes known only at run time; structural
parameters such as `dim` become keyword parameters of the generated functions), so one
generated module serves every shape. The tables and the traced graphs are
`symgrad/_builtin_graphs.py`, below the compiler (which compiles a graph on demand for a
higher order: `compiler.builtin_compiled`); this file sits above the compiler and drives it.
The modules are checked in under `symgrad/_generated/`, so `import symgrad` and running
built-in ops need no SymPy. Regenerate them with

    python -m symgrad._builtins

(`tests/test_builtins.py` checks that this reproduces the checked-in files byte for byte).
Generated interface, per op `name`: `forward(*inputs, **params) -> tuple` and
`backward(*grad_outputs, *inputs, **params) -> tuple` aligned with the inputs.
"""
from __future__ import annotations

import os

from ._builtin_graphs import (  # noqa: F401  (the built-in ops' names and graphs, as before)
    BINARY, MASK_DIFFERENTIABLE, OPS, REDUCTIONS, STRUCTURAL_OPS, UNARY, builtin_graph,
)
from .compiler import builtin_compiled, compile_graph  # noqa: F401


def generated_source(op: str) -> str:
    return compile_graph(lambda: builtin_graph(op), "numpy", None, None).source


def regenerate(folder: str | None = None) -> list[str]:
    """Write every built-in op's generated module into `folder` (default: symgrad/_generated)."""
    folder = folder or os.path.join(os.path.dirname(os.path.abspath(__file__)), "_generated")
    os.makedirs(folder, exist_ok=True)
    written = []
    for op in OPS:
        path = os.path.join(folder, f"{op}.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write(generated_source(op).replace('"""', '"""', 1))
        written.append(path)
    with open(os.path.join(folder, "__init__.py"), "w", encoding="utf-8") as f:
        f.write('"""Generated modules of the built-in ops. Do not edit: run '
                '`python -m symgrad._builtins`."""\n'
                f"OPS = {OPS!r}\n")
    return written


if __name__ == "__main__":
    for path in regenerate():
        print("wrote", os.path.relpath(path))
