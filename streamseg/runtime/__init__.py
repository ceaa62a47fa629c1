"""Runtime: the stage threads, bounded queues with drop policies, batching, shutdown.

* ``queues``: ``CameraQueues`` (live: drop oldest; file: block) and ``StageQueue``;
* ``pipeline.Pipeline``: ingest -> batch -> segment -> track -> publish threads;
* ``service.Service``: a pipeline with HTTP health, telemetry, signals, status;
* ``factory``: pipeline.yaml sections -> stage keyword arguments.
"""
