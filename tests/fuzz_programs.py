"""A seeded generator of random forward programs for differential fuzzing against torch.

`generate(seed)` returns a `Program`: Python source text of one function

    def program(m, x0, x1, ...):
        v0 = m.exp(x0)
        ...
        return (v7, v3)

written only in torch's names, so that `m` can be `torch` or `symgrad` (the same code runs on
both), the inputs (NumPy arrays of one dtype, float32 or float64) and the program's metadata.
`Program.render("torch")` prints it as a standalone, copy-pasteable reproduction.

The program is a DAG: every value is kept in a pool and later statements draw operands from
the whole pool (values are reused several times). Ops: elementwise unary and binary ops with
broadcasting, scalar constants, `where` / `maximum` / `minimum` / `clamp`, `pow` with safe
exponents, reductions (`sum mean amax logsumexp` with dims and keepdim), `matmul` where the
shapes allow, `reshape` / `transpose` / `unsqueeze` / slicing / integer indexing, `cat`.

Domains are kept safe by construction (softmax, sigmoid and softplus are not counted as
positive: at the extreme inputs they underflow to 0): `log`, `sqrt`, `rsqrt`, a division's denominator and a
`pow`'s base go through a positive value (one the generator knows to be positive, or
`abs(v) + c`). A candidate whose float64 torch evaluation is not finite or is huge is dropped
(the next sub-seed is tried), so the programs compare numbers, not overflow conventions.

Constraints that keep out documented deliberate differences (docs/runtime.md, "Differences
from torch"): no `v - v` / `v / v` on one operand (a traced forward folds them to 0 and 1),
no `maximum` / `minimum` / `where` with both operands the same value (ties: torch and symgrad
split a tie's gradient differently only at exact ties, which the generator otherwise avoids),
no advanced (tensor) indexing (not traced: only basic slicing and integer indices).
"""
from __future__ import annotations

import dataclasses

import numpy as np

SIZES = (1, 2, 3, 4)
LONG = (5, 8, 13)            # sometimes: lengths past a vector width, with a remainder


@dataclasses.dataclass
class Value:
    name: str
    shape: tuple
    positive: bool = False   # known > 0 (so log / sqrt / a denominator may take it directly)


@dataclasses.dataclass
class Program:
    seed: int
    source: str              # `def program(m, x0, ...)` in torch's names through `m`
    inputs: list             # NumPy arrays, one dtype (a quarter of the programs: one input of
    dtype: str               # the other); dtype: the lower precision present
    outputs: int

    def function(self):
        scope: dict = {}
        exec(compile(self.source, f"<fuzz program seed={self.seed}>", "exec"), scope)
        return scope["program"]

    def render(self, namespace="torch"):
        """A standalone reproduction in `namespace` ("torch" or "sg")."""
        imp = "import torch" if namespace == "torch" else "import symgrad as sg"
        shapes = ", ".join(str(tuple(x.shape)) for x in self.inputs)
        body = self.source.replace("(m, ", "(").replace("(m)", "()").replace("m.", namespace + ".")
        return (f"# fuzz program seed={self.seed} dtype={self.dtype} input shapes {shapes}\n"
                f"{imp}\n{body}")


