"""Config: the whole pipeline.yaml, assembled from the sections the stages own.

``load_pipeline(path) -> PipelineConfig`` reads, interpolates ``${ENV}``
references and validates a pipeline.yaml, raising ``ConfigError`` with every
problem (file, line, field path, hint). Each section is its own model,
defined by the stage that reads it (``streamseg.ingest.config.CameraConfig``,
``streamseg.segment.config.ModelConfig``, ...); this package sits above every
stage and composes them (``PipelineConfig``), and stages get their own
section, never the whole config. No stage imports this package.
"""

from __future__ import annotations

from streamseg.config.loader import load_pipeline
from streamseg.config.pipeline import PipelineConfig
from streamseg.configbase.errors import ConfigError, ConfigIssue

__all__ = ["ConfigError", "ConfigIssue", "PipelineConfig", "load_pipeline"]
