"""The backward engine: graph nodes, gradient accumulation, ``backward`` and ``grad``.

Semantics follow torch.autograd's engine:

* Each node runs once, with the sum of the gradients flowing into each of its outputs; ready
  nodes run in decreasing sequence number (the order the forward created them, reversed);
  ``AccumulateGrad`` runs as soon as it is ready.
* ``retain_graph`` defaults to ``create_graph``; without it each node frees what it saved,
  and a second backward through a node that saved tensors raises.
* ``create_graph=True`` runs the backward in grad mode, so the gradients have a graph.
* ``inputs=`` / ``grad`` run only the part of the graph that leads to the inputs.
* Leaf gradients follow torch's layout contract (see ``AccumulateGrad``).

Rooms: the nodes themselves (``Node``, ``GradientEdge``, ``RemovableHandle``) are in
autograd/node.py, the calling and checking of a node's hooks in autograd/_hook_calls.py, the
arguments of ``backward`` / ``grad`` made uniform in autograd/_grad_args.py; this module
imports them at module level and re-exports them. It keeps the accumulation, the run (whose
module globals symgrad.autograd.function sets) and ``backward``'s fast entries (``backward``,
``backward_implicit``). The fast path for a chain of module nodes (``_one_node``) is
autograd/_backward_chain.py; ``backward``'s general path and ``grad`` are
autograd/_grad_calls.py: both are imported at the end of this module and re-exported.
"""

import heapq
import itertools
import operator
import threading
import weakref

import numpy as np

from symgrad import tensor as _tm
from symgrad.autograd import anomaly_mode as _anomaly_mode
from symgrad.autograd.anomaly_mode import _anomaly
from symgrad.autograd import grad_mode as _gm
from symgrad import _profiling as _prof
from symgrad.autograd.node import (  # noqa: F401  (re-exported: the graph's nodes)
    _sequence, _ACCUMULATE_SEQ, FREED_MESSAGE, forward_op_name, RemovableHandle, GradientEdge,
    _NodeExtra, _extra_field, Node, _anomaly_parent)
from symgrad.autograd._hook_calls import (  # noqa: F401  (re-exported)
    _check_hook_result, _call_hooks_undefined, _checked_hook_grads, _call_pre_hooks,
    _call_post_hooks, _retain, _check_nan, _warn_forward_stack, _warn_one_stack)
from symgrad.autograd._grad_args import (  # noqa: F401  (re-exported)
    _as_tuple, _inputs_tuple, _make_grads, _ones)

__all__ = ["Node", "AccumulateGrad", "RemovableHandle", "GradientEdge", "backward", "grad",
           "forward_op_name"]

_wrap = _tm._wrap
_vc_of = _tm._vc_of


class AccumulateGrad(Node):
    """Sink for a leaf: adds the incoming gradient into ``variable.grad``."""

    __slots__ = ("variable",)

    def __init__(self, variable):
        self._init_node((), 1)
        self._sequence_nr = _ACCUMULATE_SEQ
        self.variable = variable

    def name(self):
        return "torch::autograd::AccumulateGrad"   # torch's C++ node name, verbatim

    def __repr__(self):
        return f"<AccumulateGrad object at {hex(id(self))}>"

    def _apply(self, grads):
        g = grads[0]
        if g is not None:
            accumulate_grad(self.variable, g, _gm._state.enabled)
        return ()


def grad_accumulator(t):
    """The (weakly cached) AccumulateGrad node of leaf ``t``."""
    ref = t._grad_acc
    acc = ref() if ref is not None else None
    if acc is None:
        if _anomaly.enabled:
            acc = AccumulateGrad(t)
        else:  # AccumulateGrad(t), inlined
            acc = _new(AccumulateGrad)
            acc.next_functions = ()
            acc._sequence_nr = _ACCUMULATE_SEQ
            acc._n_out = 1
            acc._x = None
            acc.variable = t
        t._grad_acc = _weakref(acc)
    return acc


_new = object.__new__
_weakref = weakref.ref


