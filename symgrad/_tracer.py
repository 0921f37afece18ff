"""The Tracer: it records the Graph while a forward runs (leaves, structural nodes, the
bindings of reused or long formulas: `Tracer.bind`), `dissolve_bindings` (a small program
emitted as one formula per region) and `_dims`. Moved verbatim from trace.py (which
re-exports every name).
"""
from __future__ import annotations

import dataclasses
import numbers

import sympy

from . import _fastsym
from ._dtypes import dtype_name as _dtype_name, promote_names as _promote_names
from ._symbols import symbol_of
from ._trace_shapes import GenericShape, _is_tensor_like, _number, broadcast_shapes
from .errors import DimensionError, ShapeError, TraceError
from .graph import Graph, Node, Param
from .ops.structural import STRUCTURAL


# Names of trace.py used below. trace.py imports this module before it defines them, so it
# binds them here once it has (trace._bind_moved_names).
_FROM_TRACE = ("SymbolicTensor", "_SITE", "_at", "_dtype_kind", "free_symbols", "tree_size",
    "user_site",)
(SymbolicTensor, _SITE, _at, _dtype_kind, free_symbols, tree_size,
    user_site,) = (None,) * len(_FROM_TRACE)


# Bindings (see the module docstring). A reused value becomes a node once its formula has
# REUSE_MIN operations or more: smaller ones (x - mu, 2*x) are cheaper inlined than read
# back, and a region keeps its whole formula for the rewrites. CHAIN_MAX bounds any pending
# formula, so no region (and no derivative built from it) grows past a constant size.
REUSE_MIN = 4
CHAIN_MAX = 16
# A traced program whose formulas, every binding inlined, hold at most this many operations is
# emitted as before bindings existed (`dissolve_bindings`): one formula per region, which the
# rewrites and CSE handle best at this size (the benchmark functions are 5-250 operations).
DISSOLVE_MAX = 1000
# The derivative of a small program is built one formula per region too, unless those formulas,
# inlined, would pass DERIVATIVE_MAX operations: reuse nested in the forward (x = r*x*(1 - x)
# repeated) makes the inlined derivative grow geometrically with the depth, and each further
# order multiplies it again (a 6-step logistic map: 161 operations, its derivative 10 144, its
# second derivative 283 737). Past the bound the derivative keeps its bindings (`Graph.dag`),
# as a large program's does. Below it, whole formulas give the rewrites and CSE more to work
# with: the benchmark functions' derivatives are at most 7 071 operations (oscillator8), the
# second derivatives at most ~25 000 (rational6: 875 operations after CSE as whole formulas,
# 1 198 with bindings), except oscillator8's (269 531: 3 512 -> 3 691 operations, compiled in
# 6 s instead of 17).
DERIVATIVE_MAX = 60_000


def _value_symbols(expr):
    """The symbols of `expr` outside the conditions of its Piecewise parts (and outside
    comparisons): the values an elementwise result is computed from."""
    found, stack = set(), [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, sympy.Symbol):
            found.add(e)
        elif isinstance(e, sympy.Piecewise):
            stack.extend(branch for branch, _ in e.args)
        elif not isinstance(e, (sympy.core.relational.Relational, sympy.logic.boolalg.Boolean)):
            stack.extend(getattr(e, "args", ()))
    return found


# --------------------------------------------------------------------------- tracer
# torch's C type names of dtypes, as its masked_fill message spells them
_C_TYPES = {"float32": "float", "float64": "double", "float16": "c10::Half", "int64": "long int",
            "int32": "int", "int16": "short int", "int8": "signed char",
            "uint8": "unsigned char"}


