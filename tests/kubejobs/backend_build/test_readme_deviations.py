"""The package README names, for each deliberate deviation from Flyte's Go plugins, a test that exists:
object building (section "Backend", tests here) and status mapping (section "Status mapping", tests in
../backend_status)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
README = HERE.parents[2] / "plugins" / "flytekitplugins-kubejobs" / "README.md"


def _defined_tests(folder: Path) -> set[str]:
    defined: set[str] = set()
    for path in folder.glob("test_*.py"):
        defined |= set(re.findall(r"^def (test_\w+)", path.read_text(), flags=re.M))
    return defined


@pytest.mark.parametrize(
    ("section", "end", "folder", "at_least"),
    [
        ("## Backend", "### Decisions (backend)", HERE, 10),
        ("## Status mapping", "### Decisions (status)", HERE.parent / "backend_status", 10),
    ],
    ids=["backend", "status"],
)
def test_every_deviation_names_an_existing_test(section: str, end: str, folder: Path, at_least: int) -> None:
    text = README.read_text()
    part = text[text.index(section) : text.index(end)]
    deviations = part[part.index("### Deliberate deviations") :]
    items = re.split(r"\n\d+\. ", deviations)[1:]
    assert len(items) >= at_least
    defined = _defined_tests(folder)
    for item in items:
        named = re.findall(r"`(test_\w+)", item)
        assert named, f"deviation without a test: {item[:80]!r}"
        for name in named:
            assert name in defined, f"README names {name}, which is not a test in {folder}"
