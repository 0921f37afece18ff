"""Anomaly mode: record each op's forward stack; name the op whose backward produced NaN."""

import warnings

__all__ = ["detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled", "is_anomaly_check_nan_enabled"]


class _Anomaly:
    enabled = False
    check_nan = True


_anomaly = _Anomaly()


def is_anomaly_enabled():
    return _anomaly.enabled


def is_anomaly_check_nan_enabled():
    return _anomaly.check_nan


class detect_anomaly:
    """Context manager (and decorator) enabling anomaly detection, as torch's.

    Each op records the stack of its forward call; when a backward raises, that stack is
    shown as a warning, and a backward returning NaN raises ``RuntimeError`` naming the op.
    """

    def __init__(self, check_nan=True):
        self.prev = _anomaly.enabled
        self.check_nan = check_nan
        self.prev_check_nan = _anomaly.check_nan
        warnings.warn(
            "Anomaly Detection has been enabled. This mode will increase the runtime "
            "and should only be enabled for debugging.",
            stacklevel=2,
        )

    def __enter__(self):
        _anomaly.enabled = True
        _anomaly.check_nan = self.check_nan

    def __exit__(self, *exc):
        _anomaly.enabled = self.prev
        _anomaly.check_nan = self.prev_check_nan

    def __call__(self, func):
        import functools

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self.__class__(self.check_nan):
                return func(*args, **kwargs)
        return wrapper


class set_detect_anomaly:
    """Set anomaly detection on or off; takes effect at once, usable as a context manager."""

    def __init__(self, mode, check_nan=True):
        self.prev = _anomaly.enabled
        self.prev_check_nan = _anomaly.check_nan
        _anomaly.enabled = bool(mode)
        _anomaly.check_nan = bool(check_nan)

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        _anomaly.enabled = self.prev
        _anomaly.check_nan = self.prev_check_nan
