"""`python -m optbench order`: the table's reading of three arrangements (the runs themselves: test_isolation)."""

from records import make_record

from optbench.__main__ import main
from optbench.studies.order import OrderCheck, order_markdown

STEADY = "smoke:b.py::test_x[steady]"
MOVED = "smoke:b.py::test_x[moved]"


def runs(*speedups):
    return {case: make_record(case, speedup) for case, speedup in speedups}


def test_a_case_that_moves_beyond_the_between_run_margin_in_one_arrangement_is_not_the_same():
    forward = runs((STEADY, (1.20, 1.18, 1.22)), (MOVED, (0.80, 0.78, 0.82)))
    check = OrderCheck(
        forward=forward,
        reversed=runs((STEADY, (1.21, 1.19, 1.23)), (MOVED, (0.81, 0.79, 0.83))),
        alone=runs((STEADY, (1.19, 1.17, 1.21)), (MOVED, (0.62, 0.60, 0.64))),
        wall_s=120,
    )
    table = order_markdown(check)
    rows = {row.split(" | ")[0].lstrip("| "): row for row in table.splitlines() if row.startswith("| test_x")}
    assert rows["test_x[steady]"].endswith("| yes | yes |")
    assert rows["test_x[moved]"].endswith("| NO | NO |") and "-22.5% (margin" in rows["test_x[moved]"]
    assert table.endswith(
        "intervals overlap in all three arrangements: 1/2; "
        "within the gate's between-run margin in all three: 1/2 (2 min)"
    )


def test_disjoint_intervals_within_the_between_run_margin_are_told_apart():
    forward = runs((STEADY, (1.00, 0.99, 1.01)))
    shifted = runs((STEADY, (1.04, 1.03, 1.05)))
    table = order_markdown(OrderCheck(forward=forward, reversed=shifted, alone=forward, wall_s=60))
    assert "| NO | yes |" in table


def test_a_case_missing_from_an_arrangement_is_not_the_same():
    forward = runs((STEADY, (1.20, 1.18, 1.22)))
    table = order_markdown(OrderCheck(forward=forward, reversed=forward, alone={}, wall_s=60))
    assert "| - | NO | NO |" in table and "within the gate's between-run margin in all three: 0/1" in table


def test_a_selection_that_collects_nothing_is_a_one_line_error(tmp_path, monkeypatch, capsys):
    (tmp_path / "test_nothing.py").write_text("def test_plain():\n    pass\n")
    monkeypatch.chdir(tmp_path)
    assert main(["order", "--tests", "test_nothing.py", "-k", "no_such_case"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("error: nothing collected from test_nothing.py") and "\n" not in error
    assert not (tmp_path / "order.md").exists()
