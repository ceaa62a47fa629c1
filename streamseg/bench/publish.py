"""How fast messages are encoded and written to Redis, per core; prints JSON.

    python -m streamseg.bench.publish [--redis URL] [--messages N] [--objects K]

* ``encode``: ``dumps`` of detections messages of ``K`` instances each (boxes,
  scores, labels, track ids and a COCO RLE mask string per instance, as a
  1080p frame gives), messages/s of one thread;
* ``sink``: ``RedisStreamsSink`` writing ``N`` such messages (already
  encoded) to a real Redis, from ``submit`` to the last acknowledgement:
  messages/s of wall time and per CPU second of this process (the writer
  thread plus the caller: "per core");
* ``redis_benchmark``: ``redis-benchmark -t xadd`` on the same server, when
  installed: what a C client gets over the same loopback (its ``-P`` is the
  pipeline depth, set to the sink's ``max_batch``).

A temporary redis-server is started when no ``--redis`` is given.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from streamseg.publish.connect import redis_client
from streamseg.publish.encode import dumps
from streamseg.publish.redis_config import RedisConfig
from streamseg.publish.redis_streams import build_sink
from streamseg.publish.sink import Message
from streamseg.streams import detections_stream

__all__ = ["bench_encode", "bench_sink", "main", "sample_message"]


def sample_message(objects: int, seq: int = 0, rng: random.Random | None = None) -> dict[str, Any]:
    """A detections message like one of a 1080p frame with ``objects`` instances."""
    rng = rng or random.Random(seq)
    instances = []
    for i in range(objects):
        x, y = rng.uniform(0, 1700), rng.uniform(0, 900)
        w, h = rng.uniform(20, 200), rng.uniform(20, 180)
        counts = "".join(
            rng.choice("0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmno")
            for _ in range(int(h * 1.5))
        )
        instances.append(
            {
                "track_id": i + 1,
                "label": rng.randint(1, 80),
                "label_name": "person",
                "score": round(rng.random(), 5),
                "box": [round(x, 2), round(y, 2), round(x + w, 2), round(y + h, 2)],
                "mask": {"size": [1080, 1920], "counts": counts},
            }
        )
    now = time.time()
    return {
        "schema_version": 1,
        "type": "detections",
        "camera": "cam0",
        "seq": seq,
        "pts": seq / 15,
        "capture_time": now,
        "camera_time": None,
        "published_time": now + 0.05,
        "image": {"height": 1080, "width": 1920},
        "model": {"arch": "maskrcnn_r50_fpn"},
        "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "instances": instances,
    }


def bench_encode(objects: int, messages: int = 2000) -> dict[str, Any]:
    """``dumps`` throughput on ``messages`` detections messages (one thread)."""
    rng = random.Random(0)
    bodies = [sample_message(objects, i, rng) for i in range(200)]
    n = 0
    size = 0
    t0, c0 = time.perf_counter(), time.process_time()
    while n < messages:
        for body in bodies:
            size += len(dumps(body))
        n += len(bodies)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {
        "objects": objects,
        "messages": n,
        "bytes_per_message": round(size / n),
        "messages_per_s": round(n / wall),
        "messages_per_cpu_s": round(n / cpu),
        "us_per_message": round(wall / n * 1e6, 2),
    }


def bench_sink(url: str, objects: int, messages: int, max_batch: int = 256) -> dict[str, Any]:
    """``RedisStreamsSink`` throughput: ``messages`` pre-encoded messages to ``url``."""
    cfg = RedisConfig(url=url, stream_prefix="bench", maxlen=10_000, max_batch=max_batch,
                      buffer_max_messages=messages + 1)  # fmt: skip
    redis_client(cfg).delete(detections_stream(cfg.stream_prefix, "cam0"))
    data = [dumps(sample_message(objects, i)) for i in range(100)]
    batch = [Message("detections", "cam0", data[i % len(data)]) for i in range(messages)]
    sink = build_sink(cfg, name="bench")
    sink.start()
    if not sink.flush(10):
        raise RuntimeError(f"Redis at {url} does not answer")
    t0, c0 = time.perf_counter(), time.process_time()
    for start in range(0, messages, 64):  # the publish thread hands over groups of frames
        sink.submit(batch[start : start + 64])
    ok = sink.flush(300)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    health = sink.health()
    sink.close()
    if not ok or health.published != messages:
        raise RuntimeError(f"only {health.published} of {messages} messages were written")
    return {
        "objects": objects,
        "messages": messages,
        "bytes_per_message": round(sum(len(d) for d in data) / len(data)),
        "max_batch": max_batch,
        "messages_per_s": round(messages / wall),
        "messages_per_cpu_s": round(messages / cpu),
    }


def redis_benchmark(url: str, messages: int, pipeline: int, size: int) -> dict[str, Any] | None:
    """``redis-benchmark`` running ``XADD`` of a ``size``-byte value (one connection,
    ``-P pipeline``, trimmed like the sink), or ``None`` when it is not installed.

    ``-t xadd`` needs redis-benchmark 7.2; the same command given explicitly
    works with every version.
    """
    exe = shutil.which("redis-benchmark")
    if exe is None:
        return None
    port = url.rsplit(":", 1)[1].split("/")[0]
    options = ["-p", port, "-n", str(messages), "-c", "1", "-P", str(pipeline), "--csv"]
    command = ["XADD", "bench:rb", "MAXLEN", "~", "10000", "*", "data", "x" * size]
    out = subprocess.run([exe, *options, *command], capture_output=True, text=True, check=True)
    rows = [line.split('","') for line in out.stdout.strip().splitlines()]
    row = next(r for r in rows if r[0].strip('"').startswith("XADD"))
    shown = " ".join([*options, *command[:-1], f"<{size} bytes>"])
    return {"command": f"redis-benchmark {shown}", "messages_per_s": round(float(row[1]))}


@contextlib.contextmanager
def _redis(url: str | None) -> Iterator[str]:
    if url is not None:
        yield url
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        args = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", tmp]  # fmt: skip
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            url = f"redis://127.0.0.1:{port}/0"
            deadline = time.monotonic() + 10
            while True:
                try:
                    redis_client(RedisConfig(url=url), socket_timeout=1).ping()
                    break
                except Exception:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
            yield url
        finally:
            proc.terminate()
            proc.wait(10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--redis", help="a Redis to write to (default: a temporary redis-server)")
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--objects", type=int, default=10)
    args = parser.parse_args(argv)
    out: dict[str, Any] = {"encode": [bench_encode(k) for k in (args.objects, 50)]}
    with _redis(args.redis) as url:
        out["sink"] = bench_sink(url, args.objects, args.messages)
        size = out["sink"]["bytes_per_message"]
        out["redis_benchmark"] = redis_benchmark(url, args.messages, 256, size)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
