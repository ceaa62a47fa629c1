"""Re-exports ``streamseg.track.alerts`` at its old path ``streamseg.config.alerts``.

New code imports ``streamseg.track.alerts``; the stages never import this package.
"""

from __future__ import annotations

from streamseg.track.alerts import (
    ALERT_KINDS,
    RULE_KINDS,
    AlertsConfig,
    CameraAlerts,
    RuleConfig,
)

__all__ = ["ALERT_KINDS", "RULE_KINDS", "AlertsConfig", "CameraAlerts", "RuleConfig"]