class Tracer:
    """Records nodes. One per trace (and one per derivative being built)."""

    def __init__(self, generic=False):
        self.generic = generic
        self.count = 0
        self.symbol_node: dict[sympy.Symbol, Node] = {}
        self.names: set[str] = set()
        self.replayed: dict[int, SymbolicTensor] = {}   # forward node id -> value (differentiate)
        self.constant_inputs: frozenset = frozenset()   # differentiate: no gradient for these
        self.sizes: dict = {}                             # tree_size memo
        self.bindings: set = set()                        # ids of the nodes bind() made
        self.captured = None   # trace(): [(array, value)] of captured arrays (None: refused)
        # input node id -> its example's float dtype name (float32 / float64); what matmul
        # checks its operands' dtypes with (the nodes themselves know only float / int / bool)
        self.precision: dict[int, str] = {}
        # input node id -> its example's dtype name, every kind (output_dtypes reads them)
        self.dtype_names: dict[int, str] = {}
        self._precision_memo: dict[int, frozenset] = {}
        self._torch_dtype_memo: dict = {}   # node id -> (dtype name, has dims): precision_of
        # formulas by shape, one SymPy fold per shape of a large program's steps: its
        # trace's ops (_trace_elementwise._by_shape), its replay and adjoints (differentiate)
        self.shape_memo: dict = {}
        self.elementwise_ops = 0   # ops traced (_trace_elementwise._by_shape)
        self.large = False         # differentiate: the derivative of a large program (Graph.dag)

    def capture(self, array, site=None):
        """A captured array (closure, global, made in the forward: `sg.eye(3)`, `sg.zeros(n)`):
        a constant input of the module, no gradient; one input per array object. Its shape is
        fixed also in a shape-generic trace (the other inputs' shapes are not)."""
        for seen, value in self.captured:
            if seen is array:
                return value
        value = self.input(f"captured{len(self.captured)}", tuple(int(n) for n in array.shape),
                           _dtype_kind(array.dtype))
        self.note_precision(value.node, array)
        self.captured.append((array, value))
        return value

    def note_precision(self, node, example):
        """Remember the float dtype of the array an input node stands for."""
        name = str(getattr(example, "dtype", ""))
        if name in ("float16", "float32", "float64"):
            self.precision[id(node)] = name
        if hasattr(example, "dtype"):
            self.dtype_names[id(node)] = _dtype_name(example.dtype)

    def precision_of(self, value):
        """The float dtype torch would give `value`, or None where unknown (no input with a
        known dtype). Promoted op by op as `output_dtypes` does: each value `value` reads
        has torch's dtype of that value (a float32 0-d input reshaped to a vector is a
        float32 vector), and among them dimensioned ones first; the old rule looked only at
        the inputs (their own dims), so a float32 vector made from a 0-d float32 input met a
        float64 0-d input as float64 (fuzz seed 1092: a matmul then refused float32 @
        float64). Falls back to that rule where a value's dtype is unknown."""
        if not self.precision:
            return None
        expr = value.expr
        import numpy

        if self.dtype_names:
            memo = self._torch_dtype_memo
            # a constant the forward made (sg.eye(3): captured) takes the module's dtype, as
            # in the generated code: a value reading one keeps the old rule below
            captured = {id(v.node) for _, v in self.captured or ()}
            found = []
            for sym in getattr(expr, "free_symbols", ()):
                node = self.symbol_node.get(sym)
                if node is None:
                    continue
                got = self._torch_dtype(node, memo, captured)
                if got is None:
                    found = None
                    break
                if got[0] in ("float16", "float32", "float64"):
                    found.append(got)
            if found:
                dims = [d for d, has_dims in found if has_dims] or [d for d, _ in found]
                return numpy.result_type(*dims).name
        found = set()
        memo = self._precision_memo
        for sym in getattr(expr, "free_symbols", ()):
            node = self.symbol_node.get(sym)
            if node is not None:
                found |= self._node_precision(node, memo)
        if not found:
            return None
        dims = [d for d, has_dims in found if has_dims] or [d for d, _ in found]
        return numpy.result_type(*dims).name

    def output_dtypes(self, nodes):
        """Per node, the dtype name torch gives that value, promoting op by op as torch does:
        a zero-dimensional operand does not promote a dimensioned one of its category
        (float32 vector * float64 0-d value is float32, also when the 0-d value was an input
        and the vector a reshape of another 0-d one), a float op of integers gives the
        default float dtype ("default"; the runtime reads it at the call). Per elementwise
        node (several torch ops fused), the rule over the values it reads. None per node
        where an input's dtype is unknown."""
        if not self.dtype_names:
            return None
        memo: dict = {}
        out = []
        for node in nodes:
            found = self._torch_dtype(node, memo)
            out.append(None if found is None else found[0])
        return tuple(out)

    def _torch_dtype(self, root, memo, unknown=()):
        """(dtype name, has dims) of `root` (output_dtypes), or None where unknown (also where
        it reads an input node whose id is in `unknown`)."""

        def at_input(node):
            if id(node) in unknown:
                return None
            name = self.dtype_names.get(id(node))
            if name is not None and _dtype_kind(name) != node.dtype:
                name = None   # (a stand-in node of another kind)
            return None if name is None else (name, node.shape != ())

        def operands(node):
            if node.op != "elementwise":
                return list(node.args)
            # the values it is computed from, not a where's condition (torch's where promotes
            # its two values only)
            return [self.symbol_node[s] for s in _value_symbols(node.expr)
                    if s in self.symbol_node] or \
                [self.symbol_node[s] for s in sorted(node.expr.free_symbols, key=str)
                 if s in self.symbol_node]   # (only inside conditions: True ** x)

        def at_node(node, kids):
            dims = node.shape != ()
            found = [memo[id(k)] for k in kids]
            kind = node.dtype
            if any(f is None for f in found):
                return None
            if kind == "bool":   # (also one folded to a constant: a + True is True)
                return ("bool", dims)
            if not kids:   # folded to a constant (True ** x): the module's own dtype
                return None
            if node.op != "elementwise" and STRUCTURAL[node.op].out_dtype == "int":
                return ("int64", dims)
            same = [f for f in found if _dtype_kind(f[0]) == kind]
            if node.op == "elementwise":   # torch's tiers: dimensioned operands first
                same = [f for f in same if f[1]] or same
            # a float made from integers ("default") yields to a real float dtype (torch's
            # default float32 is the narrowest but float16)
            names = [n for n, _ in same if n != "default"] or [n for n, _ in same]
            name = names[0] if names else ("int64" if kind == "int" else "default")
            for n in names[1:]:
                name = _promote_names(name, n)
            return (name, dims)

        return _walk_up(root, memo, at_input, operands, at_node)

    def _node_precision(self, root, memo):
        """{(dtype name, has dims)} of the inputs with a known dtype under `root`."""

        def at_input(node):
            p = self.precision.get(id(node))
            return frozenset() if p is None or node.dtype != "float" else \
                frozenset({(p, node.shape != ())})

        def operands(node):
            if node.op != "elementwise":
                return list(node.args)
            return [self.symbol_node[s] for s in getattr(node.expr, "free_symbols", ())
                    if s in self.symbol_node]

        def at_node(node, kids):
            return frozenset().union(*(memo[id(k)] for k in kids)) \
                if node.dtype == "float" else frozenset()

        return _walk_up(root, memo, at_input, operands, at_node)

    # ---- nodes
    def _name(self, base):
        name, k = base, 1
        while name in self.names:
            name, k = f"{base}_{k}", k + 1
        self.names.add(name)
        return name

    def fresh(self):
        self.count += 1
        return self.count

    def _node(self, op, args, shape, dtype, name, attrs=(), expr=None, site=None):
        node = Node(op, tuple(args), shape if isinstance(shape, tuple) else None, dtype, name,
                    tuple(attrs), expr, site, self.fresh())
        self.symbol_node[symbol_of(node)] = node
        return node

    def _leaf_value(self, node, shape=None):
        if shape is None:
            shape = node.shape if node.shape is not None else GenericShape((node,))
        return SymbolicTensor(self, symbol_of(node), shape, node.dtype, node)

    def input(self, name, shape, dtype="float"):
        node = self._node("input", (), shape, dtype, self._name(name))
        return self._leaf_value(node)

    def const(self, value, site=None):
        shape = GenericShape(()) if self.generic else ()
        expr = _number(value, site)
        return SymbolicTensor(self, expr, shape, "bool" if isinstance(value, bool) else "float")

    def value_of(self, node):
        """The value of forward `node` in the derivative being traced."""
        return self.replayed[id(node)]

    def bind(self, value: "SymbolicTensor", uses: int = 1) -> "SymbolicTensor":
        """Make `value` a binding (a node of its own) if inlining it `uses` more times would
        copy a formula worth sharing: reused with REUSE_MIN operations or more, or longer than
        CHAIN_MAX. Returns `value` (its `expr` is then the binding's symbol)."""
        if value.node is not None or value.dtype != "float":
            return value
        expr = value.expr
        if not isinstance(expr, sympy.Basic) or not expr.args:
            return value
        value.uses += uses
        size = tree_size(expr, self.sizes)
        if size >= CHAIN_MAX or (value.uses >= 2 and size >= REUSE_MIN):
            self.bindings.add(id(self.materialize(value)))
        return value

    def materialize(self, value: "SymbolicTensor", copy=False) -> Node:
        """The node holding `value`, creating an elementwise region for a pending expression.
        `copy=True` always creates a new node (an output must not alias an input)."""
        if value.node is not None and not copy:
            return value.node
        expr = value.expr
        same = self.symbol_node.get(expr) if isinstance(expr, sympy.Symbol) else None
        if same is not None and not copy and (same.shape == value.shape or (
                isinstance(value.shape, GenericShape) and value.shape.sources == (same,))):
            value.node = same
            return same
        # its symbols: those its structure key holds where it has one (a formula an op built
        # by shape, read as an operand: `_fastsym._keyed`), else a walk
        known = _fastsym.keyed_symbols(expr)
        leaves = sorted((self.symbol_node[s] for s in
                         (known if known is not None else free_symbols(expr))),
                        key=lambda n: n.index)
        attrs = ()
        if isinstance(value.shape, tuple):
            natural = ()
            for leaf in leaves:
                natural = broadcast_shapes(natural, leaf.shape)
            if natural != value.shape:
                attrs = (("broadcast", True),)
        else:
            missing = [n for n in value.shape.sources if n not in leaves]
            if missing:
                attrs = (("broadcast", True),)
                leaves = sorted(leaves + missing, key=lambda n: n.index)
        node = self._node("elementwise", leaves, value.shape, value.dtype,
                          self._name(f"v{self.count + 1}"), attrs, expr, value.site)
        value.node = node
        value.expr = symbol_of(node)
        if not isinstance(value.shape, tuple):
            value.shape = GenericShape((node,))
        return node

    def structural(self, op, args, site=None, **attrs):
        rule = STRUCTURAL[op]
        nodes = [self.materialize(a) for a in args]
        # while a derivative is built, the forward op being differentiated (site_of) is the
        # line to cite, not the line of the adjoint flowing into it
        site = site or _SITE.get() or next((a.site for a in args if a.site), None)
        shapes = [n.shape if n.shape is not None else None for n in nodes]
        try:
            shape = (None if self.generic or any(s is None for s in shapes)
                     else rule.shape(shapes, attrs))
        except ShapeError as exc:   # the rule knows the shapes; the user's line is known here
            if site and "(at " not in str(exc):
                raise ShapeError(f"{exc}{_at(site)}") from None
            raise
        dtype = rule.out_dtype or nodes[0].dtype
        node = self._node(op, nodes, shape, dtype, self._name(f"v{self.count + 1}"),
                          tuple(attrs.items()), site=site)
        out = self._leaf_value(node)
        out.site = site
        return out

    def where(self, cond, a, b):
        site = user_site()
        self._check_condition(cond, site)
        cond, a, b = (self.lift(v, site) for v in (cond, a, b))
        shape = broadcast_shapes(broadcast_shapes(cond.shape, a.shape, "where", site), b.shape,
                                 "where", site)
        c = cond.truth()
        expr = sympy.Piecewise((a.arith(), c), (b.arith(), True))
        return SymbolicTensor(self, expr, shape, "float", site=site)

    def _check_condition(self, cond, site, op="where"):
        """torch's RuntimeError for where() (op "masked_fill": masked_fill()) of a condition
        that is no bool tensor (the runtime's; a traced forward read a float condition as
        `!= 0`); where() of a uint8 one is warned and read as `!= 0`, as torch's."""
        dtype = getattr(cond, "dtype", None)
        if dtype is None or isinstance(cond, (bool, numbers.Number)):
            return
        if hasattr(cond, "tracer") and hasattr(cond, "expr"):   # a traced value
            if dtype == "bool":
                return
            name = self.dtype_names.get(id(cond.node)) if cond.node is not None else None
            if name is None:
                name = (self.precision_of(cond) or "float32") if dtype == "float" else "int64"
        else:
            name = _dtype_name(dtype)
            if name == "bool":
                return
        if op == "masked_fill":
            raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with "
                               f"dtype {_C_TYPES.get(name, name)}{_at(site)}")
        if name == "uint8":
            import warnings

            warnings.warn("where received a uint8 condition tensor. This behavior is deprecated "
                          "and will be removed in a future version of PyTorch. Use a boolean "
                          "condition instead.", UserWarning, stacklevel=4)
            return
        from .errors import scalar_type_name

        raise RuntimeError(f"where expected condition to be a boolean tensor, but got a tensor "
                           f"with dtype {scalar_type_name(name)}{_at(site)}")

    def lift(self, value, site=None):
        if isinstance(value, SymbolicTensor):
            if value.tracer is not self:
                raise TraceError(f"a traced value from another trace was used here{_at(site)}")
            return value
        if isinstance(value, (bool, int, float)):
            return self.const(value, site)
        if _is_tensor_like(value) and tuple(value.shape) == () \
                and not getattr(value, "requires_grad", False):
            # a 0-d constant such as sg.sqrt(2.0), computed eagerly: embed its value
            number = value.item() if hasattr(value, "item") else float(value)
            return self.const(number, site)
        if _is_tensor_like(value):
            if self.captured is not None and not getattr(value, "requires_grad", False) \
                    and _dtype_kind(value.dtype) is not None:
                return self.capture(value, site)
            why = " that requires grad (its gradient would be lost)" \
                if getattr(value, "requires_grad", False) else ""
            raise TraceError(
                f"the forward uses an array{why} that is not one of its inputs{_at(site)}: "
                f"shape {tuple(value.shape)}. Pass it as an argument so it can be traced")
        raise TraceError(f"cannot use a {type(value).__name__} in a traced forward{_at(site)}")


