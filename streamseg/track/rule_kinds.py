"""The rule-kind registry: :data:`RULE_KINDS`, the one list of the ``rules:`` entries' types.

Each row (:class:`RuleKind`) holds the config model of a ``rules:`` entry
(``streamseg/track/rule_config.py``), the ``"module:Class"`` of the rule in
:mod:`streamseg.track.rules` that runs it (imported when a camera's rules
are built), what each alert ``kind`` it publishes means, and what the rest
of streamseg asks of the kind: whether its rules read masks (``masks``:
``replay`` decodes them), need the model's region (stuff) classes
(``regions``: the class checks) or count crossings of a line (``counts``:
the tracking stage shows them on the overlays).
``streamseg.track.alerts`` builds ``RuleConfig`` (the ``type``-tagged union)
and ``ALERT_KINDS`` from it when it is imported, which closes the table.

Adding a rule kind: its config model, its rule class (one file under
``streamseg/track/rules/``) and one row here, or, from outside the package,
``register_rule_kind(RuleKind(...))`` in a plug-in (``streamseg.plugins``).
This module imports no torch and no ``alerts``, so a plug-in may import it.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping

from streamseg.registry import Table
from streamseg.track.rule_config import (
    CoverageRule,
    CrowdingRule,
    DwellRule,
    LineRule,
    RegionRule,
    RuleFields,
    ZoneRule,
)

__all__ = ["RULE_KINDS", "RuleKind", "kind_of", "register_rule_kind"]


@dataclasses.dataclass(frozen=True)
class RuleKind:
    """One rule kind: its config model, the ``"module:Class"`` of the rule that runs it
    and what each alert ``kind`` it publishes means.

    The rule class has ``from_config(rule, context)`` (see
    :class:`streamseg.track.rules.context.RuleContext`). ``events`` maps each
    alert kind to one line for the docs; its keys must be the kinds the
    config model's ``events`` field allows (a rule without one publishes a
    single kind named after its ``type``).

    What others ask of the kind (all off by default):

    * ``masks``: its rules read the tracks' masks whatever their options
      (``replay`` decodes recorded masks for it; an entry's own
      :meth:`RuleFields.uses_masks` adds per-entry reasons);
    * ``regions``: its ``region`` must be a class the model gives as a
      region (stuff) class (the class checks, ``streamseg.track.rules.checks``);
    * ``counts``: its rule counts crossings of a line, told by the rule's
      ``crossings()`` as ``(line, in, out)``, which the overlays show.
    """

    config: type[RuleFields]
    engine: str
    events: Mapping[str, str]
    masks: bool = False
    regions: bool = False
    counts: bool = False

    def __post_init__(self) -> None:
        if tuple(self.events) != self.kinds:
            raise TypeError(
                f"rule kind {self.type!r}: events {tuple(self.events)} must be its kinds "
                f"{self.kinds}, in that order"
            )

    @property
    def type(self) -> str:
        """The ``type:`` value that selects this kind (the config model's ``type`` literal)."""
        (value,) = typing.get_args(self.config.model_fields["type"].annotation)
        return str(value)

    @property
    def kinds(self) -> tuple[str, ...]:
        """The alert kinds this rule publishes (the ``events:`` choices, else its type)."""
        field = self.config.model_fields.get("events")
        if field is None:
            return (self.type,)
        (literal,) = typing.get_args(field.annotation)  # list[Literal[...]]
        return tuple(str(k) for k in typing.get_args(literal))


def _by_type(*kinds: RuleKind) -> Table[RuleKind]:
    return Table("rule kind", {kind.type: kind for kind in kinds})


_ENGINE = "streamseg.track.rules"

RULE_KINDS: Table[RuleKind] = _by_type(
    RuleKind(
        ZoneRule,
        f"{_ENGINE}.zones:ZoneRule",
        {
            "enter": "a track went into the zone (`extra.initial` when first seen inside)",
            "exit": "a track left the zone (`extra.reason`: `lost` when its track was dropped)",
        },
    ),
    RuleKind(
        LineRule,
        f"{_ENGINE}.lines:LineRule",
        {
            "line_in": "a track crossed the line into its `in_side`; `count`: such crossings "
            "so far",
            "line_out": "a track crossed the line the other way; `count`: such crossings so far",
        },
        counts=True,
    ),
    RuleKind(
        DwellRule,
        f"{_ENGINE}.zones:DwellRule",
        {"dwell": "a track stayed in the zone for `seconds` (`extra.dwell_seconds`)"},
    ),
    RuleKind(
        CrowdingRule,
        f"{_ENGINE}.zones:CrowdingRule",
        {
            "crowding": "more than `max_occupancy` tracks in the zone; `count`: the occupancy",
            "crowding_end": "the occupancy fell to `clear_occupancy` or below; `count`: the "
            "occupancy, `extra.seconds`: how long it was crowded",
        },
    ),
    RuleKind(
        RegionRule,
        f"{_ENGINE}.regions:RegionRule",
        {
            "on_region": "a track's surroundings were `extra.region` (at least `min_fraction` "
            "of a ring around its mask, `extra.fraction`) for `seconds`",
            "off_region": "a track that was on the region left it (`extra.reason`: `lost` "
            "when its track was dropped); `extra.seconds`: how long it was on",
        },
        masks=True,
        regions=True,
    ),
    RuleKind(
        CoverageRule,
        f"{_ENGINE}.regions:CoverageRule",
        {
            "coverage": "`extra.region` covered more (`above`) or less (`below`) than the "
            "share of the zone for `seconds`; `extra.fraction`: the share",
            "coverage_end": "the share came back past the bound; `extra.seconds`: how long "
            "it lasted",
        },
        masks=True,
    ),
)


def register_rule_kind(kind: RuleKind) -> None:
    """Add ``kind`` to :data:`RULE_KINDS` under its ``type`` (from a plug-in, before
    ``streamseg.track.alerts`` is imported; ``streamseg.registry.RegistryClosed`` after)."""
    RULE_KINDS.register(kind.type, kind)


def kind_of(rule: RuleFields) -> RuleKind:
    """The row of ``rule`` (a ``rules:`` entry): the kind whose config model it is;
    ``ValueError`` naming the known types when none is."""
    for kind in RULE_KINDS.values():
        if type(rule) is kind.config:
            return kind
    known = ", ".join(RULE_KINDS)
    raise ValueError(f"rule {rule.name!r}: unknown rule type; known: {known}")
