"""Read a streamseg service's alerts and detections from Python.

Run it next to a service (``streamseg serve``)::

    python examples/client_alerts.py --redis redis://127.0.0.1:6379/0
    python examples/client_alerts.py --group alarms --consumer worker-1   # shared, acknowledged
    python examples/client_alerts.py --from-start --count 10               # what Redis still holds

For each alert it prints one line (kind, rule, camera, track, the mask's
area in pixels); with ``--frames`` it prints the number of objects of each
class per frame instead, through ``supervision`` when it is installed
(``pip install 'streamseg[supervision]'``).
"""

from __future__ import annotations

import argparse
import collections

from streamseg.client import Client, ClientError, FrameDetections, to_supervision


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--prefix", default="streamseg", help="the service's redis.stream_prefix")
    parser.add_argument("--group", help="read as this consumer group (messages acknowledged)")
    parser.add_argument("--consumer", help="this reader's name in --group")
    parser.add_argument("--from-start", action="store_true", help="begin at the oldest message")
    parser.add_argument("--count", type=int, help="stop after this many messages")
    parser.add_argument("--idle", type=float, help="stop after this many seconds without one")
    parser.add_argument("--frames", action="store_true", help="count objects per frame instead")
    args = parser.parse_args()

    with Client(args.redis, prefix=args.prefix) as client:
        start = "begin" if args.from_start else "now"
        if args.frames:
            frames = client.detections(
                start=start, group=args.group, consumer=args.consumer, limit=args.count,
                idle_timeout=args.idle,
            )  # fmt: skip
            for frame in frames:
                print(f"{frame.camera} #{frame.seq}: {count_classes(frame)}")
            return
        alerts = client.alerts(
            start=start, group=args.group, consumer=args.consumer, limit=args.count,
            idle_timeout=args.idle,
        )  # fmt: skip
        for alert in alerts:
            mask = alert.mask()  # decoded only here, as a (H, W) bool array
            area = int(mask.sum()) if mask is not None else 0
            print(
                f"{alert.kind} {alert.rule} camera={alert.camera} "
                f"where={alert.zone or alert.line} track={alert.track_id} "
                f"label={alert.label_name} area={area}"
            )


def count_classes(frame: FrameDetections) -> dict[str, int]:
    """Objects per class name; through supervision when it is installed."""
    try:
        names = [str(n) for n in to_supervision(frame, masks=False).data["class_name"]]
    except ClientError:  # supervision is not installed
        names = [i.label_name or str(i.label) for i in frame.instances]
    return dict(sorted(collections.Counter(names).items()))


if __name__ == "__main__":
    main()
