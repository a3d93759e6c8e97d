"""What a command imports: each loads the libraries it uses when it uses them, so that
`vmsched --help` and a short run start in a fraction of a second. Checked as a property
(the modules a fresh interpreter holds after the command), not as a timing."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

# Runs the command line with the arguments given, then prints the top-level packages loaded.
COMMAND_THEN_MODULES = """
import json, sys
from vmsched.cli import main
sys.argv = ["vmsched", *json.loads(sys.argv[1])]
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted({name.partition(".")[0] for name in sys.modules})), file=sys.stderr)
"""
# The data-frame, plotting and cluster libraries: only reports, comparisons, sweeps and
# reading tables back need them.
HEAVY = {"polars", "pyarrow", "plotly", "ray"}


def modules_after(*args: str) -> set[str]:
    done = subprocess.run([sys.executable, "-c", COMMAND_THEN_MODULES, json.dumps(args)],
                          capture_output=True, text=True, timeout=120)
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


@pytest.mark.parametrize("args", [("--help",), ("run", "--help")])
def test_help_loads_no_heavy_library_and_no_rich(args):
    loaded = modules_after(*args)
    assert "vmsched" in loaded and "typer" in loaded, "the command line itself ran"
    assert not loaded & (HEAVY | {"rich"}), sorted(loaded & (HEAVY | {"rich"}))


def test_a_recorded_run_writes_its_tables_without_a_data_frame_library(tmp_path):
    loaded = modules_after("run", "default", "--duration", "1ms", "--out", str(tmp_path / "run"))
    assert (tmp_path / "run" / "samples.parquet").is_file(), "the run wrote its tables"
    assert not loaded & HEAVY, sorted(loaded & HEAVY)


# Runs a scenario through the Python API, then prints the top-level packages loaded.
API_RUN_THEN_MODULES = """
import json, sys
import vmsched.api as api
api.run("default", duration="1ms", record=False)
print(json.dumps(sorted({name.partition(".")[0] for name in sys.modules})))
"""


def test_the_api_runs_without_the_command_line_libraries():
    # Sweep workers and the benchmark's child processes run scenarios through the API:
    # the command-line framework and its console are not theirs to load.
    done = subprocess.run([sys.executable, "-c", API_RUN_THEN_MODULES], capture_output=True, text=True,
                          timeout=120, check=True)
    loaded = set(json.loads(done.stdout.strip().splitlines()[-1]))
    assert "vmsched" in loaded
    assert not loaded & (HEAVY | {"typer", "click", "rich"}), sorted(loaded & (HEAVY | {"typer", "click", "rich"}))


def test_command_annotations_are_objects_not_strings():
    # typer reads each command's parameter types from its annotations when the command
    # line is built, for every command on every invocation: as strings (postponed
    # evaluation, `from __future__ import annotations`) each would be compiled and
    # evaluated again there, a fifth of `vmsched --help`'s start-up.
    import inspect

    from vmsched import cli

    def callbacks(app):
        yield from (info.callback for info in app.registered_commands)
        for group in app.registered_groups:
            yield from callbacks(group.typer_instance)

    found = list(callbacks(cli.app))
    assert len(found) >= 10, "every command of the command line was found"
    for callback in found:
        for name, parameter in inspect.signature(callback).parameters.items():
            assert not isinstance(parameter.annotation, str), f"{callback.__module__}.{callback.__name__}: {name}"


def test_loading_the_command_line_leaves_the_garbage_collector_running():
    # The collector is paused while the command line loads: a program or test that
    # imports it must get it back running.
    code = "import gc, vmsched.cli; assert gc.isenabled(); print('ok')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "ok", done.stderr
