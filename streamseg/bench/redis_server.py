"""A Redis for a benchmark: the pipeline's own when it answers, else a throw-away local one."""

from __future__ import annotations

import contextlib
import logging
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator

from streamseg.publish.redis_config import RedisConfig

__all__ = ["redis_for_bench"]

log = logging.getLogger("streamseg.bench")


@contextlib.contextmanager
def redis_for_bench(cfg: RedisConfig) -> Iterator[RedisConfig]:
    """``cfg`` when its Redis answers, else one for a throw-away local redis-server."""
    import redis

    from streamseg.publish.connect import redis_client

    try:
        redis_client(cfg, socket_timeout=1.0).ping()
        yield cfg
        return
    except redis.RedisError:
        pass
    exe = shutil.which("redis-server")
    if exe is None:
        raise RuntimeError(
            "no Redis answers at the pipeline's url and redis-server is not installed"
        )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        args = [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", tmp]
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            local = f"redis://127.0.0.1:{port}/0"
            _wait_redis(local)
            log.info("bench: started a temporary redis-server on port %d", port)
            yield RedisConfig(url=local, stream_prefix=cfg.stream_prefix, maxlen=cfg.maxlen)
        finally:
            proc.terminate()
            proc.wait(10)


def _wait_redis(url: str, timeout: float = 10.0) -> None:
    import redis

    from streamseg.publish.connect import redis_client

    deadline = time.monotonic() + timeout
    while True:
        try:
            redis_client(RedisConfig(url=url), socket_timeout=1).ping()
            return
        except redis.RedisError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