class _Gen:
    def __init__(self, rng):
        self.rng = rng
        self.lines: list[str] = []
        self.pool: list[Value] = []
        self.n = 0

    def pick(self, k=1, pred=None):
        cands = [v for v in self.pool if pred is None or pred(v)]
        if not cands:
            return None
        # favour recent values (deeper programs) but keep reusing old ones (a DAG)
        w = np.arange(1, len(cands) + 1, dtype=float) ** 1.5
        idx = self.rng.choice(len(cands), size=k, replace=len(cands) < k, p=w / w.sum())
        return [cands[i] for i in idx]

    def emit(self, expr, shape, positive=False):
        name = f"v{self.n}"
        self.n += 1
        self.lines.append(f"    {name} = {expr}")
        v = Value(name, tuple(shape), positive)
        self.pool.append(v)
        return v

    def const(self, lo=-2.0, hi=2.0):
        c = float(self.rng.uniform(lo, hi))
        return f"{c:.3g}" if abs(c) > 1e-3 else "0.5"

    def pos(self, v):
        """An expression for a positive value made from v."""
        if v.positive:
            return v.name
        c = self.rng.choice(["0.5", "1.0", "0.25"])
        kind = self.rng.integers(3)
        if kind == 0:
            return f"(m.abs({v.name}) + {c})"
        if kind == 1:
            return f"({v.name} * {v.name} + {c})"
        return f"m.exp(m.tanh({v.name}))"

    # ---- op families -------------------------------------------------------------------

    def unary(self):
        (v,) = self.pick()
        r = self.rng
        ops = ["exp_b", "sin", "cos", "tanh", "sigmoid", "softplus", "abs", "neg", "square",
               "log", "sqrt", "rsqrt", "log1p", "expm1_b", "erf", "pow_int", "pow_frac",
               "clamp", "clamp_min", "relu", "scale", "shift", "reciprocal", "atan",
               "gelu", "silu", "elu", "softmax", "log_softmax", "cumsum", "hardtanh", "sinh",
               "logsigmoid", "leaky_relu"]
        op = ops[r.integers(len(ops))]
        x = v.name
        if op == "exp_b":
            return self.emit(f"m.exp(m.tanh({x}) * {self.const(0.5, 2)})", v.shape, True)
        if op == "expm1_b":
            return self.emit(f"m.expm1(m.sin({x}))", v.shape)
        if op in ("sin", "cos", "tanh", "erf", "atan"):
            return self.emit(f"m.{op}({x})", v.shape)
        if op in ("gelu", "silu", "elu", "logsigmoid", "leaky_relu"):
            return self.emit(f"m.nn.functional.{op}({x})", v.shape)
        if op == "hardtanh":
            return self.emit(f"m.nn.functional.hardtanh({x}, -0.8, 0.9)", v.shape)
        if op == "sinh":
            return self.emit(f"m.sinh(m.tanh({x}) * 2)", v.shape)
        if op in ("softmax", "log_softmax", "cumsum"):
            if not v.shape:
                return self.emit(f"m.{op}({x}.unsqueeze(0), 0)", (1,))
            d = int(r.integers(len(v.shape))) - (len(v.shape) if r.integers(2) else 0)
            return self.emit(f"m.{op}({x}, dim={d})", v.shape)
        if op == "sigmoid":
            return self.emit(f"m.sigmoid({x})", v.shape)
        if op == "softplus":
            # threshold 40, not 20: symgrad's softplus is exact past 20 (docs/runtime.md)
            return self.emit(f"m.nn.functional.softplus({x}, threshold=40)", v.shape)
        if op == "abs":
            return self.emit(f"m.abs({x})", v.shape)
        if op == "neg":
            return self.emit(f"-{x}", v.shape)
        if op == "square":
            return self.emit(f"m.square({x})", v.shape)
        if op in ("log", "sqrt", "rsqrt", "log1p"):
            return self.emit(f"m.{op}({self.pos(v)})", v.shape, op in ("sqrt", "rsqrt"))
        if op == "reciprocal":
            return self.emit(f"m.reciprocal({self.pos(v)})", v.shape, True)
        if op == "pow_int":
            e = int(r.choice([2, 3]))
            return self.emit(f"{x} ** {e}", v.shape, e == 2 and v.positive)
        if op == "pow_frac":
            e = float(r.choice([0.5, 1.5, -0.5, 2.5]))
            return self.emit(f"m.pow({self.pos(v)}, {e})", v.shape, True)
        if op == "clamp":
            lo = float(r.uniform(-1, 0))
            return self.emit(f"m.clamp({x}, {lo:.3g}, {lo + float(r.uniform(0.2, 2)):.3g})", v.shape)
        if op == "clamp_min":
            return self.emit(f"{x}.clamp(min={self.const(-1, 0.5)})", v.shape)
        if op == "relu":
            return self.emit(f"m.relu({x})", v.shape)
        if op == "scale":
            return self.emit(f"{self.const()} * {x}", v.shape, False)
        if op == "shift":
            c = self.const(0.1, 2)
            return self.emit(f"{x} + {c}", v.shape, v.positive)
        raise AssertionError(op)

    def binary(self):
        r = self.rng
        a = self.pick()[0]
        bs = [v for v in self.pool if v is not a and _bcast(a.shape, v.shape) is not None]
        if not bs:
            return self.unary()
        b = bs[r.integers(len(bs))]
        shape = _bcast(a.shape, b.shape)
        ops = ["add", "sub", "mul", "div", "maximum", "minimum", "where", "where_const",
               "pow_tensor", "add_scaled", "clamp_tensor", "atan2"]
        op = ops[r.integers(len(ops))]
        x, y = a.name, b.name
        if op == "add":
            return self.emit(f"{x} + {y}", shape, a.positive and b.positive)
        if op == "sub":
            return self.emit(f"{x} - {y}", shape)
        if op == "mul":
            return self.emit(f"{x} * {y}", shape, a.positive and b.positive)
        if op == "div":
            return self.emit(f"{x} / {self.pos(b)}", shape, a.positive)
        if op == "maximum":
            return self.emit(f"m.maximum({x}, {y})", shape, a.positive or b.positive)
        if op == "minimum":
            return self.emit(f"m.minimum({x}, {y})", shape, a.positive and b.positive)
        if op == "where":
            return self.emit(f"m.where({x} > {y}, {x} * {self.const()}, {y})", shape)
        if op == "where_const":
            return self.emit(f"m.where({y} > {self.const(-0.5, 0.5)}, {x}, {self.const()})", shape)
        if op == "pow_tensor":
            return self.emit(f"{self.pos(a)} ** m.tanh({y})", shape, True)
        if op == "add_scaled":
            return self.emit(f"{self.const()} * {x} + {self.const()} * {y}", shape)
        if op == "clamp_tensor":
            return self.emit(f"m.clamp({x}, min={y})", shape, b.positive)
        if op == "atan2":
            return self.emit(f"m.atan2({x}, {self.pos(b)})", shape)
        raise AssertionError(op)

    def reduction(self):
        r = self.rng
        cands = self.pick(pred=lambda v: len(v.shape) >= 1)
        if cands is None:
            return self.unary()
        v = cands[0]
        ops = ["sum", "mean", "amax", "logsumexp", "sum_all", "mean_all", "var", "norm", "prod",
               "max_values", "amin"]
        op = ops[r.integers(len(ops))]
        nd = len(v.shape)
        if op == "sum_all":
            return self.emit(f"{v.name}.sum()", (), v.positive)
        if op == "mean_all":
            return self.emit(f"{v.name}.mean()", (), v.positive)
        keep = bool(r.integers(2))
        if op in ("sum", "mean") and nd >= 2 and r.integers(3) == 0:
            dims = tuple(sorted(int(d) for d in r.choice(nd, size=2, replace=False)))
            dims_s = f"({dims[0] - nd if r.integers(2) else dims[0]}, {dims[1]})"
        else:
            d = int(r.integers(nd))
            dims = (d,)
            dims_s = str(d - nd if r.integers(2) else d)
        shape = tuple(1 if i in dims else s for i, s in enumerate(v.shape)) if keep else \
            tuple(s for i, s in enumerate(v.shape) if i not in dims)
        if op == "var":
            return self.emit(f"{v.name}.var(dim={dims_s}, unbiased=False, keepdim={keep})", shape)
        if op == "norm":
            return self.emit(f"m.norm({v.name} + 0.1, dim={dims_s}, keepdim={keep})", shape, True)
        if op == "prod":
            d = dims[0] - nd if r.integers(2) else dims[0]
            shape = tuple(1 if i == dims[0] else s for i, s in enumerate(v.shape)) if keep else \
                tuple(s for i, s in enumerate(v.shape) if i != dims[0])
            return self.emit(f"m.tanh({v.name}).prod(dim={d}, keepdim={keep})", shape)
        if op in ("max_values", "amin"):
            d = dims[0]
            shape = tuple(1 if i == d else s for i, s in enumerate(v.shape)) if keep else \
                tuple(s for i, s in enumerate(v.shape) if i != d)
            if op == "amin":
                return self.emit(f"{v.name}.amin({d}, keepdim={keep})", shape, v.positive)
            return self.emit(f"m.max({v.name}, dim={d}, keepdim={keep}).values", shape, v.positive)
        if op == "logsumexp":
            return self.emit(f"m.logsumexp({v.name}, {dims_s}, keepdim={keep})", shape)
        if op == "amax":
            return self.emit(f"{v.name}.amax(dim={dims_s}, keepdim={keep})", shape, v.positive)
        return self.emit(f"{v.name}.{op}(dim={dims_s}, keepdim={keep})", shape, v.positive)

    def matmul(self):
        r = self.rng
        mats = [v for v in self.pool if len(v.shape) in (1, 2, 3)]
        pairs = []
        for a in mats:
            for b in mats:
                s = _matmul_shape(a.shape, b.shape)
                if s is not None and (len(a.shape) > 1 or len(b.shape) > 1):
                    pairs.append((a, b, s, False))
                if len(b.shape) >= 2:
                    bt = b.shape[:-2] + (b.shape[-1], b.shape[-2])
                    s = _matmul_shape(a.shape, bt)
                    if s is not None:
                        pairs.append((a, b, s, True))
        if not pairs:
            return self.binary()
        a, b, s, t = pairs[r.integers(len(pairs))]
        bx = f"{b.name}.transpose(-1, -2)" if t else b.name
        if r.integers(2):
            return self.emit(f"{a.name} @ {bx}", s)
        return self.emit(f"m.matmul({a.name}, {bx})", s)

    def structural(self):
        r = self.rng
        (v,) = self.pick()
        nd = len(v.shape)
        ops = ["reshape", "unsqueeze"]
        if nd >= 2:
            ops += ["transpose", "transpose", "T"]
        if nd >= 1:
            ops += ["slice", "slice", "index", "flip_slice", "cat", "stack", "expand", "flatten"]
        op = ops[r.integers(len(ops))]
        x = v.name
        if op == "reshape":
            n = int(np.prod(v.shape)) if v.shape else 1
            choices = [(n,), (-1,)] + [(d, n // d) for d in SIZES if n % d == 0 and d > 1]
            if v.shape:
                choices.append(tuple(reversed(v.shape)))
            c = choices[r.integers(len(choices))]
            shape = (n,) if c == (-1,) else c
            return self.emit(f"{x}.reshape({', '.join(map(str, c))}{',' if len(c) == 1 else ''})",
                             shape, v.positive)
        if op == "unsqueeze":
            d = int(r.integers(nd + 1))
            return self.emit(f"{x}.unsqueeze({d})", v.shape[:d] + (1,) + v.shape[d:], v.positive)
        if op == "transpose":
            i, j = (int(t) for t in r.choice(nd, size=2, replace=False))
            s = list(v.shape)
            s[i], s[j] = s[j], s[i]
            return self.emit(f"{x}.transpose({i}, {j})", s, v.positive)
        if op == "T":
            s = v.shape[:-2] + (v.shape[-1], v.shape[-2])
            return self.emit(f"{x}.transpose(-2, -1)", s, v.positive)
        if op in ("slice", "flip_slice"):
            d = int(r.integers(nd))
            n = v.shape[d]
            start = int(r.integers(n))
            step = int(r.choice([1, 1, 2]))
            k = len(range(start, n, step))
            idx = ", ".join([":"] * d + [f"{start}::{step}" if step > 1 else f"{start}:"])
            s = v.shape[:d] + (k,) + v.shape[d + 1:]
            return self.emit(f"{x}[{idx}]", s, v.positive)
        if op == "index":
            d = int(r.integers(nd))
            i = int(r.integers(v.shape[d]))
            if r.integers(2):
                i = i - v.shape[d]
            idx = ", ".join([":"] * d + [str(i)])
            return self.emit(f"{x}[{idx}]", v.shape[:d] + v.shape[d + 1:], v.positive)
        if op == "stack":
            others = [u for u in self.pool if u.shape == v.shape and u is not v] or [v]
            u = others[r.integers(len(others))]
            d = int(r.integers(nd + 1))
            return self.emit(f"m.stack([{x}, {u.name}], {d})", v.shape[:d] + (2,) + v.shape[d:],
                             v.positive and u.positive)
        if op == "expand":
            return self.emit(f"{x}.unsqueeze(0).expand(3, {', '.join(['-1'] * nd)})",
                             (3,) + v.shape, v.positive)
        if op == "flatten":
            return self.emit(f"{x}.flatten()", (int(np.prod(v.shape)),), v.positive)
        if op == "cat":
            others = [u for u in self.pool if len(u.shape) == nd and u is not v]
            d = int(r.integers(nd))
            others = [u for u in others if all(a == b for i, (a, b) in enumerate(zip(u.shape, v.shape))
                                               if i != d)]
            if not others:
                return self.emit(f"m.cat([{x}, {x}], {d})", v.shape[:d] + (2 * v.shape[d],) +
                                 v.shape[d + 1:], v.positive)
            u = others[r.integers(len(others))]
            return self.emit(f"m.cat([{x}, {u.name}], dim={d})",
                             v.shape[:d] + (v.shape[d] + u.shape[d],) + v.shape[d + 1:],
                             v.positive and u.positive)
        raise AssertionError(op)


def _bcast(a, b):
    try:
        return tuple(np.broadcast_shapes(a, b))
    except ValueError:
        return None


def _matmul_shape(a, b):
    if len(a) == 1 and len(b) == 1:
        return () if a == b else None
    if len(a) == 1:
        return b[:-2] + b[-1:] if a[0] == b[-2] else None
    if len(b) == 1:
        return a[:-1] if a[-1] == b[0] else None
    if a[-1] != b[-2]:
        return None
    batch = _bcast(a[:-2], b[:-2])
    return None if batch is None else batch + (a[-2], b[-1])


def _extreme(rng, x):
    """x scaled by 10, 100 or 1000 with some entries exactly 0 (kinks of abs / relu / clamp)."""
    x = np.asarray(x * 10.0 ** int(rng.integers(0, 4)), dtype=x.dtype)
    if x.ndim:
        x[rng.random(x.shape) < 0.2] = 0
    return x


def _candidate(seed, attempt, extreme=False):
    rng = np.random.default_rng([seed, attempt])
    g = _Gen(rng)
    nin = int(rng.integers(1, 4))
    nd = int(rng.integers(0, 4))
    base = tuple(int(rng.choice(SIZES[1:])) for _ in range(nd))
    if nd and rng.integers(4) == 0:   # one long dimension
        base = base[:-1] + (int(rng.choice(LONG)),)
    dtype = "float32" if rng.integers(2) else "float64"
    inputs = []
    for i in range(nin):
        shape = list(base)
        for d in range(nd):
            if rng.integers(4) == 0:
                shape[d] = 1
        drop = int(rng.integers(0, nd + 1)) if rng.integers(3) == 0 else 0
        shape = tuple(shape[drop:])
        inputs.append(rng.standard_normal(shape).astype(dtype) if shape else
                      np.asarray(rng.standard_normal(), dtype=dtype))
        g.pool.append(Value(f"x{i}", shape))
    families = [g.unary] * 4 + [g.binary] * 5 + [g.reduction] * 2 + [g.matmul] + [g.structural] * 2
    for _ in range(int(rng.integers(3, 16))):
        families[rng.integers(len(families))]()
    made = [v for v in g.pool if v.name.startswith("v")]
    outs = [made[-1]]
    if len(made) > 2 and rng.integers(2):
        outs.append(made[int(rng.integers(len(made) - 1))])
    args = ", ".join(f"x{i}" for i in range(nin))
    src = (f"def program(m, {args}):\n" + "\n".join(g.lines) +
           f"\n    return ({', '.join(o.name for o in outs)},)\n")
    if extreme:
        inputs = [_extreme(rng, x) for x in inputs]
    if nin > 1 and rng.integers(4) == 0:   # mixed precision: one input of the other dtype
        i = int(rng.integers(nin))
        inputs[i] = inputs[i].astype("float64" if dtype == "float32" else "float32")
        dtype = "float32"                   # the tolerances of the lower precision
    return Program(seed, src, inputs, dtype, len(outs))


def _acceptable(prog, torch, extreme=False):
    """Finite float64 values and gradients of moderate size in torch (extreme: finite values,
    any gradients)."""
    fn = prog.function()
    xs = [torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in prog.inputs]
    try:
        fn(torch, *[torch.tensor(x) for x in prog.inputs])   # in the inputs' own dtypes
        outs = fn(torch, *xs)
        if not any(o.requires_grad for o in outs):
            return False
        loss = sum((o * 1.0).sum() for o in outs)
        grads = torch.autograd.grad(loss, xs, allow_unused=True)
    except RuntimeError as e:
        if "same dtype" in str(e) or "expected scalar type" in str(e):   # matmul of float32 with float64: torch refuses it
            return False             # (test_matmul_of_mixed_dtypes_raises_torchs_error)
        raise AssertionError(f"generator produced an invalid program:\n{prog.source}") from e
    except (ValueError, IndexError) as e:  # a generator bug: shapes mis-tracked
        raise AssertionError(f"generator produced an invalid program:\n{prog.source}") from e
    vals = [o.detach().numpy() for o in outs]
    if extreme:
        return all(np.all(np.isfinite(v)) for v in vals)
    vals += [g.numpy() for g in grads if g is not None]
    return all(np.all(np.isfinite(v)) and np.all(np.abs(v) < 1e4) for v in vals)


def generate(seed, torch=None, extreme=False):
    """The program of `seed` (deterministic). With torch, candidates whose float64 values or
    gradients are non-finite or huge are skipped. extreme: inputs scaled up to 1e3 with exact
    zeros, gradients may overflow (the comparison then asks for never-worse-than-torch)."""
    for attempt in range(50):
        prog = _candidate(seed, attempt, extreme)
        if torch is None or _acceptable(prog, torch, extreme):
            return prog
    raise RuntimeError(f"no acceptable program for seed {seed}")
