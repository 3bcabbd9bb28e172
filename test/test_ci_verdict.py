""".ci/scenarios.py's verdict on a suite: unlisted failures fail CI, listed ones do not unless
a single-support threshold falls below the floor the list gives it."""

import importlib.util
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def ci_scenarios():
    spec = importlib.util.spec_from_file_location("ci_scenarios", ROOT / ".ci" / "scenarios.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def row(name, passed, threshold=None, ran=True):
    r = {"name": name, "passed": passed, "figure": f"{name} figure", "ran": ran}
    if threshold is not None:
        r["threshold_mps"] = threshold
    return r


def test_a_listed_row_with_a_floor_fails_ci_only_below_it():
    ci = ci_scenarios()
    listed = ["walk_push_random", {"push_ss_stance": 0.175}]
    held = ci.verdict([row("walk_push_random", False), row("push_ss_stance", False, 0.2125)], listed)
    assert held["new"] == {} and set(held["known"]) == {"walk_push_random", "push_ss_stance"}
    lost = ci.verdict([row("push_ss_stance", False, 0.1375)], listed)
    assert "below its floor 0.175" in lost["new"]["push_ss_stance"]
    at_floor = ci.verdict([row("push_ss_stance", False, 0.175)], listed)
    assert at_floor["new"] == {}


def test_unlisted_failures_fixed_rows_and_rows_not_run():
    ci = ci_scenarios()
    v = ci.verdict(
        [row("walk", False), row("push_ss_stance", True, 0.4), row("slope_up_10deg", False, ran=False)],
        [{"push_ss_stance": 0.175}, "slope_up_10deg"],
    )
    assert list(v["new"]) == ["walk"]
    assert v["fixed"] == ["push_ss_stance"]
    assert v["not_run"] == ["slope_up_10deg"] and "slope_up_10deg" not in v["known"]


@pytest.mark.parametrize("entry", [{"push_ss_stance": "fast"}, {"a": 0.1, "b": 0.2}, 3])
def test_a_bad_entry_names_itself(entry):
    with pytest.raises(ValueError, match="known_failures.yaml"):
        ci_scenarios().known_failures([entry])


def test_the_shipped_list_parses():
    known = yaml.safe_load((ROOT / ".ci" / "known_failures.yaml").read_text())
    for mode in known.values():
        for listed in mode.values():
            ci_scenarios().known_failures(listed)
