"""Differential harness: each scenario runs with torch and with symgrad."""
import sys, warnings, traceback, threading
import numpy as np
import torch
import symgrad as sg

SCEN = []


def sc(fn):
    SCEN.append(fn)
    return fn


def norm(o):
    if isinstance(o, (torch.Tensor, sg.Tensor)):
        d = {"shape": tuple(o.shape), "dtype": str(o.dtype).split(".")[-1],
             "rg": bool(o.requires_grad), "leaf": bool(o.is_leaf), "gfnone": o.grad_fn is None}
        try:
            d["v"] = np.array(o.detach().numpy(), copy=True)
        except Exception as e:  # noqa
            d["v"] = "ERR " + type(e).__name__
        return ("T", d)
    if isinstance(o, (list, tuple)):
        if type(o).__name__ == "Size":
            o = tuple(o)
        return (type(o).__name__ if type(o) in (list, tuple) else "tuple", [norm(x) for x in o])
    if isinstance(o, (torch.dtype,)) or str(o).startswith("symgrad."):
        return ("dtype", str(o).split(".")[-1])
    if isinstance(o, dict):
        return ("dict", {k: norm(v) for k, v in o.items()})
    if isinstance(o, np.ndarray):
        return ("arr", o)
    if isinstance(o, (bool, int, float, str, type(None))):
        return o
    if isinstance(o, (np.floating, np.integer, np.bool_)):
        return o.item()
    return ("obj", type(o).__name__)


def same(a, b, path=""):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        try:
            a = np.asarray(a); b = np.asarray(b)
            if a.shape != b.shape:
                return f"{path}: shape {a.shape} vs {b.shape}"
            if a.dtype.kind in "fc" or b.dtype.kind in "fc":
                ok = np.allclose(a.astype(float), b.astype(float), rtol=1e-4, atol=1e-5, equal_nan=True)
            else:
                ok = np.array_equal(a, b)
            return None if ok else f"{path}: values {a.ravel()[:6]} vs {b.ravel()[:6]}"
        except Exception as e:
            return f"{path}: cmp error {e}"
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == 2 and len(b) == 2 and a[0] == b[0]:
        return same(a[1], b[1], path + "/" + str(a[0]))
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return f"{path}: keys {sorted(a)} vs {sorted(b)}"
        for k in a:
            r = same(a[k], b[k], path + "." + str(k))
            if r:
                return r
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{path}: len {len(a)} vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            r = same(x, y, path + f"[{i}]")
            if r:
                return r
        return None
    if isinstance(a, float) and isinstance(b, float):
        return None if np.allclose(a, b, rtol=1e-4, atol=1e-6, equal_nan=True) else f"{path}: {a} vs {b}"
    return None if a == b else f"{path}: {a!r} vs {b!r}"


def run_one(fn, m):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            res = ("ok", norm(fn(m)))
        except Exception as e:  # noqa
            res = ("exc", type(e).__name__, str(e)[:300])
    ws = [(x.category.__name__, str(x.message)[:120]) for x in w
          if "TypedStorage" not in str(x.message) and "jit.script" not in str(x.message) and "reference cycle" not in str(x.message)]
    return res, ws


def main(pattern=None, verbose=False):
    n = agree = 0
    hard, soft = [], []
    for fn in SCEN:
        if pattern and pattern not in fn.__name__:
            continue
        n += 1
        (rt, wt), (rs, ws) = run_one(fn, torch), run_one(fn, sg)
        prob = None
        if rt[0] != rs[0]:
            prob = f"torch {rt[:3] if rt[0]=='exc' else 'ok'} | sg {rs[:3] if rs[0]=='exc' else 'ok'}"
        elif rt[0] == "exc":
            if rt[1] != rs[1]:
                prob = f"exc class {rt[1]} vs {rs[1]}: {rt[2][:150]!r} | {rs[2][:150]!r}"
        else:
            prob = same(rt[1], rs[1])
        wcat_t = sorted(c for c, _ in wt); wcat_s = sorted(c for c, _ in ws)
        if not prob and wcat_t != wcat_s:
            prob = f"warnings {wt} vs {ws}"
        if prob:
            hard.append((fn.__name__, prob))
        else:
            agree += 1
            if rt[0] == "exc" and rt[2][:40] != rs[2][:40]:
                soft.append((fn.__name__, f"msg: {rt[2][:200]!r} | {rs[2][:200]!r}"))
            elif [m for _, m in wt] != [m for _, m in ws] and [m[:40] for _, m in wt] != [m[:40] for _, m in ws]:
                soft.append((fn.__name__, f"warnmsg: {wt} | {ws}"))
        if verbose:
            print(fn.__name__, rt, rs)
    print(f"{n} scenarios, {agree} agree, {len(hard)} differ")
    for name, p in hard:
        print("DIFF", name, "::", p)
    for name, p in soft:
        print("SOFT", name, "::", p)
