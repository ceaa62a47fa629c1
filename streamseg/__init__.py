"""streamseg: streaming instance segmentation for camera fleets.

Importing this package loads nothing heavy: no model, no native kernel, no
connection. Each stage lives in its own subpackage (``ingest``, ``segment``,
``track``, ``alert``, ``publish``, ``train``) and passes the types of
``streamseg.types``.
"""

__version__ = "0.1.0"

# Rows that modules outside the package add to the registries (none unless
# STREAMSEG_PLUGINS names some): loaded before any registry is read.
from streamseg import plugins as _plugins

_plugins.load_from_environment()
