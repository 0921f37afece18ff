"""``backward``'s general path and ``grad``: their arguments checked (``inputs=``,
``grad_variables``, ``allow_unused``, ``materialize_grads``, ``is_grads_batched``), the roots
and targets of the run, the results as torch returns them. Moved verbatim from
autograd/engine.py, which imports it once it has defined the run and re-exports every name
(``grad`` keeps ``symgrad.autograd.engine`` as its ``__module__``).
"""

import warnings

from symgrad import tensor as _tm
from symgrad.autograd._grad_args import _as_tuple, _inputs_tuple, _make_grads
from symgrad.autograd.engine import edge, execute
from symgrad.autograd.node import GradientEdge


def _root_edges(tensors):
    edges = []
    for i, t in enumerate(tensors):
        e = edge(t)
        if e[0] is None:
            raise RuntimeError(
                f"element {i} of tensors does not require grad and does not have a grad_fn"
            )
        edges.append(e)
    return edges


def _backward(tensors, grad_tensors, retain_graph, create_graph, grad_variables, inputs):
    """``backward`` by the general engine."""
    if grad_variables is not None:
        warnings.warn("`grad_variables` is deprecated. Use `grad_tensors` instead.",
                      FutureWarning, stacklevel=2)
        if grad_tensors is None:
            grad_tensors = grad_variables
        else:
            raise RuntimeError(
                "`grad_tensors` and `grad_variables` (deprecated) arguments both passed to "
                "`backward()`. Please only use `grad_tensors`."
            )
    if inputs is not None:
        inputs = _inputs_tuple(inputs, "backward")
        if not inputs:
            raise RuntimeError("`inputs` argument to `backward()` cannot be empty.")
    tensors = _as_tuple(tensors)
    grads = _make_grads(tensors, grad_tensors)
    if retain_graph is None:
        retain_graph = create_graph
    edges = _root_edges(tensors)
    if create_graph:
        warnings.warn(
            "Using backward() with create_graph=True will create a reference cycle between "
            "the parameter and its gradient which can cause a memory leak. We recommend using "
            "autograd.grad when creating the graph to avoid this. If you have to use this "
            "function, make sure to reset the .grad fields of your parameters to None after "
            "use to break the cycle and avoid the leak.",
            UserWarning,
            stacklevel=3,
        )
    if inputs is None:
        execute(edges, grads, retain_graph, create_graph)
        return
    targets = []
    exec_targets = []
    for t in inputs:
        if type(t) is GradientEdge:
            e = (t.node, t.output_nr)
        else:
            t.retain_grad()   # as torch: a non-leaf input retains its grad from now on (and
            e = edge(t)       # a leaf that does not require grad is refused by retain_grad)
        targets.append(e)
        if e[0] is not None:
            # torch marks every input's node as needed under backward(inputs=): it runs, with
            # its pre- and post-hooks, though what it returns reaches no node outside inputs
            exec_targets.append(e[0])
    execute(edges, grads, retain_graph, create_graph, targets, exec_targets)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         only_inputs=True, allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """Gradients of ``outputs`` w.r.t. ``inputs``, returned as a tuple (nothing accumulates).

    Args:
        outputs: tensor(s) to differentiate.
        inputs: tensor(s) (leaves or not) w.r.t. which the gradient is returned; a dict of
            them (``dict(model.named_parameters())``) returns a dict with the same keys.
        grad_outputs: the vector of the vector-Jacobian product, per output.
        retain_graph: keep the graph; defaults to ``create_graph``.
        create_graph: give the returned gradients a graph (higher order).
        allow_unused: return None for inputs the outputs do not depend on (else raise).
        materialize_grads: return zeros instead of None for unused inputs.
    """
    if materialize_grads and allow_unused is False:
        raise ValueError(
            "Expected allow_unused to be True or not passed when materialize_grads=True, "
            "but got: allow_unused=False."
        )
    if allow_unused is None:
        allow_unused = materialize_grads
    keys = inputs.keys() if type(inputs) is dict else None
    inputs = _inputs_tuple(inputs, "grad")
    if not inputs:
        raise RuntimeError("`inputs` argument to `grad()` cannot be empty.")
    if not only_inputs:
        warnings.warn(
            "only_inputs argument is deprecated and is ignored now (defaults to True). To "
            "accumulate gradient for other parts of the graph, please use "
            "symgrad.autograd.backward.",
            FutureWarning,
            stacklevel=2,
        )
    if is_grads_batched:
        out = _grad_batched(outputs, inputs, grad_outputs, retain_graph, create_graph,
                            allow_unused, materialize_grads)
    else:
        out = _grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused,
                    materialize_grads)
    return out if keys is None else dict(zip(keys, out))


