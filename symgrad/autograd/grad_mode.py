"""Grad mode: ``no_grad``, ``enable_grad``, ``set_grad_enabled``, ``inference_mode``.

Thread-local as in torch: every new thread starts with grad mode enabled. Each class works
as a context manager and as a decorator; ``no_grad``, ``enable_grad`` and ``inference_mode``
also decorate without parentheses, as torch allows.
"""

import functools
import inspect
import sys
import threading

__all__ = [
    "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled",
    "inference_mode", "is_inference_mode_enabled", "set_multithreading_enabled",
    "is_multithreading_enabled",
]


class _State(threading.local):
    enabled = True     # ops record a graph: grad mode is on and inference mode is off
    grad = True        # grad mode, as is_grad_enabled() reports it
    inference = False


_state = _State()

# threads inside an inference_mode block, process-wide: a plain global read on the hot path
# of tensor creation (Tensor._wrap) before the thread-local one
inference_live = [0]


def is_grad_enabled():
    """Grad mode (thread-local). Operations record a graph when it is on, except in
    inference mode (``enable_grad`` inside ``inference_mode`` records nothing, as torch)."""
    return _state.grad


def _set_grad(mode):
    _state.grad = mode
    _state.enabled = mode and not _state.inference


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


def _refuse_in_trace(what):
    """Turning gradients off in a forward being traced would be ignored (the backward is
    derived from every traced op): an error naming it, unless symgrad itself is the caller."""
    trace = sys.modules.get("symgrad.trace")
    if trace is None:
        return
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back
    if frame is not None and not frame.f_code.co_filename.startswith(trace._PKG_DIR):
        trace.refuse_no_grad(what)


class no_grad(_NoParamDecoratorContextManager):
    """Disable gradient recording inside the block (thread-local)."""

    def __init__(self):
        self.prev = False

    def __enter__(self):
        _refuse_in_trace("no_grad()")
        self.prev = _state.grad
        _set_grad(False)

    def __exit__(self, *exc):
        _set_grad(self.prev)


class enable_grad(_NoParamDecoratorContextManager):
    """Enable gradient recording inside the block (thread-local)."""

    def __enter__(self):
        self.prev = _state.grad
        _set_grad(True)

    def __exit__(self, *exc):
        _set_grad(self.prev)


class set_grad_enabled(_DecoratorContextManager):
    """Set grad mode to ``mode``; takes effect at once, and the block restores it on exit."""

    def __init__(self, mode):
        if not isinstance(mode, bool):
            raise TypeError("set_grad_enabled(): argument 'enabled' (position 1) must be bool, "
                            f"not {type(mode).__name__}")
        self.prev = _state.grad
        self.mode = mode
        _set_grad(self.mode)

    def __call__(self, func):
        _set_grad(self.prev)  # used as a decorator: do not leave the mode changed
        return super().__call__(func)

    def __enter__(self):
        _set_grad(self.mode)

    def __exit__(self, *exc):
        _set_grad(self.prev)

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
        self.prev = (_state.grad, _state.inference)
        # torch's InferenceMode(mode) sets grad mode to ``not mode``: inference_mode(False)
        # enables it, also inside no_grad
        _state.inference = self.mode
        _set_grad(not self.mode)
        if self.mode:
            inference_live[0] += 1

    def __exit__(self, *exc):
        grad, _state.inference = self.prev
        _set_grad(grad)
        if self.mode:
            inference_live[0] -= 1

    def clone(self):
        return self.__class__(self.mode)


_multithreading = [True]


def is_multithreading_enabled():
    """torch.autograd.is_multithreading_enabled (symgrad's engine runs a backward on the
    calling thread either way)."""
    return _multithreading[0]


class set_multithreading_enabled(_DecoratorContextManager):
    """torch.autograd.set_multithreading_enabled: takes effect at once; a block restores it."""

    def __init__(self, mode):
        self.prev = _multithreading[0]
        _multithreading[0] = bool(mode)
        self.mode = mode

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        _multithreading[0] = self.prev

    def clone(self):
        return self.__class__(self.mode)
