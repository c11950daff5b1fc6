"""The benchmark harness (bench/harness.py): its numbers, ratio cells, notes and tables, and its
process-per-case runner on small cases written here. No timing is asserted, only what is reported."""

import importlib.util
import math
import sys
import textwrap
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parent.parent / "bench" / "harness.py"


def _load_harness():
    """bench/harness.py under the name bench/_common.py and the case processes give it."""
    if "tfrec_fast_bench" not in sys.modules:
        spec = importlib.util.spec_from_file_location("tfrec_fast_bench", HARNESS)
        sys.modules["tfrec_fast_bench"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules["tfrec_fast_bench"])
    return sys.modules["tfrec_fast_bench"]


H = _load_harness()


def result(name, times, label=None, **kw):
    return H.Result(name, label or name, {}, times=list(times), **kw)


# ---- numbers ------------------------------------------------------------------------------------


def test_spread_is_interquartile_range_over_median():
    assert H.spread([1.0, 2.0, 3.0, 4.0, 5.0]) == pytest.approx((4.0 - 2.0) / 3.0)
    assert math.isnan(H.spread([2.0]))
    assert math.isnan(H.spread([]))


def test_result_median_and_ok():
    r = result("a", [3.0, 1.0, 2.0])
    assert r.ok and r.median == 2.0
    assert not result("b", []).ok
    assert not result("c", [1.0], skip="peer missing").ok
    assert not result("d", [1.0], error="wrong output").ok


def test_fastest_takes_ok_rows_only():
    rows = [
        result("eager", [2.0]),
        result("function", [1.0], error="broken"),
        result("other", [0.1]),
    ]
    assert H.fastest(rows, ["eager", "function"]).name == "eager"
    assert H.fastest(rows, ["missing"]) is None


def test_formatting():
    assert (
        H.fmt_rate(1.5e9) == "1.50 G" and H.fmt_rate(2.5e6) == "2.50 M" and H.fmt_rate(999) == "999"
    )
    assert H.fmt_rate(None) == "—" and H.fmt_num(float("nan")) == "—"
    assert H.fmt_num(12.345, ".1f", "x") == "12.3x"


def test_md_table_pads_columns():
    text = H.md_table(["a", "long header"], [["xyz", "1"]])
    assert text.splitlines() == [
        "| a   | long header |",
        "|-----|-------------|",
        "| xyz | 1           |",
    ]


# ---- columns, notes, tables ---------------------------------------------------------------------


def test_versus_is_the_peer_median_over_the_row_median():
    rows = [result("mine", [1.0]), result("peer", [4.0]), result("gone", [], skip="not installed")]
    vs = H.Versus("vs peer", "peer")
    assert vs.ratio(rows[0], rows) == 4.0
    assert vs.cell(rows[0], rows) == "4.00x"
    assert vs.cell(rows[1], rows) == "1.00x"
    assert H.Versus("vs gone", "gone").cell(rows[0], rows) == "—"  # a missing peer: no ratio
    assert H.Versus("of peer", "peer", suffix="").cell(rows[0], rows) == "4.00"


def test_versus_uses_the_fastest_of_several_peers():
    rows = [result("mine", [1.0]), result("eager", [8.0]), result("function", [2.0])]
    assert H.Versus("vs TF", "eager", "function").ratio(rows[0], rows) == 2.0


def test_targets_mark_only_the_rows_held_to_them():
    rows = [
        result("mine", [1.0], label="fast"),
        result("slow", [1.0], label="slow one"),
        result("peer", [5.0]),
    ]
    vs = H.Versus("vs peer", "peer", target=10, mine=lambda r: r.name in ("mine", "slow"))
    assert vs.cell(rows[0], rows) == "5.00x ❌ (target ≥10x)"
    assert vs.cell(rows[2], rows) == "1.00x"  # the peer itself is not held to it
    met = H.Versus("vs peer", "peer", target=2, mine=lambda r: r.name == "mine")
    assert met.cell(rows[0], rows) == "5.00x ✅ (target ≥2x)"
    assert H.targets(rows, [vs], "parse") == [
        "parse, fast: 5.0x peer (target 10x: MISSED)",
        "parse, slow one: 5.0x peer (target 10x: MISSED)",
    ]
    assert H.targets(rows, [met], "parse") == ["parse, fast: 5.0x peer (target 2x: met)"]


