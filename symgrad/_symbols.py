"""The SymPy symbol that stands for an IR node's value in elementwise regions (the IR layer,
beside graph.py, which imports SymPy only through this module and only when asked: a Graph
can be built, hashed and cached without SymPy)."""
from __future__ import annotations

import sympy


def symbol_of(node) -> sympy.Symbol:
    """The SymPy symbol of a graph.Node's value (graph.py imports this module: no import back)."""
    key = (node.name, node.dtype)
    hit = _SYMBOLS.get(key)
    if hit is None:
        if node.dtype == "int":
            hit = sympy.Symbol(node.name, integer=True)
        elif node.dtype == "bool":
            hit = sympy.Symbol(node.name)
        else:
            hit = sympy.Symbol(node.name, real=True)
        _SYMBOLS[key] = hit
    return hit


# Symbols by (name, dtype). SymPy caches a Symbol in a bounded LRU; past a few thousand nodes
# (a large program) every lookup missed and rebuilt its assumptions, a third of compile time.
_SYMBOLS: dict = {}


def name_of_symbol(s) -> str:
    """str(s) of a symbol, without SymPy's printer (a sixth of emitting a large program was
    str() of the symbols its steps read)."""
    return s.name if type(s) is sympy.Symbol else str(s)


def symbol_named(name, node):
    """The SymPy symbol named `name` standing for `node`'s value (its dtype's assumptions, as
    symbol_of gives a node its own name's); not cached: the optimizer's final names."""
    if node.dtype == "int":
        return sympy.Symbol(name, integer=True)
    if node.dtype == "bool":
        return sympy.Symbol(name)
    return sympy.Symbol(name, real=True)
