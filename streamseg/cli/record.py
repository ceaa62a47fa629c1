"""``streamseg record PIPELINE --camera ID --duration S --out DIR``: raw footage.

Remuxes the camera's packets into segment files (no re-encoding). ``--url``
records any stream or file without a pipeline.yaml. Prints one JSON object:
the files written (path, start, duration in seconds, packets).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any

from streamseg.cli import EXIT_FAILURE, EXIT_OK, UsageError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pipeline", nargs="?", help="pipeline.yaml naming the camera")
    parser.add_argument("--camera", required=True, help="camera id (names the files)")
    parser.add_argument(
        "--url", default=None, help="record this URL/file instead of PIPELINE's camera"
    )
    parser.add_argument("--duration", type=float, required=True, help="seconds of footage")
    parser.add_argument("--out", default=None, help="output folder (default: record.dir/<camera>)")
    parser.add_argument(
        "--segment-seconds",
        type=float,
        default=None,
        help="segment length (default: record.segment_s, 60)",
    )
    parser.add_argument(
        "--container",
        choices=("mp4", "mkv"),
        default=None,
        help="container (default: record.container, mp4)",
    )


def _camera(pipeline: str, camera: str) -> tuple[Any, Any]:
    """The camera's config entry and the ``record:`` section of ``pipeline``."""
    from streamseg.cli.redis_args import load_pipeline_or_exit

    cfg = load_pipeline_or_exit(pipeline)
    cameras = {c.id: c for c in cfg.cameras}
    if camera not in cameras:
        known = ", ".join(sorted(cameras))
        raise UsageError(f"{pipeline} has no camera {camera!r} (cameras: {known})")
    return cameras[camera], cfg.record


def run(args: argparse.Namespace) -> int:
    # The arguments first: a usage mistake is told at once, before torch is imported.
    if args.duration <= 0:
        raise UsageError("--duration must be positive (seconds)")
    if args.segment_seconds is not None and args.segment_seconds <= 0:
        raise UsageError("--segment-seconds must be positive (seconds)")
    if args.url is None and args.pipeline is None:
        raise UsageError("give PIPELINE (with --camera) or --url")
    from streamseg.ingest.spec import SourceError
    from streamseg.record.config import RecordConfig
    from streamseg.record.recorder import record_camera
    from streamseg.record.retention import Retention
    from streamseg.redact import redact_url

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    record = RecordConfig()
    url = args.url
    options: dict[str, Any] = {}
    if url is None:
        cam, section = _camera(args.pipeline, args.camera)
        url, options = cam.url, {"connection": cam.reconnect.connection()}
        record = section if isinstance(section, RecordConfig) else record
    if url.strip().lower().startswith("synthetic:"):
        raise UsageError(
            f"camera {args.camera!r} is a synthetic scene: it has no packets to record "
            "(`streamseg synth` writes one to a video file)"
        )
    from pathlib import Path

    out = Path(args.out) if args.out else Path(record.dir) / args.camera
    # record.retention covers record.dir; an --out folder elsewhere is covered alone.
    inside = out.absolute().parent == Path(record.dir).absolute()
    root = Path(record.dir) if inside else out
    retention = Retention(root=root, config=record.retention, flat=not inside)
    try:
        result = record_camera(
            url=url,
            camera_id=args.camera,
            out_dir=out,
            duration_s=args.duration,
            segment_s=args.segment_seconds or record.segment_s,
            container=args.container or record.container,
            retention=retention,
            **options,
        )
    except SourceError as exc:
        print(f"streamseg: record failed: {exc}", file=sys.stderr, flush=True)
        return EXIT_FAILURE
    except OSError as exc:
        print(f"streamseg: record failed: {exc}", file=sys.stderr, flush=True)
        return EXIT_FAILURE
    print(
        json.dumps(
            {
                "camera": args.camera,
                "url": redact_url(url),
                "files": [
                    {
                        "path": str(f.path),
                        "start": round(f.start, 4),
                        "duration": round(f.duration, 4),
                        "packets": f.packets,
                    }
                    for f in result.files
                ],
                "packets": result.packets,
                "reconnects": result.reconnects,
                "disk_full_stops": result.disk_full_stops,
                "removed": result.removed,
            }
        )
    )
    return EXIT_OK
