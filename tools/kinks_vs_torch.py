"""Torch conventions at kinks, ties and 0/0 points: symgrad (NumPy and C, float32/64) vs torch;
prints only the cases that differ.    python tools/kinks_vs_torch.py"""
import os, sys, tempfile; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
os.environ.setdefault("SYMGRAD_CACHE_DIR", tempfile.mkdtemp(prefix="sg-audit-"))
import numpy as np, torch, symgrad as sg, warnings, sys
warnings.simplefilter("ignore")
inf=float('inf')
CASES = [
 ("abs0", lambda m: m.abs, lambda x: x.abs(), [[0.0, -0.0]]),
 ("relu0", None, lambda x: x.relu(), [[0.0]]),
 ("clamp bounds", None, lambda x: x.clamp(0,1), [[0.0,1.0]]),
 ("max tie", None, lambda x,y: x.maximum(y), [[1.0],[1.0]]),
 ("min tie", None, lambda x,y: x.minimum(y), [[1.0],[1.0]]),
 ("amax tie", None, lambda x: x.amax(), [[1.0,1.0,0.0]]),
 ("max() tie", None, lambda x: x.max(), [[1.0,1.0,0.0]]),
 ("amin tie", None, lambda x: x.amin(), [[1.0,1.0,2.0]]),
 ("max dim tie", None, lambda x: x.max(dim=0).values if hasattr(x.max(dim=0),'values') else x.max(dim=0)[0], [[1.0,1.0,0.0]]),
 ("norm0", None, lambda x: x.norm(), [[0.0,0.0]]),
 ("norm tiny", None, lambda x: x.norm(), [[1e-200,1e-200]]),
 ("norm huge", None, lambda x: x.norm(), [[1e200,1e200]]),
 ("naive norm0", None, lambda x: (x*x).sum().sqrt(), [[0.0,0.0]]),
 ("std const", None, lambda x: x.std(), [[1.0,1.0,1.0]]),
 ("sqrt0", None, lambda x: x.sqrt(), [[0.0]]),
 ("pow half 0", None, lambda x: x**0.5, [[0.0]]),
 ("pow 2.5 0", None, lambda x: x**2.5, [[0.0]]),
 ("pow xy at 0", None, lambda x,y: x**y, [[0.0],[2.5]]),
 ("pow xy at 0 y0", None, lambda x,y: x**y, [[0.0],[0.0]]),
 ("pow x**0 at 0", None, lambda x: x**0.0, [[0.0]]),
 ("xlogy 0 0", None, lambda x,y: x.xlogy(y), [[0.0],[0.0]]),
 ("atan2 00", None, lambda x,y: x.atan2(y), [[0.0],[0.0]]),
 ("hypot 00", None, lambda x,y: x.hypot(y), [[0.0],[0.0]]),
 ("sign0", None, lambda x: x.sign(), [[0.0]]),
 ("lse -inf", None, lambda x: x.logsumexp(0), [[-inf, 0.0]]),
 ("lse all -inf", None, lambda x: x.logsumexp(0), [[-inf, -inf]]),
 ("softmax -inf", None, lambda x: x.softmax(0)[1], [[-inf, 0.0]]),
 ("log_softmax -inf", None, lambda x: x.log_softmax(0)[1], [[-inf, 0.0]]),
 ("lse huge", None, lambda x: x.logsumexp(0), [[1e300, 1e300, -1e300]]),
 ("ce huge", None, lambda x: -x.log_softmax(0)[0], [[1e4, -1e4, 0.0]]),
 ("ce huge f32", None, lambda x: -x.log_softmax(0)[0], [[3e38, -3e38, 0.0]]),
 ("prod zero", None, lambda x: x.prod(), [[0.0,2.0,3.0]]),
 ("prod two zeros", None, lambda x: x.prod(), [[0.0,0.0,3.0]]),
 ("x**-1 at 0", None, lambda x: x**-1.0, [[0.0]]),
 ("log 0", None, lambda x: x.log(), [[0.0]]),
 ("clamp min=max", None, lambda x: x.clamp(1,1), [[1.0, 0.0, 2.0]]),
 ("var const", None, lambda x: x.var(), [[1.0,1.0]]),
 ("logit 0 1", None, lambda x: x.logit(), [[0.0, 1.0]]),
 ("log_sigmoid", None, lambda x: x.log_sigmoid() if hasattr(x,'log_sigmoid') else torch.nn.functional.logsigmoid(x), [[-1e4, 1e4, -1e30]]),
 ("softplus", None, lambda x: x.softplus() if hasattr(x,'softplus') else torch.nn.functional.softplus(x), [[-1e4, 1e4, -1e30, 30.0]]),
 ("erfc big", None, lambda x: x.erfc(), [[30.0, -30.0, 1e30]]),
 ("sum many", None, lambda x: (x*x).sum(), [list(np.linspace(1, 2, 1001))]),
 ("mean", None, lambda x: x.mean(), [[1e308, 1e308]]),
 ("frac", None, lambda x: x.frac(), [[1.5]]),
 ("round", None, lambda x: x.round(), [[0.5, 1.5]]),
 ("floor", None, lambda x: x.floor(), [[1.0]]),
 ("remainder", None, lambda x,y: x.remainder(y), [[5.0],[3.0]]),
 ("exp big", None, lambda x: x.exp(), [[710.0, -746.0]]),
]

def tsg(fn, vals, dtype, target):
    xs=[np.array(v, dtype) for v in vals]
    mod=sg.compile(fn, *xs, target=target, cache_ok=False)
    with np.errstate(all="ignore"):
        y=mod.forward(*xs); y=y[0] if isinstance(y,tuple) else y
        g=mod.backward(np.ones_like(np.asarray(y, dtype)), *xs)
    return np.asarray(y), [np.asarray(a) for a in g]

def ttorch(fn, vals, dtype):
    ts=[torch.tensor(v, dtype=dtype, requires_grad=True) for v in vals]
    y=fn(*ts); y.sum().backward()
    return y.detach().numpy(), [t.grad.numpy() for t in ts]

for name,_,fn,vals in CASES:
    for dt, tdt in ((np.float64, torch.float64), (np.float32, torch.float32)):
        try:
            ty,tg=ttorch(fn, vals, tdt)
        except Exception as e:
            ty,tg=f"ERR {e}",None
        for target in ("numpy","c"):
            try:
                y,g=tsg(fn, vals, dt, target)
            except Exception as e:
                print(f"{name} {dt.__name__} {target}: sg ERR {e!r}"); continue
            same = tg is not None and np.allclose(np.asarray(y,np.float64), np.asarray(ty,np.float64), rtol=1e-5, equal_nan=True) and all(np.allclose(a.astype(np.float64),b.astype(np.float64),rtol=1e-5,equal_nan=True, atol=0) for a,b in zip(g,tg))
            if not same:
                print(f"{name} {dt.__name__} {target}: sg y={y} g={[a.tolist() for a in g]} | torch y={ty} g={[a.tolist() for a in tg] if tg else None}")
print("done")
