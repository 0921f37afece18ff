"""What the public API layer adds to the traced value class: dependency inversion, so that the
trace layer never imports the layers above it.

torch's free functions that are also tensor methods (`addmm`, `nansum`, ...: symgrad._functions)
and the linear-algebra methods (`A.det()`, `A.inverse()`: symgrad.linalg) are defined in the
public API layer. Those modules register their installer here when they are imported, which is
always before the tracer is (`import symgrad.trace` runs `symgrad/__init__.py` first), and
symgrad.trace calls `install_all(SymbolicTensor)` once its class is complete. An installer
registered after that runs at once on the classes already there. `NAMESPACES` holds the public
modules that the tracer's error messages point to (`use sg.linalg.solve(...)`)."""
from __future__ import annotations

_INSTALLERS: list = []
_CLASSES: list = []
NAMESPACES: dict = {}


def register(install):
    """Run `install(cls)` on the traced value class, now if it exists, else when it does."""
    _INSTALLERS.append(install)
    for cls in _CLASSES:
        install(cls)
    return install


def install_all(cls) -> None:
    """Run every registered installer on `cls` (in the order they were registered)."""
    _CLASSES.append(cls)
    for install in _INSTALLERS:
        install(cls)
