"""The model's health as ``/readyz``, the console and the metrics show it.

One function, :func:`model_health`, reads it from the running pipeline: the
segment stage's failed batches (in this process or the model's own) and,
with ``runtime.model_process``, the model process's state and restarts.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MODEL_STATES", "model_counts", "model_health"]

# loading: not built yet; running: takes batches; restarting: its own process
# ended and is being started again; failed: the pipeline gave up on it.
MODEL_STATES = ("loading", "running", "restarting", "failed")


def model_health(pipeline: Any, *, loaded: bool, arch: str) -> dict[str, Any]:
    """``/readyz``'s ``model``.

    Keys: ``loaded``, ``arch``, ``state`` (:data:`MODEL_STATES`),
    ``failed_batches`` (in all), ``failed_in_a_row``, ``last_error``
    (``Type: message``) and ``last_error_time`` (epoch seconds), and with
    the model in its own process ``process``: ``{pid, state, restarts,
    last_error}`` (how its last process ended). Once the pipeline runs,
    ``ops_on_reference``: the post-processing ops whose GPU kernel failed and
    that run on the PyTorch reference, op -> the kernel's error.
    """
    out: dict[str, Any] = {"loaded": loaded, "arch": arch, "state": "loading"}
    if pipeline is None:
        return out
    stage = pipeline.segment_stage.health()
    out.update(stage, state="running")
    out["ops_on_reference"] = dict(pipeline.segmenter.ops_on_reference)
    process = pipeline.segmenter.health()
    if process is not None:
        out["process"] = process
        if process["state"] != "running":
            out["state"] = "restarting"
    if pipeline.failure is not None and stage["failed_in_a_row"]:
        out["state"] = "failed"
    return out


def model_counts(health: dict[str, Any]) -> dict[str, int]:
    """The metrics' view of :func:`model_health`: ``failed_batches``, ``restarts``, ``up``."""
    process = health.get("process") or {}
    return {
        "failed_batches": int(health.get("failed_batches", 0)),
        "restarts": int(process.get("restarts", 0)),
        "up": int(health.get("state") == "running"),
    }
