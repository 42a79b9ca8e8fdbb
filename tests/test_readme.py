"""The README's example is the file the documentation includes, its printed output is the
file beside it, and the example still prints what that output shows."""

from pathlib import Path
import re
import subprocess
import sys

import pytest

ROOT = Path(__file__).parent.parent
ASSETS = ROOT / "docs" / "assets"


def _blocks(language: str) -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.DOTALL)


def test_the_readme_example_is_the_documented_file():
    assert (ASSETS / "readme_example.py").read_text() in _blocks("python")
    assert (ASSETS / "readme_example_output.txt").read_text() in _blocks("text")


@pytest.mark.slow
def test_the_readme_example_prints_its_output():
    run = subprocess.run(
        [sys.executable, str(ASSETS / "readme_example.py")],
        capture_output=True, text=True, check=True, cwd=ROOT,
    )  # fmt: skip
    printed = run.stdout + run.stderr
    assert "discrete kernel CollapsedDraw" in printed
    # the diagnosis: the labels judged by the log joint, no problem found
    assert re.search(r"z log joint\s+1\.00\d\s+[\d.]+\s+-", printed), printed
    expected = (ASSETS / "readme_example_output.txt").read_text()
    for line in expected.splitlines():
        if line.strip().startswith(("weights", "locs", "scale")):
            # the same means to two decimals (a different CPU may round draws apart)
            name, mean = line.split()[:2]
            assert re.search(rf"{re.escape(name)}\s+{re.escape(mean)}", printed), (name, printed)
