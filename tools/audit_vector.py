"""Softmax / cross-entropy written with sum, log_softmax and logsumexp at extreme logits, NumPy and C,
float32/float64, against mpmath; prints only mismatches.    python tools/audit_vector.py"""
import os, sys, tempfile; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
os.environ.setdefault("SYMGRAD_CACHE_DIR", tempfile.mkdtemp(prefix="sg-audit-"))
import numpy as np, mpmath, symgrad as sg, warnings
warnings.simplefilter("ignore")
mpmath.mp.dps = 60
def run(fn, x, target):
    m = sg.compile(fn, x, target=target, cache_ok=False)
    y = m.forward(x); y = y[0] if isinstance(y, tuple) else y
    g = m.backward(np.ones_like(np.asarray(y)), x)[0]
    return np.asarray(y), g
def ce_ref(x):
    xs=[mpmath.mpf(float(v)) for v in x]
    lse=mpmath.log(mpmath.fsum(mpmath.exp(v) for v in xs))
    return -xs[0]+lse, [mpmath.exp(v-lse) - (1 if i==0 else 0) for i,v in enumerate(xs)]
cases = {
 "ce naive sum": lambda x: -x[0] + sg.log(sg.sum(sg.exp(x))),
 "ce log_softmax": lambda x: -x.log_softmax(0)[0],
 "ce logsumexp": lambda x: -x[0] + x.logsumexp(0),
 "softmax naive": lambda x: (sg.exp(x) / sg.sum(sg.exp(x)))[0],
}
pts = [[1e4, -1e4, 0.0], [800.0, 799.0, -5.0], [-800.0, -801.0, -900.0], [30.0, 1e-20, -30.0], [3e38, -3e38, 0.0], [100.0, 100.0, 100.0]]
for name, fn in cases.items():
    for dt in (np.float32, np.float64):
        for p in pts:
            x = np.asarray(p, dt)
            if not np.all(np.isfinite(x)): continue
            for t in ("numpy", "c"):
                try:
                    y, g = run(fn, x, t)
                except Exception as e:
                    print(name, dt.__name__, t, p, "ERR", e); continue
                if name.startswith("softmax"):
                    xs=[mpmath.mpf(float(v)) for v in x]; lse=mpmath.log(mpmath.fsum(mpmath.exp(v) for v in xs))
                    ry=mpmath.exp(xs[0]-lse); rg=[ry*((1 if i==0 else 0) - mpmath.exp(v-lse)) for i,v in enumerate(xs)]
                else:
                    ry, rg = ce_ref(x)
                ry=float(ry); rg=np.array([float(v) for v in rg])
                tol = 1e-5 if dt == np.float32 else 1e-12
                bad = (not np.isfinite(y)) or abs(float(y)-ry) > tol*abs(ry) + 1e-30 or np.any(~np.isfinite(g)) or np.any(np.abs(g-rg) > tol*np.abs(rg)+ 4*np.finfo(dt).tiny)
                if bad: print(name, dt.__name__, t, p, "y", y, ry, "g", g, rg)
print("done")
