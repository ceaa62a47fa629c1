import pickle

import numpy as np
import pytest
import torch
from torch import nn

from streamseg.models.checkpoint import (
    CheckpointError,
    check_state_dict,
    load_pickle_restricted,
    load_state_dict_file,
    read_checkpoint,
)


class Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.fc = nn.Linear(4, 2)


def test_roundtrip_and_wrapped_checkpoint(tmp_path) -> None:
    model = Tiny()
    path = tmp_path / "m.pth"
    torch.save({"model": model.state_dict(), "iteration": 3}, path)
    sd = load_state_dict_file(path)
    check_state_dict(model, sd, source=str(path))


def test_mismatch_lists_every_kind_of_key(tmp_path) -> None:
    sd = Tiny().state_dict()
    sd.pop("fc.bias")
    sd["extra.weight"] = torch.zeros(1)
    sd["conv.weight"] = torch.zeros(5, 3, 3, 3)
    with pytest.raises(CheckpointError) as info:
        check_state_dict(Tiny(), sd, source="x.pth")
    msg = str(info.value)
    assert "1 missing keys: fc.bias" in msg
    assert "1 unexpected keys: extra.weight" in msg
    assert "conv.weight: checkpoint (5, 3, 3, 3) vs model (4, 3, 3, 3)" in msg


@pytest.mark.parametrize("keep", [0.5, 0.05, 0.001])  # each cut fails in its own way in torch
def test_truncated_file_gets_clear_error(tmp_path, keep: float) -> None:
    path = tmp_path / "m.pth"
    torch.save({"model": Tiny().state_dict(), "pad": torch.zeros(200_000)}, path)
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(CheckpointError, match="truncated"):
        load_state_dict_file(path)
    with pytest.raises(CheckpointError, match="truncated"):
        read_checkpoint(path)
    with pytest.raises(CheckpointError, match="does not exist"):
        load_state_dict_file(tmp_path / "nope.pth")


def test_restricted_unpickler_loads_arrays_and_refuses_code(tmp_path) -> None:
    good = tmp_path / "good.pkl"
    good.write_bytes(pickle.dumps({"model": {"w": np.ones((2, 3), np.float32)}, "__author__": "x"}))
    sd = load_state_dict_file(good)
    assert sd["w"].shape == (2, 3)

    class Evil:
        def __reduce__(self):  # type: ignore[no-untyped-def]
            return (print, ("pwned",))

    bad = tmp_path / "bad.pkl"
    bad.write_bytes(pickle.dumps({"model": Evil()}))
    with pytest.raises(CheckpointError, match=r"refusing to unpickle builtins\.print"):
        load_pickle_restricted(bad)


def test_save_and_read_checkpoint_with_meta(tmp_path) -> None:
    from streamseg.models.checkpoint import read_checkpoint, save_checkpoint

    model = Tiny()
    path = tmp_path / "sub" / "ckpt.pth"
    save_checkpoint(path, model.state_dict(), arch="tiny", class_names=["__background__", "a"])
    ckpt = read_checkpoint(path)
    assert ckpt.meta == {"arch": "tiny", "class_names": ["__background__", "a"]}
    check_state_dict(model, ckpt.state_dict, source=str(path))
    assert not (tmp_path / "sub" / "ckpt.pth.tmp").exists()


def test_a_pickle_without_arrays_is_an_error(tmp_path) -> None:
    path = tmp_path / "empty.pkl"
    path.write_bytes(pickle.dumps({"model": {"__author__": "x"}, "other": 1}))
    with pytest.raises(CheckpointError, match="holds no tensors or arrays"):
        load_state_dict_file(path)


def test_mismatch_keys_can_be_shown_under_the_file_s_names() -> None:
    sd = Tiny().state_dict()
    sd.pop("fc.bias")
    sd["conv.weight"] = torch.zeros(5, 3, 3, 3)
    with pytest.raises(CheckpointError) as info:
        check_state_dict(Tiny(), sd, source="x.pkl", key_name=lambda k: "their." + k)
    msg = str(info.value)
    assert "1 missing keys: their.fc.bias" in msg
    assert "their.conv.weight: checkpoint (5, 3, 3, 3) vs model (4, 3, 3, 3)" in msg
