"""Plug-ins from outside the package, named in the ``STREAMSEG_PLUGINS`` environment variable.

A plug-in is a module that adds rows to streamseg's registries (an
architecture to ``streamseg.models.ARCHITECTURES``, ...) when it is
imported. ``STREAMSEG_PLUGINS`` lists such modules, comma-separated; they
are imported when ``streamseg`` itself is, so their rows are in every
registry before a config type or a CLI choice is built from it, in
``serve`` and in every process it starts (they inherit the environment).
The test suite registers its test-only model (``maskrcnn_small_faulty``)
this way, so users never see it among the choices.

Example::

    STREAMSEG_PLUGINS=mycompany.streamseg_rows streamseg check pipeline.yaml
"""

from __future__ import annotations

import importlib
import os

__all__ = ["ENV", "PluginError", "load_from_environment"]

ENV = "STREAMSEG_PLUGINS"


class PluginError(ImportError):
    """A module named in ``STREAMSEG_PLUGINS`` could not be imported."""


def load_from_environment() -> tuple[str, ...]:
    """Import every module named in ``STREAMSEG_PLUGINS``; the names imported, in order."""
    names = tuple(filter(None, (n.strip() for n in os.environ.get(ENV, "").split(","))))
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError as e:
            raise PluginError(
                f"{ENV} names the module {name!r}, which cannot be imported ({e}); "
                f"check the name and that its folder is on PYTHONPATH, or unset {ENV}"
            ) from e
    return names