def edge(t):
    """``(node, output_nr)`` through which gradient flows into tensor ``t`` (a GradientEdge:
    its own)."""
    if type(t) is GradientEdge:
        return (t.node, t.output_nr)
    fn = t._grad_fn if t._base is None else t.grad_fn
    if fn is not None:
        return (fn, t._output_nr)
    if t._requires_grad and (t._base is None or t._view_meta is None):
        return (grad_accumulator(t), 0)
    return (None, 0)   # no history, or a view made in no_grad mode (torch drops its gradient)


# ------------------------------------------------------------------- accumulation
_owned = set()  # ids of gradient arrays the user can see during the current backward


def _add_arrays(a, b):
    """``a + b`` as an array: NumPy returns a scalar for two 0-d arrays, which a Tensor must
    not hold (its repr, numpy() and device all expect an array)."""
    r = a + b
    return np.asarray(r) if isinstance(r, np.generic) else r


def _clone_obey_contract(g, variable):
    """A copy of ``g`` with ``variable``'s strides when it is dense, else row-major."""
    out = _tm._empty_like_layout(variable._data)
    out[...] = g._data
    return _tm._wrap(out)


def _obeys_layout(g, variable):
    v = variable._data
    a = g._data
    if not _tm._is_non_overlapping_and_dense(v):
        return _tm._is_contiguous(a)
    return all(s == 1 or sa == sv for s, sa, sv in zip(v.shape, a.strides, v.strides))


_UNSET = object()


def accumulate_grad(variable, g, create_graph):
    """torch's AccumulateGrad::accumulateGrad, including the gradient layout contract."""
    if not variable._requires_grad:   # torch: a leaf set to requires_grad=False since
        return
    v = variable._data
    a = g._data
    # grad_dtype, where the user set one: a dtype, or None for any
    want = getattr(variable, "_grad_dtype", _UNSET) if _tm.grad_dtype_live[0] else _UNSET
    if want is _UNSET:
        if a.dtype != v.dtype:
            g = g.to(variable.dtype)
            a = g._data
    elif want is not None and a.dtype != want.np:
        g = g.to(want)
        a = g._data
    if a.shape != v.shape:
        g = _sum_to_tensor(g, v.shape)
        a = g._data
    old = variable._grad
    if old is None:
        if not create_graph:
            if (a.base is None and g._grad_fn is None and id(a) not in _owned
                    and ((a.flags.c_contiguous and v.flags.c_contiguous)
                         or _obeys_layout(g, variable))):
                # steal: nobody else sees this buffer (g.detach(), inlined)
                t = _wrap(a)
                t._vc = _vc_of(g)
                variable._grad = t
                _owned.add(id(a))
                _keep_alive.append(a)
            else:
                variable._grad = _clone_obey_contract(g, variable)
        else:
            # Deep copy into the layout of the parameter; differentiable (CopyBackwards).

            variable._grad = _runtime_ops.copy_obey_contract(g, variable)
    elif not create_graph:
        # torch: with grad mode off, ``variable.grad += new_grad`` in place, also when the
        # .grad has a graph (create_graph earlier); it keeps its identity and grad_fn
        od = old._data
        if type(od) is not np.ndarray or od.flags.writeable:
            np.add(od, a, out=od, casting="unsafe")
            _vc_of(old).bump()
        else:
            variable._grad = _wrap(_add_arrays(od, a).astype(od.dtype, copy=False))
    else:
        variable._grad = old + g
    hooks = getattr(variable, "_post_acc_hooks", None) if _post_acc_live[0] else None
    if hooks:
        for hook in tuple(hooks.values()):
            r = hook(variable)
            if r is not None:   # torch: a post-accumulate hook must return None
                if not isinstance(r, _tm.Tensor):
                    raise TypeError(f"expected Variable, but hook returned '{type(r).__name__}'")
                raise RuntimeError("Tensor post accumulate grad hooks should return None.")


_keep_alive = []  # arrays whose ids are in _owned, kept alive so ids are not reused


def _sum_to_tensor(g, shape):

    return _runtime_ops.sum_to(g, shape)


# ------------------------------------------------------------------------ the run
def _call_hooks(hooks, g):
    for hook in tuple(hooks.values()):
        r = hook(g)
        if r is not None:
            if type(r) is not _tm.Tensor or r._data.shape != g._data.shape \
                    or r._data.dtype != g._data.dtype:
                _check_hook_result(hook, r, g)
            g = r
            _owned.add(id(r._data))
            _keep_alive.append(r._data)
    return g


