"""Plug-ins from outside the package, named in the ``STREAMSEG_PLUGINS`` environment variable.

A plug-in adds rows to streamseg's registries: a sink type
(``streamseg.publish.sink_config.SINK_TYPES``), a rule kind
(``streamseg.track.rule_kinds.RULE_KINDS``), a decoder
(``streamseg.ingest.spec.DECODERS``), an architecture
(``streamseg.models.ARCHITECTURES``), ... (docs/plugins.md).
``STREAMSEG_PLUGINS`` lists them, comma-separated, each either a module
(its import registers the rows) or ``module:function`` (the module is
imported, then ``function()`` is called and registers them). They are
loaded when ``streamseg`` itself is imported, so their rows are in every
registry before a config type or a CLI choice is built from it, in
``serve`` and in every process it starts (they inherit the environment).
A row registered later is refused (``streamseg.registry.RegistryClosed``).
The test suite registers its test-only model (``maskrcnn_small_faulty``)
this way, so users never see it among the choices.

Example::

    STREAMSEG_PLUGINS=mycompany.streamseg_rows streamseg check pipeline.yaml
    STREAMSEG_PLUGINS=mycompany.rows:register streamseg serve pipeline.yaml
"""

from __future__ import annotations

import importlib
import os

__all__ = ["ENV", "PluginError", "load_from_environment"]

ENV = "STREAMSEG_PLUGINS"


class PluginError(ImportError):
    """A plug-in named in ``STREAMSEG_PLUGINS`` could not be imported or called."""


def load_from_environment() -> tuple[str, ...]:
    """Load every plug-in named in ``STREAMSEG_PLUGINS``; the names loaded, in order."""
    names = tuple(filter(None, (n.strip() for n in os.environ.get(ENV, "").split(","))))
    for name in names:
        module, _, function = name.partition(":")
        try:
            loaded = importlib.import_module(module)
        except ImportError as e:
            raise PluginError(
                f"{ENV} names the module {module!r}, which cannot be imported ({e}); "
                f"check the name and that its folder is on PYTHONPATH, or unset {ENV}"
            ) from e
        if function:
            register = getattr(loaded, function, None)
            if not callable(register):
                raise PluginError(
                    f"{ENV} names {name!r}, but {module} has no function {function!r}"
                )
            register()
    return names
