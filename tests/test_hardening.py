"""Inputs that once passed validation and then panicked, aborted, hung or ran with a
wrong meaning, each with its one-line error; output directories that are whole or
absent (also under kill -9); Ctrl-C with a real signal; the command-line conventions."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import SHORT, interrupt
from test_cli import assert_user_error

VMSCHED = [sys.executable, "-c", "from vmsched.cli import main; main()"]
SERVER = "vm[0].workload[0]"    # the default scenario's server
PARALLEL = "vm[1].workload[0]"  # and its barrier-synchronized parallel job

# (--set override on the default scenario, fragments of the one-line error)
REFUSED_OVERRIDES = [
    ("host.sockets=65536", ["host:", "8192 (CONFIG_NR_CPUS)"]),
    ("host.cores_per_socket=65536", ["host:", "8192"]),
    ("host.cores_per_socket=99999", ["host:", "8192"]),
    (f"{SERVER}.threads=100000000", [f"{SERVER}.threads", "PID_MAX_LIMIT"]),
    ("vm[0].vcpus=4294967295", ["vm[0].vcpus", "KVM_MAX_VCPUS"]),
    (f"{PARALLEL}.locks=4294967295", [f"{PARALLEL}.locks"]),
    (f"{SERVER}.rate_per_s=1e9", [f"{SERVER}.rate_per_s", "1e7"]),
    (f"{SERVER}.work_us=1e300", [f"{SERVER}.work_us", "1e300", "1e6 s"]),
    (f"{SERVER}.work_us=1e-300", [f"{SERVER}.work_us", "1 ns"]),
    ("vm[0].bandwidth={quota_ms=inf}", ["vm[0].bandwidth.quota_ms", "finite"]),
    ("vm[0].bandwidth={quota_ms=20, period_ms=10}", ["vm[0].bandwidth.quota_ms", "period_ms"]),
    ("vm[0].bandwidth={quota_ms=5, phase_ms=nan}", ["vm[0].bandwidth.phase_ms", "finite"]),
    ("vm[0].vcpu_bandwidth=[{vcpus=[99], quota_ms=2}]", ["vm[0].vcpu_bandwidth[0].vcpus", "no vCPU 99"]),
    ("vm[0].weight=4294967295", ["vm[0].weight", "MAX_SHARES"]),
    ("duration_ms=1e-300", ["duration_ms", "1 ns"]),
    ("vm[0].guest.capacity=[0, 0]", ["vm[0].guest.capacity[0]", "SCHED_CAPACITY_SCALE"]),
    ("metrics.sample_interval_ms=inf", ["metrics.sample_interval_ms", "finite"]),
    (f"{PARALLEL}.imbalance=5", [f"{PARALLEL}.imbalance", "[0, 1]"]),
    ("host.threads_per_core=3", ["host.threads_per_core", "two SMT siblings"]),
    (f"{SERVER}.start_ms=1e6", [f"{SERVER}.start_ms", "never start"]),
    ("vm[0].name=''", ["vm[0].name", "empty"]),
    (f"{SERVER}.phases=3", [f"{SERVER}.phases", "does not read"]),
]


@pytest.mark.parametrize("override, fragments", REFUSED_OVERRIDES, ids=[o for o, _ in REFUSED_OVERRIDES])
def test_validate_refuses_what_the_engine_cannot_run(cli, tmp_path, override, fragments):
    assert_user_error(cli("validate", "default", "--set", override), "builtin:default", *fragments)
    out = tmp_path / "out"
    assert_user_error(cli("run", "default", "--set", override, "--out", out), *fragments)
    assert not out.exists()


def test_ping_rate_and_pipeline_stages(cli, tmp_path):
    ping = tmp_path / "ping.toml"
    ping.write_text("name='p'\nduration_ms=10\n[[vm]]\nname='a'\n[[vm.workload]]\nkind='ping'\nrate_per_s=1e9\n")
    assert_user_error(cli("validate", ping), str(ping), "vm[0].workload[0].rate_per_s")
    pipeline = tmp_path / "pipeline.toml"
    pipeline.write_text("name='p'\nduration_ms=10\n[[vm]]\nname='a'\n[[vm.workload]]\nkind='pipeline'\n"
                        "stages=4294967295\n")
    assert_user_error(cli("validate", pipeline), "vm[0].workload[0].stages")


def test_variants_are_validated(cli, tmp_path):
    scenario = tmp_path / "v.toml"
    scenario.write_text("name='v'\nduration_ms=10\n[[vm]]\nname='a'\n[[vm.workload]]\nkind='hog'\n"
                        "[variants.huge]\n\"vm[0].vcpus\" = 100000\n")
    assert_user_error(cli("validate", scenario), "variants.huge", "vm[0].vcpus", "KVM_MAX_VCPUS")


@pytest.mark.parametrize("seed", ["-1", str(2**70)])
def test_seed_out_of_range(cli, tmp_path, seed):
    assert_user_error(cli("run", "default", "--seed", seed, "--out", tmp_path / "o"), f"--seed {seed}")
    assert_user_error(cli("compare", "default", "--seed", seed, "--out", tmp_path / "o"), f"--seed {seed}")
    assert not (tmp_path / "o").exists()


def test_scenario_that_is_not_a_file(cli, tmp_path):
    assert_user_error(cli("validate", tmp_path), str(tmp_path), "is a directory")
    assert_user_error(cli("validate", "/dev/zero"), "/dev/zero", "not a regular file")
    binary = tmp_path / "blob.toml"
    binary.write_bytes(bytes(range(256)))
    assert_user_error(cli("validate", binary), str(binary), "not a text file")


def test_absurd_run_is_refused_with_its_estimate(cli, tmp_path):
    out = tmp_path / "out"
    result = cli("run", "default", "--set", "duration_ms=1e8", "--set", f"{SERVER}.rate_per_s=1e7", "--out", out)
    assert_user_error(result, "events", "GB")
    assert not out.exists()


def test_duration_needs_a_unit(cli, tmp_path):
    assert_user_error(cli("run", "default", "--duration", "100", "--out", tmp_path / "o"), "needs its unit")


def test_trace_options_are_checked(cli, tmp_path):
    out = tmp_path / "out"
    assert_user_error(cli("run", "default", "--duration", SHORT, "--trace-window", "1s:2s", "--out", out),
                      "--trace-window", "after the run's end")
    assert_user_error(cli("run", "default", "--duration", SHORT, "--trace", "--trace-limit-mb", "-1",
                          "--out", out), "--trace-limit-mb")
    assert not out.exists()


def test_no_record_is_honoured_with_trace(cli, tmp_path):
    out = tmp_path / "out"
    assert cli("run", "default", "--duration", "50ms", "--trace", "--no-record", "--out", out).exit_code == 0
    assert (out / "trace.json").is_file()
    assert not any((out / f"{name}.parquet").exists() for name in ("requests", "samples", "tasks"))


# --- output directories ---------------------------------------------------------------

def test_out_of_an_earlier_run_needs_force_and_is_replaced_whole(cli, tmp_path):
    out = tmp_path / "out"
    assert cli("run", "default", "--duration", "50ms", "--trace", "--out", out).exit_code == 0
    assert (out / "trace.json").is_file()
    before = (out / "summary.json").read_bytes()
    assert_user_error(cli("run", "default", "--duration", "50ms", "--seed", "2", "--out", out),
                      str(out), "--force")
    assert (out / "summary.json").read_bytes() == before
    assert cli("run", "default", "--duration", "50ms", "--seed", "2", "--force", "--out", out).exit_code == 0
    # The new run has no trace: the old one's must be gone with the rest of it.
    assert not (out / "trace.json").exists()
    assert json.loads((out / "summary.json").read_text())["seed"] == 2
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_out_that_is_not_a_run_is_refused(cli, tmp_path):
    other = tmp_path / "papers"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    assert_user_error(cli("run", "default", "--duration", "50ms", "--force", "--out", other), "not an earlier run")
    assert (other / "notes.txt").read_text() == "mine"
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert_user_error(cli("run", "default", "--duration", "50ms", "--out", a_file), "not a directory")
    assert_user_error(cli("run", "default", "--duration", "50ms", "--out", ""), "--out", "empty")


@pytest.fixture
def no_simulation(monkeypatch):
    """Any simulation started fails the test: what must be refused before the
    (multi-second) full run is checked by the run never starting, not by a wall-clock
    bound that a loaded machine can miss."""
    from vmsched import api

    def refused(*args, **kwargs):
        raise AssertionError("the simulation started")
    monkeypatch.setattr(api, "run", refused)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_unwritable_out_fails_before_the_run(cli, tmp_path, no_simulation):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    assert_user_error(cli("run", "default", "--out", locked / "run"), "cannot write")


def test_unwritable_out_fails_before_the_run_even_as_root(cli, tmp_path, no_simulation):
    # A path under a regular file cannot be created by anyone.
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    assert_user_error(cli("run", "default", "--out", blocker / "run"), "cannot write")


def test_variant_name_is_not_a_path(cli, tmp_path):
    out = tmp_path / "out"
    assert_user_error(cli("compare", "default", "--variant", "../../etc=host.hz=1000", "--variant", "b=",
                          "--duration", "50ms", "--out", out), "../../etc")
    assert not out.exists() and not (tmp_path / "etc").exists()


def _run_files(run_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(run_dir.iterdir())}


def test_kill_9_never_leaves_a_mixed_run(tmp_path):
    """Replace a run (seed 1) by another (seed 2) and kill the writer at random moments:
    the directory must afterwards hold exactly one of the two complete runs."""
    def vmsched(*args, **kwargs):
        return subprocess.Popen([*VMSCHED, "run", "default", "--duration", SHORT, "--trace", *args],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kwargs)

    references = {}
    for seed in (1, 2):
        ref = tmp_path / f"ref{seed}"
        assert vmsched("--seed", str(seed), "--out", str(ref)).wait() == 0
        references[seed] = _run_files(ref)
    assert references[1]["summary.json"] != references[2]["summary.json"]
    out = tmp_path / "out"
    rng = random.Random(11)
    started = time.monotonic()
    durations = []
    for attempt in range(12):
        if not out.exists() or _run_files(out) != references[1]:
            subprocess.run(["rm", "-rf", str(out)], check=True)
            assert vmsched("--seed", "1", "--out", str(out)).wait() == 0
        begin = time.monotonic()
        process = vmsched("--seed", "2", "--force", "--out", str(out))
        # Spread the kills over the whole run, writing phase included.
        time.sleep(rng.uniform(0, max(durations, default=2.0)))
        process.send_signal(signal.SIGKILL)
        if process.wait() == 0:
            durations.append(time.monotonic() - begin)
        if out.exists():
            assert _run_files(out) in (references[1], references[2]), f"attempt {attempt}: mixed run"
        if time.monotonic() - started > 90:
            break
    # Temporary directories of killed writers are cleared by the next run beside them.
    assert vmsched("--seed", "2", "--force", "--out", str(out)).wait() == 0
    assert _run_files(out) == references[2]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "ref1", "ref2"]


def _start_long_run(out: Path) -> subprocess.Popen:
    """A run of a thousand simulated seconds, returned once it has announced itself ("a
    long run: ...", printed just before the simulation starts): its signal handlers are
    in place from then on. A fixed sleep instead would race the interpreter's start-up
    and imports, seconds on a loaded machine, and a signal that came before the
    handlers would kill the process the default way."""
    process = subprocess.Popen([*VMSCHED, "run", "bench-mixed-64", "--duration", "1000s", "--allow-large",
                                "--out", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    first = process.stderr.readline()
    assert first.startswith("a long run:"), first + process.stderr.read()
    time.sleep(1)  # into the simulation
    assert process.poll() is None
    return process


def test_ctrl_c_stops_a_run_quickly_and_writes_nothing(tmp_path):
    out = tmp_path / "out"
    process = _start_long_run(out)
    # The message comes when the run has stopped and its directory is gone.
    answered, lines = interrupt(process)
    assert process.wait(timeout=30) == 130
    assert answered < 1.0, answered
    shown = [line.strip() for line in lines if line.strip() and "\r" not in line]
    assert shown[-1] == "error: interrupted; nothing was written", lines
    assert not any("Traceback" in line for line in lines)
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_sigterm_stops_a_run_as_ctrl_c_does(tmp_path):
    """timeout, systemd and batch schedulers stop a job with SIGTERM: it is answered as
    Ctrl-C is, with its own status (128 + SIGTERM) and no staging directory left."""
    out = tmp_path / "out"
    process = _start_long_run(out)
    process.send_signal(signal.SIGTERM)
    lines = process.stderr.readlines()
    assert process.wait(timeout=30) == 143
    shown = [line.strip() for line in lines if line.strip() and "\r" not in line]
    assert shown[-1] == "error: terminated; nothing was written", lines
    assert not any("Traceback" in line for line in lines)
    assert list(tmp_path.iterdir()) == []


def test_a_run_clears_stale_staging_directories_of_any_target_beside_it(tmp_path):
    """A writer killed outright (SIGKILL, power loss) leaves its staging directory; the
    next run into the same folder removes it whatever its target was, once its process
    is gone, and leaves a live writer's and any other directory alone."""
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    stale = [tmp_path / f".other.{gone.pid}.abcd_123.tmp", tmp_path / f".other.{gone.pid}.old"]
    live = tmp_path / f".other.{os.getpid()}.abcd_123.tmp"
    unrelated = tmp_path / ".cache.123.tmp"
    for path in [*stale, live, unrelated]:
        path.mkdir()
        (path / "summary.json").write_text("{}")
    assert vmsched_run(tmp_path / "out") == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, unrelated.name, "out"])


