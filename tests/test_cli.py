"""The command line: error paths write nothing and name file and field; runs are
reproducible; the built-ins are listed; recorded tables agree with the summary."""
from __future__ import annotations

import json
import re

import polars as pl
import pytest

from vmsched import _native
from conftest import SHORT, assert_user_error

BUILTINS = [name for name, _, _ in _native.builtin_scenarios()]


def default_toml() -> str:
    return next(toml for name, _, toml in _native.builtin_scenarios() if name == "default")


def test_unknown_field_names_file_and_field(cli, tmp_path):
    scenario = tmp_path / "typo.toml"
    scenario.write_text("bogus_field = 1\n" + default_toml())
    out = tmp_path / "out"
    result = cli("run", scenario, "--out", out)
    assert_user_error(result, str(scenario), "bogus_field")
    assert not out.exists()


def test_wrong_type_names_file_and_field(cli, tmp_path):
    scenario = tmp_path / "bad_type.toml"
    text, replaced = re.subn(r"(?m)^duration_ms\s*=.*$", 'duration_ms = "long"', default_toml())
    assert replaced == 1
    scenario.write_text(text)
    out = tmp_path / "out"
    assert_user_error(cli("run", scenario, "--out", out), str(scenario), "duration_ms")
    assert not out.exists()
    assert_user_error(cli("validate", scenario), str(scenario), "duration_ms")


def test_unknown_scenario(cli, tmp_path):
    out = tmp_path / "out"
    assert_user_error(cli("run", "no-such-scenario", "--out", out), "no-such-scenario")
    assert_user_error(cli("run", tmp_path / "missing.toml", "--out", out), "missing.toml")
    assert not out.exists()


@pytest.mark.parametrize("override, field", [("host.no_such_knob=3", "host.no_such_knob"),
                                             ("host.hz=\"fast\"", "host.hz"),
                                             ("no_equals_sign", "no_equals_sign")])
def test_bad_set(cli, tmp_path, override, field):
    out = tmp_path / "out"
    assert_user_error(cli("run", "default", "--set", override, "--out", out), "builtin:default", field)
    assert not out.exists()


def test_bad_duration_and_window(cli, tmp_path):
    out = tmp_path / "out"
    assert_user_error(cli("run", "default", "--duration", "2 parsecs", "--out", out), "--duration: '2 parsecs'")
    assert_user_error(cli("run", "default", "--duration", "5", "--out", out), "--duration: '5'", "unit")
    assert_user_error(cli("run", "default", "--duration", "0", "--out", out), "--duration: '0'", "positive")
    assert_user_error(cli("run", "default", "--trace-window", "3ms:1ms", "--out", out), "--trace-window: '3ms:1ms'")
    assert not out.exists()


def test_compare_checks_its_duration_and_window_before_any_run(cli, tmp_path):
    # An option's error names the option, as `run` does, and comes before the first variant
    # runs; a timeline window after the run's end would draw an empty report, as `run` refuses.
    out = tmp_path / "out"
    result = cli("compare", "vcpu-stacking", "--duration", "5", "--out", out)
    assert_user_error(result, "--duration: '5'")
    assert "running variant" not in result.stderr
    assert_user_error(cli("compare", "vcpu-stacking", "--duration", "10ms", "--window", "20ms:30ms", "--out", out),
                      "--window 20ms:30ms", "after the run's end at 10 ms")
    assert_user_error(cli("compare", "vcpu-stacking", "--window", "9ms", "--out", out), "--window: '9ms'")
    assert not out.exists()


@pytest.mark.parametrize("name", ["default", "vsched-fig16", "tableau-fig5-bg-io", "irs-fig7"])
def test_validate_json_prints_a_scenario_that_validates_again(cli, tmp_path, name):
    first = cli("validate", name, "--json")
    assert first.exit_code == 0, first.output
    printed = tmp_path / "normalized.json"
    printed.write_text(first.stdout)
    again = cli("validate", printed, "--json")
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout) == json.loads(first.stdout)


def test_an_error_shows_a_rejected_long_word_by_its_start_and_length(cli, tmp_path):
    long = "x" * 5000
    scenario = tmp_path / "long.toml"
    scenario.write_text("name='a'\nduration_ms=10\n[[vm]]\nname='a'\n")
    result = cli("validate", scenario, "--set", f"{long}=1")
    # The word is the name with the punctuation around it (a colon, quotes).
    assert_user_error(result, "x" * 60 + "... (500", " characters)")
    assert len(result.stderr) < 1000
    assert_user_error(cli("validate", long), "... (500", "no such scenario")


def test_validate_accepts_builtin_text(cli, tmp_path):
    scenario = tmp_path / "ok.toml"
    scenario.write_text(default_toml())
    result = cli("validate", scenario)
    assert result.exit_code == 0 and result.stdout.startswith("ok: ")