def _call_output_hooks(tensor_hooks, grads):
    """The tensor hooks of a (non-leaf) node's outputs, on the node's incoming gradients (None
    for an output that got none: the node runs, as torch's)."""
    for nr, hooks in tensor_hooks.items():
        if not hooks:
            continue
        if grads[nr] is not None:
            grads[nr] = _call_hooks(hooks, grads[nr])
        else:
            _call_hooks_undefined(hooks)


# for register_multi_grad_hook (torch's _current_graph_task_id / _will_engine_execute_node).
_task = threading.local()
_task_ids = itertools.count()


def current_graph_task_id():
    """The id of the backward running in this thread, -1 outside one."""
    task = getattr(_task, "current", None)
    return -1 if task is None else task[0]


def will_engine_execute_node(node):
    """Whether the running backward executes (or captures the gradient of) ``node``."""
    task = getattr(_task, "current", None)
    if task is None:
        raise RuntimeError(
            "_will_engine_execute_node should only be called during the backward pass")
    if isinstance(node, GradientEdge):
        node = node.node
    return any(node in nodes for nodes in task[1])


_seq_key = operator.attrgetter("_sequence_nr")
_module_function = None  # symgrad.autograd.function.ModuleFunction, set when it is defined
_hooks_live = [0, True]  # symgrad.autograd.graph.live, set with _module_function
_node_packed = None      # function._node_packed: a module node holds pack-hooked values
_grad_dtype_live = _tm.grad_dtype_live
_post_acc_live = _tm.post_acc_live
_grad_module_function = None  # symgrad.autograd.function.GradModuleFunction, likewise


def _newly_live(node, slots, old):
    """A gradient-module node's edges for the outputs in ``slots``: (the edges to follow now,
    those not followed before; all of them)."""
    new = node.live_edges(slots)
    if old is None:
        return new, new
    return [e if o[0] is None else (None, 0) for e, o in zip(new, old)], new


def _run_hooked(node, grads, keep_graph):
    """One node of ``_execute_all`` that has hooks or retain_grad (the general steps)."""
    if type(node) is AccumulateGrad:
        hooks = node.variable._hooks
        if hooks and grads[0] is not None:
            grads[0] = _call_hooks(hooks, grads[0])
    x = node._x
    if x is not None:
        if type(node) is not AccumulateGrad:
            if x.tensor_hooks:
                _call_output_hooks(x.tensor_hooks, grads)
            if x.retain_refs:
                for nr, ref in x.retain_refs.items():
                    _retain(ref, grads[nr])
        if x.pre_hooks:
            grads = _call_pre_hooks(x.pre_hooks, grads)
    kids = node.next_functions
    if not kids and type(node) is not AccumulateGrad:
        outputs = ()
    elif not node._run_without_grads and all(g is None for g in grads):
        outputs = [None] * len(kids)
    else:
        outputs = node._apply(grads)
    if not keep_graph:
        node._release()
    if x is not None and x.post_hooks:
        outputs = _call_post_hooks(x.post_hooks, outputs, grads)
    return outputs


