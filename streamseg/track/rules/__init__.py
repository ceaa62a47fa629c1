"""Alert: zone, line, dwell and crowding rules that turn tracks into Events."""
