"""`compare` runs each variant on the same seed; its ratios equal those of separate runs."""
from __future__ import annotations

import pytest

import vmsched
from vmsched import _native
from vmsched.metrics import headline_metrics
from vmsched.overrides import parse_variant
from conftest import SHORT

VARIANTS = {"hz250": 250, "hz1000": 1000}


@pytest.fixture
def two_variant_scenario(tmp_path):
    text = next(toml for name, _, toml in _native.builtin_scenarios() if name == "default")
    tables = "".join(f'\n[variants.{name}]\n"host.hz" = {hz}\n' for name, hz in VARIANTS.items())
    path = tmp_path / "two_variants.toml"
    path.write_text(text + tables)
    return path


def test_ratios_equal_separate_runs(two_variant_scenario):
    frame = vmsched.compare(two_variant_scenario, seed=5, duration=SHORT)
    assert frame["variant"].unique(maintain_order=True).to_list() == list(VARIANTS)
    separate = {name: {m.name: m.value for m in headline_metrics(
        vmsched.run(two_variant_scenario, seed=5, duration=SHORT, set=[f"host.hz={hz}"], record=False).summary)}
        for name, hz in VARIANTS.items()}
    checked = 0
    for row in frame.iter_rows(named=True):
        assert row["value"] == pytest.approx(separate[row["variant"]][row["metric"]], rel=1e-12, abs=0)
        base = separate["hz250"][row["metric"]]
        if base:
            assert row["ratio"] == pytest.approx(separate[row["variant"]][row["metric"]] / base, rel=1e-12)
            checked += 1
    assert checked > 0


def test_cli_variants_match_file_variants(cli, two_variant_scenario, tmp_path):
    specs = [f"--variant={name}=host.hz={hz}" for name, hz in VARIANTS.items()]
    out = tmp_path / "cli"
    result = cli("compare", two_variant_scenario, *specs, "--seed", "5", "--duration", SHORT, "--out", out)
    assert result.exit_code == 0, result.output
    for name in VARIANTS:
        assert name in result.stdout
    assert "↓" in result.stdout and "↑" in result.stdout and "×" in result.stdout
    from_file = tmp_path / "file"
    assert cli("compare", two_variant_scenario, "--seed", "5", "--duration", SHORT, "--out", from_file).exit_code == 0
    for name in VARIANTS:
        assert (out / name / "summary.json").read_bytes() == (from_file / name / "summary.json").read_bytes()
    assert (out / "report.html").is_file() and (out / "compare.parquet").is_file()


def test_compare_report_renders(cli, two_variant_scenario, tmp_path, browser_load):
    from test_report import assert_charts_drawn
    out = tmp_path / "out"
    assert cli("compare", two_variant_scenario, "--duration", SHORT, "--out", out).exit_code == 0
    assert_charts_drawn(browser_load(out / "report.html"), expected_charts=4)


def test_bad_variant_is_a_user_error(cli, two_variant_scenario, tmp_path):
    result = cli("compare", two_variant_scenario, "--variant", "x=host.no_such_knob=1", "--out", tmp_path / "o")
    assert result.exit_code == 2 and "host.no_such_knob" in result.stderr
    assert not (tmp_path / "o").exists()
    result = cli("compare", "default", "--variant", "missing-overrides", "--out", tmp_path / "o")
    assert result.exit_code == 2


def test_variant_spec_keeps_commas_inside_values():
    assert parse_variant("pin=vm[0].pin=[0,1],host.hz=1000", "cli") == ("pin", ["vm[0].pin=[0,1]", "host.hz=1000"])
    assert parse_variant("base=", "cli") == ("base", [])


def test_change_against_a_zero_reference_is_absolute():
    from vmsched.metrics import change
    assert change(387, 0, "↓") == ("+387", "worse")
    assert change(387, 0, "↑") == ("+387", "better")
    assert change(0, 0, "↓") == ("=", "")
    assert change(50, 100, "↓") == ("×0.500", "better")
    assert change(101, 100, "") == ("×1.010", "")
    assert change(None, 100, "↓") == ("–", "")


