"""`sg.scan` and `sg.fori_loop`: loops that compile once (JAX's lax.scan / lax.fori_loop).

On runtime tensors they run the loop in Python, recording the autograd tape step by step
(full torch-style autograd, any order). Inside a traced forward (`sg.compile`, an
`sg.Function`'s forward, `symgrad compile`) the body is traced ONCE over symbolic per-step
values and the loop is one `scan` node of the graph (`symgrad.scan_rules`): it is differentiated
once (a reverse scan over the body's VJP) and emitted as a loop, so a 10 000-step integrator
compiles as fast as a 1-step one. See docs/loops.md.

This module imports no SymPy: the traced path imports it when it runs.
"""
from __future__ import annotations

import operator

import numpy as np

__all__ = ["scan", "fori_loop"]


# --------------------------------------------------------------------------- pytrees
def _flatten(value, what):
    """(leaves [(path, leaf)], spec) of a tensor or a (nested) tuple / list of them; None is an
    empty tree."""
    leaves = []

    def walk(v, path):
        if isinstance(v, (tuple, list)):
            return (type(v), tuple(walk(c, f"{path}[{i}]") for i, c in enumerate(v)))
        if v is None:
            return None
        leaves.append((path, v))
        return "leaf"

    return leaves, walk(value, what)


def _unflatten(spec, items):
    items = iter(items)

    def build(s):
        if s == "leaf":
            return next(items)
        if s is None:
            return None
        typ, children = s
        values = [build(c) for c in children]
        return values if typ is list else tuple(values)

    return build(spec)


def _same_structure(a, b):
    if a == "leaf" or b == "leaf" or a is None or b is None:
        return a == b
    return len(a[1]) == len(b[1]) and all(_same_structure(x, y) for x, y in zip(a[1], b[1]))


def _structure_text(spec):
    if spec == "leaf":
        return "tensor"
    if spec is None:
        return "None"
    typ, children = spec
    inner = ", ".join(_structure_text(c) for c in children)
    return f"[{inner}]" if typ is list else f"({inner}{',' if len(children) == 1 else ''})"


def _site():
    from .trace import user_site

    return user_site()


def _at(site):
    return f" (at {site})" if site else ""


def _is_traced(v):
    return hasattr(v, "tracer") and hasattr(v, "expr")


def _check_leaf(path, v, site):
    from numbers import Number

    if isinstance(v, (bool, str, bytes)) or not (
            isinstance(v, Number) or hasattr(v, "shape")):
        from .errors import TraceError

        raise TraceError(f"sg.scan: {path} is a {type(v).__name__}, not a tensor{_at(site)}; "
                         "carries, xs and ys are tensors or (nested) tuples / lists of them")


def _length(xs_leaves, length, site):
    """The number of steps: the xs' common leading length, or `length`."""
    from .errors import ShapeError

    lengths = []
    for path, x in xs_leaves:
        shape = tuple(x.shape)
        if not shape:
            raise ShapeError(f"sg.scan: {path} is 0-d; each of xs is stacked along a leading "
                             f"axis of one row per step{_at(site)}")
        lengths.append((path, int(shape[0])))
    if lengths and any(n != lengths[0][1] for _, n in lengths):
        detail = ", ".join(f"{p} has {n}" for p, n in lengths)
        raise ShapeError(f"sg.scan: xs have mismatched leading lengths ({detail}){_at(site)}; "
                         "every x needs one row per step")
    if length is not None:
        try:
            length = operator.index(length)
        except TypeError:
            raise TypeError(f"sg.scan: length must be an int (the number of steps is static), "
                            f"got {type(length).__name__}{_at(site)}") from None
        if length < 0:
            raise ValueError(f"sg.scan: length must be >= 0, got {length}{_at(site)}")
        if lengths and length != lengths[0][1]:
            raise ShapeError(f"sg.scan: length={length} disagrees with the leading length of "
                             f"xs ({lengths[0][0]} has {lengths[0][1]}){_at(site)}")
        return length
    if not lengths:
        raise ValueError(f"sg.scan: with xs=None give length= (the number of steps){_at(site)}")
    return lengths[0][1]


