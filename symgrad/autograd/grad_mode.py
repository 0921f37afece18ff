"""Grad mode: ``no_grad``, ``enable_grad``, ``set_grad_enabled``, ``inference_mode``.

Thread-local as in torch: every new thread starts with grad mode enabled. Each class works
as a context manager and as a decorator; ``no_grad``, ``enable_grad`` and ``inference_mode``
also decorate without parentheses, as torch allows.
"""

import functools
import inspect
import threading

__all__ = [
    "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled",
    "inference_mode", "is_inference_mode_enabled",
]


class _State(threading.local):
    enabled = True
    inference = False


_state = _State()

# threads inside an inference_mode block, process-wide: a plain global read on the hot path
# of tensor creation (Tensor._wrap) before the thread-local one
inference_live = [0]


def is_grad_enabled():
    """True when operations record a graph for autograd (thread-local)."""
    return _state.enabled


def _set_enabled(mode):
    _state.enabled = bool(mode)


def is_inference_mode_enabled():
    return _state.inference


class _DecoratorContextManager:
    """Context manager that can also decorate functions and generators."""

    def __call__(self, func):
        if inspect.isclass(func):
            import warnings

            warnings.warn(
                "Decorating classes is deprecated and will be disabled in future versions. "
                "You should only decorate functions or methods. To preserve the current "
                "behavior of class decoration, you can directly decorate the `__init__` "
                "method and nothing else.", FutureWarning, stacklevel=2)
            cls = func

            def func(*args, **kwargs):
                return cls(*args, **kwargs)
        if inspect.isgeneratorfunction(func):
            @functools.wraps(func)
            def generator(*args, **kwargs):
                gen = func(*args, **kwargs)
                try:
                    with self.clone():
                        response = gen.send(None)
                    while True:
                        try:
                            request = yield response
                        except GeneratorExit:
                            with self.clone():
                                gen.close()
                            raise
                        except BaseException as exc:
                            with self.clone():
                                response = gen.throw(exc)
                        else:
                            with self.clone():
                                response = gen.send(request)
                except StopIteration as stop:   # the wrapped generator finished
                    return stop.value
            return generator

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self.clone():
                return func(*args, **kwargs)
        return wrapper

    def clone(self):
        return self.__class__()


class _NoParamDecoratorContextManager(_DecoratorContextManager):
    """Allows ``@no_grad`` as well as ``@no_grad()``."""

    def __new__(cls, orig_func=None):
        if orig_func is None:
            return super().__new__(cls)
        return cls()(orig_func)


class no_grad(_NoParamDecoratorContextManager):
    """Disable gradient recording inside the block (thread-local)."""

    def __init__(self):
        self.prev = False

    def __enter__(self):
        self.prev = _state.enabled
        _state.enabled = False

    def __exit__(self, *exc):
        _state.enabled = self.prev


class enable_grad(_NoParamDecoratorContextManager):
    """Enable gradient recording inside the block (thread-local)."""

    def __enter__(self):
        self.prev = _state.enabled
        _state.enabled = True

    def __exit__(self, *exc):
        _state.enabled = self.prev


class set_grad_enabled(_DecoratorContextManager):
    """Set grad mode to ``mode``; takes effect at once, and the block restores it on exit."""

    def __init__(self, mode):
        if not isinstance(mode, bool):
            raise TypeError("set_grad_enabled(): argument 'enabled' (position 1) must be bool, "
                            f"not {type(mode).__name__}")
        self.prev = _state.enabled
        self.mode = mode
        _state.enabled = self.mode

    def __call__(self, func):
        _state.enabled = self.prev  # used as a decorator: do not leave the mode changed
        return super().__call__(func)

    def __enter__(self):
        _state.enabled = self.mode

    def __exit__(self, *exc):
        _state.enabled = self.prev

    def clone(self):
        return self.__class__(self.mode)


class inference_mode(_DecoratorContextManager):
    """``no_grad``, and tensors created inside are inference tensors (``is_inference()``):
    outside the block they cannot be saved for backward, written in place or made to require
    grad (torch's errors); views made inside of normal tensors refuse in-place writes outside.
    """

    def __new__(cls, mode=True):
        if callable(mode) and not isinstance(mode, bool):
            return cls()(mode)
        return super().__new__(cls)

    def __init__(self, mode=True):
        self.mode = bool(mode)

    def __enter__(self):
        self.prev = (_state.enabled, _state.inference)
        if self.mode:
            _state.enabled = False
            _state.inference = True
            inference_live[0] += 1
        else:   # torch's InferenceMode(false) enables grad mode, also inside no_grad
            _state.enabled = True
            _state.inference = False

    def __exit__(self, *exc):
        _state.enabled, _state.inference = self.prev
        if self.mode:
            inference_live[0] -= 1

    def clone(self):
        return self.__class__(self.mode)