def _execute_all(root_edges, root_grads, keep_graph, create_graph):
    """``execute`` for the common case: every node runs, nothing is captured, anomaly mode off.

    Nodes run in decreasing sequence number, as the general engine's ready queue would run
    them: a node's inputs were created before it, so every node that feeds it gradient has a
    higher number and has already run. AccumulateGrad nodes run as soon as they are ready.
    Returns False, having run nothing, when the graph breaks that ordering.
    """
    # 1. discover the graph: pending-input counts of leaf accumulators, the other nodes
    acc_deps = {}
    seen = set()
    nodes = []
    stack = []
    Acc = AccumulateGrad
    GM = _grad_module_function
    slots = {}   # gradient-module node -> its outputs that edges lead to
    live = {}    # gradient-module node -> the edges followed so far (GradModuleFunction)
    for node, nr in root_edges:
        if node is not None:
            if type(node) is Acc:
                acc_deps[node] = acc_deps.get(node, 0) + 1
                continue
            if type(node) is GM:
                slots.setdefault(node, set()).add(nr)
            if node not in seen:
                seen.add(node)
                stack.append(node)
    while stack:
        node = stack.pop()
        seq = node._sequence_nr
        if type(node) is GM:
            edges, new = _newly_live(node, slots[node], live.get(node))
            if node not in live:
                nodes.append(node)
            live[node] = new
        else:
            nodes.append(node)
            edges = node.next_functions
        for child, nr in edges:
            if child is None:
                continue
            if type(child) is Acc:
                acc_deps[child] = acc_deps.get(child, 0) + 1
            elif child not in seen:
                if child._sequence_nr >= seq:
                    return False
                seen.add(child)
                stack.append(child)
                if type(child) is GM:
                    slots[child] = {nr}
            else:
                if child._sequence_nr >= seq:
                    return False
                if type(child) is GM and nr not in slots[child]:
                    slots[child].add(nr)
                    if child in live:   # expanded already: follow the edges this one adds
                        stack.append(child)
    if len(nodes) > 1:
        nodes.sort(key=_seq_key, reverse=True)
    _task.current = (next(_task_ids), (seen, acc_deps))

    # 2. run. A node's buffer exists once a gradient (not None) reached it.
    buffers = {}
    acc_bufs = {}
    wrap = _wrap
    MF = _module_function

    def run_acc(acc):
        g = acc_bufs.pop(acc, None)
        if acc._x is None and not acc.variable._hooks:
            if g is not None:
                accumulate_grad(acc.variable, g, create_graph)
        else:
            _run_hooked(acc, [g], keep_graph)

    for (node, nr), g in zip(root_edges, root_grads):
        if node is None:
            continue
        if type(node) is Acc:
            if g is not None:
                old = acc_bufs.get(node)
                acc_bufs[node] = g if old is None else (
                    old + g if create_graph else wrap(_add_arrays(old._data, g._data)))
            left = acc_deps[node] - 1
            acc_deps[node] = left
            if left == 0:
                run_acc(node)
            continue
        if g is not None:
            buf = buffers.get(node)
            if buf is None:
                buf = buffers[node] = [None] * node._n_out
            old = buf[nr]
            buf[nr] = g if old is None else (
                old + g if create_graph else wrap(_add_arrays(old._data, g._data)))

    for node in nodes:
        grads = buffers.pop(node, None)
        kids = node.next_functions if type(node) is not GM else live[node]
        if node._x is None:
            if grads is None and not node._run_without_grads:
                outputs = None  # no gradient reached it: None flows on
            elif not kids:
                outputs = ()
            else:
                outputs = node._apply(grads if grads is not None else [None] * node._n_out)
            if not keep_graph:
                if type(node) is MF:  # ModuleFunction._release, inlined
                    node._extra = None
                    if node._freeable:
                        node._saved = None
                else:
                    node._release()
        else:
            outputs = _run_hooked(node, grads if grads is not None else [None] * node._n_out,
                                  keep_graph)
        if outputs is None:
            for child, _ in kids:
                if child is not None and type(child) is Acc:
                    left = acc_deps[child] - 1
                    acc_deps[child] = left
                    if left == 0:
                        run_acc(child)
            continue
        for (child, nr), g in zip(kids, outputs):
            if child is None:
                continue
            if type(child) is Acc:
                if g is not None:
                    old = acc_bufs.get(child)
                    acc_bufs[child] = g if old is None else (
                        old + g if create_graph else wrap(_add_arrays(old._data, g._data)))
                left = acc_deps[child] - 1
                acc_deps[child] = left
                if left == 0:
                    run_acc(child)
            elif g is not None:
                buf = buffers.get(child)
                if buf is None:
                    buf = buffers[child] = [None] * child._n_out
                old = buf[nr]
                buf[nr] = g if old is None else (
                    old + g if create_graph else wrap(_add_arrays(old._data, g._data)))
    return True


# Reentrant backward (a backward run from inside a node's backward) nests Python frames; past
# this many levels in one thread the next level runs in a fresh thread (the caller waits), as
# torch's engine hands deep reentrant work to a new worker: a 2000-deep reentrant backward
# does not hit RecursionError.
_MAX_REENTRANT_DEPTH = 40
_depth = threading.local()


