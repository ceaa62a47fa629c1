"""``${NAME}`` and ``${NAME:-default}`` interpolation in YAML string values."""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["UnsetVariable", "interpolate"]

_VAR = re.compile(r"\$(?:\$|\{(?P<name>[^}:]*)(?::-(?P<default>[^}]*))?\})")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class UnsetVariable(ValueError):
    """A ``${NAME}`` without default whose variable is not set."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(name)


def interpolate(text: str, environ: Mapping[str, str]) -> str:
    """Replace ``${NAME}``/``${NAME:-default}`` in ``text``; ``$$`` is a literal ``$``.

    ``${NAME:-default}`` uses the default when ``NAME`` is unset or empty.
    Raises ``UnsetVariable`` for ``${NAME}`` with ``NAME`` unset, and
    ``ValueError`` for a malformed reference such as ``${1X}``.
    """

    def repl(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name, default = m.group("name"), m.group("default")
        if not _NAME.fullmatch(name):
            raise ValueError(f"bad variable reference {m.group(0)!r}: expected ${{NAME}}")
        value = environ.get(name)
        if default is not None:
            return value if value else default
        if value is None:
            raise UnsetVariable(name)
        return value

    return _VAR.sub(repl, text)
