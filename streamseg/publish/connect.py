"""The one way streamseg opens a Redis client: from a ``redis:`` section.

The publisher, the hot-swap listener, ``subscribe``, ``replay`` and ``swap``
all call :func:`redis_client`, so the url, the credentials (usually
``${REDIS_PASSWORD}`` from the environment) and the TLS files (a private
CA, a client certificate for mutual TLS) mean the same thing everywhere.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from streamseg.publish.redis_config import RedisConfig

if TYPE_CHECKING:
    import redis

__all__ = ["redis_client"]


def redis_client(
    cfg: RedisConfig, *, socket_timeout: float | None = None, retries: int = 0
) -> redis.Redis:
    """A redis-py client for ``cfg``; nothing is connected until the first command.

    ``cfg.username``/``cfg.password`` override credentials in the url.
    ``cfg.tls.enabled`` (or a ``rediss://`` url) wraps the connection in
    TLS, verified against ``cfg.tls.ca_file`` (the system's CAs when unset)
    unless ``cfg.tls.verify`` is off; ``cert_file``/``key_file`` are the
    client's certificate for servers that require one.

    Args:
        socket_timeout: seconds per command and per connection attempt
            (default ``cfg.socket_timeout``); a blocking read (``XREAD
            BLOCK``) needs more than its block time.
        retries: redis-py's own retries of a failed command; 0 raises at
            once, so the caller runs its own backoff.
    """
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    url = cfg.url
    if cfg.use_tls and url.startswith("redis://"):
        url = "rediss://" + url.removeprefix("redis://")
    timeout = cfg.socket_timeout if socket_timeout is None else socket_timeout
    kwargs: dict[str, Any] = {
        "socket_timeout": timeout,
        "socket_connect_timeout": timeout,
        "retry": Retry(NoBackoff(), retries),
        "health_check_interval": 0,
    }
    if cfg.username is not None:
        kwargs["username"] = cfg.username
    if cfg.password is not None:
        kwargs["password"] = cfg.password.get_secret_value()
    if url.startswith("rediss://"):
        t = cfg.tls
        kwargs.update(
            ssl_ca_certs=t.ca_file,
            ssl_certfile=t.cert_file,
            ssl_keyfile=t.key_file,
            ssl_cert_reqs="required" if t.verify else "none",
            ssl_check_hostname=t.verify,
        )
    return redis.Redis.from_url(url, **kwargs)
