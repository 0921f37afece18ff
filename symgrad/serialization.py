"""symgrad.save / symgrad.load: torch.save / torch.load for symgrad objects (tensors, and
dicts, lists, tuples ... of them).

The file is a pickle (protocol 2 by default), not torch's zip archive: symgrad and torch
files are not interchangeable. As in torch >= 2.6, ``load`` defaults to ``weights_only=True``:
it unpickles tensors, NumPy arrays and dtypes, and built-in containers and scalars, and
refuses any other global (which could run code). Pass ``weights_only=False`` only for files
from a trusted source.
"""
from __future__ import annotations

import io
import os
import pickle

__all__ = ["save", "load"]

_SAFE_GLOBALS = {
    ("symgrad.tensor", "_rebuild"), ("symgrad.tensor", "_dtype_by_name"),
    ("numpy._core.multiarray", "_reconstruct"), ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "scalar"), ("numpy.core.multiarray", "scalar"),
    ("numpy", "ndarray"), ("numpy", "dtype"), ("_codecs", "encode"),
    ("collections", "OrderedDict"),
    ("builtins", "set"), ("builtins", "frozenset"), ("builtins", "slice"),
    ("builtins", "complex"), ("builtins", "bytearray"), ("builtins", "range"),
}


class _WeightsOnlyUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) in _SAFE_GLOBALS or module == "numpy.dtypes":
            return super().find_class(module, name)
        raise pickle.UnpicklingError(
            f"Weights only load failed: unsupported global {module}.{name}. symgrad.load with "
            "weights_only=False unpickles it, which can run arbitrary code: do that only for "
            "a file from a trusted source.")


def save(obj, f, pickle_module=pickle, pickle_protocol=2):
    """Write ``obj`` to ``f`` (a path or a binary file object)."""
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as fh:
            pickle_module.dump(obj, fh, protocol=pickle_protocol)
    else:
        pickle_module.dump(obj, f, protocol=pickle_protocol)


def load(f, map_location=None, pickle_module=None, *, weights_only=True, mmap=None,
         **pickle_load_args):
    """Read back what `save` wrote to ``f`` (a path, a binary file object, or bytes in a
    BytesIO). ``map_location`` is accepted for torch's signature: symgrad tensors load on
    the CPU."""
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as fh:
            data = fh.read()
    else:
        data = f.read()
    if weights_only:
        if pickle_module is not None:
            raise RuntimeError("Can not safely load weights when explicit pickle_module is "
                               "specified")
        return _WeightsOnlyUnpickler(io.BytesIO(data), **pickle_load_args).load()
    return (pickle_module or pickle).loads(data, **pickle_load_args)