def test_within_holds_a_row_to_a_share_of_its_peers_time():
    rows = [
        result("arrow", [1.1], label="arrow"),
        result("slow", [1.5], label="slow"),
        result("base", [1.0]),
    ]
    vs = H.Versus("vs base", "base", within=1.2, mine=lambda r: r.name in ("arrow", "slow"))
    assert vs.cell(rows[0], rows) == "0.91x ✅ (time 1.10x, target ≤1.2x)"
    assert vs.cell(rows[1], rows) == "0.67x ❌ (time 1.50x, target ≤1.2x)"
    assert vs.cell(rows[2], rows) == "1.00x"
    assert H.targets(rows, [vs], "arrow") == [
        "arrow, arrow: 0.91x base (time 1.10x, target ≤1.2x: met)",
        "arrow, slow: 0.67x base (time 1.50x, target ≤1.2x: MISSED)",
    ]


def test_a_table_of_no_ok_rows_is_its_header_and_the_notes():
    rows = [result("gone", [], skip="not installed")]
    text, lines = H.table(rows, [H.Versus("vs gone", "gone")])
    assert text.splitlines() == ["| implementation | vs gone |", "|----------------|---------|"]
    assert lines == ["gone: skipped -- not installed"]


def test_per_second_and_figure():
    r = result("a", [2.0], records=10)
    assert H.per_second("records/s", 4e6).cell(r, [r]) == "2.00 M"
    assert H.per_second("GB/s", 3.0, ".3f").cell(r, [r]) == "1.500"
    assert H.per_second("records/s", lambda row: None).cell(r, [r]) == "—"
    assert H.figure("x", lambda row: row.records / 4, ".1f").cell(r, [r]) == "2.5"


def test_notes_say_why_rows_are_missing_then_what_rows_measured():
    rows = [
        result("ok", [1.0], label="A", info="both CRCs", notes=["checked"]),
        result("tf", [], label="TF", skip="tensorflow not installed"),
        result("bad", [1.0], label="B", error="output differs"),
    ]
    assert H.notes(rows) == [
        "TF: skipped -- tensorflow not installed",
        "B: FAILED -- output differs",
        "A: both CRCs; checked",
    ]


def test_table_shows_ok_rows_only():
    rows = [
        result("a", [1.0, 1.0], label="A", loops=3),
        result("b", [], label="B", skip="peer missing"),
    ]
    text, notes = H.table(rows, H.timing(".1f"), first="reader")
    assert text.splitlines()[0].split("|")[1:-1] == [
        " reader ",
        " median s ",
        " IQR/median ",
        " runs/sample ",
    ]
    assert text.splitlines()[2] == "| A      | 1.0      | 0%         | 3           |"
    assert "B" not in text and notes == ["B: skipped -- peer missing"]


def test_section_and_select():
    assert H.section("T", "table", ["n"]) == "### T\n\ntable\n\n- n\n"
    cases = [H.Case("a", "A", H.read_batches), H.Case("b", "B", H.read_each)]
    assert [c.name for c in H.select(cases, "b")] == ["b"]
    assert H.select(cases, None) == cases


def test_expect_records_fails_rows_with_another_count():
    rows = [
        result("a", [1.0], records=5),
        result("b", [1.0], records=4),
        result("probe", [1.0], records=0),
    ]
    H.expect_records(rows, 5, exempt=["probe"])
    assert [r.error for r in rows] == [None, "handled 4 records, expected 5", None]


def test_need_says_not_installed():
    with pytest.raises(H.Skip, match="^no_such_module_for_bench not installed$"):
        H.need("no_such_module_for_bench.sub")
    assert H.need("json").dumps(1) == "1"


