"""Devices and their array modules: numpy for "cpu", cupy for "cuda". Nothing else."""

import numpy

__all__ = ["device", "array_module", "device_of"]


class device:
    """A device name, spelled as torch spells it: ``device("cpu")``, ``device("cuda", 0)``."""

    __slots__ = ("type", "index")

    def __init__(self, type="cpu", index=None):
        if isinstance(type, device):
            type, index = type.type, type.index if index is None else index
        if ":" in type:
            type, _, idx = type.partition(":")
            index = int(idx)
        if type not in ("cpu", "cuda"):
            raise RuntimeError(f"Expected one of cpu, cuda device type at start of device string: {type}")
        self.type = type
        self.index = index

    def __eq__(self, other):
        if isinstance(other, str):
            other = device(other)
        if not isinstance(other, device):
            return NotImplemented
        return self.type == other.type and self.index == other.index

    def __hash__(self):
        return hash((self.type, self.index))

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self):
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"


CPU = device("cpu")


def array_module(dev):
    """The array module (numpy or cupy) that holds tensors of ``dev``."""
    dev = dev if isinstance(dev, device) else device(dev or "cpu")
    if dev.type == "cpu":
        return numpy
    try:
        import cupy
    except ImportError as err:  # no cupy: say what to install
        raise RuntimeError(
            "symgrad: device 'cuda' needs CuPy and a CUDA GPU (pip install cupy-cuda12x)"
        ) from err
    try:
        if cupy.cuda.runtime.getDeviceCount() == 0:
            raise RuntimeError("symgrad: device 'cuda' requested but no CUDA GPU is visible")
    except cupy.cuda.runtime.CUDARuntimeError as err:
        raise RuntimeError("symgrad: device 'cuda' requested but no CUDA GPU is usable") from err
    return cupy


def device_of(array):
    """The device an array lives on."""
    if isinstance(array, numpy.ndarray):
        return CPU
    return device("cuda", getattr(getattr(array, "device", None), "id", 0))
