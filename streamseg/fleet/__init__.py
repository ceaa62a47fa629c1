"""A fleet: ``serve`` workers that share the cameras through the Redis they publish to.

* ``config``: the ``fleet:`` section (name, capacity, lease seconds);
* ``placement``: rendezvous hashing of cameras over the live workers, within capacity;
* ``store``: every Redis key of the fleet (heartbeats, camera list, leases);
* ``worker``: ``FleetWorker``, one process's membership: heartbeat, leases,
  the cameras it starts and stops through ``host.CameraHost`` (the service).

No consensus of our own: a camera's lease is a Redis key that expires, taken
only where none exists, renewed and released only by its holder (docs/fleet.md).
Importing this package loads nothing heavy.
"""
