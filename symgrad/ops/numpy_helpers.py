"""The NumPy helpers generated modules paste in: the table (`NUMPY_HELPERS`: the stable
primitives' helpers of `stable_numpy`, then the special functions' of `specfun_numpy`, in the
order they are pasted), which ones a printed source needs, and all of them as one namespace."""
from __future__ import annotations

import re

from .stable_numpy import _HELPER_DEPENDS, NUMPY_HELPERS
from . import specfun_numpy  # noqa: F401  (adds the special functions' helpers to NUMPY_HELPERS)


# the names called in printed code: `name(` not preceded by a word character or a dot
_CALLED = re.compile(r"(?<![\w.])(\w+)\(")


def required_numpy_helpers(source: str) -> tuple[str, ...]:
    """Names of the ``NUMPY_HELPERS`` that printed NumPy code calls, dependencies first.

    Args:
        source: printed code (one expression or a whole module body).

    Returns:
        Helper names in a deterministic order (NUMPY_HELPERS order); paste
        ``NUMPY_HELPERS[name]`` for each into the generated module.
    """
    wanted: set[str] = set()
    called = set(_CALLED.findall(source))   # one pass over a large program's source
    for name in NUMPY_HELPERS:
        if name in called:
            wanted.add(name)
            wanted.update(_HELPER_DEPENDS.get(name, ()))
    return tuple(name for name in NUMPY_HELPERS if name in wanted)


def numpy_helper_namespace() -> dict[str, object]:
    """All helpers compiled into a namespace dict (for ``lambdify(modules=[ns, "numpy"])``)."""
    import numpy

    namespace: dict[str, object] = {"numpy": numpy}
    for source in NUMPY_HELPERS.values():
        exec(source, namespace)
    return namespace
