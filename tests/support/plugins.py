"""The suite's registry rows, loaded through ``STREAMSEG_PLUGINS`` (``streamseg.plugins``).

``tests/conftest.py`` names this module in ``STREAMSEG_PLUGINS``, so every
process of the suite (pytest's own, ``serve`` and its model process) has
the rows, and a user's install never lists them. Importing it imports no
torch: each row names its code, loaded when used.
"""

from __future__ import annotations

from streamseg.models import ARCHITECTURES, Arch

# maskrcnn_small that fails on chosen forward passes (raise, exit, hang),
# for tests of how the service lives with a failing model.
ARCHITECTURES.register(
    "maskrcnn_small_faulty", Arch("tests.support.faulty_model:maskrcnn_small_faulty", "maskrcnn")
)
