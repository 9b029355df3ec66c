"""The terminal view (reactlab.views.terminal): plain without a TTY, coloured on request,
and safe."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from reactlab.analysis.verify import load_verified
from reactlab.cli import main
from reactlab.views.terminal import format_run, show, use_color
from tests.test_viewer import CLEAR_SCREEN, HOSTILE, make_runs, write_hostile_trace

SGR = re.compile(r"\x1b\[[0-9;]*m")
RUNS = [("cierre_acme", "openai", "cierre_inventado"),
        ("noticias_busi_abril", "openai", "inyeccion_obedece_alcance"),
        ("variacion_busi", "openai", "bucle_presupuesto"),
        ("variacion_busi", "openai", "fallo_servidor_persistente")]


@pytest.fixture(scope="module")
def pairs(toolbox: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, str]]:
    got = make_runs(toolbox, tmp_path_factory.mktemp("show_runs"), RUNS)
    return {s: p for (_, _, s), p in zip(RUNS, got, strict=True)}


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_when_stdout_is_not_a_tty(pairs, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", pairs["cierre_inventado"][0]]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out
    assert "run       cierre_acme/openai/cierre_inventado" in out
    assert "── step 1 ── 338 tokens sent (cumulative 338)" in out
    assert '→ precio {"ticker": "ACME", "fecha": "2024-03-15"}  [error] call_0_0' in out
    assert "✗ ticker desconocido: ACME" in out
    assert "answer    El cierre del ticker ACME el 2024-03-15 fue de $10." in out
    assert "verdict   REJECTED — 2 finding(s)" in out
    assert out.rstrip().endswith("- unresolved_tool_error: unresolved tool error")
    assert "- figure_without_source: figure without a source: 10" in out


def test_coloured_with_color_always(pairs, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", pairs["cierre_inventado"][0], "--color", "always"]) == 0
    out = capsys.readouterr().out
    assert "\x1b[" in out
    assert "\x1b[1;4;31m10\x1b[0m" in out  # the figure without a source, highlighted
    assert "\x1b[31m[error]\x1b[0m" in out
    plain = SGR.sub("", out)
    assert "\x1b" not in plain
    assert main(["show", pairs["cierre_inventado"][0], "--color", "never"]) == 0
    assert capsys.readouterr().out == plain


def test_auto_colour_follows_the_tty_and_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    assert use_color("auto", _Tty()) is True
    assert use_color("auto", io.StringIO()) is False
    assert use_color("always", io.StringIO()) is True
    assert use_color("never", _Tty()) is False
    monkeypatch.setenv("NO_COLOR", "1")
    assert use_color("auto", _Tty()) is False
    with pytest.raises(ValueError):
        use_color("sometimes", _Tty())


def test_auto_on_a_tty_colours(pairs, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    stream = _Tty()
    show(pairs["cierre_inventado"][0], stream=stream)
    assert "\x1b[1;4;31m10\x1b[0m" in stream.getvalue()


def test_guardrails_errors_and_blocked_calls(pairs, capsys: pytest.CaptureFixture[str]) -> None:
    show(pairs["inyeccion_obedece_alcance"][0], color="never")
    out = capsys.readouterr().out
    assert "[blocked] call_1_0" in out and "! guardrail scope_rule" in out
    assert "<INFORMATION>" in out  # a terminal is not HTML: the text is shown as it is
    show(pairs["bucle_presupuesto"][0], color="never")
    out = capsys.readouterr().out
    assert out.count("! guardrail repeated_call") == 5 and "[repeated]" in out
    assert "! guardrail token_budget" in out and "875 tokens refused, 551 left" in out
    assert "answer    no answer (token budget)" in out
    show(pairs["fallo_servidor_persistente"][0], color="never")
    out = capsys.readouterr().out
    assert "✗ backend error server (HTTP 503) after 3 attempt(s)" in out
    assert "answer    no answer (backend error)" in out


def test_verified_file_is_used_when_given(pairs, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    tpath, vpath = pairs["cierre_inventado"]
    rec = json.loads(Path(vpath).read_text(encoding="utf-8"))
    rec["verified"], rec["findings"] = True, []
    edited = tmp_path / "v.json"
    edited.write_text(json.dumps(rec), encoding="utf-8")
    assert main(["show", tpath, "--verified", str(edited)]) == 0
    assert "verdict   verified" in capsys.readouterr().out
    other = pairs["bucle_presupuesto"][1]
    assert main(["show", tpath, "--verified", other]) == 2
    assert "another version of the trace" in capsys.readouterr().err


def test_hostile_text_cannot_drive_the_terminal(pairs, tmp_path: Path) -> None:
    tpath, vpath = write_hostile_trace(Path(pairs["cierre_inventado"][0]),
                                       tmp_path / "hostil.jsonl")
    run = load_verified(str(tpath), vpath)
    for color in (False, True):
        out = format_run(run, color)
        plain = SGR.sub("", out)
        assert CLEAR_SCREEN not in out and "\x1b" not in plain
        assert "\u202e" not in out and "\ud800" not in out
        assert "\\x1b[2J" in plain and "\\u202e" in plain and "\\ud800" in plain
        assert HOSTILE in plain  # shown as text; a terminal does not run it
        # A line break in the answer cannot forge a line of the view.
        assert not [ln for ln in plain.splitlines() if ln.startswith("verdict   verified")]
        assert "verdict   REJECTED" in plain
    out = format_run(run, True)
    assert f"\x1b[1;4;31m\"{HOSTILE}\"\x1b[0m" in out


def test_a_narrow_encoding_does_not_crash(pairs) -> None:
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="ascii")
    show(pairs["cierre_inventado"][0], color="never", stream=stream)
    text = raw.getvalue().decode("ascii")
    assert "\\xbfCu\\xe1l fue el cierre de ACME" in text