def _profiled(node, grads):
    """``node._apply(grads)`` as a profiler event named by the node (``MulBackward0``)."""
    rec = _prof.begin(node.name(), "backward", _prof.shapes_of([g for g in grads]))
    try:
        return node._apply(grads)
    finally:
        _prof.end(rec)


def _accumulate_owned(v, o, seed, stolen):
    """``accumulate_grad(v, o)`` of ``_one_node``, with the engine's state of what the user
    can see: the seed and the arrays already made .grad (never stolen)."""
    global _owned, _keep_alive
    prev_owned, prev_keep = _owned, _keep_alive
    _owned = {id(seed)}
    _keep_alive = [seed]
    if stolen:
        _owned.update(stolen)
        _keep_alive.extend(stolen.values())
    try:
        accumulate_grad(v, o, False)
    finally:
        _owned, _keep_alive = prev_owned, prev_keep


def execute(root_edges, root_grads, keep_graph, create_graph, targets=None, exec_targets=()):
    """Run the graph backward from ``root_edges`` (see `_execute`)."""
    d = getattr(_depth, "n", 0)
    if d >= _MAX_REENTRANT_DEPTH:
        return _execute_in_fresh_thread(root_edges, root_grads, keep_graph, create_graph,
                                        targets, exec_targets)
    _depth.n = d + 1
    # As torch's engine (which runs a backward under a copy of the caller's thread-local
    # state): a saved_tensors_hooks context entered or left inside the backward (a hook that
    # calls __enter__ / __exit__, or a backward that raises inside one) does not stay
    # entered, or stay popped, in the caller's thread after it.
    outer = getattr(_graph._local, "stack", None)
    if outer is not None:
        inner = _graph._local.stack = list(outer)
    try:
        return _execute(root_edges, root_grads, keep_graph, create_graph, targets,
                        exec_targets)
    finally:
        _depth.n = d
        if outer is not None:
            _graph._forget_entries(len(inner) - len(outer))
            _graph._local.stack = outer


def _execute_in_fresh_thread(*args):
    """`_execute(*args)` in a new thread that starts with this thread's grad mode, saved-tensor
    hooks and graph task; its result or exception comes back here."""

    grad, enabled, inference = _gm._state.grad, _gm._state.enabled, _gm._state.inference
    hooks = getattr(_graph._local, "stack", None)
    disabled = getattr(_graph._local, "disabled", None)
    task = getattr(_task, "current", None)
    box = {}

    def run():
        _gm._state.grad, _gm._state.enabled, _gm._state.inference = grad, enabled, inference
        if hooks is not None:
            _graph._local.stack = hooks          # the same list: pushes and pops are shared
        if disabled is not None:
            _graph._local.disabled = disabled
        _task.current = task
        try:
            box["result"] = execute(*args)
        except BaseException as e:  # noqa: BLE001  (re-raised in the caller's thread)
            box["error"] = e

    worker = threading.Thread(target=run, name="symgrad-reentrant-backward")
    worker.start()
    worker.join()
    if "error" in box:
        raise box["error"].with_traceback(box["error"].__traceback__)
    return box["result"]


