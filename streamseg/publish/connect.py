"""Opening a Redis client from the ``redis:`` section (credentials, TLS, timeouts)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import redis

__all__ = ["redis_client"]


def redis_client(
    *,
    url: str,
    username: str | None = None,
    password: str | None = None,
    tls: bool = False,
    ca_file: str | None = None,
    cert_file: str | None = None,
    key_file: str | None = None,
    verify: bool = True,
    socket_timeout: float = 5.0,
    retries: int = 0,
) -> redis.Redis:
    """A redis-py client; nothing is connected until the first command.

    ``username``/``password`` override credentials in ``url``. ``tls`` (or a
    ``rediss://`` url) wraps the connection in TLS, verified against
    ``ca_file`` unless ``verify`` is off. ``retries=0``: a failed command
    raises at once, so the caller runs its own backoff.
    """
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    if tls and url.startswith("redis://"):
        url = "rediss://" + url.removeprefix("redis://")
    kwargs: dict[str, Any] = {
        "socket_timeout": socket_timeout,
        "socket_connect_timeout": socket_timeout,
        "retry": Retry(NoBackoff(), retries),
        "health_check_interval": 0,
    }
    if username is not None:
        kwargs["username"] = username
    if password is not None:
        kwargs["password"] = password
    if url.startswith("rediss://"):
        kwargs.update(
            ssl_ca_certs=ca_file,
            ssl_certfile=cert_file,
            ssl_keyfile=key_file,
            ssl_cert_reqs="required" if verify else "none",
            ssl_check_hostname=verify,
        )
    return redis.Redis.from_url(url, **kwargs)


def client_from_config(cfg: Any, *, retries: int = 0) -> redis.Redis:
    """``redis_client`` from a ``RedisConfig``."""
    return redis_client(
        url=cfg.url,
        username=cfg.username,
        password=None if cfg.password is None else cfg.password.get_secret_value(),
        tls=cfg.use_tls,
        ca_file=cfg.tls.ca_file,
        cert_file=cfg.tls.cert_file,
        key_file=cfg.tls.key_file,
        verify=cfg.tls.verify,
        socket_timeout=cfg.socket_timeout,
        retries=retries,
    )
