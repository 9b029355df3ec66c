"""One definition of a run count (reactlab.views.counts; issue 41, item 3). The default
run's cross-check of every reader is tests/test_pipeline.py's test_one_count_everywhere."""

from __future__ import annotations

from pathlib import Path

import pytest

from reactlab import cli
from reactlab.views.counts import agent_of, count, format_counts, is_trial_trace

TRIALS = """task,backend,scenario,trial,trace
t,a,correcto,1,results/traces/t/a/correcto.jsonl
t,a,bucle__langchain,1,results/traces/t/a/bucle__langchain.jsonl
t,b,react,1,results/traces/t/b/react/t1.jsonl
t,b,react,2,results/traces/t/b/react/t2.jsonl
t,b,correcto,1,results/traces/t/b/correcto.jsonl
"""


def test_three_selections_by_backend(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                     ) -> None:
    assert is_trial_trace("results/traces/t/b/react/t2.jsonl")
    assert not is_trial_trace("results/traces/t/b/t2.jsonl/x.jsonl")
    assert (agent_of("bucle__langchain"), agent_of("bucle")) == ("langchain", "lesson")
    rows = [{"backend": "a", "agent": "lesson", "trial": 0},
            {"backend": "a", "agent": "langchain", "trial": ""},
            {"backend": "b", "agent": "lesson", "trial": 1},
            {"backend": "b", "agent": "lesson", "trial": 2},
            {"backend": "b", "agent": "lesson", "trial": None}]
    expected = {"a": {"runs": 2, "one_draw": 2, "lesson_loop": 1},
                "b": {"runs": 3, "one_draw": 1, "lesson_loop": 1}}
    assert count(rows, "backend") == expected
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "trials.csv").write_text(TRIALS, encoding="utf-8")
    assert cli.main(["summary", "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out == format_counts(expected, "backend") + "\n"
    assert out.splitlines()[:4] == ["backend  runs  one_draw  lesson_loop",
                                    "a           2         2            1",
                                    "b           3         1            1",
                                    "all         5         3            2"]
    assert cli.main(["summary", "--results", str(tmp_path / "none")]) == 2
    assert "trials.csv: no such table" in capsys.readouterr().err
