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
