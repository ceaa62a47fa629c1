"""The trainer's standard hooks: metrics, progress bar, evaluation, checkpoints.

Only rank 0 writes files; evaluation runs on rank 0 while the others wait.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from streamseg.train.checkpointing import (
    capture_rng,
    save_model_checkpoint,
    save_training_checkpoint,
)
from streamseg.train.distributed import barrier
from streamseg.train.trainer import HookBase

__all__ = ["CheckpointHook", "EvalHook", "MetricsHook", "MetricsLog"]

log = logging.getLogger("streamseg.train")


class MetricsLog:
    """Appends JSON lines to ``path`` (one object per line, flushed at once).

    Non-finite numbers (the gradient norm of an fp16 step the gradient scaler
    skipped) are written as ``null``: NaN and Infinity are not JSON.
    """

    def __init__(self, path: Path, *, truncate_after: int | None = None) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        if truncate_after is not None and path.exists():
            # A resumed run drops lines from iterations the checkpoint never saw.
            kept = [
                line
                for line in path.read_text(encoding="utf-8").splitlines()
                if line.strip() and json.loads(line).get("iteration", 0) <= truncate_after
            ]
            path.write_text("".join(f"{line}\n" for line in kept), encoding="utf-8")

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(_finite(record), sort_keys=True, allow_nan=False)
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(line + "\n")


def _finite(value: Any) -> Any:
    """``value`` with every NaN / infinite float replaced by ``None``."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


class MetricsHook(HookBase):
    """Every ``period`` iterations: one JSON line, a log line; a tqdm bar throughout.

    The bar is drawn only on a terminal (on stderr); while it is, log lines
    to the console are written through tqdm so that they do not land inside
    the bar's line.

    JSON line fields: ``iteration`` (completed), ``epoch``, ``loss`` and each
    ``loss_*`` (averaged over the period's last iteration's micro-batches and
    processes), ``lr``, ``images_per_s`` (over the period), ``step_time``,
    ``data_time`` (seconds), ``time`` (unix seconds).
    """

    def __init__(
        self,
        metrics_log: MetricsLog | None,
        *,
        period: int,
        epoch_of: Callable[[int], int],
        progress: bool,
    ) -> None:
        self.metrics_log = metrics_log
        self.period = period
        self.epoch_of = epoch_of
        self.progress = progress
        self._bar: Any = None
        self._open = contextlib.ExitStack()
        self._window_start = time.perf_counter()
        self._window_iters = 0

    def before_train(self) -> None:
        if self.progress and self.metrics_log is not None:
            from tqdm import tqdm
            from tqdm.contrib.logging import logging_redirect_tqdm

            t = self.trainer
            # disable=None: no bar when stderr is not a terminal (files, CI
            # logs), where the log lines say the same every log_period.
            self._bar = self._open.enter_context(
                tqdm(
                    total=t.max_iter,
                    initial=t.start_iter,
                    unit="it",
                    dynamic_ncols=True,
                    disable=None,
                )
            )
            if not self._bar.disable:
                self._open.enter_context(logging_redirect_tqdm())
        self._window_start = time.perf_counter()

    def after_step(self) -> None:
        t = self.trainer
        self._window_iters += 1
        elapsed = time.perf_counter() - self._window_start
        ips = self._window_iters * t.images_per_iter / max(elapsed, 1e-9)
        if self._bar is not None:
            self._bar.update(1)
            self._bar.set_postfix(loss=f"{t.metrics['loss']:.4f}", img_s=f"{ips:.2f}")
        if t.iter % self.period and t.iter != t.max_iter:
            return
        record = {
            "iteration": t.iter,
            "epoch": self.epoch_of(t.iter - 1),
            "images_per_s": round(ips, 4),
            "time": round(time.time(), 3),
            **t.metrics,
        }
        self._window_start, self._window_iters = time.perf_counter(), 0
        if self.metrics_log is not None:
            self.metrics_log.write(record)
            log.info(
                "iter %d/%d loss %.4f lr %.5g %.2f img/s",
                t.iter,
                t.max_iter,
                t.metrics["loss"],
                t.metrics["lr"],
                ips,
            )

    def close(self) -> None:
        self._open.close()
        self._bar = None


