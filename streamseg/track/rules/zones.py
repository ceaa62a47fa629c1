"""Zone rules: ``enter`` / ``exit``, ``dwell`` and ``crowding``.

Per-track state lives in dicts keyed by track id; geometry is vectorised
over the frame's tracks (``Membership.step``) and Python only loops over
tracks whose state changed. Rules that would keep the same inside states
(same zone, test and filters) share one ``ZoneState``, stepped once per
frame. State persists while a track is lost: a track
hidden inside a zone and found again stays inside (no exit/enter pair).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from streamseg.track.rules.base import TIME_EPS, RuleBase
from streamseg.track.rules.membership import IN, UNKNOWN
from streamseg.track.view import TrackView
from streamseg.types import Event

if TYPE_CHECKING:
    from streamseg.track.rules.context import RuleContext
    from streamseg.track.rules.zone_state import ZoneState

__all__ = ["CrowdingRule", "DwellRule", "ZoneRule"]

I64 = NDArray[np.int64]


class _ZoneTracking(RuleBase):
    """Keeps ``since`` (id -> time inside began); the inside states are ``state``'s."""

    def __init__(self, *, zone: str, state: ZoneState, **common: Any) -> None:
        super().__init__(**common)
        self.zone = zone
        self.state = state
        self.membership = state.membership
        self.inside = state.inside
        self.since: dict[int, float] = {}

    def _advance(self, view: TrackView) -> tuple[I64, NDArray[np.int8], NDArray[np.bool_], I64]:
        """The watched tracks' positions, previous and new inside states, and which changed.

        Returns ``idx (K,)`` positions in ``view``, ``prev (K,)`` (-1/0/1),
        ``now_in (K,)`` bool and ``moved``: positions into ``idx`` whose
        state changed (first sightings included).
        """
        idx = self.eligible(view)
        prev, now_in, moved = self.state.advance(view, idx)
        return idx, prev, now_in, moved

    def _drop_removed(self, view: TrackView) -> list[tuple[int, int, float]]:
        """Forget removed tracks; return ``(position in removed, id, since)`` of those inside."""
        if len(view.removed_ids) == 0:
            return []
        out = []
        was = self.state.drop(view)
        for r, tid in enumerate(view.removed_ids.tolist()):
            since = self.since.pop(tid, view.frame.time)
            if was[r] == IN:
                out.append((r, tid, since))
        self.forget(view.removed_ids)
        return out

    def occupancy(self) -> tuple[str, int]:
        return self.zone, self.inside.count(IN)


class ZoneRule(_ZoneTracking):
    """``enter`` and ``exit`` events of ``zone``.

    Args:
        events: the kinds to emit (``enter``, ``exit``).
        initial: ``flag`` (a track first seen inside gets an ``enter`` with
            ``extra.initial = true``) or ``skip`` (no event for it).
        exit_on_lost: ``exit`` (``extra.reason = "lost"``) when a track
            inside is removed by the tracker.
    """

    def __init__(
        self, *, events: list[str], initial: str, exit_on_lost: bool, **common: Any
    ) -> None:
        super().__init__(**common)
        self.kinds = set(events)
        self.initial = initial
        self.exit_on_lost = exit_on_lost

    @classmethod
    def from_config(cls, rule: Any, context: RuleContext) -> ZoneRule:
        return cls(
            events=list(rule.events),
            initial=rule.initial,
            exit_on_lost=rule.exit_on_lost,
            **context.zone_options(rule),
        )

    def update(self, view: TrackView) -> list[Event]:
        idx, prev, now_in, moved = self._advance(view)
        events: list[Event] = []
        now = view.frame.time
        entering = moved[now_in[moved]]
        leaving = moved[prev[moved] == IN]  # changed, so now out
        if len(entering):
            born = self.membership.born_inside(view, idx[entering]) & (prev[entering] == UNKNOWN)
            for k, initial in zip(entering.tolist(), born.tolist(), strict=True):
                i = int(idx[k])
                tid = int(view.ids[i])
                self.since[tid] = float(view.first_seen[i]) if initial else now
                if initial and self.initial == "skip":
                    continue
                extra = {"initial": True} if initial else {}
                events += self._emit("enter", view, i, extra)
        for k in leaving.tolist():
            i = int(idx[k])
            since = self.since.pop(int(view.ids[i]), now)
            events += self._emit("exit", view, i, {"seconds_inside": round(now - since, 3)})
        for r, _, since in self._drop_removed(view):
            if self.exit_on_lost and "exit" in self.kinds:
                gone = {
                    "reason": "lost",
                    "seconds_inside": round(now - since, 3),
                    "occupancy": self.occupancy()[1],
                }
                events.append(self.removed_event("exit", view, r, zone=self.zone, extra=gone))
        return events

    def _emit(self, kind: str, view: TrackView, i: int, extra: dict[str, Any]) -> list[Event]:
        if kind not in self.kinds or not self.cooled(int(view.ids[i]), kind, view.frame.time):
            return []
        extra["occupancy"] = self.state.seen()
        return [self.event(kind, view, i, zone=self.zone, extra=extra)]