def _split_result(result, f, site):
    from .errors import TraceError

    if not isinstance(result, (tuple, list)) or len(result) != 2:
        what = type(result).__name__ if not isinstance(result, (tuple, list)) else \
            f"a {type(result).__name__} of {len(result)}"
        raise TraceError(f"sg.scan: the body {_name(f)} must return (carry, y), got {what}"
                         f"{_body_at(f, site)}")
    return result


def _name(f):
    return getattr(f, "__qualname__", None) or type(f).__name__


def _body_at(f, site):
    from .trace import source_line

    line = source_line(getattr(f, "__func__", f))
    return _at(line or site)


def _carry_mismatch(f, site, path, new, old, what="shape"):
    from .errors import ShapeError, TraceError

    cls = ShapeError if what == "shape" else TraceError
    return cls(f"sg.scan: the body {_name(f)} returned a carry {path} of {what} {new}, but "
               f"init's is {old}: a carry keeps its shape and dtype across steps"
               f"{_body_at(f, site)}")


# --------------------------------------------------------------------------- API
def scan(f, init, xs=None, length=None, reverse=False):
    """Loop `f` over steps, carrying state: JAX's `lax.scan`.

    `f(carry, x) -> (carry, y)`. Returns `(final_carry, ys)`, the ys of every step stacked on
    a new leading axis. `carry`, `x` and `y` may each be a tensor or a (nested) tuple / list
    of tensors; `y` may be None. `xs` are sliced along their leading axis (one row per step);
    with `xs=None` give `length`. `reverse=True` runs the steps last to first (ys stay at their
    step's index). The carry must keep its structure, shapes and dtypes across steps.

    On runtime tensors this is a Python loop with full autograd. Inside a traced forward the
    body is traced once and compiled as a loop: values it closes over (weights, captured
    arrays) become inputs of the loop and get their gradients summed over the steps; the
    backward is a reverse loop over the carries the forward saved (T x carry memory).

    Example::

        def step(state, _):
            th, om = state
            return (th + h * om, om - h * sg.sin(th)), th

        (th, om), path = sg.scan(step, (th0, om0), length=1000)
    """
    site = _site()
    init_leaves, init_spec = _flatten(init, "init")
    xs_leaves, xs_spec = _flatten(xs, "xs")
    for path, v in init_leaves + xs_leaves:
        _check_leaf(path, v, site)
    if not callable(f):
        raise TypeError(f"sg.scan: f must be callable, got {type(f).__name__}{_at(site)}")
    if reverse not in (True, False):
        raise TypeError(f"sg.scan: reverse must be a bool, got {reverse!r}{_at(site)}")
    T = _length(xs_leaves, length, site)
    tracer = next((v.tracer for _, v in init_leaves + xs_leaves if _is_traced(v)), None)
    if tracer is None:
        from .trace import _TRACING

        current = _TRACING.get()
        tracer = current if current not in (True, False, None) else None
    if tracer is not None:
        return _traced(tracer, f, init_leaves, init_spec, xs_leaves, xs_spec, T, reverse, site)
    return _eager(f, init_leaves, init_spec, xs_leaves, xs_spec, T, reverse, site)


def fori_loop(*args):
    """`fori_loop(lower, upper, body_fun, init_val)` (JAX's signature) or
    `fori_loop(n, body_fun, init_val)` (lower = 0): `val = body_fun(i, val)` for i in
    range(lower, upper), returning the final val. The bounds are Python ints; in a traced
    forward the loop is a scan (compiled once, never unrolled) and `i` a 0-d int value."""
    site = _site()
    if len(args) == 3:
        (upper, body, init), lower = args, 0
    elif len(args) == 4:
        lower, upper, body, init = args
    else:
        raise TypeError(f"sg.fori_loop takes (lower, upper, body_fun, init_val) or (n, "
                        f"body_fun, init_val), got {len(args)} arguments{_at(site)}")
    bounds = []
    for name, v in (("lower", lower), ("upper", upper)):
        try:
            bounds.append(operator.index(v))
        except TypeError:
            raise TypeError(f"sg.fori_loop: {name} must be a Python int (the number of steps "
                            f"is static), got {type(v).__name__}{_at(site)}") from None
    lower, upper = bounds
    if not callable(body):
        raise TypeError(f"sg.fori_loop: body_fun must be callable, got "
                        f"{type(body).__name__}{_at(site)}")
    leaves, _ = _flatten(init, "init_val")
    traced = any(_is_traced(v) for _, v in leaves)
    if not traced:
        from .trace import _TRACING

        traced = _TRACING.get() not in (True, False, None)
    if not traced:
        val = init
        for i in range(lower, upper):
            val = body(i, val)
        return val

    def step(val, i):
        return body(i, val), None

    final, _ = scan(step, init, np.arange(lower, max(upper, lower), dtype=np.int64))
    return final


