"""Config errors that name the file, the line and the field.

One ``ConfigError`` for every YAML file streamseg reads (pipeline.yaml and
training configs) and for the checks made on them later (a training run's
output folder, a device that is not there).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

__all__ = ["ConfigError", "ConfigIssue", "loc_of"]

Loc = tuple[str | int, ...]


@dataclasses.dataclass(frozen=True)
class ConfigIssue:
    """One problem in a config file.

    ``loc`` is the field path (``("cameras", 1, "url")``), ``line`` the
    1-based YAML line (``None`` when the problem is not at one place).
    """

    message: str
    loc: Loc = ()
    line: int | None = None
    hint: str | None = None

    @property
    def path(self) -> str:
        """``cameras[1].url`` style field path."""
        out = ""
        for part in self.loc:
            out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
        return out

    def format(self, filename: str) -> str:
        where = f"{filename}:{self.line}" if self.line is not None else filename
        field = f" {self.path}:" if self.loc else ""
        hint = f" ({self.hint})" if self.hint else ""
        return f"{where}:{field} {self.message}{hint}"


class ConfigError(ValueError):
    """A config file that cannot be used; ``issues`` lists every problem found.

    ``filename`` names the file (or what stands for it, e.g.
    ``train.yaml (with --set)``); each line of the message reads
    ``file:line: field.path: message (hint)``.
    """

    def __init__(self, filename: str, issues: Sequence[ConfigIssue]) -> None:
        self.filename = filename
        self.issues = sorted(issues, key=lambda i: (i.line or 0, i.path))
        super().__init__(self.format())

    def format(self) -> str:
        return "\n".join(issue.format(self.filename) for issue in self.issues)


def loc_of(path: str) -> Loc:
    """The ``loc`` of a field path: ``"alerts.cameras.a.rules[0].classes"`` ->
    ``("alerts", "cameras", "a", "rules", 0, "classes")`` (``ConfigIssue.path`` reversed)."""
    out: list[str | int] = []
    for part in path.replace("]", "").split("."):
        name, _, index = part.partition("[")
        out.append(name)
        if index:
            out += [int(i) for i in index.split("[")]
    return tuple(out)
