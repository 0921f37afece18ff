"""Write the generated sources of the benchmark functions (NumPy and C, float32/float64) to a
directory, so a compiler change can be checked for leaving common functions' code unchanged:
    python tools/snapshot_sources.py OUTDIR && diff -r OLD OUTDIR"""
import os
import re
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
os.environ.setdefault("SYMGRAD_CACHE_DIR", tempfile.mkdtemp(prefix="sg-snap-"))

import symgrad as sg  # noqa: E402
from benchmarks import functions  # noqa: E402
from benchmarks.peers import symgrad_namespace  # noqa: E402

EXTRA = {
    "softplus_op": lambda x: sg.softplus(x),
    "sigmoid_op": lambda x: sg.sigmoid(x),
    "tanh_op": lambda x: sg.tanh(x),
    "log_softmax": lambda x: x.log_softmax(-1),
    "softmax": lambda x: x.softmax(-1),
    "norm": lambda x: x.norm(),
    "std": lambda x: x.std(-1),
    "var": lambda x: x.var(-1),
    "div": lambda x: 1.0 / (x * x + 1.0),
    "elu": lambda x: sg.where(x > 0, x, sg.expm1(x)),
}


def _clean(text):
    # the benchmark record captured by the forward prints with object addresses
    return re.sub(r"Constants: f=Func\(.*", "Constants: f=Func(...)", text)


def main(out):
    os.makedirs(out, exist_ok=True)
    ns = symgrad_namespace(sg)
    rng = np.random.default_rng(0)
    for f in functions.select(None):
        for dtype in (np.float32, np.float64):
            xs = f.make_inputs(1024, dtype, rng)
            for target in ("numpy", "c"):
                mod = sg.compile(lambda *a, f=f: f.sym(ns, *a), *xs, target=target,
                                 cache_ok=False)
                for name, text in sorted(mod.files.items()):
                    with open(os.path.join(out, f"{f.name}-{dtype.__name__}-{target}-"
                                           f"{os.path.basename(name)}"), "w") as fh:
                        fh.write(_clean(text))
    for name, fn in EXTRA.items():
        for dtype in (np.float32, np.float64):
            x = rng.uniform(-2, 2, (8, 16)).astype(dtype)
            for target in ("numpy", "c"):
                mod = sg.compile(fn, x, target=target, cache_ok=False)
                for fname, text in sorted(mod.files.items()):
                    with open(os.path.join(out, f"x-{name}-{dtype.__name__}-{target}-"
                                           f"{os.path.basename(fname)}"), "w") as fh:
                        fh.write(_clean(text))


if __name__ == "__main__":
    main(sys.argv[1])