def _execute(root_edges, root_grads, keep_graph, create_graph, targets=None, exec_targets=()):
    """Run the graph backward from ``root_edges``.

    Args:
        root_edges: ``(node, output_nr)`` per output.
        root_grads: gradient Tensor (or None) per output.
        keep_graph: do not free saved tensors.
        create_graph: run in grad mode so that gradients get a graph.
        targets: ``None`` to run every node, or edges whose incoming gradients to capture.
        exec_targets: nodes among the targets to execute (AccumulateGrad for backward(inputs)).

    Returns:
        A list aligned with ``targets`` of captured gradients (or None).
    """
    global _owned, _keep_alive
    prev_task = getattr(_task, "current", None)
    profiling = _prof.ON[0]   # the profiler times each node: the general loop below
    if targets is None and not _anomaly.enabled and not profiling:
        prev_mode = _gm._state.grad
        _gm._set_grad(create_graph)
        prev_owned, prev_keep = _owned, _keep_alive
        _owned, _keep_alive = set(), []
        for g in root_grads:
            if g is not None:
                _owned.add(id(g._data))
        try:
            if _execute_all(root_edges, root_grads, keep_graph, create_graph):
                return []
        finally:
            _gm._set_grad(prev_mode)
            _owned, _keep_alive = prev_owned, prev_keep
            _task.current = prev_task

    # 1. discover the graph (of a gradient-module node, the edges of its outputs that edges
    # lead to: GradModuleFunction)
    GM = _grad_module_function
    slots = {}
    children = {}
    stack = []
    for node, nr in root_edges:
        if node is not None:
            if type(node) is GM:
                slots.setdefault(node, set()).add(nr)
            if node not in children:
                children[node] = None
                stack.append(node)
    order = []
    while stack:
        node = stack.pop()
        if type(node) is GM:
            old = children[node]
            edges, kids = _newly_live(node, slots[node], old)
            if old is None:
                order.append(node)
        else:
            order.append(node)
            edges = kids = node.next_functions
        children[node] = kids
        for child, nr in edges:
            if child is None:
                continue
            if type(child) is GM:
                s = slots.setdefault(child, set())
                if nr not in s:
                    s.add(nr)
                    if children.get(child) is not None:   # expanded: follow the new edges
                        stack.append(child)
            if child not in children:
                children[child] = None
                stack.append(child)

    # 2. which nodes run, which only receive (captured), and each one's dependency count
    captures = None
    if targets is None:
        runs = children
    else:
        captures = {}
        for i, (node, nr) in enumerate(targets):
            if node is not None:
                captures.setdefault(node, []).append((nr, i))
        parents = {}
        for node in order:
            for child, _ in children[node]:
                if child is not None:
                    parents.setdefault(child, []).append(node)
        runs = {n: None for n in exec_targets if n in children}
        frontier = [n for n in captures if n in children]
        while frontier:
            node = frontier.pop()
            for p in parents.get(node, ()):
                if p not in runs:
                    runs[p] = None
                    frontier.append(p)
    receives = runs if captures is None else {**runs, **captures}
    deps = {}
    for node in runs:
        for child, _ in children[node]:
            if child in receives:
                deps[child] = deps.get(child, 0) + 1
    for node, _ in root_edges:
        if node in receives:
            deps[node] = deps.get(node, 0) + 1

    # 3. run, highest sequence number first
    _task.current = (next(_task_ids), (receives,))
    results = [None] * (len(targets) if targets is not None else 0)
    buffers = {}
    heap = []
    counter = itertools.count()
    prev_mode = _gm._state.grad
    _gm._set_grad(create_graph)
    anomaly = _anomaly_mode._anomaly.enabled
    prev_owned, prev_keep = _owned, _keep_alive
    _owned, _keep_alive = set(), []
    for g in root_grads:
        if g is not None:
            _owned.add(id(g._data))
    try:
        def deliver(node, nr, g):
            buf = buffers.get(node)
            if buf is None:
                buf = buffers[node] = [None] * node._n_out
            if g is not None:
                old = buf[nr]
                if old is None:
                    buf[nr] = g
                elif create_graph:
                    buf[nr] = old + g
                else:
                    buf[nr] = _tm._wrap(_add_arrays(old._data, g._data))
            left = deps[node] - 1
            deps[node] = left
            if left == 0:
                heapq.heappush(heap, (-node._sequence_nr, next(counter), node))

        for (node, nr), g in zip(root_edges, root_grads):
            if node is not None and node in receives:
                deliver(node, nr, g)

        while heap:
            _, _, node = heapq.heappop(heap)
            grads = buffers.pop(node, None) or [None] * node._n_out
            # tensor hooks (leaf hooks live on the tensor), then retain_grad, then capture
            if type(node) is AccumulateGrad:
                hooks = node.variable._hooks
                if hooks and grads[0] is not None:
                    grads[0] = _call_hooks(hooks, grads[0])
            else:
                if node._tensor_hooks:
                    _call_output_hooks(node._tensor_hooks, grads)
                if node._retain_refs:
                    for nr, ref in node._retain_refs.items():
                        _retain(ref, grads[nr])
            if captures is not None and node in captures:
                for nr, i in captures[node]:
                    results[i] = grads[nr]
            if node not in runs:
                continue
            if node._pre_hooks:
                grads = _call_pre_hooks(node._pre_hooks, grads)
            kids = children[node]
            if not kids and type(node) is not AccumulateGrad:
                outputs = ()
            elif not node._run_without_grads and all(g is None for g in grads):
                outputs = [None] * len(kids)
            elif anomaly:
                prev_parent = getattr(_anomaly_parent, "node", None)
                _anomaly_parent.node = node
                try:
                    outputs = node._apply(grads) if not profiling else _profiled(node, grads)
                    if _anomaly_mode._anomaly.check_nan:
                        _check_nan(node, outputs)
                except Exception:
                    _warn_forward_stack(node)
                    raise
                finally:
                    _anomaly_parent.node = prev_parent
            elif profiling:
                outputs = _profiled(node, grads)
            else:
                outputs = node._apply(grads)
            if not keep_graph:
                node._release()
            if node._post_hooks:
                outputs = _call_post_hooks(node._post_hooks, outputs, grads)
            for (child, nr), g in zip(kids, outputs):
                if child is not None and child in receives:
                    deliver(child, nr, g)
    finally:
        _gm._set_grad(prev_mode)
        _owned, _keep_alive = prev_owned, prev_keep
        _task.current = prev_task
    return results


