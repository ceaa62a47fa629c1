"""Read what a streamseg service publishes, from Python: ``streamseg.client.Client``.

* ``client``: ``Client`` (``detections()``, ``alerts()``, ``entries()``);
* ``subscription``: ``Subscription``, the iterator each of those returns
  (XREAD or consumer groups, acknowledgement, reconnects, consume spans),
  and its ``Backoff`` policy;
* ``events``: the typed messages ``FrameDetections``, ``Instance``,
  ``Region`` (semantic and panoptic models' class regions), ``Alert`` and
  the raw ``Entry``; masks decode to numpy only on ``mask()``;
* ``validate``: the debug mode's JSON Schema check (``SchemaError``);
* ``convert``: to and from ``supervision.Detections``;
* ``recording``: recorded detections from a JSON-lines file or the Redis
  detections streams (``Recording``), read back by ``replay`` and ``render``.

Nothing in streamseg imports this package except the CLI (``streamseg
subscribe``, ``replay`` and ``render`` are users of it). Stream names come
from ``streamseg.streams``. See docs/events.md, "Reading events from Python".
"""

from __future__ import annotations

from streamseg.client.client import Client
from streamseg.client.convert import from_supervision, to_supervision
from streamseg.client.events import (
    Alert,
    ClientError,
    Entry,
    FrameDetections,
    Instance,
    MessageError,
    Region,
    decode_rle,
)
from streamseg.client.subscription import Backoff, Subscription
from streamseg.client.validate import SchemaError

__all__ = [
    "Alert",
    "Backoff",
    "Client",
    "ClientError",
    "Entry",
    "FrameDetections",
    "Instance",
    "MessageError",
    "Region",
    "SchemaError",
    "Subscription",
    "decode_rle",
    "from_supervision",
    "to_supervision",
]
