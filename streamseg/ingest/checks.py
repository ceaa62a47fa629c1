"""Whether a camera's entry can be opened, short of connecting to it.

``camera_issues(cam, index)`` is the one check of a ``cameras:`` entry
beyond its schema: the URL parses (parameters such as
``synthetic://?seed=abc`` or ``fps=banana`` included), the file or V4L2
device is there, a synthetic scene's keys are valid and the decoder is
installed. ``serve`` and ``check`` run it at start-up
(``streamseg.cli.startup``), the console before it applies a camera change.
Each problem is a ``ConfigIssue`` naming the field (``cameras[i].url``).
"""

from __future__ import annotations

from streamseg.configbase.errors import ConfigIssue
from streamseg.ingest.config import CameraConfig
from streamseg.ingest.spec import SourceError, decoder_problem, parse_source_url

__all__ = ["camera_issues"]


def camera_issues(cam: CameraConfig, index: int) -> list[ConfigIssue]:
    """Problems of camera ``cam`` (``cameras[index]``) that opening it would meet."""
    issues: list[ConfigIssue] = []
    try:
        spec = parse_source_url(cam.url, camera_id=None)
        spec.check_exists(cam.id)
        if spec.kind == "synthetic":
            _check_scene(spec.target)
    except SourceError as exc:
        issues.append(ConfigIssue(str(exc), ("cameras", index, "url")))
    problem = decoder_problem(cam.decode)
    if problem is not None:
        issues.append(ConfigIssue(problem[0], ("cameras", index, "decode"), hint=problem[1]))
    return issues


def _check_scene(target: str) -> None:
    from streamseg.synthetic.scene import SyntheticScene

    try:
        SyntheticScene.from_url(target)
    except ValueError as exc:
        raise SourceError(str(exc)) from None