# --------------------------------------------------------------------------- eager
def _as_runtime(v):
    from . import tensor as _tm

    return v if isinstance(v, _tm.Tensor) else _tm.as_tensor(v)


def _eager(f, init_leaves, init_spec, xs_leaves, xs_spec, T, reverse, site):
    from . import _runtime_ops as ops
    from .errors import TraceError

    carries = [_as_runtime(v) for _, v in init_leaves]
    xs = [_as_runtime(v) for _, v in xs_leaves]
    carry = _unflatten(init_spec, carries)
    rows, y_spec = [], None
    steps = range(T - 1, -1, -1) if reverse else range(T)
    for t in steps:
        x = _unflatten(xs_spec, [v[t] for v in xs])
        new, y = _split_result(f(carry, x), f, site)
        new_leaves, new_spec = _flatten(new, "carry")
        if not _same_structure(new_spec, init_spec):
            raise TraceError(f"sg.scan: the body {_name(f)} returned a carry of structure "
                             f"{_structure_text(new_spec)}, but init is "
                             f"{_structure_text(init_spec)}{_body_at(f, site)}")
        fixed = []
        for (path, v), old in zip(new_leaves, carries):
            _check_leaf(path, v, site)
            v = _as_runtime(v)
            if tuple(v.shape) != tuple(old.shape):
                raise _carry_mismatch(f, site, path, tuple(v.shape), tuple(old.shape))
            if v.dtype != old.dtype:
                raise _carry_mismatch(f, site, path, v.dtype, old.dtype, "dtype")
            fixed.append(v)
        carries = fixed
        carry = _unflatten(init_spec, carries)
        y_leaves, y_spec = _flatten(y, "y")
        for path, v in y_leaves:
            _check_leaf(path, v, site)
        rows.append([_as_runtime(v) for _, v in y_leaves])
    if reverse:
        rows.reverse()
    if T == 0:   # no step ran: the ys are empty, of the shapes one step would give
        from . import tensor as _tm
        from .autograd.grad_mode import no_grad

        with no_grad():
            x = _unflatten(xs_spec, [_tm.zeros(tuple(v.shape[1:]), dtype=v.dtype) for v in xs])
            _, y = _split_result(f(carry, x), f, site)
        y_leaves, y_spec = _flatten(y, "y")
        return carry, _unflatten(y_spec, [_tm.zeros((0,) + tuple(_as_runtime(v).shape),
                                                    dtype=_as_runtime(v).dtype)
                                          for _, v in y_leaves])
    ys = [ops.stack([row[j] for row in rows]) for j in range(len(rows[0]))]
    return carry, _unflatten(y_spec, ys)


