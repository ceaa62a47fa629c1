"""The trainer's hooks in real runs: periodic evaluation keeping ``best.pth``, progress bar."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path
from typing import Any

import pytest
import torch

from streamseg.models.checkpoint import read_checkpoint
from streamseg.models.trained import load_trained_model
from streamseg.train.checkpointing import read_training_state
from streamseg.train.config import TrainConfig
from streamseg.train.datasets import build_dataset
from streamseg.train.engine import run_training
from streamseg.train.evaluate import evaluate_model
from tests.support.servers import cli_env
from tests.support.training import SCENE, StopAt, tiny_config, tiny_yaml, weights

REPO = Path(__file__).resolve().parents[2]

OPTIONS = "min_size: 64, max_size: 96, rpn_post_nms_top_n_train: 200"
VAL = f'[{{synthetic: "{SCENE}", frames: 2}}]'


def _eval_config(tmp_path: Path, name: str) -> TrainConfig:
    """16 iterations on 2 frames, evaluated on those frames every 4 iterations
    (every detection counts, so that AP moves in so short a run)."""
    return tiny_config(
        tmp_path,
        name,
        frames=2,
        model__options=f"{{{OPTIONS}, score_threshold: 0.0}}",
        solver__iterations=16,
        solver__lr=0.003,
        data__hflip=0.0,
        data__val=VAL,
        eval__period=4,
        eval__metric="segm.AP",
    )


def _evals(run_dir: Path) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [r for r in rows if "eval" in r]


def test_periodic_evaluation_keeps_the_best_checkpoint(tmp_path: Path) -> None:
    cfg = _eval_config(tmp_path, "run")
    result = run_training(cfg, install_signals=False)
    out = Path(cfg.output.dir)
    evals = _evals(out)
    # Every eval.period iterations, and once more at the end.
    assert [e["iteration"] for e in evals] == [4, 8, 12, 16]
    values = [e["eval"]["segm"]["AP"] for e in evals]
    assert all(0.0 <= v <= 1.0 for v in values) and max(values) > 0.0
    for k, e in enumerate(evals):
        so_far = values[: k + 1]
        leader = evals[so_far.index(max(so_far))]["iteration"]  # ties keep the earlier one
        assert e["best"] == {"segm.AP": max(so_far), "iteration": leader}
    best_iteration = evals[values.index(max(values))]["iteration"]
    assert (result.best, result.best_iteration) == (max(values), best_iteration)

    # best.pth: weights and meta of the best iteration, without training state.
    best = read_checkpoint(out / "best.pth")
    assert best.meta["iteration"] == best_iteration
    assert best.meta["metrics"] == evals[values.index(max(values))]["eval"]
    assert "train_state" not in torch.load(out / "best.pth", weights_only=True)
    # last.pth is the resumable end of the run, a separate file.
    _, last_meta, last_state = read_training_state(out / "last.pth")
    assert last_state["iteration"] == last_meta["iteration"] == 16
    # Evaluating best.pth again reproduces the numbers logged for its iteration,
    # so it holds that iteration's weights.
    model, names = load_trained_model(str(out / "best.pth"))
    val = build_dataset(cfg.data.val)
    val.set_class_names(names)
    again = evaluate_model(model, val, names, batch_size=cfg.eval.batch_size)
    logged = evals[values.index(max(values))]["eval"]
    assert (again["bbox"], again["segm"]) == (logged["bbox"], logged["segm"])
    final = weights(out / "model_final.pth")
    same = all(torch.equal(final[k], v) for k, v in best.state_dict.items())
    assert same == (best_iteration == 16)


def test_the_best_so_far_survives_a_resume(tmp_path: Path) -> None:
    straight = _eval_config(tmp_path, "straight")
    run_training(straight, install_signals=False)
    broken = _eval_config(tmp_path, "broken")
    first = run_training(broken, install_signals=False, extra_hooks=[StopAt(6)])
    assert first.stopped and first.iteration == 6
    assert [e["iteration"] for e in _evals(Path(broken.output.dir))] == [4]
    second = run_training(broken, resume=True, install_signals=False)
    a, b = _evals(Path(straight.output.dir)), _evals(Path(broken.output.dir))
    for row in (*a, *b):
        row.pop("eval_time")
    assert a == b
    assert second.best == a[-1]["best"]["segm.AP"]
    assert second.best_iteration == a[-1]["best"]["iteration"]
    wa = weights(Path(straight.output.dir) / "best.pth")
    wb = weights(Path(broken.output.dir) / "best.pth")
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


def _screen(output: str) -> list[str]:
    """The lines a terminal shows for ``output``: ``\\r`` returns to the first
    column and later characters overwrite earlier ones."""
    lines: list[str] = []
    row: list[str] = []
    col = 0
    for ch in output.replace("\r\n", "\n"):
        if ch == "\n":
            lines.append("".join(row).rstrip())
            row, col = [], 0
        elif ch == "\r":
            col = 0
        else:
            row[col : col + 1] = [ch]
            col += 1
    if row:
        lines.append("".join(row).rstrip())
    return lines


def _run_on(tmp_path: Path, stderr_is_terminal: bool) -> tuple[int, str]:
    """``streamseg train`` (progress: true) with stderr on a pseudo-terminal or
    a pipe; returns the exit code and everything written to stderr."""
    path = tmp_path / "bar.yaml"
    path.write_text(tiny_yaml(tmp_path / "run").replace("progress: false", "progress: true"))
    args = [sys.executable, "-m", "streamseg", "train", str(path), "--threads", "1"]
    if not stderr_is_terminal:
        proc = subprocess.run(
            args, cwd=REPO, env=cli_env(), capture_output=True, text=True, timeout=300
        )
        return proc.returncode, proc.stderr
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # 100 columns
    child = subprocess.Popen(args, cwd=REPO, env=cli_env(), stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    chunks = []
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 300)
            if not ready:
                child.kill()
                break
            try:
                data = os.read(master, 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
    return child.wait(timeout=60), b"".join(chunks).decode()


LOG_LINE = re.compile(
    r"^\d{4}-\d\d-\d\d [\d:,]+ streamseg\.train INFO: iter (\d+)/6 loss [\d.]+ lr "
)


@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "pipe"])
def test_progress_bar_and_log_lines_share_stderr(tmp_path: Path, terminal: bool) -> None:
    code, output = _run_on(tmp_path, terminal)
    assert code == 0, output
    screen = _screen(output)
    # Every log line stands on its own line of the screen, from its first
    # column: none is glued to the bar.
    logged = [line for line in screen if " iter " in line]
    matches = [LOG_LINE.match(line) for line in logged]
    assert all(matches), logged
    assert [int(m.group(1)) for m in matches if m] == [1, 2, 3, 4, 5, 6]
    # tqdm writes s/it instead of it/s when an iteration takes over a second (a busy machine).
    bars = [line for line in screen if "it/s" in line or "s/it" in line]
    if terminal:
        # The bar, finished, with loss and throughput, is left as the last line.
        assert bars and bars == screen[-1:]
        assert re.search(r"100%\|.*\| 6/6 \[.*(it/s|s/it), img_s=[\d.]+, loss=[\d.]+\]$", bars[0])
    else:
        # Not a terminal: no bar (and no carriage returns), log lines only.
        assert not bars and "\r" not in output
