"""Changes to pipeline.yaml made through the console's API, kept in the file itself.

``PipelineEditor.change(edit)`` reads the pipeline file with the one YAML
loader (ruamel.yaml round trip), lets ``edit`` change the tree, validates
the whole result with the same schema and reference checks as ``serve``
(so errors name the same fields), and only then writes the file back,
atomically (a temporary file renamed over it). Only the lines the edit is
about change: every other line stays byte for byte as it was, comments,
spacing, quotes and ``${ENV}`` references included
(``streamseg.console.roundtrip``); a rejected change leaves the file, and
the running pipeline, untouched.

Why the pipeline file and not an overlay beside it: the file stays the one
place that says what runs (``streamseg check`` and a restart see exactly
what the console made), and there is no merge order to explain. Where the
file is read-only (a Kubernetes ConfigMap), a change is refused with a
message saying so, before anything is applied.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from streamseg.config.loader import validate_pipeline
from streamseg.config.pipeline import PipelineConfig
from streamseg.configbase.errors import ConfigError, ConfigIssue
from streamseg.configbase.yaml_tree import read_yaml
from streamseg.console.roundtrip import LineGaps, dump, merge_edit, round_trip_yaml

__all__ = ["ChangeRefused", "PipelineEditor", "yaml_node"]

log = logging.getLogger("streamseg.console")

# Lists of numbers under these keys are written on one line: [[x, y], ...].
_FLOW_KEYS = frozenset({"polygon", "points", "classes", "events"})


class ChangeRefused(Exception):
    """A change that was not made; ``status`` is the HTTP status, ``issues`` name the fields."""

    def __init__(self, status: int, issues: Sequence[ConfigIssue], message: str) -> None:
        super().__init__(message)
        self.status = status
        self.issues = list(issues)

    def to_dict(self) -> dict[str, Any]:
        return {
            "error": str(self),
            "issues": [
                {"field": i.path or None, "message": i.message, "hint": i.hint, "line": i.line}
                for i in self.issues
            ],
        }


Edit = Callable[[CommentedMap], None]


class PipelineEditor:
    """Validated, comment-keeping edits of one pipeline.yaml.

    Args:
        path: the pipeline file ``serve`` was started with.
        checks: what the running service adds to the file's own schema and
            reference checks (``streamseg.config.loader.validate_pipeline``,
            the same as ``serve``'s, so errors name the same fields).
        environ: for ``${NAME}`` references (default ``os.environ``).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        checks: Callable[[PipelineConfig], list[ConfigIssue]] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.path = Path(path)
        self.checks = checks
        self.environ = os.environ if environ is None else environ
        self._lock = threading.Lock()

    def change(
        self, edit: Edit, *, commit: Callable[[PipelineConfig], None] | None = None
    ) -> PipelineConfig:
        """Apply ``edit`` to the file's tree, validate, ``commit``, save; the new config.

        ``edit`` raises ``ChangeRefused`` for a request that makes no sense
        (an unknown name); schema errors become ``ChangeRefused(422)``.
        ``commit`` (putting the config to work) may refuse too, with
        ``ChangeRefused``; then the file is not written. A file that cannot
        be written raises ``ChangeRefused(409)`` after ``commit``: the
        caller undoes what it committed.
        """
        with self._lock:
            try:
                read_yaml(self.path, what="a pipeline.yaml")  # says what is wrong with it
                text = self.path.read_text(encoding="utf-8")
            except (ConfigError, OSError) as exc:
                issues = exc.issues if isinstance(exc, ConfigError) else [ConfigIssue(str(exc))]
                raise ChangeRefused(409, issues, "the pipeline file cannot be read") from None
            yaml = round_trip_yaml(text)
            tree = yaml.load(text)
            gaps = LineGaps(tree)
            edit(tree)
            gaps.restore(tree)  # blank lines stay where they were, between the same entries
            try:
                config = validate_pipeline(
                    tree, self.path, environ=self.environ, checks=self.checks
                )
            except ConfigError as exc:
                raise ChangeRefused(422, exc.issues, "the change is not valid") from None
            self._check_writable()
            if commit is not None:
                commit(config)
            self._write(_edited_text(text, tree, yaml))
            return config

    def _check_writable(self) -> None:
        if os.access(self.path, os.W_OK) and os.access(self.path.parent, os.W_OK):
            return
        issue = ConfigIssue(
            f"{self.path} (or its folder) is not writable",
            hint="the console saves changes in the pipeline file; make it writable",
        )
        raise ChangeRefused(409, [issue], "the change could not be saved")

    def _write(self, text: str) -> None:
        try:
            fd, tmp = tempfile.mkstemp(prefix=".console-", dir=self.path.parent)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            mode = self.path.stat().st_mode & 0o777
            os.chmod(tmp, mode)
            os.replace(tmp, self.path)
        except OSError as exc:
            issue = ConfigIssue(
                f"cannot write {self.path}: {exc.strerror or exc}",
                hint="the console saves changes in the pipeline file; make it writable",
            )
            raise ChangeRefused(409, [issue], "the change could not be saved") from None


def _edited_text(original: str, tree: Any, yaml: YAML) -> str:
    """The file with the edit of ``tree``, every other line as in ``original``."""
    base = dump(yaml.load(original), yaml)
    edited = dump(tree, yaml)
    merged = merge_edit(original, base, edited)
    if _plain(yaml.load(merged)) == _plain(tree):
        return merged
    log.warning("console: the edit could not be placed line by line; the file is rewritten whole")
    return edited


def _plain(node: Any) -> Any:
    """The data of a ruamel tree, as plain dicts, lists and scalars (no substitution)."""
    if isinstance(node, Mapping):
        return {str(k): _plain(v) for k, v in node.items()}
    if isinstance(node, list | tuple):
        return [_plain(v) for v in node]
    return node


def yaml_node(value: Any, key: str | None = None) -> Any:
    """Plain JSON data as ruamel nodes; point lists in flow style (``[[x, y], ...]``)."""
    if isinstance(value, Mapping):
        node = CommentedMap()
        for k, v in value.items():
            node[str(k)] = yaml_node(v, str(k))
        return node
    if isinstance(value, list | tuple):
        seq = CommentedSeq(yaml_node(v, key) for v in value)
        if key in _FLOW_KEYS or all(not isinstance(v, Mapping | list | tuple) for v in value):
            seq.fa.set_flow_style()
        return seq
    return value
