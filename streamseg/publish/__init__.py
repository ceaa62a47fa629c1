"""Publish: detections and alerts to sinks (Redis Streams, MQTT) as versioned JSON.

* ``encode``: the message bodies (schemas in ``streamseg/schemas/``) and
  ``MessageEncoder``, which encodes each message once for every sink;
* ``sink``: the ``Sink`` interface; ``buffered.BufferedSink``, the outage buffer,
  writer thread and reconnects that every sink shares;
* ``redis_streams.RedisStreamsSink``: pipelined XADD to Redis Streams;
* ``mqtt.MQTTSink``: one topic per camera and one for alerts on an MQTT broker;
* ``sinks.build_sinks``: the sinks of a pipeline.yaml (``redis:`` and ``sinks:``),
  from the registry ``streamseg.publish.sink_config.SINK_TYPES``;
* ``connect.redis_client``: the one Redis client factory (``redis:`` section);
* the sections publish owns: ``redis_config`` (``redis:``), ``sink_config``
  (``sinks:`` entries and their registry), ``connection`` (what both share).
"""
