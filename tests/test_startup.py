"""What a command imports: each loads the libraries it uses when it uses them, so that
`vmsched --help` and a short run start in a fraction of a second. Checked as a property
(the modules a fresh interpreter holds after the command), not as a timing."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from vmsched.cli import COMMAND_MODULES

# Runs the command line with the arguments given, then prints the top-level packages loaded.
COMMAND_THEN_MODULES = """
import json, sys
from vmsched.cli import main
sys.argv = ["vmsched", *json.loads(sys.argv[1])]
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted({*(name.partition(".")[0] for name in sys.modules),
                         *(name for name in sys.modules if name.startswith("vmsched."))})), file=sys.stderr)
"""
# The data-frame, plotting and cluster libraries: only reports, comparisons, sweeps and
# reading tables back need them.
HEAVY = {"polars", "pyarrow", "plotly", "ray"}


def modules_after(*args: str, cwd=None) -> set[str]:
    """The top-level packages, and vmsched's modules, loaded by the command `args` (its
    output to pipes, as scripts and benchmarks see it)."""
    done = subprocess.run([sys.executable, "-c", COMMAND_THEN_MODULES, json.dumps(args)],
                          capture_output=True, text=True, timeout=120, cwd=cwd)
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


def test_a_run_without_recording_loads_neither_rich_nor_other_commands(tmp_path):
    # What `vmsched run --no-record` prints to a pipe is written without rich (terminal.py;
    # a line longer than the console is wrapped by rich: the path is kept short), and the
    # modules of the other commands are not imported (cli.command_line).
    loaded = modules_after("run", "default", "--duration", "1ms", "--no-record", "--out", "run", cwd=tmp_path)
    assert (tmp_path / "run" / "summary.json").is_file(), "the run wrote its summary"
    assert not loaded & (HEAVY | {"rich"}), sorted(loaded & (HEAVY | {"rich"}))
    others = {f"vmsched.{module}" for module in COMMAND_MODULES}
    assert "vmsched.api" in loaded and not loaded & others, sorted(loaded & others)


def test_a_command_alone_is_the_command_in_the_whole_command_line():
    # The command line built for one named command gives that command's help exactly as
    # the whole command line does.
    from typer.testing import CliRunner

    from vmsched.cli import app, command_line

    whole = CliRunner().invoke(app, ["--help"])
    names = [line.split()[0] for line in whole.output.split("Commands:")[1].splitlines() if line.strip()]
    assert {"run", "plan", "probe", "sweep", "reproduce", "real", "bench"} <= set(names), names
    for name in names:
        alone = CliRunner().invoke(command_line([name]), [name, "--help"])
        assert alone.exit_code == 0 and alone.output == CliRunner().invoke(app, [name, "--help"]).output, name


def test_the_set_up_compiled_every_module_checked_against_its_source():
    # The package is installed editable and Python may be told not to write bytecode
    # (PYTHONDONTWRITEBYTECODE): `make setup` compiles every module (tools/build-extension.sh),
    # as bytecode that is checked against a hash of its source, so that an edited module
    # is compiled again rather than run stale (PEP 552: bit 0 of the flags word set marks
    # hash-based bytecode, bit 1 that it is checked).
    import importlib.util
    from pathlib import Path

    import vmsched
    package = Path(vmsched.__file__).parent
    for source in package.glob("*.py"):
        cached = Path(importlib.util.cache_from_source(str(source)))
        assert cached.is_file(), f"{cached}: missing; run `make setup`"
        flags = int.from_bytes(cached.read_bytes()[4:8], "little")
        assert flags == 0b11, f"{cached}: not checked-hash bytecode (flags {flags:#b})"


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