def dissolve_bindings(graph: Graph, bindings, budget=None) -> Graph:
    """`graph` with the binding nodes in `bindings` (ids) inlined into the regions that read
    them, when all its formulas together, inlined, stay within `budget` operations (default
    DISSOLVE_MAX; None: always): a small program keeps whole formulas for the rewrites and
    CSE; a large one keeps its bindings (`Graph.dag`) and stays linear. A binding read by a
    structural op or returned stays a node (it would be one without bindings too)."""
    budget = DISSOLVE_MAX if budget is None else budget
    nodes = graph.nodes()
    if not bindings or not any(id(n) in bindings for n in nodes):
        return graph
    # the inlined size of every region, without building it (a DAG computation)
    weight: dict = {}
    total = 0
    memo: dict = {}
    for n in nodes:
        if n.op != "elementwise":
            continue
        w = _weighted_size(n.expr, weight, memo)
        if id(n) in bindings:
            weight[symbol_of(n)] = w
        total += w
        if total > budget:
            return dataclasses.replace(graph, dag=True)
    new: dict = {}
    inlined: dict = {}       # binding symbol -> its formula, bindings inlined
    leaves_of: dict = {}     # binding symbol -> the nodes its inlined formula reads
    for n in nodes:
        if n.op == "input":
            new[id(n)] = n
            continue
        if n.op != "elementwise":
            args = tuple(new[id(a)] for a in n.args)
            new[id(n)] = n if args == n.args else dataclasses.replace(n, args=args)
            continue
        sub = {symbol_of(a): inlined[symbol_of(a)] for a in n.args if id(a) in bindings}
        expr = n.expr.xreplace(sub) if sub else n.expr
        leaves: dict = {}            # id(new node) -> new node
        for a in n.args:
            if id(a) in bindings:
                for leaf in leaves_of[symbol_of(a)]:
                    leaves[id(leaf)] = leaf
            else:
                leaves[id(new[id(a)])] = new[id(a)]
        if id(n) in bindings:
            inlined[symbol_of(n)] = expr
            leaves_of[symbol_of(n)] = list(leaves.values())
        free = free_symbols(expr) if sub else None
        args = tuple(sorted((a for a in leaves.values()
                             if free is None or symbol_of(a) in free or a.shape is None),
                            key=lambda a: a.index))
        attrs = n.attrs
        if sub and isinstance(n.shape, tuple) and not n.attr("broadcast"):
            natural = ()
            for a in args:
                natural = broadcast_shapes(natural, a.shape)
            if natural != n.shape:
                attrs = attrs + (("broadcast", True),)
        new[id(n)] = n if (args == n.args and expr is n.expr) else dataclasses.replace(
            n, args=args, expr=expr, attrs=attrs)
    return dataclasses.replace(
        graph, inputs=tuple(new[id(n)] for n in graph.inputs),
        outputs=tuple(None if o is None else new[id(o)] for o in graph.outputs))