def test_same_seed_gives_identical_summary(cli, tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    for out in (first, second):
        assert cli("run", "default", "--seed", "7", "--duration", SHORT, "--out", out).exit_code == 0
    assert (first / "summary.json").read_bytes() == (second / "summary.json").read_bytes()
    summary = json.loads((first / "summary.json").read_text())
    assert summary["seed"] == 7 and summary["duration_ns"] == 200_000_000


def test_run_prints_summary_table(cli, tmp_path):
    result = cli("run", "default", "--duration", SHORT, "--out", tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert result.exit_code == 0
    for vm in summary["vms"]:
        assert vm["name"] in result.stdout
    for workload in summary["workloads"]:
        assert workload["name"] in result.stdout


def test_scenarios_json_lists_every_builtin(cli):
    listed = json.loads(cli("scenarios", "--json").stdout)
    assert [entry["name"] for entry in listed] == BUILTINS
    assert all(entry["description"] for entry in listed)
    assert {"default", "bench-mixed-64", "bench-simpy-rr"} <= set(BUILTINS)


def test_scenarios_show_prints_toml(cli):
    assert cli("scenarios", "--show", "default").stdout.strip() == default_toml().strip()
    assert_user_error(cli("scenarios", "--show", "nope"), "nope")


def test_parquet_tables_round_trip_and_match_summary(cli, tmp_path):
    assert cli("run", "default", "--duration", SHORT, "--out", tmp_path).exit_code == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    requests = pl.read_parquet(tmp_path / "requests.parquet")
    samples = pl.read_parquet(tmp_path / "samples.parquet")
    tasks = pl.read_parquet(tmp_path / "tasks.parquet")
    for workload in summary["workloads"]:
        if "latency_ns" in workload:
            rows = requests.filter(pl.col("workload") == workload["name"])
            assert rows.height == workload["latency_ns"]["count"]
            assert rows["latency_ns"].max() == workload["latency_ns"]["max"]
    # One sample per entity per interval: every (metric, entity) series has the same length.
    lengths = samples.group_by("metric", "vm", "vcpu", "pcpu").len()["len"].unique()
    assert lengths.len() == 1
    shares = samples.filter(pl.col("metric") == "vm_cpu_share").group_by("vm").agg(pl.col("value").mean())
    assert shares.height == len(summary["vms"])
    assert set(tasks.columns) >= {"vm", "task", "workload", "cpu_time_ns", "runnable_ns",
                                  "context_switches", "migrations", "spin_ns"}
    total_task_time = tasks["cpu_time_ns"].sum()
    assert 0 < total_task_time <= sum(vm["cpu_time_ns"] for vm in summary["vms"])


def test_policies_and_kernels_list_the_registry(cli):
    listed = json.loads(cli("policies", "--json").output)
    names = {(p["name"], p["level"]) for p in listed}
    assert {("cfs", "host"), ("linux", "guest")} <= names
    assert all(set(p) == {"name", "level", "description", "params"} for p in listed)
    kernels = json.loads(cli("kernels", "--json").output)
    assert "linux-6.5" in {k["name"] for k in kernels}
    assert all(set(k) == {"name", "description", "sets"} for k in kernels)
    assert_user_error(cli("validate", "default", "--set", "host.kernel=linux-9"), "host.kernel", "linux-6.5")


def test_run_takes_a_variant_of_the_scenario(cli, tmp_path):
    """`--variant NAME` runs the scenario's [variants.NAME] exactly as its settings given
    with --set would; --set refines it; an unknown name lists the known ones."""
    by_name = tmp_path / "by-name"
    by_set = tmp_path / "by-set"
    assert cli("run", "uvf-fig8", "--variant", "balance", "--duration", "50ms", "--no-record",
               "--out", by_name).exit_code == 0
    assert cli("run", "uvf-fig8", "--set", 'host.cfs.balance="strict"', "--duration", "50ms", "--no-record",
               "--out", by_set).exit_code == 0
    plain = json.loads((by_set / "summary.json").read_text())
    assert json.loads((by_name / "summary.json").read_text()) == plain
    assert json.loads((by_name / "run.json").read_text())["overrides"] == ['host.cfs.balance="strict"']
    refined = tmp_path / "refined"
    assert cli("run", "uvf-fig8", "--variant", "balance", "--set", 'host.cfs.balance="off"', "--duration", "50ms",
               "--no-record", "--out", refined).exit_code == 0
    assert json.loads((refined / "summary.json").read_text()) != plain
    result = cli("run", "uvf-fig8", "--variant", "nope", "--out", tmp_path / "bad")
    assert_user_error(result, "nope", "lc-balance")
    assert not (tmp_path / "bad").exists()


def test_help_and_names_keep_their_square_brackets(cli):
    """Help texts are printed as written, and names from the scenario print whole: square
    brackets are not read as terminal markup."""
    assert "its [variants] against the schema" in " ".join(cli("validate", "-h").stdout.split())
    assert "[variants.NAME]" in " ".join(cli("run", "-h").stdout.split())
    from vmsched.summary_table import print_summary
    from vmsched.terminal import make_console
    console = make_console()
    with console.capture() as captured:
        print_summary({"scenario": "s[1]", "seed": 1, "duration_ns": 10**9, "events": 1,
                       "host": {"pcpus": 1, "busy_ns": 0, "policy": "cfs"},
                       "vms": [{"name": "vm[a]", "vcpus": [], "share": 0, "entitlement": 0, "steal_ns": 0,
                                "context_switches": 0, "migrations": 0}],
                       "workloads": [{"name": "w[x]/y", "vm": "vm[a]", "completed": 0, "throughput_per_s": 0}],
                       "locks": {}}, console)
    text = captured.get()
    assert "s[1]" in text and "vm[a]" in text and "w[x]/y" in text
