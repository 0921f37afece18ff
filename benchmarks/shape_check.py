"""What the entry shape check of a static-shape module costs per call (issue 19: < 1 us).

For each benchmark function at 1e3 elements, times the check's condition as the generated
backward runs it (the inputs' shapes against the shapes generated for), and the whole
backward call, NumPy target. The condition only: when it holds (a wrong shape) the module
raises, so a passing call pays exactly it.

    python -m benchmarks.shape_check
"""
from __future__ import annotations

import re
import timeit


def measure(size=1000, target="numpy", names=None):
    import numpy as np

    import symgrad as sg
    from benchmarks import functions
    from benchmarks.peers import symgrad_forward, symgrad_namespace

    rows = []
    for func in functions.ALL:
        if func.sym is None or names is not None and func.name not in names:
            continue
        inputs = func.make_inputs(size, np.float64, np.random.default_rng(1))
        m = sg.compile(symgrad_forward(func, symgrad_namespace(sg)), *inputs, target=target)
        source = m.source[m.source.index("\ndef backward("):]
        test = re.search(r"\n    if (getattr\(.*\)):\n        _check_shapes", source)
        if test is None:
            continue
        args = re.match(r"\ndef backward\(([^)]*)\)", source).group(1).split(", ")
        outs = m.forward(*inputs)
        outs = outs if isinstance(outs, tuple) else (outs,)
        seeds = [np.ones_like(np.asarray(o)) for o in outs]
        scope = dict(zip(args, seeds + list(inputs)))
        # many short runs: their minimum is the uncontended cost on a shared machine
        check = min(timeit.repeat(test.group(1), globals=scope, number=1000, repeat=300)) / 1000
        call = min(timeit.repeat(lambda: m.backward(*seeds, *inputs), number=200,
                                 repeat=5)) / 200
        rows.append((func.name, len(inputs), check, call))
    return rows


def main():
    for name, n, check, call in measure():
        print(f"{name:<20} {n} inputs  check {check * 1e9:6.0f} ns  backward {call * 1e6:8.1f} us"
              f"  ({check / call:.2%})")


if __name__ == "__main__":
    main()
