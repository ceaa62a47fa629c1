"""The model as the pipeline hosts it: built here, or in a process of its own.

:func:`build_model_stage` picks by ``runtime.model_process``; the worker of
a model in its own process builds it with
:func:`streamseg.hosting.segmenter.build_segmenter` too, so both ways load
the same weights, backend and warm-up.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from streamseg.hosting.segmenter import build_segmenter

if TYPE_CHECKING:
    from streamseg.config.pipeline import PipelineConfig
    from streamseg.hosting.process import ModelProcess
    from streamseg.segment.segmenter import Segmenter

__all__ = ["build_model_stage"]


def build_model_stage(
    config: PipelineConfig, *, cancel: threading.Event | None = None
) -> Segmenter | ModelProcess:
    """The model as the pipeline runs it: in this process, or in its own
    (``runtime.model_process``) with ``runtime``'s torch threads.

    ``cancel``: setting it ends a model's own process while it starts
    (``ModelProcess`` raises ``StartCancelled``); a model built in this
    process is built to the end.
    """
    rt = config.runtime
    if rt.model_process:
        from streamseg.hosting.process import ModelProcess

        return ModelProcess(
            config.model,
            threads=rt.inference_threads(),
            answer_timeout=rt.model_timeout,
            nice=rt.model_nice,
            cancel=cancel,
        )
    return build_segmenter(config.model)