class EvalHook(HookBase):
    """Evaluate every ``period`` iterations and at the end; keep the best.

    Args:
        evaluate: returns the metrics dict of :func:`evaluate_model`; called
            on rank 0 only.
        metric: ``"segm.AP"``-style path into that dict; higher is better.
        save_best: writes ``best.pth`` (called with the metrics) on rank 0.
    """

    def __init__(
        self,
        evaluate: Callable[[], dict[str, Any]],
        *,
        period: int,
        metric: str,
        is_main: bool,
        metrics_log: MetricsLog | None,
        save_best: Callable[[dict[str, Any]], None],
    ) -> None:
        self.evaluate = evaluate
        self.period = period
        self.metric = metric
        self.is_main = is_main
        self.metrics_log = metrics_log
        self.save_best = save_best
        self.best: float | None = None
        self.best_iteration: int | None = None
        self.latest: dict[str, Any] = {}
        self._last_iter: int | None = None

    def _run(self) -> None:
        t = self.trainer
        self._last_iter = t.iter
        if self.is_main:
            started = time.perf_counter()
            result = self.evaluate()
            self.latest = result
            section, name = self.metric.split(".")
            value = float(result[section][name])
            log.info(
                "eval at iteration %d: %s = %.4f (%s)",
                t.iter,
                self.metric,
                value,
                json.dumps({k: result[k] for k in ("bbox", "segm")}),
            )
            if self.best is None or value > self.best:
                self.best, self.best_iteration = value, t.iter
                self.save_best(result)
            if self.metrics_log is not None:
                self.metrics_log.write(
                    {
                        "iteration": t.iter,
                        "eval": result,
                        "eval_time": round(time.perf_counter() - started, 3),
                        "best": {self.metric: self.best, "iteration": self.best_iteration},
                    }
                )
        barrier(t.dist)

    def after_step(self) -> None:
        t = self.trainer
        if self.period and t.iter % self.period == 0 and t.iter < t.max_iter:
            self._run()

    def after_train(self) -> None:
        t = self.trainer
        if not t.stopped and self._last_iter != t.iter:
            self._run()

    def state_dict(self) -> dict[str, Any]:
        return {"best": self.best, "best_iteration": self.best_iteration}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.best = state.get("best")
        self.best_iteration = state.get("best_iteration")


class CheckpointHook(HookBase):
    """Save ``last.pth`` every ``period`` iterations and when training ends.

    At the natural end it also writes ``model_final.pth`` (weights and meta
    only, what ``serve`` and ``eval`` load).

    Args:
        out_dir: the run folder.
        meta: returns the checkpoint's plain-data meta for the current state.
        data_state: returns the data position to record.
    """

    def __init__(
        self,
        out_dir: Path,
        *,
        period: int,
        is_main: bool,
        meta: Callable[[], dict[str, Any]],
        data_state: Callable[[], dict[str, Any]],
    ) -> None:
        self.out_dir = out_dir
        self.period = period
        self.is_main = is_main
        self.meta = meta
        self.data_state = data_state

    def save_last(self) -> None:
        t = self.trainer
        if self.is_main:
            state = {
                "iteration": t.iter,
                "optimizer": t.optimizer.state_dict(),
                "scheduler": t.scheduler.state_dict(),
                "scaler": t.scaler.state_dict(),
                "rng": capture_rng(),
                "data": self.data_state(),
                "hooks": {type(h).__name__: h.state_dict() for h in t.hooks},
            }
            save_training_checkpoint(
                self.out_dir / "last.pth",
                model_state=t.unwrapped.state_dict(),
                meta=self.meta(),
                train_state=state,
            )
        barrier(t.dist)

    def after_step(self) -> None:
        t = self.trainer
        if t.iter % self.period == 0 and t.iter < t.max_iter:
            self.save_last()

    def after_train(self) -> None:
        t = self.trainer
        self.save_last()
        if self.is_main:
            if t.stopped:
                log.warning(
                    "stopped at iteration %d of %d; resume with --resume (%s)",
                    t.iter,
                    t.max_iter,
                    self.out_dir / "last.pth",
                )
            else:
                save_model_checkpoint(self.out_dir / "model_final.pth", t.unwrapped, self.meta())