def test_compare_report_colours_better_and_worse(cli, tmp_path):
    out = tmp_path / "out"
    # Weighting the web VM up changes both VMs' shares: some rows differ.
    assert cli("compare", "default", "--variant", "base=", "--variant", "heavy=vm[0].weight=8192",
               "--duration", SHORT, "--out", out).exit_code == 0
    html = (out / "report.html").read_text()
    assert 'class="num better"' in html or 'class="num worse"' in html


def across_seeds(cli, tmp_path, *args):
    import json
    result = cli("compare", *args, "--duration", SHORT, "--out", tmp_path / "out", "--json", "--workers", "2")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_identical_variants_never_differ_significantly(cli, tmp_path):
    document = across_seeds(cli, tmp_path, "default", "--variant", "a=host.hz=250", "--variant", "b=host.hz=250",
                            "--seeds", "3", "--seed", "11")
    assert document["seeds"] == [11, 12, 13]
    rows = document["across_seeds"]
    later = [row for row in rows if row["variant"] == "b"]
    assert later and all(row["n"] == 3 for row in later)
    assert not any(row["significant"] for row in later)
    assert all(row["diff_mean"] == 0 for row in later)
    # The seeds really differ: the server's tail latency varies from seed to seed.
    p99 = next(row for row in rows if row["variant"] == "a" and row["metric"] == "web/nginx-like: latency p99")
    assert p99["ci95"] > 0


def test_a_built_difference_is_significant_and_matches_separate_runs(cli, tmp_path):
    # Twice the requests: the web VM serves twice as many and uses more CPU, on every seed.
    variants = {"light": "vm[0].workload[0].rate_per_s=2000", "busy": "vm[0].workload[0].rate_per_s=4000"}
    document = across_seeds(cli, tmp_path, "default", *(f"--variant={name}={spec}" for name, spec in variants.items()),
                            "--seeds", "4,9,2")
    rows = {(row["metric"], row["variant"]): row for row in document["across_seeds"]}
    served, share = rows[("web/nginx-like: throughput", "busy")], rows[("web: CPU share", "busy")]
    assert served["significant"] and served["verdict"] == "better"
    assert served["ratio_mean"] == pytest.approx(2, rel=0.1)
    assert share["significant"] and share["diff_mean"] > 0
    # Mean, paired difference and ratio equal those computed from separate runs.
    separate = {(name, seed): {m.name: m.value for m in headline_metrics(vmsched.run(
        "default", seed=seed, duration=SHORT, set=[spec], record=False).summary)}
        for name, spec in variants.items() for seed in (4, 9, 2)}
    for metric in ("batch: CPU share", "web: steal", "web/nginx-like: latency p99"):
        heavy = [separate[("busy", seed)][metric] for seed in (4, 9, 2)]
        equal = [separate[("light", seed)][metric] for seed in (4, 9, 2)]
        row = rows[(metric, "busy")]
        assert row["mean"] == pytest.approx(sum(heavy) / 3, rel=1e-12)
        assert row["diff_mean"] == pytest.approx(sum(h - e for h, e in zip(heavy, equal)) / 3, rel=1e-9)
        assert row["ratio_mean"] == pytest.approx(sum(h / e for h, e in zip(heavy, equal)) / 3, rel=1e-9)
    # The statistics are kept beside the first seed's runs and shown in the report.
    out = tmp_path / "out"
    assert (out / "compare_seeds.parquet").is_file() and (out / "busy" / "summary.json").is_file()
    assert "Across seeds" in (out / "report.html").read_text()


@pytest.mark.parametrize("seeds, message", [("1", "at least 2 seeds"), ("x", "expected a count"),
                                            ("3,3", "repeated"), ("1,-1", "from 0 to 2^64-1")])
def test_bad_seeds_are_refused(cli, tmp_path, seeds, message):
    result = cli("compare", "default", "--variant", "a=host.hz=250", "--seeds", seeds, "--out", tmp_path / "out")
    assert result.exit_code == 2 and message in result.stderr, result.output
    assert not (tmp_path / "out").exists()
