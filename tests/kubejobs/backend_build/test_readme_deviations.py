"""The package README's Backend section names, for each deviation, a test that exists here."""

from __future__ import annotations

import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
README = HERE.parents[2] / "plugins" / "flytekitplugins-kubejobs" / "README.md"


def test_every_deviation_names_an_existing_test():
    text = README.read_text()
    backend = text[text.index("## Backend") : text.index("### Decisions (backend)")]
    deviations = backend[backend.index("### Deliberate deviations") :]
    items = re.split(r"\n\d+\. ", deviations)[1:]
    assert len(items) >= 10
    defined = set()
    for path in HERE.glob("test_*.py"):
        defined |= set(re.findall(r"^def (test_\w+)", path.read_text(), flags=re.M))
    for item in items:
        named = re.findall(r"`(test_\w+)", item)
        assert named, f"deviation without a test: {item[:80]!r}"
        for name in named:
            assert name in defined, f"README names {name}, which is not a test in {HERE}"
