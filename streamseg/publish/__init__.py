"""Publish: detections and alerts to Redis Streams as versioned JSON.

* ``encode``: the message bodies (schemas in ``streamseg/schemas/``);
* ``publisher.RedisPublisher``: pipelined XADD, buffering through outages;
* ``stage.PublishStage``: the pipeline stage;
* ``connect``: a redis-py client from the ``redis:`` section.
"""