class DwellRule(_ZoneTracking):
    """A ``dwell`` event once a track has been in ``zone`` for ``seconds`` (capture time).

    A track first seen inside counts from its first observation. With
    ``repeat``, further events follow every ``repeat`` seconds of the same
    visit. Time keeps running while the track is lost inside the zone.
    """

    def __init__(self, *, seconds: float, repeat: float | None, **common: Any) -> None:
        super().__init__(**common)
        self.seconds = seconds
        self.repeat = repeat
        self.fired: dict[int, float] = {}  # track id -> dwell time at the last event

    @classmethod
    def from_config(cls, rule: Any, context: RuleContext) -> DwellRule:
        return cls(seconds=rule.seconds, repeat=rule.repeat, **context.zone_options(rule))

    def update(self, view: TrackView) -> list[Event]:
        idx, prev, now_in, moved = self._advance(view)
        now = view.frame.time
        for k in moved[now_in[moved]].tolist():
            i = int(idx[k])
            initial = prev[k] == UNKNOWN and bool(
                self.membership.born_inside(view, idx[k : k + 1])[0]
            )
            self.since[int(view.ids[i])] = float(view.first_seen[i]) if initial else now
        for k in moved[prev[moved] == IN].tolist():
            tid = int(view.ids[int(idx[k])])
            self.since.pop(tid, None)
            self.fired.pop(tid, None)
        events: list[Event] = []
        inside = idx[now_in]
        if len(inside):
            ids = view.ids[inside].tolist()
            since = np.fromiter((self.since.get(t, now) for t in ids), np.float64, len(ids))
            due = (now - since >= self.seconds - TIME_EPS).nonzero()[0]
            for k in due.tolist():
                events += self._maybe_fire(view, int(inside[k]), now - float(since[k]))
        for _, tid, _ in self._drop_removed(view):
            self.fired.pop(tid, None)
        return events

    def _maybe_fire(self, view: TrackView, i: int, dwell: float) -> list[Event]:
        tid = int(view.ids[i])
        last = self.fired.get(tid)
        if last is not None and (self.repeat is None or dwell - last < self.repeat - TIME_EPS):
            return []
        if not self.cooled(tid, "dwell", view.frame.time):
            return []
        self.fired[tid] = dwell
        extra = {"dwell_seconds": round(dwell, 3), "since": view.frame.time - dwell}
        return [self.event("dwell", view, i, zone=self.zone, extra=extra)]


class CrowdingRule(_ZoneTracking):
    """``crowding`` when more than ``max_occupancy`` confirmed tracks are in ``zone``.

    The zone must stay above ``max_occupancy`` for ``min_duration`` seconds;
    ``crowding_end`` follows when the occupancy falls to ``clear_at`` or
    below (hysteresis). ``cooldown`` spaces two ``crowding`` events.
    """

    def __init__(
        self,
        *,
        max_occupancy: int,
        clear_at: int,
        min_duration: float,
        events: list[str],
        **common: Any,
    ) -> None:
        super().__init__(**common)
        self.max_occupancy = max_occupancy
        self.clear_at = clear_at
        self.min_duration = min_duration
        self.kinds = set(events)
        self.crowded_since: float | None = None
        self.above_since: float | None = None
        self.last_event: float | None = None

    @classmethod
    def from_config(cls, rule: Any, context: RuleContext) -> CrowdingRule:
        return cls(
            max_occupancy=rule.max_occupancy,
            clear_at=rule.clear_at,
            min_duration=rule.min_duration,
            events=list(rule.events),
            **context.zone_options(rule),
        )

    def update(self, view: TrackView) -> list[Event]:
        self._advance(view)
        self._drop_removed(view)
        now = view.frame.time
        _, occ = self.occupancy()
        if self.crowded_since is not None:
            if occ > self.clear_at:
                return []
            extra = {"seconds": round(now - self.crowded_since, 3)}
            self.crowded_since = None
            self.above_since = None
            if "crowding_end" not in self.kinds:
                return []
            return [self.event("crowding_end", view, None, zone=self.zone, count=occ, extra=extra)]
        if occ <= self.max_occupancy:
            self.above_since = None
            return []
        self.above_since = now if self.above_since is None else self.above_since
        if now - self.above_since < self.min_duration - TIME_EPS:
            return []
        if self.last_event is not None and now - self.last_event < self.cooldown - TIME_EPS:
            return []
        self.crowded_since = now
        self.last_event = now
        if "crowding" not in self.kinds:
            return []
        ids = self.inside.ids_with(IN).tolist()
        info = {"track_ids": ids, "max_occupancy": self.max_occupancy}
        return [self.event("crowding", view, None, zone=self.zone, count=occ, extra=info)]