def _weighted_size(expr, weight, memo):
    """tree_size of `expr` with each symbol in `weight` counted as that many operations.
    Numbers weigh 0 and are never looked up (a Float's hash is recomputed on every lookup)."""
    if getattr(expr, "is_Number", False):
        return 0
    hit = memo.get(expr)
    if hit is not None:
        return hit
    stack = [(expr, False)]
    while stack:
        e, ready = stack.pop()
        if e in memo:
            continue
        args = e.args if isinstance(e, sympy.Basic) else ()
        if not args:
            memo[e] = weight.get(e, 0)
        elif ready:
            memo[e] = 1 + sum(memo[a] for a in args if not a.is_Number)
        else:
            stack.append((e, True))
            stack.extend((a, False) for a in args if not a.is_Number and a not in memo)
    return memo[expr]


def _dims(dim, ndim, op, site):
    """Normalise a dim argument to a sorted tuple of non-negative ints (None = all)."""
    if dim is None:
        return None
    if isinstance(dim, Param):
        return dim
    dims = tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)
    if not all(isinstance(d, numbers.Integral) and not isinstance(d, bool) for d in dims):
        bad = next(d for d in dims if not isinstance(d, numbers.Integral) or isinstance(d, bool))
        raise TraceError(f"{op}: dim must be an int or a tuple of ints, got {bad!r}{_at(site)}")
    dims = tuple(int(d) for d in dims)
    if ndim is None:
        return dims
    out = []
    for d in dims:
        if not -max(ndim, 1) <= d < max(ndim, 1):
            raise DimensionError(f"{op}: dimension out of range (expected to be in range of "
                             f"[{-max(ndim, 1)}, {max(ndim, 1) - 1}], but got {d}){_at(site)}")
        if d % max(ndim, 1) in out:
            raise ShapeError(f"{op}: dim {d % max(ndim, 1)} appears multiple times in the list "
                             f"of dims{_at(site)}")
        out.append(d % max(ndim, 1))
    return tuple(sorted(out))


def _walk_up(root, memo, at_input, operands, at_node):
    """memo[id(root)], each node's value computed after its operands' (iteratively: a deep
    program would overflow Python's stack): at_input(node) for an input, at_node(node,
    operands) for any other node."""
    stack = [root]
    while stack:
        node = stack[-1]
        if id(node) in memo:
            stack.pop()
            continue
        if node.op == "input":
            memo[id(node)] = at_input(node)
            stack.pop()
            continue
        kids = operands(node)
        todo = [k for k in kids if id(k) not in memo]
        if todo:
            stack.extend(todo)
            continue
        stack.pop()
        memo[id(node)] = at_node(node, kids)
    return memo[id(root)]
