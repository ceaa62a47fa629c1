"""Runtime: the stage protocol, bounded queues with drop policies, the runner and shutdown."""
