"""The bottom of every config: what each stage's section schema is built from.

Stages define their own ``pipeline.yaml`` sections (``streamseg.ingest.config``,
``streamseg.segment.config``, ``streamseg.track.config``, ...) from the
pieces here, and :mod:`streamseg.config` assembles them into the whole
file. This package imports nothing of streamseg, so every stage may use it:

* ``base.StrictModel``: a section (unknown keys are errors, frozen);
* ``choices``: a field's ``Literal`` and its "unknown X" message from a registry;
* ``errors.ConfigError`` / ``ConfigIssue``: errors naming the file, line and field;
* ``yaml_tree``: the one YAML reader that keeps line numbers, with ``${ENV}``
  interpolation (``env``), used by pipeline.yaml, training configs and the
  console's editor.
"""

from __future__ import annotations

from streamseg.configbase.base import StrictModel
from streamseg.configbase.errors import ConfigError, ConfigIssue

__all__ = ["ConfigError", "ConfigIssue", "StrictModel"]
