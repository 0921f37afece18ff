"""The backward engine's fast path: ``_one_node`` runs the backward of a small graph without
branches (a chain of module nodes, forward-only Functions' and built-in ops', each with at most
one edge to another node, the others to leaves reached once each) without the general engine's
graph walk; ``backward`` and ``t.backward()`` try it first (autograd/engine.py calls it as its
own ``engine._one_node``, where the tests patch it). Moved verbatim from autograd/engine.py,
which imports it once it has defined what it reads and re-exports every name.
"""

from symgrad import _profiling as _prof
from symgrad.tensor import _wrap
from symgrad.autograd.anomaly_mode import _anomaly
from symgrad.autograd.engine import (
    AccumulateGrad, _accumulate_owned, _grad_dtype_live, _post_acc_live,
)

# set, as the engine's own, by autograd/_module_nodes.py once the module node is defined
_module_function = None  # symgrad.autograd.function.ModuleFunction
_hooks_live = [0, True]  # symgrad.autograd.graph.live
_node_packed = None      # function._node_packed: a module node holds pack-hooked values


_CHAIN_MAX = 4   # nodes: a longer graph runs through the general engine (a walk that finds
# a branch after many nodes is work lost)


def _one_node(fn, nr, g, keep_graph):
    """The backward of a small graph without branches: a chain of module nodes (forward-only
    Functions', built-in ops'), each with at most one edge to another node, the others to
    leaves reached once each, or nowhere (``F.apply(x, w).backward(g)``,
    ``F.apply(x).sum().backward()``). The nodes run and the leaves accumulate exactly as
    ``_execute_all`` runs them (the same calls and order: each node's backward with its
    version checks, its release, ``accumulate_grad``'s gradient-stealing rules), without the
    graph walk, the dicts and the thread-local state a general backward sets up.
    Returns False, having run nothing, when the graph is not of that form or something may
    observe the engine's state during the run (hooks of any kind, retain_grad, anomaly mode,
    the profiler, a node whose saved values went through saved-tensor hooks): the caller
    runs the general engine."""
    MF = _module_function
    if _anomaly.enabled or _prof.ON[0]:
        return False
    packed = _hooks_live[1]   # saved-tensor hooks were entered: a node may hold packed values
    post_acc = _post_acc_live[0]
    edges = fn.next_functions
    if len(edges) == 1 and fn._n_out == 1 and type(fn) is MF and fn._x is None:
        # one node, one input (F.apply(x).backward(g)): the steps below, for that graph
        child = edges[0][0]
        if (type(child) is AccumulateGrad and child._x is None and not child.variable._hooks
                and not (post_acc and getattr(child.variable, "_post_acc_hooks", None))
                and not (packed and _node_packed(fn))):
            a = fn._grad1(g)   # _apply_plain([g])[0], its array
            if not keep_graph:
                fn._extra = None
                if fn._freeable:
                    fn._saved = None
            if a is not None:
                v = child.variable
                d = v._data
                if (v._grad is None and v._requires_grad and not _grad_dtype_live[0]
                        and a is not g._data and (a.dtype is d.dtype or a.dtype == d.dtype)
                        and a.shape == d.shape
                        and a.base is None and a.flags.c_contiguous
                        and d.flags.c_contiguous):
                    v._grad = _wrap(a)
                else:
                    _accumulate_owned(v, _wrap(a), g._data, None)
            return True
    if fn._n_out == 1 and type(fn) is MF and fn._x is None and edges:
        # one node, its edges to distinct leaves (or nowhere): F.apply(x, w, b).backward(g),
        # the chain below for that graph, each gradient wrapped only as the .grad it becomes
        leaves = []
        for e in edges:
            child = e[0]
            if child is None:
                leaves.append(None)
            elif (type(child) is AccumulateGrad and child._x is None
                    and not child.variable._hooks
                    and not (post_acc and getattr(child.variable, "_post_acc_hooks", None))):
                leaves.append(child)
            else:
                break
        else:
            n_leaves = len(leaves) - leaves.count(None)
            if (len(set(leaves)) - (n_leaves != len(leaves)) == n_leaves
                    and not (packed and _node_packed(fn))):
                arrays = fn._grad_arrays(g)
                if not keep_graph:
                    fn._extra = None
                    if fn._freeable:
                        fn._saved = None
                seed = g._data
                stolen = None   # arrays made .grad here, by id (alive: their ids stay theirs)
                for child, a in zip(leaves, arrays):
                    if child is None or a is None:
                        continue
                    v = child.variable
                    d = v._data
                    if (v._grad is None and v._requires_grad and not _grad_dtype_live[0]
                            and a is not seed and (a.dtype is d.dtype or a.dtype == d.dtype)
                            and a.shape == d.shape
                            and a.base is None and a.flags.c_contiguous
                            and d.flags.c_contiguous and (stolen is None or id(a) not in stolen)):
                        v._grad = _wrap(a)
                        if stolen is None:
                            stolen = {id(a): a}
                        else:
                            stolen[id(a)] = a
                    else:
                        _accumulate_owned(v, _wrap(a), seed, stolen)
                return True
    chain = []   # (node, edge to the next node or None)
    accs = None  # the leaves' accumulators met (a set once there are two)
    node = fn
    while True:
        if type(node) is not MF or node._x is not None or len(chain) == _CHAIN_MAX:
            return False
        if packed and _node_packed(node):   # its unpack hooks run in the general engine
            return False
        nxt = None
        for e in node.next_functions:
            child = e[0]
            if child is None:
                continue
            if type(child) is AccumulateGrad:
                if child._x is not None or child.variable._hooks or (
                        post_acc and getattr(child.variable, "_post_acc_hooks", None)):
                    return False
                if accs is None:
                    accs = child
                elif type(accs) is set:
                    if child in accs:   # a leaf reached twice: summed first, generally
                        return False
                    accs.add(child)
                elif child is accs:
                    return False
                else:
                    accs = {accs, child}
            elif nxt is None:
                nxt = e
            else:
                return False   # a branch: the general engine
        chain.append((node, nxt))
        if nxt is None:
            break
        node = nxt[0]
    seed = g._data
    stolen = None   # arrays made .grad here, by id (alive: their ids stay theirs)
    n_out = fn._n_out
    if n_out == 1:
        grads = [g]
    else:
        grads = [None] * n_out
        grads[nr] = g
    for node, nxt in chain:
        edges = node.next_functions
        # the node's backward, as in grad mode off (create_graph is False): _apply_plain
        outputs = node._apply_plain(grads) if grads is not None and edges else None
        if not keep_graph:   # ModuleFunction._release, inlined
            node._extra = None
            if node._freeable:
                node._saved = None
        grads = None
        if outputs is None:
            continue   # no gradient reached it: None flows on (the nodes after it released)
        for e, o in zip(edges, outputs):
            child = e[0]
            if child is None or o is None:
                continue
            if e is nxt:
                grads = [None] * child._n_out
                grads[e[1]] = o
                continue
            v = child.variable
            a = o._data
            d = v._data
            if (v._grad is None and v._requires_grad and not _grad_dtype_live[0]
                    and a is not seed and a.dtype == d.dtype and a.shape == d.shape
                    and a.base is None and a.flags.c_contiguous and d.flags.c_contiguous
                    and (stolen is None or id(a) not in stolen)):
                # accumulate_grad's steal, as it does it: the node's fresh output is the
                # .grad (nobody else sees it: no hooks; a detach() of it, inlined)
                v._grad = o
                if stolen is None:
                    stolen = {id(a): a}
                else:
                    stolen[id(a)] = a
            else:
                _accumulate_owned(v, o, seed, stolen)
    return True
