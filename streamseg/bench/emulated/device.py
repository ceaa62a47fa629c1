"""The emulated GPU of :mod:`streamseg.bench.emulated`: tensors, dispatch mode, registration.

A tensor of the device is a wrapper (``_Tensor``) around a CPU tensor. Every
op that touches one goes through ``_Dispatch``, which unwraps, runs the op
on the CPU, counts it and wraps the result; Triton ops are run by their
Python body so that their own ops and launches count. ``_PythonLevel``
handles what the dispatcher never sees (``tolist``, ``numpy``,
``torch.tensor(..., device=...)``).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from streamseg.bench.emulated.counts import (
    _STATE,
    DispatchCounts,
    EmulationError,
    _counts,
    emulation,
    record_sync,
)
from streamseg.ops import _native
from streamseg.ops.syncs import add_sync_counter

__all__ = [
    "DEVICE_TYPE",
    "_ACTIVE",
    "_Dispatch",
    "_PythonLevel",
    "_interpreted_launches",
    "register",
]

DEVICE_TYPE = "emugpu"
_COMPOSITE = torch._C.DispatchKey.CompositeImplicitAutograd
# Ops whose output size is read from device data (a sync on CUDA).
_SIZE_FROM_DATA = frozenset(
    {
        "aten::nonzero",
        "aten::masked_select",
        "aten::_unique",
        "aten::_unique2",
        "aten::unique_dim",
        "aten::unique_consecutive",
        "aten::bincount",
        "aten::_local_scalar_dense",
        "aten::equal",
        "aten::is_nonzero",
    }
)
_INDEXING = frozenset(
    {"aten::index", "aten::index_put_", "aten::index_put", "aten::_index_put_impl_"}
)
# Device ops that queue no work: allocations and aliases.
_NO_LAUNCH = frozenset(
    {"aten::empty", "aten::empty_strided", "aten::detach", "aten::alias", "aten::lift_fresh"}
)


class _Tensor(torch.Tensor):
    """A tensor of the emulated device: its data is ``elem``, a CPU tensor."""

    elem: torch.Tensor

    @staticmethod
    def __new__(cls, elem: torch.Tensor) -> _Tensor:
        # Never an inference tensor: torch gives a view of a parameter, made under
        # inference_mode, its base's version counter, which an inference tensor refuses.
        with torch.inference_mode(False):
            out = torch.Tensor._make_wrapper_subclass(
                cls,
                elem.shape,
                strides=elem.stride(),
                storage_offset=elem.storage_offset(),
                dtype=elem.dtype,
                device=torch.device(DEVICE_TYPE, 0),
                requires_grad=elem.requires_grad,
            )
        out.elem = elem
        return out

    __torch_function__ = torch._C._disabled_torch_function_impl  # type: ignore[assignment]

    @classmethod
    def __torch_dispatch__(  # type: ignore[override]
        cls, func: Any, types: Any, args: Any = (), kwargs: Any = None
    ) -> Any:
        raise EmulationError(f"{func} on an {DEVICE_TYPE} tensor outside emulated_gpu()")

    def __repr__(self) -> str:  # type: ignore[override]
        return f"{DEVICE_TYPE}({self.elem!r})"


def _on_device(x: object) -> bool:
    return isinstance(x, torch.device) and x.type == DEVICE_TYPE


class _Dispatch(TorchDispatchMode):
    """Runs every op of the emulated device on the CPU and counts it."""

    def __init__(self, *, interpret: bool) -> None:
        super().__init__()
        self.interpret = interpret

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        owner = emulation()
        if owner is not None:
            owner.memory.raise_pending()
        if func.namespace == "streamseg_triton":
            return self._decompose(func, args, kwargs)
        if torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), _COMPOSITE):
            # e.g. aten::to: count what it becomes (a _to_copy, or nothing). The C++
            # decomposition, as eager CUDA runs it (not a Python one registered for tracing).
            with self:
                return func._op_dk(_COMPOSITE, *args, **kwargs)
        name = func._schema.name
        flat = _leaves((args, kwargs))
        device = any(isinstance(x, _Tensor) or _on_device(x) for x in flat)
        counts = _counts()
        host_result = False
        if name in ("aten::_to_copy", "aten::copy_"):
            host_result = self._copy(name, args, kwargs, counts)
        elif device:
            _check_same_device(name, args, flat)
            if counts is not None:
                self._count_device_op(func, name, args, kwargs, counts)
        if counts is not None:
            counts.ops[name] += 1
        by_elem = {id(x.elem): x for x in flat if isinstance(x, _Tensor)}
        out = func(*_map(_unwrap, args), **_map(_unwrap, kwargs))
        if not device or host_result:
            return out
        return _map(lambda t: _wrap(t, by_elem), out)

    def _decompose(self, func: Any, args: Any, kwargs: Any) -> Any:
        """Run a ``streamseg_triton`` op's Python body under this mode: its torch
        ops and kernel launches are counted one by one.

        Unless the kernels are interpreted, their launches are counted but
        not run, and the op's result comes from its C++ twin (same name and
        arguments in ``torch.ops.streamseg``, tested equal): the interpreter
        would take minutes where the twin takes milliseconds.
        """
        from torch._library.custom_ops import OPDEFS

        body: Callable[..., Any] = OPDEFS[func._schema.name]._init_fn
        twin = None if self.interpret else _cpu_twin(func)
        if twin is None:
            with self:
                return body(*args, **kwargs)
        with self, _stubbed_kernels():
            body(*args, **kwargs)
        with _disable_current_modes():
            out = twin(*_map(_unwrap, args), **_map(_unwrap, kwargs))
        return _map(lambda t: _wrap(t, {}), out)

    @staticmethod
    def _copy(name: str, args: Any, kwargs: Any, counts: DispatchCounts | None) -> bool:
        """Count a copy; whether its result is a host tensor."""
        if name == "aten::copy_":
            dst_device, src = isinstance(args[0], _Tensor), args[1]
            non_blocking = bool(args[2]) if len(args) > 2 else bool(kwargs.get("non_blocking"))
        else:
            src = args[0]
            target = kwargs.get("device")
            dst_device = _on_device(target) if target is not None else isinstance(src, _Tensor)
            non_blocking = bool(kwargs.get("non_blocking"))
        src_device = isinstance(src, _Tensor)
        if counts is not None:
            if src_device != dst_device:
                counts.launches["copy:" + ("D2H" if src_device else "H2D")] += 1
                if not non_blocking:
                    counts.sync("sync:" + ("D2H" if src_device else "H2D"))
            elif src_device:
                counts.launches["copy:D2D"] += 1
        return not dst_device

    @staticmethod
    def _count_device_op(
        func: Any, name: str, args: Any, kwargs: dict[str, Any], counts: DispatchCounts
    ) -> None:
        if name in _SIZE_FROM_DATA:
            counts.sync(f"sync:{name}")
        elif name == "aten::repeat_interleave" and len(args) == 1 and not kwargs.get("output_size"):
            counts.sync(f"sync:{name}")  # the output size is the sum of the repeats
        elif name in _INDEXING:
            indices = [i for i in _leaves(args[1]) if isinstance(i, torch.Tensor)]
            if any(i.dtype in (torch.bool, torch.uint8) for i in indices):
                counts.sync(f"sync:{name}(mask)")
            elif any(not isinstance(i, _Tensor) and i.dim() > 0 for i in indices):
                counts.sync(f"sync:{name}(host index)")
        if not func.is_view and name not in _NO_LAUNCH:
            counts.launches[name] += 1


def _cpu_twin(func: Any) -> Callable[..., Any] | None:
    """The C++ op taking the same arguments as the Triton op ``func``, if built."""
    if not _native.enabled("cpu"):
        return None
    twin: Callable[..., Any] | None = getattr(
        torch.ops.streamseg, func._schema.name.split("::")[1], None
    )
    return twin


@contextlib.contextmanager
def _stubbed_kernels() -> Iterator[None]:
    """Triton launches inside are counted, not run."""
    was = getattr(_STATE, "stub", False)
    _STATE.stub = True
    try:
        yield
    finally:
        _STATE.stub = was


def _check_same_device(name: str, args: Any, flat: list[Any]) -> None:
    """Raise as CUDA does when a device op gets a host tensor (0-dim ones are scalars)."""
    if name in _INDEXING:
        return  # host index tensors are copied over (counted as a sync)
    for x in flat:
        if isinstance(x, torch.Tensor) and not isinstance(x, _Tensor) and x.dim() > 0:
            raise RuntimeError(
                f"{name}: expected all tensors on {DEVICE_TYPE} (emulated GPU), got a host "
                f"tensor of shape {tuple(x.shape)} (on CUDA this is an error too)"
            )


def _leaves(tree: Any) -> list[Any]:
    """The leaves of nested tuples, lists and dicts (an op's arguments): faster than pytree."""
    if isinstance(tree, tuple | list):
        return [leaf for item in tree for leaf in _leaves(item)]
    if isinstance(tree, dict):
        return [leaf for item in tree.values() for leaf in _leaves(item)]
    return [tree]


def _map(fn: Callable[[Any], Any], tree: Any) -> Any:
    """``fn`` on every leaf of nested tuples, lists and dicts, the structure kept."""
    if isinstance(tree, tuple):
        return tuple(_map(fn, item) for item in tree)
    if isinstance(tree, list):
        return [_map(fn, item) for item in tree]
    if isinstance(tree, dict):
        return {key: _map(fn, item) for key, item in tree.items()}
    return fn(tree)


def _unwrap(x: Any) -> Any:
    if isinstance(x, _Tensor):
        return x.elem
    if _on_device(x):
        return torch.device("cpu")
    return x


def _wrap(x: Any, by_elem: dict[int, _Tensor]) -> Any:
    if not isinstance(x, torch.Tensor) or isinstance(x, _Tensor):
        return x
    same = by_elem.get(id(x))  # an in-place op returns its argument
    if same is not None:
        return same
    out = _Tensor(x)
    owner = emulation()
    if owner is not None:
        owner.memory.hold(out, x)
    return out


class _PythonLevel(TorchFunctionMode):
    """What the dispatcher never sees: device arguments of Python calls, ``tolist``."""

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func is torch.Tensor.tolist and isinstance(args[0], _Tensor):
            return args[0].cpu().tolist()
        if func is torch.Tensor.numpy and isinstance(args[0], _Tensor):
            raise TypeError(
                f"can't convert {DEVICE_TYPE} device type tensor to numpy. Use Tensor.cpu() "
                "to copy the tensor to host memory first (as on CUDA)."
            )
        if func in (torch.tensor, torch.as_tensor) and _on_device(_device_arg(kwargs)):
            # Built on the host, then copied over (what torch does on CUDA).
            device = torch.device(kwargs.pop("device"))
            return func(*args, **kwargs).to(device)
        if func is torch.Tensor.new_tensor and isinstance(args[0], _Tensor):
            dtype = kwargs.pop("dtype", None) or args[0].dtype
            return torch.tensor(args[1], dtype=dtype).to(args[0].device)
        return func(*args, **kwargs)


def _device_arg(kwargs: dict[str, Any]) -> torch.device | None:
    device = kwargs.get("device")
    return torch.device(device) if device is not None else None


_REGISTER_LOCK = threading.Lock()
_registered = False
# Emulations running now: the device says it is available only then, so that
# torch never takes it for this process's accelerator otherwise (torch.random.fork_rng
# and torch.accelerator ask the registered backend).
_ACTIVE = [0]


class _Backend:
    """``torch.emugpu``: what torch asks a backend module (one device, no RNG of its own)."""

    def is_available(self) -> bool:
        return _ACTIVE[0] > 0

    def is_initialized(self) -> bool:
        return True

    def device_count(self) -> int:
        return 1 if self.is_available() else 0

    def current_device(self) -> int:
        return 0

    def _is_in_bad_fork(self) -> bool:
        return False

    def manual_seed_all(self, seed: int) -> None:
        pass

    def get_rng_state(self, device: Any = None) -> torch.Tensor:
        return torch.zeros(0, dtype=torch.uint8)

    def set_rng_state(self, state: torch.Tensor, device: Any = None) -> None:
        pass


def register() -> None:
    """Rename ``privateuse1`` to :data:`DEVICE_TYPE` with a Python device guard (once).

    The ops then serve its tensors as a GPU's (:func:`streamseg.ops._native.is_gpu_type`
    reads the renaming), and the syncs serving code reports
    (:func:`streamseg.ops.syncs.record_sync`) reach the counts.
    """
    global _registered
    with _REGISTER_LOCK:
        if _registered:
            return
        from torch.utils import backend_registration

        class Hooks(torch._C._acc.PrivateUse1Hooks):
            def is_available(self) -> bool:
                return _ACTIVE[0] > 0

            def has_primary_context(self, dev_id: int) -> bool:
                return True

            def is_built(self) -> bool:
                return True

        backend_registration._setup_privateuseone_for_python_backend(
            DEVICE_TYPE, backend_module=_Backend(), hook=Hooks()
        )
        add_sync_counter(record_sync)
        _registered = True


@contextlib.contextmanager
def _interpreted_launches(counts: DispatchCounts) -> Iterator[None]:
    """Count each Triton launch; run it in the interpreter on the CPU data."""
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError as exc:  # pragma: no cover - triton comes with torch's wheels
        raise EmulationError(f"the Triton interpreter is missing: {exc}") from exc
    original = InterpretedFunction.run

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        if counts.active:
            counts.launches[f"triton:{self.fn.__name__}"] += 1
        if getattr(_STATE, "stub", False):
            return None
        args, kwargs = _map(_unwrap, (args, kwargs))
        with _disable_current_modes():
            return original(self, *args, **kwargs)

    InterpretedFunction.run = run
    try:
        yield
    finally:
        InterpretedFunction.run = original