def test_need_says_not_importable_when_the_import_itself_fails(tmp_path, monkeypatch):
    (tmp_path / "broken_peer_for_bench.py").write_text("import no_such_dependency_for_bench\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(
        H.Skip, match="broken_peer_for_bench not importable .*no_such_dependency_for_bench"
    ):
        H.need("broken_peer_for_bench")


# ---- the runner, on cases in a module of their own ----------------------------------------------

CASES = """
import os
import sys

H = sys.modules["tfrec_fast_bench"]  # the harness this worker process runs


def ok(opts):
    state = {"prepared": 0}

    def prepare():
        state["prepared"] += 1

    return H.Body(lambda: opts.n, prepare=prepare, info=f"case {opts.case}",
                  extras=lambda: {"prepared": state["prepared"]})


def missing_peer(opts):
    H.need("no_such_peer_for_bench")


def wrong_output(opts):
    return H.Body(lambda: opts.n, check=lambda: "output differs")


def crashes(opts):
    return H.Body(lambda: os._exit(3))


def setup_raises(opts):
    raise ValueError("no data")


def answer(opts):
    return {"n": opts.n, "pid": os.getpid()}


def skipped_call(opts):
    raise H.Skip("tensorflow not installed")
"""


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    path = tmp_path_factory.mktemp("bench") / "harness_cases.py"
    path.write_text(textwrap.dedent(CASES))
    spec = importlib.util.spec_from_file_location("harness_cases", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_measure_runs_each_case_in_its_own_process(cases, tmp_path):
    names = ["ok", "missing_peer", "wrong_output", "crashes", "setup_raises"]
    run = [H.Case(n, n.upper(), getattr(cases, n)) for n in names]
    got = {
        r.name: r
        for r in H.measure(run, {"n": 7}, repeats=3, warmup=1, verbose=False, log_dir=tmp_path)
    }
    ok = got["ok"]
    assert ok.ok and len(ok.times) == 3 and ok.records == 7 and ok.info == "case ok"
    assert ok.extra["prepared"] == [2, 3, 4]  # prepare() before every run, the warm-up's first
    assert len(ok.extra["cpu_s"]) == 3
    assert got["missing_peer"].skip == "no_such_peer_for_bench not installed"
    assert got["wrong_output"].error == "output differs" and not got["wrong_output"].times
    assert got["crashes"].error.startswith("worker died (exit 3)")
    assert got["setup_raises"].error == "setup failed: ValueError: no data"  # a failure, not a skip
    assert got["setup_raises"].skip is None
    assert "ValueError: no data" in (tmp_path / "setup_raises.log").read_text()


def test_measure_loops_fast_cases_up_to_min_time(cases):
    (r,) = H.measure(
        [H.Case("ok", "OK", cases.ok)], {"n": 1}, repeats=2, min_time=0.05, verbose=False
    )
    assert r.ok and r.loops > 1 and r.extra["prepared"][1] - r.extra["prepared"][0] == r.loops


def test_measure_pools_the_samples_of_several_processes(cases, tmp_path):
    run = [
        H.Case("ok", "OK", cases.ok),
        H.Case("missing_peer", "MISSING", cases.missing_peer),
        H.Case("wrong_output", "WRONG", cases.wrong_output),
    ]
    got = {
        r.name: r
        for r in H.measure(run, {"n": 3}, repeats=2, processes=3, verbose=False, log_dir=tmp_path)
    }
    ok = got["ok"]
    assert ok.ok and ok.records == 3 and len(ok.times) == 6
    assert ok.extra["process"] == [0, 0, 1, 1, 2, 2]
    assert ok.extra["prepared"] == [2, 3] * 3  # each pass a new process: prepare() counts anew
    assert got["missing_peer"].skip == "no_such_peer_for_bench not installed"
    assert got["wrong_output"].error == "output differs" and not got["wrong_output"].times
    assert sorted(p.name for p in tmp_path.iterdir()) == ["process0", "process1", "process2"]
    with pytest.raises(ValueError, match="processes"):
        H.measure(run, {"n": 3}, repeats=1, processes=0, verbose=False)


def test_options_carry_processes_into_measure_and_the_method_sentence():
    import argparse

    ap = argparse.ArgumentParser()
    H.add_arguments(ap)
    one, three = ap.parse_args([]), ap.parse_args(["--processes", "3", "--repeats", "4"])
    assert H.timing_options(one)["processes"] == 1 and H.timing_options(three)["processes"] == 3
    assert "new processes" not in H.method(one)
    assert "made 3 times, each time in new processes" in H.method(
        three
    ) and "median of 12" in H.method(three)


def test_pooled_counts_must_agree():
    a = result("x", [1.0], records=5)
    b = result("x", [2.0], records=6)
    pooled = H._pooled([a, b])
    assert not pooled.ok and "record count differs" in pooled.error


def test_call_returns_the_result_of_a_fresh_process(cases):
    import os

    got = H.call(cases.answer, {"n": 5})
    assert got["n"] == 5 and got["pid"] != os.getpid()
    with pytest.raises(H.Skip, match="tensorflow not installed"):
        H.call(cases.skipped_call, {})


def test_measure_rss_reports_the_peak_over_the_baseline(cases):
    ok, gone = H.measure_rss(
        [H.Case("ok", "OK", cases.ok), H.Case("gone", "GONE", cases.missing_peer)], {"n": 2}
    )
    assert (
        ok.ok
        and ok.records == 2
        and ok.extra["maxrss_kib"][0] >= ok.extra["maxrss_base_kib"][0] > 0
    )
    assert gone.skip == "no_such_peer_for_bench not installed"


# ---- output: provenance, failures, exit status ---------------------------------------------------


def test_failures_are_found_in_nested_raw_timings():
    rows = [
        result("ok", [1.0]),
        result("gone", [], label="GONE", skip="not installed"),
        result("bad", [1.0], label="BAD", error="output differs"),
    ]
    nested = {"table": {"timings": H.raw(rows), "rss": H.raw([])}, "other": [H.raw(rows[:2])]}
    assert H.failures(nested) == ["BAD: output differs"]
    assert H.failures(H.raw(rows[:2])) == []


def test_emit_writes_where_it_comes_from_and_fails_on_a_failed_row(tmp_path, capsys):
    ok, bad = result("ok", [1.0]), result("bad", [1.0], label="BAD", error="wrong output")
    md = tmp_path / "out.md"
    assert H.emit(["### T\n\ntable\n"], H.raw([ok]), str(md), None, ["x: met"]) == 0
    text = md.read_text()
    assert text.startswith("_Made by `") and "### Targets" in text and "Failed rows" not in text
    assert H.emit(["### T\n"], {"t": H.raw([ok, bad])}, str(md), None) == 1
    assert "### Failed rows\n\n- BAD: wrong output" in md.read_text()
    assert "FAILED: BAD: wrong output" in capsys.readouterr().err


def test_provenance_names_the_command_the_commit_and_local_changes(tmp_path, monkeypatch):
    import subprocess

    def git(*args):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=tmp_path,
            check=True,
            capture_output=True,
        )

    git("init", "-q")
    script = tmp_path / "bench" / "bench_x.py"
    script.parent.mkdir()
    script.write_text("pass\n")
    git("add", ".")
    git("commit", "-q", "-m", "x")
    head = subprocess.run(
        ["git", "rev-parse", "--short=12", "HEAD"], cwd=tmp_path, text=True, capture_output=True
    ).stdout.strip()
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    line = H.provenance([str(script), "--repeats", "3"])
    assert "OPENBLAS_NUM_THREADS=1 " in line and "bench/bench_x.py --repeats 3`" in line
    assert f"at commit {head};" in line and "uncommitted" not in line
    script.write_text("pass  # changed\n")
    assert f"at commit {head} **+ uncommitted changes**" in H.provenance([str(script)])
