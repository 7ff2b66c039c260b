"""The top README: the first screen shows the two commands, and the Operate section documents
every check `wspin check` runs, in its order."""

from __future__ import annotations

import re
from pathlib import Path

from tests.wspinctl.installation import NAMES

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_the_first_screen_shows_make_demo_and_make_test() -> None:
    first_screen = "\n".join(README.splitlines()[:24])
    assert "make demo" in first_screen and "make test" in first_screen


def test_the_operate_section_shows_every_check_in_order_with_output_and_its_table() -> None:
    operate = README.split("## Operate", 1)[1].split("\n## ", 1)[0]
    printed = re.findall(r"^[✓✗] (\S+)", operate, re.M)
    assert printed == NAMES
    tabled = [
        n
        for cell in re.findall(r"^\| (`[^|]+`) \|", operate, re.M)
        for n in re.findall(r"`([^`]+)`", cell)
    ]
    assert tabled == NAMES
    assert "$ wspin status" in operate and "llmsafespaces_workspace_pods" in operate
