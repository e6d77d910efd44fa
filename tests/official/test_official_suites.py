"""Drop-in, measured by the official plugins' own test suites (see suites.py for how they are fetched,
rewritten and run): every official test that passes with the official plugins passes with ours, or is in
the reviewed table of deliberate differences (deliberate.py), which the READMEs show."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from . import suites
from .deliberate import DELIBERATE, README_BLOCK_BEGIN, README_BLOCK_END, readme_block

READMES = {
    name: suites.REPO / "plugins" / f"flytekitplugins-{name}" / "README.md" for name in ("kfoperators", "raycluster")
}


@pytest.mark.slow
@pytest.mark.first
# The official Elastic file starts real torch worlds (spawn and fork) and waits on torch's 5 s monitor: several
# minutes of wall time when the machine is shared, beyond the suite's 300 s per-test cap.
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("group", sorted(suites.GROUPS))
def test_what_passes_with_the_official_plugins_passes_with_ours(group: str, tmp_path: Path) -> None:
    official = suites.official_results(tmp_path / "official", group)
    ours = suites.run(suites.layout(tmp_path / "ours", ours=True), group)
    selection = suites.GROUPS[group]
    assert official and all(selection.selects(test_id) for test_id in official)
    passed = {t for t, outcome in official.items() if outcome == "passed"}
    regressions = sorted(t for t in passed if ours.get(t) != "passed" and t not in DELIBERATE)
    listed = {t for t in DELIBERATE if selection.selects(t)}
    stale = sorted(t for t in listed if ours.get(t) == "passed" or t not in passed)
    print(  # the numbers, in the -rA / -s report
        f"{group}: official passes {len(passed)}/{len(official)}, ours passes "
        f"{sum(ours.get(t) == 'passed' for t in official)}; official failures (not counted): "
        f"{sorted(t for t in official if t not in passed)}"
    )
    assert regressions == [], f"official tests that pass with the official plugins and fail with ours: {regressions}"
    assert stale == [], f"listed as deliberate but not (or no longer) a difference: {stale}"


@pytest.mark.parametrize(
    "test_id",
    [
        "test_elastic_task.py::test_end_to_end[spawn]",
        "test_elastic_task.py::test_recoverable_error[True-fork]",
        "test_elastic_task.py::test_default_timeouts",
        "test_ray.py::test_ray_task",
    ],
)
def test_every_official_test_belongs_to_exactly_one_group(test_id: str) -> None:
    assert sum(group.selects(test_id) for group in suites.GROUPS.values()) == 1, test_id


def test_the_rewrite_changes_only_plugin_imports() -> None:
    source = (
        "from flytekitplugins.kfpytorch.task import Elastic\nimport flytekitplugins.kfmpi\n"
        "from flytekitplugins.ray import HeadNodeConfig\nfrom flytekitplugins.ray.models import RayJob\n"
        'x = "flytekitplugins.kfpytorch"\n'
    )
    assert suites.rewrite(source) == (
        "from flytekitplugins.kfoperators.task import Elastic\nimport flytekitplugins.kfoperators\n"
        "from flytekitplugins.raycluster import HeadNodeConfig\nfrom flytekitplugins.ray.models import RayJob\n"
        'x = "flytekitplugins.kfpytorch"\n'
    )


def _differences_section(text: str) -> str:
    match = re.search(r"^## Differences from [^\n]*\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert match, "no 'Differences from ...' section"
    return match.group(1)


@pytest.mark.parametrize("readme", sorted(READMES))
def test_the_readmes_show_the_table(readme: str) -> None:
    section = _differences_section(READMES[readme].read_text())
    start, end = section.find(README_BLOCK_BEGIN), section.find(README_BLOCK_END)
    assert 0 <= start < end, f"{readme} README: no generated block in its Differences section"
    assert section[start : end + len(README_BLOCK_END)] == readme_block(readme), (
        f"regenerate the block from tests/official/deliberate.py:\n{readme_block(readme)}"
    )
    for test_id, difference in DELIBERATE.items():
        if difference.readme == readme:
            assert difference.documented_by in section, f"{test_id}: {difference.documented_by!r} not documented"