# --------------------------------------------------------------------- public API
def backward_implicit(t):
    """``t.backward()`` with every argument at its default (the common case)."""
    a = t._data
    if t._requires_grad:
        if a.size != 1:
            raise RuntimeError("grad can be implicitly created only for scalar outputs")
        if a.dtype.kind != "f":
            raise RuntimeError(
                "grad can be implicitly created only for real scalar outputs but got "
                f"{t.dtype}"
            )
        g = _wrap(_ones(a))
    else:
        g = None
    fn = t._grad_fn if t._base is None else t.grad_fn
    if fn is not None:
        if g is not None and t._base is None and _one_node(fn, t._output_nr, g, False):
            return
        e = (fn, t._output_nr)
    elif t._requires_grad:
        e = (grad_accumulator(t), 0)
    else:
        raise RuntimeError(
            "element 0 of tensors does not require grad and does not have a grad_fn")
    execute((e,), (g,), False, False)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False,
             grad_variables=None, inputs=None):
    """Accumulate the gradients of ``tensors`` into the leaves' ``.grad`` (torch semantics).

    Args:
        tensors: tensor(s) whose gradient is computed.
        grad_tensors: the vector of the vector-Jacobian product, per tensor; None is allowed
            for one-element tensors (an implicit 1).
        retain_graph: keep saved tensors for another backward; defaults to ``create_graph``.
        create_graph: build a graph of the derivative (higher order).
        inputs: restrict accumulation to these tensors (leaves or not; a dict: its values).
    """
    if (type(tensors) is _tm.Tensor and type(grad_tensors) is _tm.Tensor and not create_graph
            and inputs is None and grad_variables is None and tensors._base is None):
        # one tensor, its gradient given (y.backward(g)): a small graph, often
        fn = tensors._grad_fn
        if fn is not None:
            a, ga = tensors._data, grad_tensors._data
            if (ga.shape == a.shape and ga.dtype == a.dtype
                    and _one_node(fn, tensors._output_nr, grad_tensors, bool(retain_graph))):
                return
    _backward(tensors, grad_tensors, retain_graph, create_graph, grad_variables, inputs)


# The fast chain path and backward's general path / grad read the run defined above: imported
# now (autograd/_backward_chain.py, autograd/_grad_calls.py) and re-exported; backward and
# backward_implicit call _one_node as this module's global (the tests patch engine._one_node).
from symgrad.autograd._backward_chain import _CHAIN_MAX, _one_node  # noqa: E402,F401
from symgrad.autograd._grad_calls import (  # noqa: E402,F401
    _backward, _grad, _grad_batched, _materialized, _root_edges, grad,
)
grad.__module__ = __name__   # public: symgrad.autograd.engine.grad, as before

# The runtime layer's siblings this module calls into (each imports this one at module level,
# so they are bound once every name above is defined)
from symgrad import _runtime_ops  # noqa: E402
from symgrad.autograd import graph as _graph  # noqa: E402
