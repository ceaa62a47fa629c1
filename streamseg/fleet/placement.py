"""Which worker serves which camera: rendezvous (highest random weight) hashing.

Every worker computes the same placement from the same facts (the live
workers with their capacities, the camera ids), without talking to the
others. A camera goes to the worker with the highest ``score(camera,
worker)`` that still has room; cameras are placed in a fixed order (by
their best score), so that a worker joining or leaving moves only the
cameras it must: those it takes, or those it held.

With few cameras the hash is lumpy (six cameras on three workers may land
4/1/1): ``capacity`` is what evens the load out, and it is also what a
worker can serve, so set it to the cameras one worker takes when another
is gone (``streamseg bench fleet`` sets ``ceil(cameras / (workers - 1))``).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable, Mapping

__all__ = ["place", "score"]


def score(camera_id: str, worker: str) -> int:
    """The stable weight of ``worker`` for ``camera_id`` (64 bits of BLAKE2b)."""
    digest = hashlib.blake2b(f"{camera_id}\0{worker}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def place(cameras: Iterable[str], workers: Mapping[str, int]) -> dict[str, str | None]:
    """``{camera: worker}`` for every camera; ``None`` where no live worker has room.

    Args:
        cameras: the fleet's camera ids.
        workers: ``{worker name: capacity in cameras}`` of the live workers.
    """
    ranked = {
        cid: sorted(workers, key=functools.partial(score, cid), reverse=True) for cid in cameras
    }
    # Cameras with a strong first choice go first: when capacity binds, which
    # camera overflows depends on the cameras' own scores, not on list order.
    order = sorted(ranked, key=lambda c: (-score(c, ranked[c][0]) if ranked[c] else 0, c))
    room = dict(workers)
    out: dict[str, str | None] = {}
    for cid in order:
        out[cid] = None
        for worker in ranked[cid]:
            if room[worker] > 0:
                room[worker] -= 1
                out[cid] = worker
                break
    return out
