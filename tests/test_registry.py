"""``registry.load``: the one loader of the registries' ``"module:attribute"`` rows."""

from __future__ import annotations

import subprocess
import sys

import pytest

from streamseg.ingest.spec import SCHEMES
from streamseg.registry import RegistryClosed, Table, load, split_target
from streamseg.track.rule_kinds import RULE_KINDS


def test_load_imports_the_module_when_the_row_is_used() -> None:
    """In a fresh interpreter: the table imports no plug-in; using its row does."""
    code = (
        "import sys\n"
        "from streamseg.publish.sink_config import SINK_TYPES\n"
        "from streamseg.registry import load\n"
        "assert 'streamseg.publish.mqtt' not in sys.modules\n"
        "assert callable(load(SINK_TYPES['mqtt'].build))\n"
        "assert 'streamseg.publish.mqtt' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@pytest.mark.parametrize("bad", ["streamseg.registry", "streamseg.registry:", ":load", "a:b:c"])
def test_a_malformed_row_says_what_a_row_is(bad: str) -> None:
    with pytest.raises(ValueError, match="'module:attribute'"):
        split_target(bad)


def test_a_row_naming_nothing_fails_with_python_s_own_error() -> None:
    with pytest.raises(ModuleNotFoundError):
        load("streamseg.no_such_module:x")
    with pytest.raises(AttributeError, match="no_such_function"):
        load("streamseg.registry:no_such_function")


def test_every_scheme_and_rule_row_loads() -> None:
    for name, scheme in SCHEMES.items():
        assert callable(load(scheme.parser)), name
    for name, kind in RULE_KINDS.items():
        assert isinstance(load(kind.engine), type), name


def _models_in(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    code = "import streamseg.models as m; print(sorted(m.ARCHITECTURES))"
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env
    )


def test_plugins_add_rows_only_where_named() -> None:
    """The suite's test-only model comes from STREAMSEG_PLUGINS, never from the package."""
    import os

    plain = {k: v for k, v in os.environ.items() if k != "STREAMSEG_PLUGINS"}
    assert "maskrcnn_small_faulty" not in _models_in(plain).stdout
    named = {**plain, "STREAMSEG_PLUGINS": "tests.support.plugins"}
    assert "maskrcnn_small_faulty" in _models_in(named).stdout


def test_a_plugin_that_cannot_be_imported_is_named_with_the_fix() -> None:
    import os

    done = _models_in({**os.environ, "STREAMSEG_PLUGINS": "tests.support.plugins, no_such_mod"})
    assert done.returncode != 0
    assert "STREAMSEG_PLUGINS names the module 'no_such_mod', which cannot be imported" in (
        done.stderr
    )


def test_a_plugin_function_that_does_not_exist_is_named() -> None:
    import os

    done = _models_in({**os.environ, "STREAMSEG_PLUGINS": "tests.support.plugins:no_such"})
    assert done.returncode != 0
    assert "names 'tests.support.plugins:no_such'" in done.stderr
    assert "has no function 'no_such'" in done.stderr


def test_a_table_takes_rows_until_a_type_is_built_from_it() -> None:
    table: Table[int] = Table("colour", {"red": 1})
    table.register("blue", 2)
    with pytest.raises(ValueError, match="colour 'blue' is already registered"):
        table.register("blue", 3)
    assert table.close("mypackage.palette") is table and dict(table) == {"red": 1, "blue": 2}
    with pytest.raises(RegistryClosed) as info:
        table.register("green", 3)
    message = str(info.value)
    assert "'green' is registered too late" in message and "mypackage.palette" in message
    assert "STREAMSEG_PLUGINS" in message and "green" not in table
