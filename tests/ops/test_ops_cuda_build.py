"""Every CUDA source compiles with nvcc for sm_80 and sm_90 (no GPU needed).

The CPU torch wheel ships ATen and c10/cuda headers but not the generated
``c10/cuda/impl/cuda_cmake_macros.h`` (it only sets a Windows export
macro), so ``C10_CUDA_NO_CMAKE_CONFIGURE_FILE`` skips it; the kernels use no
other CUDA-build-only header (no cuBLAS via ATen/cuda/CUDAContext.h).
Objects are cached by the hash of the sources, headers, flags and compiler,
so an unchanged tree does not compile again.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from torch.utils import cpp_extension

from streamseg.ops import _native

NVCC = Path(os.environ.get("STREAMSEG_NVCC", "/usr/local/cuda/bin/nvcc"))
ARCHS = ("80", "90")
CSRC = _native.sources_dir()
CU_FILES = sorted(CSRC.glob("*/*_cuda.cu"))


def nvcc_flags() -> list[str]:
    includes = [*cpp_extension.include_paths(), str(CSRC)]
    cuda_home = NVCC.parent.parent / "include"
    flags = [f"-I{p}" for p in (*includes, cuda_home)]
    for arch in ARCHS:
        flags += ["-gencode", f"arch=compute_{arch},code=sm_{arch}"]
    return [
        *flags,
        "-std=c++20",
        "-O3",
        "--expt-relaxed-constexpr",
        "-DSTREAMSEG_WITH_CUDA",
        "-DC10_CUDA_NO_CMAKE_CONFIGURE_FILE",
        "-Xcompiler",
        "-fPIC",
        "-diag-suppress=3306",  # torch's C++20 bit-field initialisers, seen by the device pass
    ]


def _key(source: Path, flags: list[str]) -> str:
    h = hashlib.sha256()
    for f in sorted(CSRC.rglob("*")):
        if f.suffix in (".h", ".cuh") or f == source:
            h.update(f.name.encode() + f.read_bytes())
    h.update(" ".join(flags).encode())
    h.update(subprocess.run([NVCC, "--version"], capture_output=True, text=True).stdout.encode())
    return h.hexdigest()[:20]


def compile_one(source: Path, cache: Path) -> tuple[Path, str]:
    flags = nvcc_flags()
    obj = cache / f"{source.stem}-{_key(source, flags)}.o"
    if obj.is_file():
        return obj, ""
    tmp = obj.with_suffix(".tmp.o")
    proc = subprocess.run(
        [str(NVCC), "-c", str(source), "-o", str(tmp), *flags],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        return obj, proc.stdout + proc.stderr
    tmp.replace(obj)
    return obj, ""


@pytest.mark.slow
def test_every_cuda_source_compiles_for_sm80_and_sm90() -> None:
    assert NVCC.is_file(), (
        f"nvcc not found at {NVCC}: install the CUDA toolkit or set STREAMSEG_NVCC"
    )
    assert shutil.which("c++"), "nvcc needs a host C++ compiler: run scripts/setup.sh"
    assert {p.parent.name for p in CU_FILES} == {
        "nms",
        "roi_align",
        "paste_masks",
        "rle",
        "box_coder",
    }
    cache = _native.cache_dir() / "nvcc-check"
    cache.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=max(1, min(len(CU_FILES), os.cpu_count() or 1))) as pool:
        results = list(pool.map(lambda f: compile_one(f, cache), CU_FILES))
    failures = {
        src.name: log[-3000:] for src, (_, log) in zip(CU_FILES, results, strict=True) if log
    }
    assert not failures, failures
    for obj, _ in results:
        data = obj.read_bytes()
        # The fat binary with device code for both architectures is embedded.
        assert b".nv_fatbin" in data and len(data) > 10_000
