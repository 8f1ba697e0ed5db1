"""docs/oracle.md's tables of deviations and the oracle cases stay in step: every row names a
case a table declares, an open-issue row names its issue, and an intentional one says why.
(The other direction, a case that differs without a row, fails in the case itself.)"""
import importlib
import pathlib
import re

import oracle

HERE = pathlib.Path(__file__).parent


def test_every_row_names_a_declared_case():
    for path in sorted(HERE.glob("test_oracle_*.py")):
        importlib.import_module(path.stem)
    rows = oracle.deviations()
    unknown = sorted(set(rows) - oracle.CASES)
    assert not unknown, f"docs/oracle.md lists cases no table declares: {unknown}"


def test_rows_say_why():
    for case_id, (section, text) in oracle.deviations().items():
        if section == oracle.SECTIONS[1]:
            assert re.search(r"issue \d+", text), f"`{case_id}`: name the open issue"
        assert len(text) > 20, f"`{case_id}`: the row needs what differs and why"