def test_an_interruption_before_the_writing_starts_leaves_no_staging_directory(tmp_path):
    """A command makes its staging directory before its long part (estimating,
    probing), and writes into it later; Ctrl-C or SIGTERM in between ends the process
    through the CLI's handler, and the directory goes with it."""
    script = ("import signal, sys\n"
              "from vmsched.rundir import OutputDir\n"
              "def terminated(signum, frame):\n"
              "    sys.exit(143)  # as the CLI's handler ends it\n"
              "signal.signal(signal.SIGTERM, terminated)\n"
              "output = OutputDir(sys.argv[1])\n"
              "assert output.temp.is_dir()\n"
              "signal.raise_signal(signal.SIGTERM)\n")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "out")], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 143, done.stderr
    assert list(tmp_path.iterdir()) == []


def vmsched_run(out: Path) -> int:
    return subprocess.run([*VMSCHED, "run", "default", "--duration", SHORT, "--no-record", "--out", str(out)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode


# --- conventions ------------------------------------------------------------------------

def test_version_and_short_help(cli):
    from vmsched import __version__
    result = cli("--version")
    assert result.exit_code == 0 and result.stdout.strip() == f"vmsched {__version__}"
    assert __version__ != "unknown"
    from importlib.metadata import version
    assert __version__ == version("vmsched"), "the extension's version is the package's"
    assert cli("-h").exit_code == 0 and "run" in cli("-h").stdout
    assert "--check-invariants" in cli("run", "-h").stdout


def test_help_shows_brackets(cli):
    assert "[variants.NAME]" in cli("compare", "--help").stdout


def test_json_outputs(cli, tmp_path):
    validated = json.loads(cli("validate", "default", "--json").stdout)
    assert validated["name"] == "default" and validated["host"]["hz"] > 0
    result = cli("run", "default", "--duration", "50ms", "--json", "--out", tmp_path / "r")
    assert result.exit_code == 0
    printed = json.loads(result.stdout)
    assert printed["summary"] == json.loads((tmp_path / "r" / "summary.json").read_text())
    result = cli("compare", "default", "--variant", "a=", "--variant", "b=host.hz=1000", "--duration", "50ms",
                 "--json", "--out", tmp_path / "c")
    assert result.exit_code == 0
    metrics = json.loads(result.stdout)["metrics"]
    assert {row["variant"] for row in metrics} == {"a", "b"}


def test_unexpected_error_is_one_line_exit_4(tmp_path):
    # A run directory whose summary is not JSON makes the report fail in a way no check
    # anticipates: still one line, exit 4, no traceback.
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "summary.json").write_text("{not json")
    result = subprocess.run([*VMSCHED, "report", str(run_dir)], capture_output=True, text=True)
    assert result.returncode == 4, result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


# --- plan ---------------------------------------------------------------------------------

TWO_CORES_FIVE_VCPUS = ('{"host": {"cores": 2}, "vm": [{"name": "vm0", "vcpus": 4, "utilization": 0.4724499078475226, '
                        '"latency_ms": 76}, {"name": "vm1", "utilization": 0.096655, "latency_ms": 27}]}')


def test_plan_of_two_cores_five_vcpus_is_small(cli, tmp_path):
    source = tmp_path / "in.json"
    source.write_text(TWO_CORES_FIVE_VCPUS)
    out = tmp_path / "table.bin"
    result = cli("plan", source, "--out", out, "--format", "bin")
    assert result.exit_code == 0, result.output
    assert out.stat().st_size < 64 * 1024  # was 410 MB, from one 1 ns allocation
    assert "left short 0" in result.stdout


def test_plan_input_and_output_problems(cli, tmp_path):
    binary = tmp_path / "blob.json"
    binary.write_bytes(bytes(range(256)) * 4)
    assert_user_error(cli("plan", binary, "--out", tmp_path / "t.json"), str(binary), "not a text file")
    source = tmp_path / "in.json"
    source.write_text(TWO_CORES_FIVE_VCPUS)
    assert_user_error(cli("plan", source, "--out", tmp_path), str(tmp_path), "is a directory")
    assert_user_error(cli("plan", source, "--out", tmp_path / "missing" / "t.json"), "no directory")
    assert list(tmp_path.iterdir()) == [binary, source] or set(tmp_path.iterdir()) == {binary, source}


def test_plan_takes_a_builtin_name(cli, tmp_path):
    out = tmp_path / "t.json"
    result = cli("plan", "anubis-table1", "--out", out)
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["vcpus"]
    assert_user_error(cli("plan", "no-such-builtin", "--out", out), "no-such-builtin")


def test_ctrl_c_during_the_seeds_of_a_comparison_leaves_nothing(tmp_path):
    """The other seeds run in worker processes: Ctrl-C there ends them and the
    comparison's directory, the first seed's finished runs included. (Enough seeds that
    the workers are still busy a second later on any machine: a signal that comes
    while the interpreter exits kills it the default way, status -2.)"""
    out = tmp_path / "cmp"
    process = subprocess.Popen([*VMSCHED, "compare", "default", "--variant", "a=host.hz=250", "--variant", "b=host.hz=1000",
                                "--seeds", "500", "--workers", "2", "--duration", "10s", "--out", str(out)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines = []
    for line in process.stderr:
        lines.append(line)
        if "running the other seeds" in line:
            break
    time.sleep(1)  # the workers are running
    assert process.poll() is None, lines
    process.send_signal(signal.SIGINT)
    lines += process.stderr.readlines()
    assert process.wait(timeout=30) == 130
    shown = [line.strip() for line in lines if line.strip() and "\r" not in line]
    assert shown[-1] == "error: interrupted; nothing was written", lines
    assert not any("Traceback" in line for line in lines)
    assert list(tmp_path.iterdir()) == []
