"""Redis and MQTT connections share one url/TLS/credentials check (``ServerConnection``),
and their delivery settings reach the sink as one object (``DeliveryOptions.of``)."""

from __future__ import annotations

import dataclasses

import pytest
from pydantic import ValidationError

from streamseg.backoff import ReconnectPolicy
from streamseg.ingest.config import ReconnectConfig
from streamseg.publish.connection import ServerConnection, TLSConfig
from streamseg.publish.delivery import DeliveryOptions
from streamseg.publish.redis_config import RedisConfig, RedisTLSConfig
from streamseg.publish.sink_config import MQTTSinkConfig, RedisSinkConfig


def redis(url: str, **kw: object) -> RedisConfig:
    return RedisConfig(url=url, **kw)


def mqtt(url: str, **kw: object) -> MQTTSinkConfig:
    return MQTTSinkConfig(type="mqtt", name="m", url=url, **kw)


@pytest.mark.parametrize(
    ("make", "url", "message"),
    [
        (redis, "http://h", "redis url must start with redis://, rediss:// (TLS) or unix:// "
                            "(e.g. redis://127.0.0.1:6379/0)"),
        (redis, "redis://", "redis url has no host (e.g. redis://127.0.0.1:6379/0)"),
        (redis, "redis://h:99999", "malformed redis url (Port out of range 0-65535)"),
        (redis, "redis://h/zero", "redis url database must be a number, got 'zero'"),
        (mqtt, "redis://h", "mqtt url must start with mqtt:// or mqtts:// (TLS) "
                            "(e.g. mqtt://127.0.0.1:1883)"),
        (mqtt, "mqtt://", "mqtt url has no host (e.g. mqtt://127.0.0.1:1883)"),
        (mqtt, "mqtt://h:99999", "malformed mqtt url (Port out of range 0-65535)"),
        (mqtt, "mqtt://u:pw@h", "put MQTT credentials in username/password (${ENV}), not in "),
    ],
)  # fmt: skip
def test_each_form_names_its_problem(make: object, url: str, message: str) -> None:
    with pytest.raises(ValidationError) as info:
        make(url)  # type: ignore[operator]
    assert message in str(info.value)


def test_what_both_connections_share() -> None:
    r = RedisSinkConfig(type="redis", name="c", url="rediss://h:6380/1", password="pw")
    m = mqtt("mqtt://h", password="", tls={"enabled": True, "ca_file": "ca.pem"})
    for section in (r, m, redis("unix:///run/redis.sock")):
        assert isinstance(section, ServerConnection)
    assert r.use_tls and r.secrets() == ["pw"]
    assert m.use_tls and m.password is None and m.secrets() == []  # an empty ${ENV}: unset
    assert m.host_port == ("h", 8883)
    assert not mqtt("mqtt://h").use_tls and mqtt("mqtts://h").use_tls
    assert RedisTLSConfig is TLSConfig and isinstance(m.tls, TLSConfig)


def test_delivery_is_one_object_from_the_section() -> None:
    section = mqtt("mqtt://h", buffer_max_messages=7, max_batch=3, reconnect_initial=0.5)
    assert DeliveryOptions.of(section) == DeliveryOptions(
        buffer_max=7, max_batch=3, reconnect=ReconnectPolicy(initial=0.5, max_delay=10.0)
    )
    assert DeliveryOptions.of(redis("redis://h")) == DeliveryOptions()  # the same defaults
    # the sinks' waits are the cameras' policy (streamseg.backoff), from the section's fields
    fast = DeliveryOptions.of(mqtt("mqtt://h", reconnect_initial=0.5, reconnect_max=3.0))
    waits = [dataclasses.replace(fast.reconnect, jitter=0).delay(n) for n in range(5)]
    assert waits == [0.5, 1.0, 2.0, 3.0, 3.0]
    # a maximum under the first wait caps every wait, as the section allows
    capped = DeliveryOptions.of(mqtt("mqtt://h", reconnect_initial=5.0, reconnect_max=1.0))
    assert capped.reconnect.delay(0) == pytest.approx(1.0, rel=0.21)


def test_the_camera_reconnect_policy_is_built_once() -> None:
    policy = ReconnectConfig(initial_backoff=1.5, max_backoff=4.0, jitter=1.0).policy()
    assert (policy.initial, policy.max_delay, policy.jitter) == (1.5, 4.0, 0.99)
    assert ReconnectConfig().policy().delay(0) == pytest.approx(0.5, rel=0.21)
    # the timeouts travel with it, one object from the camera's section to the source
    conn = ReconnectConfig(connect_timeout=2.0, read_timeout=7.0).connection()
    assert (conn.connect_timeout, conn.read_timeout) == (2.0, 7.0)
    assert conn.reconnect == ReconnectConfig().policy()
