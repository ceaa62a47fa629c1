"""What one inference asks of a GPU, counted on a CPU: torch ops, kernel launches, host syncs.

On a GPU the cost of a frame is as much the number of kernel launches and
of host synchronisations as the arithmetic: each launch costs the CPU a few
microseconds, and each sync makes the CPU wait for the GPU to drain its
queue, after which the GPU waits for the CPU. Both counts are properties of
the Python code, so they can be measured without a GPU.

:func:`emulated_gpu` gives a device that behaves like CUDA for the code that
runs on it: tensors created on it or moved to it report that device (so
``tensor.device``, the ops' choice of kernels and every ``.to(device)`` act
as on a GPU), while their data lives on the CPU. Every torch op on it passes
through one :class:`~torch.utils._python_dispatch.TorchDispatchMode`, which
runs it on the CPU and counts it, and the Triton kernels run in Triton's
interpreter (``TRITON_INTERPRET=1``) on the CPU copies. The public ops of
:mod:`streamseg.ops` send tensors of this device to the Triton kernels, as
they do CUDA tensors (:func:`streamseg.ops._native.gpu_device`); with
``STREAMSEG_OPS=reference`` to the PyTorch references.

What is counted (:class:`DispatchCounts`):

* **ops**: every aten op dispatched, on the device or on the host, views
  included: each costs the CPU the dispatcher's time.
* **launches**: work queued on the GPU's stream: every device op that is
  not a view or an allocation (one per op: sort, nonzero or a convolution
  may launch several kernels, so this is a lower bound), every copy between
  host and device, and every Triton kernel launch.
* **syncs**: points where the CPU must wait for the GPU to reach them:

  1. reading a device value on the host: ``.item()``, ``bool()``,
     ``int()``, ``float()`` of a tensor, ``.tolist()``, ``.cpu()``, any
     copy to the host without ``non_blocking=True``;
  2. a copy from the host to the device without ``non_blocking=True``
     (CUDA synchronises the stream after a pageable copy), including
     ``torch.tensor(data, device=gpu)`` and indexing a device tensor with a
     host index tensor;
  3. an op whose output size depends on device data: ``nonzero`` (also
     ``torch.where(cond)``), ``masked_select``, indexing or assigning with a
     bool mask, ``unique``, ``bincount``, ``repeat_interleave`` without
     ``output_size``.

  A ``non_blocking`` copy is not counted: its data is valid only after an
  explicit wait (a CUDA event), which is counted where the code makes it
  (:func:`record_sync`).

What runs on the host tensors (built from Python data, or copied back) is
counted as ops but never as launches. An op mixing a device tensor with a
host tensor of more than one element raises, as CUDA does.

The device is PyTorch's ``privateuse1`` backend renamed to
:data:`DEVICE_TYPE` with a Python device guard (PyTorch's own hook for
Python backends); it is registered once per process, on first use.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from streamseg.ops import _native

__all__ = [
    "DEVICE_TYPE",
    "DispatchCounts",
    "EmulationError",
    "emulated_gpu",
    "record_sync",
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


class EmulationError(RuntimeError):
    """The emulated GPU cannot run this (e.g. the Triton kernels are not interpreted)."""


@dataclasses.dataclass
class DispatchCounts:
    """Counts by op name (``aten::conv2d``, ``triton:_paste_kernel``, ``sync:D2H``...)."""

    ops: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    launches: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    syncs: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    # Where each sync was made: "kind at module:line" of the innermost streamseg frame.
    sync_sites: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    active: bool = True

    def clear(self) -> None:
        self.ops.clear()
        self.launches.clear()
        self.syncs.clear()
        self.sync_sites.clear()

    def sync(self, kind: str) -> None:
        """Count one host sync of ``kind`` and where the code made it."""
        self.syncs[kind] += 1
        self.sync_sites[f"{kind} at {_caller()}"] += 1

    def totals(self) -> dict[str, int]:
        """``{"ops", "launches", "triton_launches", "syncs"}`` summed over names."""
        return {
            "ops": sum(self.ops.values()),
            "launches": sum(self.launches.values()),
            "triton_launches": sum(v for k, v in self.launches.items() if k.startswith("triton:")),
            "syncs": sum(self.syncs.values()),
        }

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Count nothing inside (set-up work that is not part of what is measured)."""
        with self._active(False):
            yield

    @contextlib.contextmanager
    def counting(self) -> Iterator[None]:
        """Count inside (within :meth:`paused`: the part that is measured)."""
        with self._active(True):
            yield

    @contextlib.contextmanager
    def _active(self, active: bool) -> Iterator[None]:
        was, self.active = self.active, active
        try:
            yield
        finally:
            self.active = was


