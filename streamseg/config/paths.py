"""Where a pipeline.yaml's relative paths point: the file's own folder.

``load_pipeline`` resolves a valid config with :func:`resolve_paths`;
``check``'s salvage of a refused file (:mod:`streamseg.config.salvage`)
resolves the sections that are valid alone with the same two functions,
so both read the same files.
"""

from __future__ import annotations

from pathlib import Path

from streamseg.config.pipeline import PipelineConfig
from streamseg.ingest.config import CameraConfig
from streamseg.segment.config import ModelConfig

__all__ = ["resolve_camera_path", "resolve_model_paths", "resolve_path", "resolve_paths"]


def resolve_path(value: str, base_dir: Path) -> Path:
    """``value`` as a path; relative paths are taken from ``base_dir``."""
    p = Path(value).expanduser()
    return p if p.is_absolute() else base_dir / p


def resolve_paths(config: PipelineConfig, base_dir: Path) -> PipelineConfig:
    """``config`` with its model's and cameras' paths relative to ``base_dir``."""
    model = resolve_model_paths(config.model, base_dir)
    cameras = [resolve_camera_path(cam, base_dir) for cam in config.cameras]
    return config.model_copy(update={"model": model, "cameras": cameras})


def resolve_model_paths(model: ModelConfig, base_dir: Path) -> ModelConfig:
    """``model`` with its weights file (unless a catalogue name) and AOT package
    relative to ``base_dir`` (the pipeline file's folder)."""
    if model.weights is not None and model.catalogue_entry() is None:
        model = model.model_copy(update={"weights": str(resolve_path(model.weights, base_dir))})
    if model.aot_package is not None:
        package = str(resolve_path(model.aot_package, base_dir))
        model = model.model_copy(update={"aot_package": package})
    return model


def resolve_camera_path(cam: CameraConfig, base_dir: Path) -> CameraConfig:
    """``cam`` with a file path (a URL without a scheme) relative to ``base_dir``."""
    if "://" in cam.url:
        return cam
    return cam.model_copy(update={"url": str(resolve_path(cam.url, base_dir))})
