"""Config: the pydantic schema of pipeline.yaml and its loader.

``load_pipeline(path) -> PipelineConfig`` reads, interpolates ``${ENV}``
references and validates a pipeline.yaml, raising ``ConfigError`` with every
problem (file, line, field path, hint). Each section is its own model
(``CameraConfig``, ``ModelConfig``, ...); stages get keyword arguments built
from a section, never the whole config.
"""

from __future__ import annotations

from streamseg.config.loader import load_pipeline
from streamseg.config.pipeline import PipelineConfig
from streamseg.configbase.errors import ConfigError, ConfigIssue

__all__ = ["ConfigError", "ConfigIssue", "PipelineConfig", "load_pipeline"]
