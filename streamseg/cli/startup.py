"""Start-up checks: the mistakes ``serve`` would meet while starting, found before it starts.

``environment_issues`` needs no model and opens no camera (a GPU that is
not there, a backend that cannot run, catalogue weights not downloaded yet,
a missing video file or V4L2 device,
DALI not installed, a synthetic scene's bad keys); ``serve`` runs it first.
``model_issues`` also loads the model as ``serve`` would (the weights, an
AOT package, the classes alert rules name); ``check`` runs both. Each
problem is a :class:`ConfigIssue` naming the pipeline.yaml field and the fix.

The stages raise a :class:`streamseg.errors.StartupError` for such a
mistake while ``serve`` starts (in the model's own process too); it carries
its field, and every command exits 2 with it (``streamseg.cli.main``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamseg.configbase.errors import ConfigIssue, loc_of
from streamseg.errors import StartupError
from streamseg.ingest.checks import camera_issues
from streamseg.segment.backends import backend_problems

if TYPE_CHECKING:
    from streamseg.config.pipeline import PipelineConfig
    from streamseg.config.runtime import RuntimeConfig
    from streamseg.ingest.config import CameraConfig
    from streamseg.segment.config import ModelConfig
    from streamseg.track.alerts import AlertsConfig

__all__ = ["environment_issues", "machine_issues", "model_issues"]


def environment_issues(
    config: PipelineConfig, cameras: list[CameraConfig] | None = None
) -> list[ConfigIssue]:
    """Problems of the machine and the cameras' files/devices; no model, no connection."""
    issues = machine_issues(config.model, config.runtime)
    for cam in cameras if cameras is not None else config.cameras:
        issues += camera_issues(cam, config.cameras.index(cam))
    return issues


def machine_issues(model: ModelConfig, runtime: RuntimeConfig) -> list[ConfigIssue]:
    """Whether this machine can run ``model`` (device, backend, weights in the cache) and
    ``runtime.host_cpu``."""
    return _device_issues(model) + _weights_issues(model) + _host_cpu_issues(runtime)


def _device_issues(model: ModelConfig) -> list[ConfigIssue]:
    import torch

    from streamseg.segment.segmenter import cuda_problem

    device = torch.device(model.device)
    problems = backend_problems(model.backend, device)
    if problems:
        hint = "; ".join(problems)
        return [
            ConfigIssue(
                f"backend {model.backend!r} cannot run here", ("model", "backend"), hint=hint
            )
        ]
    problem = cuda_problem(device) if device.type == "cuda" else None
    return [ConfigIssue(problem, ("model", "device"))] if problem else []


def _host_cpu_issues(runtime: RuntimeConfig) -> list[ConfigIssue]:
    problem = runtime.host_cpu_problem()
    if problem is None:
        return []
    return [ConfigIssue(problem[0], ("runtime", "host_cpu"), hint=problem[1])]


def _weights_issues(model: ModelConfig) -> list[ConfigIssue]:
    """Catalogue weights that are not in the cache (and are not allowed to be missing)."""
    from streamseg.models.weights import cached_file, not_cached_message

    entry = model.catalogue_entry()
    if entry is None or model.missing_weights == "random" or cached_file(entry).exists():
        return []
    message, _, hint = not_cached_message(entry).partition("; ")
    return [ConfigIssue(message, ("model", "weights"), hint=hint)]


def model_issues(model: ModelConfig, alerts: AlertsConfig) -> list[ConfigIssue]:
    """Load the model as ``serve`` would (no warm-up); the weights, package and the
    classes the ``alerts`` rules name.

    Run it after :func:`environment_issues` found nothing about the model.
    """
    from streamseg.hosting.segmenter import resolve_weights
    from streamseg.segment import Segmenter
    from streamseg.track.rules.checks import rule_issues

    try:
        segmenter = Segmenter(**model.segmenter_options(resolve_weights(model)))
    except StartupError as exc:
        return [ConfigIssue(str(exc), loc_of(exc.field or "model"), hint=exc.fix)]
    except FileNotFoundError as exc:
        return [ConfigIssue(str(exc), ("model", "weights"))]
    try:
        regions = segmenter.region_classes
        return rule_issues(alerts, segmenter.class_names, regions)
    finally:
        segmenter.close()