_STATE = threading.local()


def _caller() -> str:
    """``module:line`` of the innermost frame of streamseg's code (this module aside)."""
    import sys

    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if name.startswith("streamseg.") and name != __name__:
            return f"{name}:{frame.f_lineno}"
        frame = frame.f_back  # type: ignore[assignment]
    return "?"


def _counts() -> DispatchCounts | None:
    counts: DispatchCounts | None = getattr(_STATE, "counts", None)
    return counts if counts is not None and counts.active else None


def record_sync(kind: str) -> None:
    """Count one host sync the code makes explicitly (e.g. waiting on a CUDA event).

    A no-op outside :func:`emulated_gpu`; call it next to the wait so that the
    emulated count sees what the GPU run does.
    """
    counts = _counts()
    if counts is not None:
        counts.sync(f"sync:{kind}")


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
    return same if same is not None else _Tensor(x)


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


def _register_device() -> None:
    """Rename ``privateuse1`` to :data:`DEVICE_TYPE` with a Python device guard (once)."""
    global _registered
    with _REGISTER_LOCK:
        if _registered:
            return
        from torch.utils import backend_registration

        class Hooks(torch._C._acc.PrivateUse1Hooks):  # type: ignore[misc, name-defined]
            def is_available(self) -> bool:
                return _ACTIVE[0] > 0

            def has_primary_context(self, dev_id: int) -> bool:
                return True

            def is_built(self) -> bool:
                return True

        backend_registration._setup_privateuseone_for_python_backend(
            DEVICE_TYPE, backend_module=_Backend(), hook=Hooks()
        )
        _native.GPU_DEVICE_TYPES.add(DEVICE_TYPE)
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

    InterpretedFunction.run = run  # type: ignore[method-assign]
    try:
        yield
    finally:
        InterpretedFunction.run = original  # type: ignore[method-assign]


def _check_interpreter() -> None:
    if os.environ.get("TRITON_INTERPRET") != "1":
        raise EmulationError(
            "the emulated GPU runs the Triton kernels in Triton's interpreter: set "
            "TRITON_INTERPRET=1 before triton is first imported (streamseg bench dispatch does)"
        )
    import sys

    kernels = sys.modules.get("streamseg.ops.triton.nms")
    if kernels is not None and type(kernels._scan_kernel).__name__ != "InterpretedFunction":
        raise EmulationError(
            "the Triton kernels were compiled for a real GPU in this process (imported before "
            "TRITON_INTERPRET=1 was set); run the emulation in a fresh process"
        )


@contextlib.contextmanager
def emulated_gpu(*, interpret: bool = False) -> Iterator[tuple[torch.device, DispatchCounts]]:
    """``(device, counts)``: an emulated GPU and what runs on it, counted.

    With ``interpret``, every Triton kernel runs in Triton's interpreter
    (slow: minutes for a RoIAlign of a few hundred boxes); without, each
    Triton op's launches are counted and its result taken from its C++
    twin when the C++ kernels are built (the interpreter otherwise).

    Move a model and its inputs to ``device`` inside the block; everything
    torch does meanwhile (on any device) is counted in ``counts``; use
    ``counts.paused()`` around set-up and ``counts.clear()`` to start a
    measurement. One emulation per thread at a time.

    Raises:
        EmulationError: ``TRITON_INTERPRET=1`` is not set (the Triton
            kernels would need a real GPU).
    """
    _check_interpreter()
    _register_device()
    counts = DispatchCounts()
    if getattr(_STATE, "counts", None) is not None:
        raise EmulationError("emulated_gpu() is already active in this thread")
    _STATE.counts = counts
    _ACTIVE[0] += 1
    try:
        with _interpreted_launches(counts), _PythonLevel(), _Dispatch(interpret=interpret):
            yield torch.device(DEVICE_TYPE, 0), counts
    finally:
        _ACTIVE[0] -= 1
        _STATE.counts = None
