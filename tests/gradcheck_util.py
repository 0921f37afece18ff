"""Independent numerical references for the compiler tests: central finite differences."""
import numpy as np


def numeric_vjp(forward, inputs, grad_outputs, eps=1e-6):
    """d/d inputs of sum_k <grad_outputs[k], forward(*inputs)[k]> by central differences."""
    def scalar(*args):
        outs = forward(*args)
        outs = outs if isinstance(outs, tuple) else (outs,)
        return sum(float(np.sum(np.asarray(g) * np.asarray(o, dtype=np.float64)))
                   for g, o in zip(grad_outputs, outs) if g is not None)

    grads = []
    for i, x in enumerate(inputs):
        x = np.asarray(x, dtype=np.float64)
        g = np.zeros_like(x)
        it = np.nditer(x, flags=["multi_index"])
        for _ in it:
            idx = it.multi_index
            plus, minus = x.copy(), x.copy()
            plus[idx] += eps
            minus[idx] -= eps
            args_p = list(inputs); args_p[i] = plus
            args_m = list(inputs); args_m[i] = minus
            g[idx] = (scalar(*args_p) - scalar(*args_m)) / (2 * eps)
        grads.append(g)
    return grads


def assert_close(actual, expected, rtol=1e-6, atol=1e-7, what=""):
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, err_msg=what)
