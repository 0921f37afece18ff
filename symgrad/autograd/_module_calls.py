"""How the runtime calls a generated module: its entry points and its saving plan.

``call_module`` / ``call_ignoring_fp_errors`` call a module's ``forward`` / ``backward`` under
NumPy's ``errstate(all="ignore")`` without entering the emitter's decorator each call (the
undecorated function, ``_RAW``), with one profiler event per call; ``_saving`` reads a module's
saving plan (``forward_saving`` / ``backward_saved``). Also the version-counter error that names
the forward op (``_version_error``, ``_label``), shared by the module nodes and custom Functions.
``symgrad.autograd.function`` re-exports every name.
"""

import numpy as np

from symgrad.autograd import engine as _engine
from symgrad import _profiling as _prof

_PROF_ON = _prof.ON

_NO_EDGE = (None, 0)
_ndarray = np.ndarray


def _version_error(shape, legacy, label, output_nr, current, expected):
    msg = (
        "one of the variables needed for gradient computation has been modified by an inplace "
        f"operation: [symgrad.{legacy} {list(shape)}]"
    )
    if label is not None:   # torch names the forward op: "output 0 of Exp"
        msg += f", which is output {output_nr} of {_engine.forward_op_name(label)},"
    msg += (
        f" is at version {current}; expected version {expected} instead. Hint: enable anomaly "
        "detection to find the operation that failed to compute its gradient, with "
        "symgrad.autograd.set_detect_anomaly(True, check_nan=False)."
    )
    return RuntimeError(msg)


def _label(node):
    if node is None or type(node) is _engine.AccumulateGrad:
        return None
    return node.name()


# ------------------------------------------------------------ module entry points
# The NumPy emitter decorates ``forward``/``backward`` with ``numpy.errstate(all="ignore")``.
# Entering that decorator costs more than the module's arithmetic on small arrays, so the
# runtime calls the undecorated function under the same error state, set through NumPy's
# context variable directly. Anything else (another decorator, other settings, a NumPy
# without that variable) is called as it is.
try:
    from numpy._core import _ufunc_config as _ufc

    _ERR_CV = _ufc._extobj_contextvar
    _make_extobj = _ufc._make_extobj
    _UNSPECIFIED = _ufc._Unspecified
    _cv_get = _ERR_CV.get
    _cv_set = _ERR_CV.set
    _cv_reset = _ERR_CV.reset
except (ImportError, AttributeError):  # pragma: no cover - other NumPy versions
    _ERR_CV = None

_MISS = object()
_RAW = {}        # decorated function -> undecorated one, or None when it must be called as is
_IGNORE = {}     # current error-state object -> the same with all="ignore"


def _errstate_ignore_wrapped(f):
    """The function under ``@numpy.errstate(all="ignore")``, or None."""
    w = getattr(f, "__wrapped__", None)
    if w is None or _ERR_CV is None:
        return None
    for cell in getattr(f, "__closure__", None) or ():
        try:
            v = cell.cell_contents
        except ValueError:
            continue
        if isinstance(v, np.errstate):
            if (getattr(v, "_all", None) == "ignore" and v._call is _UNSPECIFIED
                    and v._divide is None and v._over is None and v._under is None
                    and v._invalid is None):
                return w
            return None
    return None


def _raw(f):
    try:
        return _RAW[f]
    except KeyError:
        pass
    except TypeError:  # unhashable callable
        return None
    r = _errstate_ignore_wrapped(f)
    if len(_RAW) > 4096:
        _RAW.clear()
    _RAW[f] = r
    return r


def _ignore_state():
    cur = _cv_get()
    ign = _IGNORE.get(cur)
    if ign is None:
        tok = _cv_set(cur)
        try:
            ign = _make_extobj(all="ignore")
        finally:
            _cv_reset(tok)
        if len(_IGNORE) > 64:
            _IGNORE.clear()
        _IGNORE[cur] = ign
    return ign


_TWIN = {}   # module entry point -> the function to call for it (_twin)


def _twin(f):
    """What the runtime calls for module entry point `f` (a plain function: no errstate
    decorator): the generated twin `_<name>_trusted` where its module has one (the C
    target's: the routine without the shape check, casts and copies that arrays of the
    module's dtype, shapes and layout need not; its guard hands any other argument to `f`,
    so the results are f's), else `f` itself."""
    try:
        return _TWIN[f]
    except KeyError:
        pass
    except TypeError:  # unhashable callable
        return f
    g = getattr(f, "__globals__", None)
    name = getattr(f, "__name__", None)
    t = g.get(f"_{name}_trusted") if type(g) is dict and type(name) is str else None
    if not callable(t):
        t = f
    if len(_TWIN) > 4096:
        _TWIN.clear()
    _TWIN[f] = t
    return t


def call_module(f, args, params):
    """``f(*args, **params)`` for a module entry point, errstate decorator included."""
    if _PROF_ON[0] and _prof.wants():   # profiler: one event per generated-module call
        return _prof.call(call_module, _prof.module_label(f), "module",
                          _prof.shapes_of(args), (f, args, params))
    raw = _RAW.get(f, _MISS)
    if raw is _MISS:
        raw = _raw(f)
    if raw is None:
        return (_TWIN.get(f) or _twin(f))(*args, **params)
    tok = _cv_set(_IGNORE.get(_cv_get()) or _ignore_state())
    try:
        return raw(*args, **params)
    finally:
        _cv_reset(tok)


def call_ignoring_fp_errors(f, *args):
    """``f(*args)`` under ``numpy.errstate(all="ignore")`` (cheaply)."""
    if _ERR_CV is None:
        with np.errstate(all="ignore"):
            return f(*args)
    tok = _cv_set(_IGNORE.get(_cv_get()) or _ignore_state())
    try:
        return f(*args)
    finally:
        _cv_reset(tok)


_SAVING = {}  # module -> (forward_saving, backward_saved) or None


def _saving(mod):
    """The module's ``(forward_saving, backward_saved)`` when it exposes both, else None."""
    try:
        return _SAVING[mod]
    except KeyError:
        pass
    except TypeError:
        return None
    fs = getattr(mod, "forward_saving", None)
    bs = getattr(mod, "backward_saved", None)
    r = (fs, bs) if callable(fs) and callable(bs) else None
    if len(_SAVING) > 4096:  # gradient modules of built-ins are made afresh (create_graph)
        _SAVING.clear()
    try:
        _SAVING[mod] = r
    except TypeError:
        pass
    return r
