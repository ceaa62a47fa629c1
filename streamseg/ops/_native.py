"""Find the native kernels: C++ for the CPU (built here), Triton for CUDA.

The C++ kernels in ``ops/csrc`` are compiled on first use with
``torch.utils.cpp_extension.load`` (ninja and the system C++ compiler) into
``$TORCH_EXTENSIONS_DIR`` or ``~/.cache/streamseg/torch_extensions``, one
folder per torch version, Python version and source tree (two checkouts
never rebuild each other's library). Later processes find the library there
and only load it. CUDA tensors go to the Triton kernels of
:mod:`streamseg.ops.triton`, which need the ``triton`` package (it comes
with every CUDA build of torch) and no compiler of ours.

``STREAMSEG_OPS`` chooses the path (:mod:`streamseg.ops._mode` reads it):

* unset or ``auto``: native when it loads, else the PyTorch reference, with
  one warning per device type (logger ``streamseg.ops``) saying why and how
  to fix it;
* ``reference``: always the reference, nothing is built or imported;
* ``native``: native or an error (``NativeOpsError``), for CI and
  deployments that must not silently run slow.

A Triton kernel can load and still fail when it is launched (a compile
error for this GPU, too little shared memory, a bug in how its arguments
bind). Each Triton op runs its kernel through
:func:`streamseg.ops._launch.launch`: in ``auto``
mode a kernel that raises on its first call for a device and dtype is
replaced by the reference for that op from then on, with one warning
naming the op and the error (``reference_ops`` lists them for
``/readyz`` and the metrics); in ``native`` mode it raises
``NativeOpsError``. ``streamseg.ops.warm_up`` calls every op once at
start-up, so either happens before the first live frame.

Nothing here runs at import time.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import torch

from streamseg.ops._launch import reference_ops
from streamseg.ops._mode import ENV_VAR, NativeOpsError, mode

__all__ = [
    "cache_dir",
    "enabled",
    "is_gpu_type",
    "load",
    "load_gpu",
    "on_gpu",
    "sources",
    "sources_dir",
    "status",
]

_OPS = ("nms", "roi_align", "paste_masks", "rle", "box_coder")
_log = logging.getLogger("streamseg.ops")
R = TypeVar("R")


@dataclass
class _Attempt:
    """One way of loading kernels (the C++ build, the Triton import): tried once a
    process; ``error``: why it failed."""

    tried: bool = False
    error: str | None = None


@dataclass
class _State:
    devices: frozenset[str] = frozenset()
    library: Path | None = None
    cpu: _Attempt = field(default_factory=_Attempt)
    gpu: _Attempt = field(default_factory=_Attempt)
    lock: threading.Lock = field(default_factory=threading.Lock)


_STATE = _State()


def sources_dir() -> Path:
    """The kernel sources: the copy a wheel ships in ``streamseg/ops/csrc``, else
    ``ops/csrc`` of the source checkout this package runs from (editable install)."""
    here = Path(__file__).resolve().parent
    packaged = here / "csrc"
    if packaged.is_dir():
        return packaged
    return here.parents[1] / "ops" / "csrc"


def sources() -> list[Path]:
    """The C++ source files, ``register.cpp`` first."""
    root = sources_dir()
    return [root / "register.cpp", *(root / op / f"{op}_cpu.cpp" for op in _OPS)]


def cache_dir() -> Path:
    """Root of the build cache (``TORCH_EXTENSIONS_DIR`` wins)."""
    env = os.environ.get("TORCH_EXTENSIONS_DIR")
    if env:
        return Path(env)
    return Path.home() / ".cache" / "streamseg" / "torch_extensions"


def _build_dir() -> Path:
    version = torch.__version__.replace("+", "_")
    py = f"py{sys.version_info.major}{sys.version_info.minor}"
    # The build arguments name the source folder, and torch rebuilds when they
    # change: one folder per source tree keeps checkouts from thrashing.
    tree = hashlib.sha1(str(sources_dir()).encode()).hexdigest()[:8]
    return cache_dir() / f"streamseg_ops-torch{version}-{py}-cpu-{tree}"


def _compile(verbose: bool) -> Path:
    """Compile (or find up to date in the cache) and load the library."""
    from torch.utils import cpp_extension

    files = sources()
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise FileNotFoundError(
            f"native sources missing: {', '.join(missing)} (reinstall streamseg: its wheel "
            f"ships them as streamseg/ops/csrc; or run it from a checkout that has ops/csrc)"
        )
    build = _build_dir()
    build.mkdir(parents=True, exist_ok=True)
    with _exclusive(build):
        cpp_extension.load(
            name="streamseg_ops_cpu",
            sources=[str(f) for f in files],
            extra_cflags=["-O3"],
            extra_include_paths=[str(sources_dir())],
            build_directory=str(build),
            with_cuda=False,
            is_python_module=False,
            verbose=verbose,
        )
    return build / "streamseg_ops_cpu.so"


@contextlib.contextmanager
def _exclusive(build: Path) -> Iterator[None]:
    """Hold ``build``'s compile lock; clear what a killed builder left behind.

    torch marks a build in progress with a ``lock`` file and waits, without
    end, while one exists, so a process killed mid-compile (Ctrl-C on the
    first start) would hang every later start. An ``flock`` is released by
    the kernel when its holder dies: whoever holds it is the only builder
    of this folder, and a ``lock`` file found then is stale.
    """
    import fcntl

    with open(build / ".streamseg-build.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            stale = build / "lock"
            if stale.exists():
                _log.warning("ops: removing %s left by an interrupted build", stale)
                stale.unlink(missing_ok=True)
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _try_load(verbose: bool) -> str | None:
    """Load the C++ kernels; the reason it failed, or ``None``."""
    if not (_build_dir() / "streamseg_ops_cpu.so").is_file():
        _log.info("ops: compiling the native CPU kernels (first use; a minute or so)")
    start = time.perf_counter()
    try:
        _STATE.library = _compile(verbose)
    except Exception as exc:  # any compiler/linker/loader failure means "no native"
        return f"CPU build: {exc}"
    _log.info("ops: native CPU kernels ready (%.1f s)", time.perf_counter() - start)
    from streamseg.ops import _fake

    _fake.register()
    _STATE.devices = _STATE.devices | {"cpu"}
    return None


def _try_load_gpu() -> str | None:
    """Import the Triton kernels; the reason it failed, or ``None``."""
    try:
        from streamseg.ops import triton as gpu_kernels

        gpu_kernels.load()
    except ImportError as exc:
        return f"Triton kernels: {exc} (pip install triton)"
    _STATE.devices = _STATE.devices | {"cuda"}
    return None


def _load_once(
    attempt: _Attempt, load: Callable[[], str | None], warning: str, failure: str
) -> str | None:
    """Run ``load`` the first time a process asks; its error, if any.

    In ``auto`` mode a failure is logged once (``warning``, formatted with
    the error and the variable's name); in ``native`` mode every call raises
    :class:`NativeOpsError` (``failure``: what could not be done).
    """
    current = mode()
    with _STATE.lock:
        if not attempt.tried:
            attempt.tried = True
            attempt.error = load()
            if attempt.error is not None and current == "auto":
                _log.warning(warning, attempt.error, ENV_VAR)
    if attempt.error is not None and current == "native":
        raise NativeOpsError(f"{ENV_VAR}=native but {failure}: {attempt.error}")
    return attempt.error


def load_gpu() -> bool:
    """Whether the Triton kernels serve CUDA tensors (imports them on first call).

    Raises :class:`NativeOpsError` when ``STREAMSEG_OPS=native`` and they
    cannot load; in ``auto`` mode a failure is logged once as a warning.
    """
    if mode() == "reference":
        return False
    error = _load_once(
        _STATE.gpu,
        _try_load_gpu,
        "streamseg GPU kernels unavailable, using the PyTorch reference on CUDA (slower). "
        "Reason: %s. Set %s=reference to silence this warning.",
        "the GPU kernels could not load",
    )
    return error is None


def load(verbose: bool = False) -> frozenset[str]:
    """Build/load the C++ ops once; the device types served so far (empty: none).

    Raises :class:`NativeOpsError` when ``STREAMSEG_OPS=native`` and they
    cannot load. In ``auto`` mode a failure is logged once as a warning.
    """
    if mode() == "reference":
        return frozenset()
    _load_once(
        _STATE.cpu,
        lambda: _try_load(verbose),
        "streamseg native ops unavailable, using the PyTorch reference (slower). Reason: %s. "
        "Fix: install a C++ compiler (g++) and ninja (pip install ninja), or set %s=reference "
        "to silence this warning.",
        "the native ops could not be built",
    )
    return _STATE.devices


def is_gpu_type(device_type: str) -> bool:
    """Whether tensors of ``device_type`` are a GPU's, served by the Triton kernels.

    CUDA, or the Python backend that PyTorch's ``privateuse1`` slot was renamed
    to (the emulated GPU of :mod:`streamseg.bench.emulated`, which counts
    launches on a CPU). PyTorch's own registration says which that is: no
    list of ours to keep or to write to.
    """
    if device_type == "cuda":
        return True
    renamed = torch._C._get_privateuse1_backend_name()
    return device_type == renamed and renamed != "privateuseone"


def on_gpu(t: torch.Tensor) -> bool:
    """Whether ``t`` is on a GPU (CUDA, or the emulated one that counts dispatches):
    where a host sync stalls the device and code should avoid one."""
    return is_gpu_type(t.device.type)


def _constant_result(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``torch.compiler.assume_constant_result`` without importing ``torch._dynamo``.

    That import costs about 2 s of CPU in every process that imports the ops
    (each ``streamseg`` command); the decorator itself only marks ``fn`` with
    the attribute dynamo reads while tracing (``tests/ops`` prove a compiled
    graph still takes the answer as a constant).
    """
    fn._dynamo_marked_constant = True  # type: ignore[attr-defined]
    return fn


@_constant_result
def enabled(device_type: str) -> bool:
    """Whether native kernels serve tensors on ``device_type`` (loads on first call):
    C++ for ``cpu``, Triton for ``cuda``.

    ``torch.compile`` evaluates this once while tracing and keeps the answer.
    """
    if device_type == "cuda":
        return load_gpu()
    return device_type == "cpu" and "cpu" in load()


def status() -> dict[str, object]:
    """What was loaded, from where, or why not (for ``bench ops`` and bug reports)."""
    return {
        "mode": mode(),
        "devices": sorted(_STATE.devices),
        "library": str(_STATE.library) if _STATE.library else None,
        "error": _STATE.cpu.error,
        "gpu_error": _STATE.gpu.error,
        "reference_ops": reference_ops(),
    }