# --------------------------------------------------------------------------- traced
def _traced(tr, f, init_leaves, init_spec, xs_leaves, xs_spec, T, reverse, site):
    import dataclasses

    from .errors import TraceError
    from .graph import Graph, Node
    from .scan_rules import ScanBody, finish_outputs, make_scan, parts_of
    from .trace import dissolve_bindings, symbol_of

    if tr.generic:
        raise TraceError(f"sg.scan in a shape-generic trace{_at(site)}: a loop's carries need "
                         "static shapes; give example inputs (sg.compile(fn, *arrays), "
                         "--shape on the command line)")
    carries = [tr.lift(v, site) for _, v in init_leaves]
    for (path, _), c in zip(init_leaves, carries):
        if c.dtype != "float":
            raise TraceError(f"sg.scan: {path} is a {c.dtype} tensor{_at(site)}; the carries of "
                             "a traced loop are float tensors")
    xvals = [tr.lift(v, site) for _, v in xs_leaves]

    mark = tr.count
    ph_c = [tr.input(f"carry{i}", tuple(c.shape), "float") for i, c in enumerate(carries)]
    ph_x = [tr.input(f"x{j}", tuple(x.shape)[1:], x.dtype) for j, x in enumerate(xvals)]
    new, y = _split_result(f(_unflatten(init_spec, ph_c), _unflatten(xs_spec, ph_x)), f, site)
    new_leaves, new_spec = _flatten(new, "carry")
    if not _same_structure(new_spec, init_spec):
        raise TraceError(f"sg.scan: the body {_name(f)} returned a carry of structure "
                         f"{_structure_text(new_spec)}, but init is "
                         f"{_structure_text(init_spec)}{_body_at(f, site)}")
    new_vals = []
    for (path, v), c in zip(new_leaves, carries):
        _check_leaf(path, v, site)
        v = tr.lift(v, site)
        if v.dtype != "float":
            raise _carry_mismatch(f, site, path, v.dtype, "float", "dtype")
        if tuple(v.shape) != tuple(c.shape):
            raise _carry_mismatch(f, site, path, tuple(v.shape), tuple(c.shape))
        new_vals.append(v)
    y_leaves, y_spec = _flatten(y, "y")
    y_vals = []
    for path, v in y_leaves:
        _check_leaf(path, v, site)
        v = tr.lift(v, site)
        if v.dtype != "float":
            raise TraceError(f"sg.scan: the body {_name(f)} returned {path} of dtype {v.dtype}"
                             f"{_body_at(f, site)}; a traced loop's ys are float tensors")
        y_vals.append(v)
    outputs = finish_outputs(tr, new_vals + y_vals)

    # the body: the nodes between the placeholders and the outputs; any other value it reads
    # (made before the loop, or not depending on the step) is an input of the loop
    holders = {id(v.node) for v in ph_c + ph_x}
    depends: dict = {}

    def on_step(node):
        stack = [node]
        while stack:
            n = stack[-1]
            if id(n) in depends:
                stack.pop()
                continue
            if id(n) in holders:
                depends[id(n)] = True
            elif n.index <= mark:
                depends[id(n)] = False
            else:
                todo = [a for a in n.args if id(a) not in depends]
                if todo:
                    stack.extend(todo)
                    continue
                depends[id(n)] = any(depends[id(a)] for a in n.args)
            stack.pop()
        return depends[id(node)]

    out_ids = {id(n) for n in outputs}
    internal: dict = {}
    captured: dict = {}
    stack = list(outputs)
    while stack:
        n = stack.pop()
        if id(n) in internal or id(n) in captured:
            continue
        if id(n) in holders:
            internal[id(n)] = n
        elif id(n) in out_ids or on_step(n):
            internal[id(n)] = n
            stack.extend(n.args)
        else:
            captured[id(n)] = n
    outer = sorted(captured.values(), key=lambda n: n.index)
    new_of: dict = {}
    rename: dict = {}
    for n in outer:
        node = Node("input", (), n.shape, n.dtype, tr._name(n.name), index=n.index)
        new_of[id(n)] = node
        rename[symbol_of(n)] = symbol_of(node)
    for n in sorted(internal.values(), key=lambda n: n.index):
        if id(n) in holders:
            new_of[id(n)] = n
            continue
        args = tuple(new_of[id(a)] for a in n.args)
        expr = n.expr
        if n.op == "elementwise" and any(id(a) in captured for a in n.args):
            expr = expr.xreplace(rename)
        new_of[id(n)] = dataclasses.replace(n, args=args, expr=expr)
    k, q = len(ph_c), len(y_vals)
    graph = Graph(
        name=f"{getattr(f, '__name__', 'body')}_body".replace("<", "").replace(">", ""),
        inputs=tuple(v.node for v in ph_c + ph_x) + tuple(new_of[id(n)] for n in outer),
        outputs=tuple(new_of[id(n)] for n in outputs),
        output_names=tuple([f"new_carry{i}" for i in range(k)] + [f"y{j}" for j in range(q)]))
    bindings = {id(new_of[i]) for i in tr.bindings if i in new_of}
    graph = dissolve_bindings(graph, bindings)
    body = ScanBody(graph, k, len(ph_x))
    args = carries + xvals + [tr._leaf_value(n) for n in outer]
    packed = make_scan(tr, body, args, T, reverse, True, site)
    parts = parts_of(tr, packed, body, T, True, site)
    return _unflatten(init_spec, parts[:k]), _unflatten(y_spec, parts[k:k + q])