def _grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused,
          materialize_grads):
    """``grad`` of a tuple of inputs, not batched."""
    outputs = _as_tuple(outputs)
    grads = _make_grads(outputs, grad_outputs)
    if retain_graph is None:
        retain_graph = create_graph
    edges = _root_edges(outputs)   # torch checks the outputs first, then the inputs
    for t in inputs:
        if type(t) is not GradientEdge and not t._requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
    targets = [edge(t) for t in inputs]
    results = execute(edges, grads, retain_graph, create_graph, targets)
    out = []
    for i, (t, r) in enumerate(zip(inputs, results)):
        if r is None:
            if not allow_unused:
                raise RuntimeError(
                    f"The differentiated Tensor at index {i} appears to not have been used in "
                    "the graph. Set allow_unused=True if this is the desired behavior."
                )
            if materialize_grads:
                r = _materialized(t, create_graph)
        elif type(t) is not GradientEdge and r._data.dtype != t._data.dtype:
            r = r.to(t.dtype)
        out.append(r)
    return tuple(out)


def _materialized(t, create_graph):
    """materialize_grads' zeros for an unused input (torch: a leaf that requires grad under
    create_graph)."""
    if type(t) is GradientEdge:
        raise RuntimeError("materialize_grads cannot be used when the given input is a "
                           "GradientEdge")
    return _tm.zeros_like(t, requires_grad=create_graph)


def _grad_batched(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused,
                  materialize_grads):
    """grad(..., is_grads_batched=True): one vector-Jacobian product per slice of the leading
    dimension of every grad_output, stacked along a new leading dimension (torch runs them
    with vmap; the results are the same). The graph lives until the last slice is done."""
    outputs = _as_tuple(outputs)
    grad_outputs = _as_tuple(grad_outputs)
    if len(grad_outputs) != len(outputs):
        raise RuntimeError(f"grad requires one grad_output per output: got {len(grad_outputs)} "
                           f"grad_outputs and {len(outputs)} outputs")
    sizes = {g.shape[0] for g in grad_outputs if g is not None and g.dim() > 0}
    if len(sizes) != 1:
        raise RuntimeError("is_grads_batched=True needs every grad_output to have the same "
                           f"leading (batch) dimension, got sizes {sorted(sizes)}")
    (n,) = sizes
    for i, (g, o) in enumerate(zip(grad_outputs, outputs)):
        if isinstance(g, _tm.Tensor) and isinstance(o, _tm.Tensor) \
                and g._data.shape[1:] != o._data.shape:
            raise RuntimeError(
                "If `is_grads_batched=True`, we interpret the first dimension of each "
                "grad_output as the batch dimension. The sizes of the remaining dimensions are "
                "expected to match the shape of corresponding output, but a mismatch was "
                f"detected: grad_output[{i}] has a shape of {g[0].shape} and output[{i}] has a "
                f"shape of {o.shape}. If you only want some tensors in `grad_output` to be "
                "considered batched, consider using vmap.")
    if retain_graph is None:
        retain_graph = create_graph
    rows = []
    for i in range(n):
        slices = tuple(None if g is None else g[i] for g in grad_outputs)
        rows.append(_grad(outputs, inputs, slices, retain_graph or i < n - 1, create_graph,
                          allow_unused, False))

    out = []
    for t, col in zip(inputs, zip(*rows)):
        if col[0] is not None:
            out.append(_runtime_ops.stack(list(col)))
        elif materialize_grads:   # as torch: zeros of the input's own shape, not batched
            out.append(_materialized(t, create_graph))
        else:
            out.append(None)
    return tuple(out)

# The runtime layer's siblings this module calls into (each imports this one at module level,
# so they are bound once every name above is defined)
from symgrad import _runtime_ops  # noqa: E402
