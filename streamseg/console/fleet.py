"""One console for a fleet: other workers' cameras and alerts, fetched from their owners.

In a fleet (docs/fleet.md) every worker's console lists every camera; a
camera another worker serves is shown through that worker: its live view
(``live.mjpg``, ``frame.jpg``) and its alerts' snapshots and clips are
fetched from the owner's console (the address in its heartbeat) and passed
on as they come (:func:`proxy`), with the viewer's token. A request passed
on carries ``X-Streamseg-Fleet-Hop``, and is never passed on again (two
workers that briefly disagree on an owner cannot bounce it between them).

The fleet's alerts come from the Redis alert stream every worker publishes
to; those of other workers are listed beside this worker's own, with ids
``WORKER:N`` (``N``: the owner's own event id, from its snapshot's file
name), so that their snapshot is the owner's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Protocol

from aiohttp import web

from streamseg.console.web import http_error

__all__ = ["HOP", "FleetPeers", "matches", "proxy", "remote_event", "split_event_id"]

HOP = "X-Streamseg-Fleet-Hop"
_PASSED_ON = ("Content-Type", "Cache-Control", "X-Frame-Seq", "Content-Disposition")
_SNAPSHOT_NAME = re.compile(r"(?:^|/)(\d{8})-[^/]*\.jpg$")


class FleetPeers(Protocol):
    """The rest of the fleet, as one worker sees it (``streamseg.fleet.view.FleetView``)."""

    def console_of(self, camera_id: str) -> str | None:
        """The console address of the worker that serves ``camera_id``, when another does."""
        ...

    def worker_console(self, worker: str) -> str | None:
        """The console address another worker announced."""
        ...

    def alerts(self, count: int = 500) -> list[dict[str, Any]]:
        """Other workers' alerts as published, newest first."""
        ...


def remote_event(msg: Mapping[str, Any]) -> dict[str, Any]:
    """The console's event (``EventLog.list``'s shape) of an alert another worker
    published: id ``WORKER:N``, its snapshot through this console, ``remote``."""
    out = {k: v for k, v in msg.items() if k != "mask_rle"}
    worker = str(msg.get("worker"))
    found = _SNAPSHOT_NAME.search(str(msg.get("snapshot") or ""))
    n = int(found.group(1)) if found else None
    ident = f"{worker}:{n if n is not None else msg.get('frame_seq')}:{msg.get('rule')}"
    out.update(
        id=f"{worker}:{n}" if n is not None else ident,
        snapshot=f"/api/events/{worker}:{n}/snapshot.jpg" if n is not None else None,
        snapshot_path=msg.get("snapshot"),
        rule_config=None,
        path=[],
        clip=None,
        clip_ready=False,
        remote=True,
    )
    return out


def matches(event: Mapping[str, Any], filters: Mapping[str, Any]) -> bool:
    """Whether ``event`` passes ``EventLog.list``'s filters (camera, rule, kind, label,
    since, until; ``None``: any)."""
    keys = {"camera": "camera_id", "rule": "rule", "kind": "kind", "label": "label_name"}
    for name, key in keys.items():
        if filters.get(name) is not None and event.get(key) != filters[name]:
            return False
    t = event.get("time", 0)
    since, until = filters.get("since"), filters.get("until")
    return (since is None or t >= since) and (until is None or t <= until)


def split_event_id(eid: str) -> tuple[str, int] | None:
    """``("w1", 7)`` for another worker's event ``w1:7``; ``None`` for one of this worker."""
    worker, sep, n = eid.rpartition(":")
    return (worker, int(n)) if sep and worker and n.isdigit() else None


async def proxy(request: web.Request, console: str, path: str) -> web.StreamResponse:
    """GET ``path`` of the console at ``console`` and pass its reply on as it comes
    (an MJPEG stream frame by frame), with the viewer's token; 503 when it does not
    answer. A request already passed on once is refused (404) instead."""
    import aiohttp

    if request.headers.get(HOP):
        raise http_error(404, "camera", "not served here (passed on from another worker)", None)
    headers = {HOP: "1"}
    token = request.query.get("token")
    if request.headers.get("Authorization"):
        headers["Authorization"] = request.headers["Authorization"]
    elif token:
        headers["Authorization"] = f"Bearer {token}"
    query = {k: v for k, v in request.query.items() if k != "token"}
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=3, sock_read=30)
    response: web.StreamResponse | None = None
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.get(console.rstrip("/") + path, headers=headers, params=query) as up,
        ):
            response = web.StreamResponse(
                status=up.status, headers={k: up.headers[k] for k in _PASSED_ON if k in up.headers}
            )
            await response.prepare(request)
            async for chunk in up.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
    except (TimeoutError, aiohttp.ClientError) as exc:
        if response is None:
            raise http_error(
                503,
                "camera",
                f"the worker that serves it ({console}) did not answer: {type(exc).__name__}",
                "fleet.console_url must be reachable from this worker",
            ) from None
    except ConnectionResetError:  # the viewer left
        pass
    return response if response is not None else web.Response(status=204)
