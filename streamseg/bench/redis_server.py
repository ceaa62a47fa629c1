"""A throw-away local redis-server, for benchmarks, scripts and tests.

``RedisServer`` runs ``redis-server`` on 127.0.0.1 and a free port. It can
be stopped and started again on the same port (a Redis going away), speak
TLS only, require a password, and keep its data across a restart
(``persist``: an append-only file synced on every write).
``redis_for_bench`` gives a benchmark the pipeline's own Redis when it
answers, else one of these.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streamseg.bench.ports import end_process, free_port, wait_for_port
from streamseg.publish.redis_config import RedisConfig

__all__ = ["RedisServer", "TLSFiles", "redis_for_bench"]

log = logging.getLogger("streamseg.bench")


@dataclass(frozen=True)
class TLSFiles:
    """PEM files of a throw-away CA, a server certificate for 127.0.0.1, a client one."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


class RedisServer:
    """A redis-server subprocess bound to 127.0.0.1 on a fixed free port.

    With ``tls``, it listens for TLS only (``rediss://``); ``client_certs``
    makes it require a client certificate signed by the same CA. With
    ``persist``, it keeps its data across stop()/start() (an append-only
    file synced on every write, in ``workdir``).
    """

    def __init__(
        self,
        workdir: Path,
        password: str | None = None,
        tls: TLSFiles | None = None,
        client_certs: bool = False,
        persist: bool = False,
    ) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            raise RuntimeError(
                "redis-server is not installed: run scripts/setup.sh "
                "or `apt-get install redis-server`"
            )
        self.exe = exe
        self.port = free_port()
        self.workdir = workdir
        self.password = password
        self.tls = tls
        self.client_certs = client_certs
        self.persist = persist
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        scheme = "rediss" if self.tls else "redis"
        return f"{scheme}://{auth}127.0.0.1:{self.port}/0"

    def _ports(self) -> list[str]:
        if not self.tls:
            return ["--port", str(self.port)]
        return [
            "--port", "0", "--tls-port", str(self.port),
            "--tls-cert-file", str(self.tls.server_cert),
            "--tls-key-file", str(self.tls.server_key),
            "--tls-ca-cert-file", str(self.tls.ca),
            "--tls-auth-clients", "yes" if self.client_certs else "no",
        ]  # fmt: skip

    def start(self) -> None:
        args = [self.exe, *self._ports(), "--bind", "127.0.0.1", "--save", ""]
        args += ["--appendonly", "yes" if self.persist else "no", "--appendfsync", "always"]
        args += ["--dir", str(self.workdir)]
        if self.password:
            args += ["--requirepass", self.password]
        self.proc = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        wait_for_port(self.port)

    def stop(self) -> None:
        end_process(self.proc)
        self.proc = None

    def client(self) -> Any:
        """A redis-py client (bytes replies) for this server."""
        import redis

        if self.tls is None:
            return redis.Redis.from_url(self.url, decode_responses=False)
        return redis.Redis.from_url(
            self.url,
            decode_responses=False,
            ssl_ca_certs=str(self.tls.ca),
            ssl_certfile=str(self.tls.client_cert),
            ssl_keyfile=str(self.tls.client_key),
        )


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
    if shutil.which("redis-server") is None:
        raise RuntimeError(
            "no Redis answers at the pipeline's url and redis-server is not installed"
        )
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(Path(tmp))
        server.start()
        try:
            _wait_redis(server)
            log.info("bench: started a temporary redis-server on port %d", server.port)
            yield RedisConfig(url=server.url, stream_prefix=cfg.stream_prefix, maxlen=cfg.maxlen)
        finally:
            server.stop()


def _wait_redis(server: RedisServer, timeout: float = 10.0) -> None:
    import redis

    deadline = time.monotonic() + timeout
    while True:
        try:
            server.client().ping()
            return
        except redis.RedisError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
