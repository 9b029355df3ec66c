"""The static HTML trace viewer (reactlab.views.html) on traces produced in-process."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from reactlab import config, trace
from reactlab.analysis import verify
from reactlab.cli import main
from reactlab.core.errors import TraceError
from reactlab.trace.records import End, ToolCallRecord, record_from_json
from reactlab.views import html as viewer
from tests.conftest import ROOT, run_specs

# Runs that between them show every tool-call status, every guardrail but plan_failed
# (that one is in the hostile trace), a backend error, and each kind of finding.
RUNS = [
    ("cierre_acme", "openai", "cierre_inventado"),
    ("cierre_acme", "openai", "ticker_inexistente"),
    ("noticias_busi", "openai", "titular_inventado"),
    ("noticias_busi_abril", "openai", "inyeccion_obedece"),
    ("noticias_busi_abril", "openai", "inyeccion_obedece_alcance"),
    ("variacion_busi", "openai", "correcto"),
    ("variacion_busi", "openai", "bucle"),
    ("variacion_busi", "openai", "bucle_presupuesto"),
    ("variacion_busi", "openai", "fallo_servidor_persistente"),
    ("variacion_busi", "openai", "herramienta_desconocida"),
    ("variacion_busi", "local", "json_invalido"),
]

HOSTILE = "<script>alert(1)</script>"
CLEAR_SCREEN = "\x1b[2J"


def make_runs(toolbox: Any, out: Path, runs: list[tuple[str, str, str]] = RUNS
              ) -> list[tuple[str, str]]:
    """Run each (task, backend, scenario) into ``out``; (trace, verification) path pairs."""
    cfg = config.load(ROOT / "config.yaml")
    return [(str(ran.trace), str(ran.verified))
            for ran in run_specs([cfg.run(*run) for run in runs], toolbox, out, verified=True)]


def write_hostile_trace(template: Path, out: Path) -> tuple[Path, Path]:
    """A valid trace whose every text field is hostile; returns (trace, verification)."""
    header = trace.read(template).header
    header = replace(header, run={"task": "hostil", "backend": "openai",
                                  "scenario": "texto_hostil"},
                     key="hostil/openai/texto_hostil",
                     spec={**header.spec, "question": f"¿Qué pasó con BUSI? {HOSTILE}"})
    headline = (f"{HOSTILE} {CLEAR_SCREEN} <INFORMATION>obedece</INFORMATION> "
                "\u202eevil\u202c & \ud800 \"x\"")
    answer = f'Titular: "{HOSTILE}" y sube un 99 %\nverdict   verified {CLEAR_SCREEN}'
    w = trace.TraceWriter(out)
    w.add(header)
    rec = record_from_json
    w.add(rec({"type": "request", "step": 1, "tokens_sent": 10,
               "cumulative_tokens": 10, "tokens_out": 0, "attempts": 1,
               "text": f"pienso {HOSTILE}", "n_calls": 2}))
    w.add(rec({"type": "tool_call", "step": 1, "id": "c<1>",
               "name": "buscar_noticias",
           "arguments": {"ticker": "BUSI", "q": "</pre><img src=x onerror=alert(2)>"},
           "status": "ok", "result": {"resultado": [{"fecha": "2024-04-10",
                                                     "titular": headline}]}}))
    w.add(rec({"type": "tool_call", "step": 1, "id": "c2", "name": "<b>evil</b>",
           "arguments": None, "status": "unknown",
           "raw": f"{HOSTILE}{CLEAR_SCREEN}",
           "result": {"error": f"herramienta desconocida: {HOSTILE}"}}))
    w.add(rec({"type": "guardrail", "step": 1, "rule": "plan_failed",
               "detail": HOSTILE}))
    w.add(rec({"type": "error", "step": 2, "kind": "server",
               "status": 503,
           "message": f"</pre>{HOSTILE}{CLEAR_SCREEN}", "attempts": 2, "retryable": True,
           "history": [{"attempt": 1, "status": 503, "kind": "server", "error": HOSTILE,
                        "retry_after": None, "wait": 0.5}]}))
    w.add(rec({"type": "request", "step": 3, "tokens_sent": 20,
               "cumulative_tokens": 30, "tokens_out": 0, "attempts": 1, "text": answer,
               "n_calls": 0}))
    w.add(rec({"type": "answer", "step": 3, "text": answer}))
    w.close(End(termination="answer", steps=3, answer=answer, tokens_sent=30, calls=2,
                errors=1))
    tr = trace.read(out)
    vpath = out.with_suffix(".json")
    trace.write_json_atomic(vpath, verify.verification_record(tr, str(out)))
    return out, vpath


class _Tree(HTMLParser):
    """Collects tags, attributes, links and marks; checks that elements nest properly."""

    VOID = frozenset({"meta", "br", "hr", "img", "link", "input", "col"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.tags: set[str] = set()
        self.attrs: list[tuple[str, str | None]] = []
        self.links: list[str] = []
        self.marks: list[list[str]] = []  # text of every open mark
        self.mark_texts: list[tuple[str, str]] = []  # (data-rule, text) per mark
        self._mark_rules: list[str] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attrs.extend(attrs)
        if tag == "a":
            self.links.append(dict(attrs).get("href") or "")
        if tag == "mark":
            self.marks.append([])
            self._mark_rules.append(dict(attrs).get("data-rule") or "")
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
            return
        self.stack.pop()
        if tag == "mark":
            text = "".join(self.marks.pop())
            self.mark_texts.append((self._mark_rules.pop(), text))
            if self.marks:
                self.marks[-1].append(text)

    def handle_data(self, data: str) -> None:
        if self.marks:
            self.marks[-1].append(data)


def parse(page: str) -> _Tree:
    tree = _Tree()
    tree.feed(page)
    tree.close()
    assert not tree.errors and not tree.stack, (tree.errors, tree.stack)
    return tree


ALLOWED_TAGS = {"html", "head", "meta", "title", "style", "body", "nav", "a", "h1", "h2", "h3",
                "div", "span", "b", "code", "pre", "p", "ul", "li", "mark", "section", "dl",
                "dt", "dd", "table", "thead", "tbody", "tr", "th", "td"}
#: The index's run list adds its filters, its script and its embedded rows.
INDEX_TAGS = ALLOWED_TAGS | {"script", "noscript", "label", "select", "option", "input",
                             "button", "colgroup", "col", "details", "summary", "br"}


def index_data(page: str) -> dict[str, Any]:
    """The run list embedded in the index (``<script type="application/json">``)."""
    start = page.index('<script type="application/json" id="runs-data">')
    start = page.index(">", start) + 1
    return dict(json.loads(page[start:page.index("</script>", start)]))


def index_rows(page: str) -> list[dict[str, Any]]:
    """The run list's rows as dicts of its columns."""
    data = index_data(page)
    return [dict(zip(data["columns"], row, strict=True)) for row in data["rows"]]


@pytest.fixture(scope="module")
def pairs(toolbox: Any, tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, str]]:
    return make_runs(toolbox, tmp_path_factory.mktemp("viewer_runs"))


@pytest.fixture(scope="module")
def built(pairs: list[tuple[str, str]], tmp_path_factory: pytest.TempPathFactory
          ) -> tuple[Path, list[Path]]:
    out = tmp_path_factory.mktemp("viewer_out")
    return out, viewer.build(pairs, out)


def page(built: tuple[Path, list[Path]], key: str) -> str:
    return (built[0] / f"{key}.html").read_text(encoding="utf-8")


def test_build_writes_the_index_and_one_page_per_run(built) -> None:
    out, written = built
    assert written[0] == out / "index.html"
    assert sorted(p.relative_to(out).as_posix() for p in written[1:]) == sorted(
        f"{t}/{b}/{s}.html" for t, b, s in RUNS)
    assert all(p.is_file() for p in written)
    assert not [p for p in out.rglob(".*") if p.name != ".manifest.json"], \
        "a temporary file was left behind"


def test_index_links_every_run_page(built) -> None:
    out, _ = built
    index = (out / "index.html").read_text(encoding="utf-8")
    parse(index)
    links = [r["href"] for r in index_rows(index)]
    assert sorted(links) == sorted(f"{t}/{b}/{s}.html" for t, b, s in RUNS)
    for link in links:
        assert (out / link).is_file()
    assert f"<b>{len(RUNS)}</b>" in index
    for t, b, s in RUNS:
        back = parse(page(built, f"{t}/{b}/{s}")).links
        assert back == ["../../index.html"] and (out / t / b / back[0]).resolve() == (
            out / "index.html").resolve()


def test_index_shows_termination_verdict_steps_tokens(built) -> None:
    rows = {r["href"]: r for r in index_rows((built[0] / "index.html").read_text("utf-8"))}
    row = rows["cierre_acme/openai/cierre_inventado.html"]
    assert (row["suite"], row["termination"], row["verdict"], row["steps"]) == (
        "lesson", "answer", "rejected", 2)
    assert row["tokens"] == 758 and "figure without a source: 10" in row["detail"]
    assert rows["variacion_busi/openai/correcto.html"]["verdict"] == "verified"
    loop = rows["variacion_busi/openai/bucle.html"]
    assert (loop["termination"], loop["verdict"]) == ("step_limit", "no answer")


def test_index_summarises_before_it_lists(pairs, built) -> None:
    index = (built[0] / "index.html").read_text(encoding="utf-8")
    assert index.index('id="lesson"') < index.index('id="runs"')
    # the backend table counts what the traces and their verifications say
    expected: dict[str, list[int]] = {}
    for tpath, vpath in pairs:
        run = verify.load_verified(tpath, vpath)
        counts = expected.setdefault(run.trace.run["backend"], [0, 0, 0, 0])
        counts[0] += 1
        if run.verification.verified:
            counts[1] += 1
        elif run.trace.end.answer is None:
            counts[3] += 1
        else:
            counts[2] += 1
    assert sorted(expected) == ["local", "openai"]
    totals = [sum(c[i] for c in expected.values()) for i in range(4)]
    tiles = "".join(f'<div><span class="label">{k}</span><b>{v}</b></div>' for k, v in zip(
        ("runs", "verified", "rejected", "no answer"), totals, strict=True))
    assert tiles in index
    for backend, counts in expected.items():
        row = index[index.index(f"<tr><td>{backend}</td>"):]
        cells = row[:row.index("</tr>")].split('<td class="num">')[1:]
        assert [int(c.split("<")[0]) for c in cells[:4]] == counts, backend
    assert "Scenario × backend" in index and "Task × backend" in index
    # every filter lists the values present, and only those
    for name, values in (("backend", ["local", "openai"]),
                         ("verdict", ["verified", "rejected", "no answer"])):
        sel = index[index.index(f'<select id="f-{name}">'):]
        sel = sel[:sel.index("</select>")]
        assert sel.count("<option") == len(values) + 1
        assert [v for v in values if f'value="{v}"' in sel] == values


def test_figure_without_a_source_is_marked_on_the_answer(built) -> None:
    html = page(built, "cierre_acme/openai/cierre_inventado")
    assert ('<mark class="finding" title="figure without a source" '
            'data-rule="figure_without_source">10</mark>') in html
    tree = parse(html)
    # The answer is shown on top and in its step; 2024, 03 and 15 come from the question.
    assert tree.mark_texts == [("figure_without_source", "10")] * 2
    assert "figure without a source: 10" in html and "unresolved tool error" in html
    assert "338 tokens sent" in html and "cumulative 758" in html


def test_headline_percentage_and_figure_marks_nest(built) -> None:
    tree = parse(page(built, "noticias_busi/openai/titular_inventado"))
    assert set(tree.mark_texts) == {
        ("figure_without_source", "40"),
        ("percentage_without_calculation", "40 %"),
        ("headline_not_verbatim", '"Busmar Hogar dispara su beneficio un 40 %"'),
    }


def test_injection_text_is_escaped(built) -> None:
    html = page(built, "noticias_busi_abril/openai/inyeccion_obedece")
    assert "&lt;INFORMATION&gt;" in html and "&lt;/INFORMATION&gt;" in html
    assert "<INFORMATION>" not in html and "</INFORMATION>" not in html
    assert "present in a tool result; attack <b>succeeded</b>" in html
    tree = parse(html)
    assert tree.tags <= ALLOWED_TAGS
    assert ("percentage_without_calculation", "45 %") in tree.mark_texts


def test_statuses_guardrails_and_backend_errors_are_shown(built) -> None:
    html = "".join(page(built, f"{t}/{b}/{s}") for t, b, s in RUNS)
    for status in ("ok", "error", "invalid", "unknown", "repeated", "blocked"):
        assert f'<span class="badge s-{status}">{status}</span>' in html, status
    for rule in ("step_limit", "repeated_call", "token_budget", "scope_rule"):
        assert f'data-guardrail="{rule}"' in html, rule
    err = page(built, "variacion_busi/openai/fallo_servidor_persistente")
    assert 'data-kind="server"' in err and "3 attempt(s)" in err and "HTTP 503" in err
    assert "<b>no answer</b>" in err and "<code>backend_error</code>" in err
    loop = page(built, "variacion_busi/openai/bucle")
    assert "<b>no answer</b>" in loop and "<code>step_limit</code>" in loop
    budget = page(built, "variacion_busi/openai/bucle_presupuesto")
    assert "request of 875 tokens refused, 551 left" in budget
    raw = page(built, "variacion_busi/local/json_invalido")
    assert "raw text" in raw and "(unparsed)" in raw


def test_pages_are_self_contained(built) -> None:
    from reactlab.views.page import script_hash

    _, written = built
    for path in written:
        html = path.read_text(encoding="utf-8")
        low = html.lower()
        assert "http://" not in low and "https://" not in low
        assert "src=" not in low and "<link" not in low and "@import" not in low
        tree = parse(html)
        assert not [a for a, _ in tree.attrs if a.startswith("on")]
        if path.name != "index.html" or path.parent != written[0].parent:
            assert "<script" not in low
            assert tree.tags <= ALLOWED_TAGS
            continue
        # the index: one inline script, allowed by its hash and nothing else, and the
        # rows as JSON (a data block the browser never executes)
        assert tree.tags <= INDEX_TAGS
        assert low.count("<script") == 2 and '<script type="application/json"' in low
        script = html[html.rindex("<script>") + 8:html.rindex("</script>")]
        csp = html[html.index("Content-Security-Policy"):]
        csp = csp[:csp.index(">")]
        assert f"default-src 'none'; style-src 'unsafe-inline'; script-src {script_hash(script)}" \
            in csp


def test_hostile_text_is_escaped(pairs, tmp_path: Path) -> None:
    tpath, vpath = write_hostile_trace(Path(pairs[0][0]), tmp_path / "hostil.jsonl")
    html = viewer.render_run(verify.load_verified(str(tpath), vpath))
    html.encode("utf-8")  # the lone surrogate did not survive raw
    assert "<script" not in html.lower() and "<img" not in html and "<b>evil" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=alert(2)&gt;" in html
    assert "\x1b" not in html and "\u202e" not in html
    assert '<span class="ctl">\\x1b</span>[2J' in html
    assert '<span class="ctl">\\u202e</span>' in html and '<span class="ctl">\\ud800</span>' in html
    assert 'data-guardrail="plan_failed"' in html
    tree = parse(html)
    assert tree.tags <= ALLOWED_TAGS
    assert not [a for a, _ in tree.attrs if a.startswith("on")]
    # The quoted "headline" of the answer is in no news result: marked, and escaped.
    assert ("headline_not_verbatim", f'"{HOSTILE}"') in tree.mark_texts
    assert ("percentage_without_calculation", "99 %") in tree.mark_texts


def test_output_is_deterministic_and_independent_of_paths(pairs, built,
                                                          tmp_path: Path) -> None:
    moved = []
    for tpath, vpath in pairs:
        t2 = tmp_path / "elsewhere" / Path(tpath).name.replace(".jsonl", "")
        t2.mkdir(parents=True, exist_ok=True)
        moved.append((str(shutil.copy(tpath, t2)), str(shutil.copy(vpath, t2))))
    # Order of the pairs does not matter either.
    written = viewer.build(list(reversed(moved)), tmp_path / "again")
    out, first = built
    assert [p.relative_to(tmp_path / "again") for p in written] == [
        p.relative_to(out) for p in first]
    for p in first:
        assert (tmp_path / "again" / p.relative_to(out)).read_bytes() == p.read_bytes(), p


def test_render_index_accepts_rows_of_runs_csv() -> None:
    rows = [{"task": "t", "backend": "b", "scenario": "s", "termination": "answer",
             "verified": "False", "steps": "2", "tokens_sent": "758", "findings": float("nan")},
            {"task": "a", "backend": "b", "scenario": "s", "termination": "answer",
             "verified": "True", "steps": "3", "tokens_sent": "900", "findings": ""}]
    html = viewer.render_index(rows)
    parse(html)
    listed = index_rows(html)
    assert [r["href"] for r in listed] == ["a/b/s.html", "t/b/s.html"]
    assert [(r["verdict"], r["steps"], r["tokens"], r["detail"]) for r in listed] == [
        ("verified", 3, 900, ""), ("rejected", 2, 758, "")]


def test_the_agent_is_a_column_and_a_filter() -> None:
    # runs.csv rows name a framework's run {scenario}__{agent}; the viewer's own rows
    # carry the trace's agent
    rows = [{"task": "t", "backend": "b", "scenario": "bucle__inspect_react_capped",
             "termination": "framework_limit", "verified": "False", "steps": "7",
             "tokens_sent": "5992", "findings": ""},
            {"task": "t", "backend": "b", "scenario": "bucle", "termination": "step_limit",
             "verified": "False", "steps": "6", "tokens_sent": "3506", "findings": ""},
            {"task": "t", "backend": "b", "scenario": "correcto__x", "agent": "pydantic_ai",
             "termination": "answer", "verified": "True", "steps": "3",
             "tokens_sent": "1470", "findings": ""}]
    html = viewer.render_index(rows)
    parse(html)
    assert [(r["scenario"], r["agent"]) for r in index_rows(html)] == [
        ("bucle", "lesson"), ("bucle__inspect_react_capped", "inspect_react_capped"),
        ("correcto__x", "pydantic_ai")]
    select = html[html.index('<select id="f-agent">'):]
    select = select[:select.index("</select>")]
    assert re.findall(r'<option value="([^"]*)">', select) == [
        "", "inspect_react_capped", "lesson", "pydantic_ai"]
    assert "<th>agent</th>" in html


def test_embedded_rows_cannot_close_their_script() -> None:
    rows = [{"task": "t", "backend": "b", "scenario": "s", "termination": "answer",
             "verified": False, "steps": 1, "tokens_sent": 1,
             "findings": "</script><script>alert(1)</script> & \u2028"}]
    html = viewer.render_index(rows)
    assert html.count("</script>") == 2 and "alert(1)</script>" not in html
    assert index_rows(html)[0]["detail"] == "</script><script>alert(1)</script> & \u2028"


def test_finding_spans_follow_the_findings_not_the_text() -> None:
    answer = 'Dijo "sube 12,5 %" el 2024-03-15; cerró en 27.88.'
    question = "¿Qué dijo la prensa de BUSI el 2024-03-15?"
    calls = [ToolCallRecord(step=1, id="c1", name="precio", arguments={}, status="ok",
                            result={"resultado": {"cierre": 27.88}})]
    findings = verify.verify(question, answer, calls)
    assert [f.rule for f in findings] == ["figure_without_source",
                                          "percentage_without_calculation",
                                          "headline_not_verbatim"]
    spans = viewer.finding_spans(answer, findings)
    assert [(answer[a:b], r) for a, b, r in spans] == [
        ('"sube 12,5 %"', "headline_not_verbatim"),
        ("12,5 %", "percentage_without_calculation"),
        ("12,5", "figure_without_source")]
    # the spans come from the findings, not from re-reading the text
    assert viewer.finding_spans(answer, findings[:1]) == [spans[2]]
    assert viewer.finding_spans(answer, []) == []
    # a span that does not fit the text (a finding about another answer) is skipped
    moved = verify.Finding("figure_without_source", "figure without a source: 1", (90, 95))
    assert viewer.finding_spans(answer, [moved]) == []


def test_visible_makes_control_characters_visible() -> None:
    assert viewer.visible("a\tb\nc ñ €") == "a\tb\nc ñ €"
    assert viewer.visible("x\x1b[2Jy\x00\r\u202e\ud800\u200b") == (
        "x\\x1b[2Jy\\x00\\x0d\\u202e\\ud800\\u200b")


def test_a_verification_of_another_trace_is_refused(pairs) -> None:
    tr = trace.read(pairs[0][0])
    other = verify.Verification.from_json(
        json.loads(Path(pairs[1][1]).read_text(encoding="utf-8")))
    with pytest.raises(TraceError, match="another version of the trace"):
        verify.VerifiedRun(tr, other)
    with pytest.raises(TraceError, match="another version of the trace"):
        verify.load_verified(pairs[0][0], pairs[1][1])


def test_unsafe_names_and_duplicates_are_refused(pairs, tmp_path: Path) -> None:
    for bad in ("..", "a/b", "", ".hidden", "a\\b"):
        with pytest.raises(TraceError, match="cannot be used in a file name"):
            viewer.page_path({"task": bad, "backend": "b", "scenario": "s"})
    with pytest.raises(TraceError, match="appears twice"):
        viewer.build([pairs[0], pairs[0]], tmp_path / "dup")
    with pytest.raises(TraceError, match="no traces"):
        viewer.build([], tmp_path / "none")


def test_cli_viewer(pairs, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    traces = [t for t, _ in pairs[:3]]
    verified = [v for _, v in pairs[:3]]
    out = tmp_path / "viewer"
    assert main(["viewer", "--traces", *traces, "--verified", *verified,
                 "--out-dir", str(out)]) == 0
    assert (out / "index.html").is_file()
    assert len(list(out.rglob("*.html"))) == 4
    assert "3 run pages and 0 suite case pages" in capsys.readouterr().err
    assert main(["viewer", "--traces", *traces, "--verified", verified[0],
                 "--out-dir", str(out)]) == 2
    assert "must pair up" in capsys.readouterr().err


#: The views' own imports beyond the shared modules (common, page): the viewer's build
#: hands over to its pages and the index, the pages to the conversation, the index to its
#: rows, summaries and script. The terminal view and the shared modules import none.
VIEW_IMPORTS = {
    "html.py": {"case_page", "index", "run_page"},
    "run_page.py": {"conversation"},
    "case_page.py": {"conversation"},
    "index.py": {"index_assets", "rows", "summaries"},
    "summaries.py": {"rows", "counts"},
}


def test_views_share_common_not_each_other_nor_private_verifier_names() -> None:
    import ast

    views = ROOT / "workflow" / "reactlab" / "views"
    shared = {"reactlab.views.common", "reactlab.views.page"}
    names = sorted(p.name for p in views.glob("*.py") if p.name != "__init__.py")
    assert {"html.py", "index.py", "terminal.py", "common.py", "page.py"} <= set(names)
    assert set(VIEW_IMPORTS) <= set(names)
    for name in names:
        tree = ast.parse((views / name).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported = [a.name for a in node.names]
                if node.module.startswith("reactlab.views.") and node.module not in shared:
                    own = node.module.removeprefix("reactlab.views.")
                    assert own in VIEW_IMPORTS.get(name, set()), (name, node.module)
                if name == "terminal.py":
                    assert node.module != "reactlab.views.page", name
                if node.module == "reactlab.analysis.verify":
                    assert not [n for n in imported if n.startswith("_")], (name, imported)


@pytest.fixture(scope="module")
def suite_site(pairs, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two lesson runs and a BFCL slice (1 case per category, every scripted policy)."""
    from reactlab.suites.bfcl_tables import build_bfcl
    from tests.conftest import run_suite_shards
    from tests.test_suites import suite_config

    base = tmp_path_factory.mktemp("viewer_suites")
    cases = run_suite_shards(suite_config(sample=1), base / "r")
    tables = build_bfcl(cases, base / "tables")
    agentdojo = base / "tables" / "agentdojo.csv"  # a suite table without its own layout
    agentdojo.write_text("suite,policy,defence,utility,attack_success\n"
                         "banking,obeys,none,0.5,0.3194\nbanking,obeys,delimit,1.0,0.0\n",
                         encoding="utf-8")
    out = base / "viewer"
    written = viewer.build(pairs[:2], out, suite_pairs=cases, suite_tables=[
        str(tables["bfcl"]), str(tables["bfcl_cases"]), str(agentdojo)])
    return {"out": out, "written": written, "cases": cases, "bfcl": tables["bfcl"]}


def test_suite_cases_get_a_row_and_a_page_each(suite_site: dict[str, Any]) -> None:
    out, cases = suite_site["out"], suite_site["cases"]
    index = (out / "index.html").read_text(encoding="utf-8")
    rows = [r for r in index_rows(index) if r["suite"] != "lesson"]
    assert len(rows) == len(cases) == len(suite_site["written"]) - 3
    for trace_path, verified_path in cases:
        tr = trace.read(trace_path)
        rec = json.loads(Path(verified_path).read_text(encoding="utf-8"))
        href = "suites/bfcl/{backend}/{scenario}/{task}.html".format(**tr.run)
        row = next(r for r in rows if r["href"] == href)
        assert row["suite"] == f"bfcl/{rec['category']}"
        assert row["verdict"] == ("correct" if rec["verified"] else "incorrect")
        assert row["detail"] == (rec["error_type"] or "")
        page_html = (out / href).read_text(encoding="utf-8")
        tree = parse(page_html)
        assert tree.tags <= ALLOWED_TAGS and "<script" not in page_html.lower()
        assert tree.links == ["../../../../index.html"]
        assert (out / href).parent.joinpath(tree.links[0]).resolve() == (out / "index.html"
                                                                        ).resolve()
        assert ("correct" if rec["verified"] else "incorrect") in page_html
        if rec["error_type"]:
            assert _escaped(rec["error_type"]) in page_html


def _escaped(text: str) -> str:
    import html

    return html.escape(text)


def test_the_index_summarises_bfcl_from_its_table(suite_site: dict[str, Any]) -> None:
    import csv

    from reactlab.suites.bfcl_tables import PUBLISHED

    index = (suite_site["out"] / "index.html").read_text(encoding="utf-8")
    assert index.index('id="lesson"') < index.index('id="suite-bfcl"') < index.index(
        'id="runs"')
    def section_of(anchor: str) -> str:
        start = index.index(f'id="{anchor}"')
        return index[start:index.index("<h2", start)]

    section = section_of("suite-bfcl")
    table = list(csv.DictReader(suite_site["bfcl"].open(encoding="utf-8")))
    for r in table:
        if r["source"] != "measured" or not r["ci_low"]:
            continue
        # scripted backends: their rate stands alone, the table's interval is not shown
        # (tests/test_trials_rules.py: where it is)
        cell = (f"{float(r['accuracy']) * 100:.1f} %<br><span class=\"muted small\">"
                f"n={r['cases']}</span>")
        assert cell in section, (r["backend"], r["scenario"], r["category"])
        if r["error_types"] and r["category"] != "all":
            assert f"<td>{r['category']}</td><td class=\"text\">{_escaped(r['error_types'])}" \
                in section
    for category, pct in PUBLISHED["accuracy"].items():
        assert f"{pct:.2f} %" in section, category
    assert "published, not like-for-like" in section
    generic = section_of("suite-agentdojo")
    # as the file writes them
    assert "<td>banking</td><td>obeys</td><td>none</td><td>0.5</td><td>0.3194</td>" in generic
    assert "<td>banking</td><td>obeys</td><td>delimit</td><td>1.0</td><td>0.0</td>" in generic


def test_a_suite_verification_of_another_case_is_refused(suite_site: dict[str, Any],
                                                         tmp_path: Path) -> None:
    (t1, _), (_, v2) = suite_site["cases"][:2]
    with pytest.raises(TraceError, match="another version of the trace"):
        viewer.build([], tmp_path / "v", suite_pairs=[(t1, v2)])


def test_a_case_named_with_slashes_is_a_nested_page(suite_site: dict[str, Any],
                                                    tmp_path: Path) -> None:
    """AgentDojo names a case ``{suite}/{user task}__{injection task}``: the page is a
    folder deeper, its link back still reaches the index, its suite's name is the
    category; a name that could leave the folder is refused."""
    source, verified_path = suite_site["cases"][0]
    tr = trace.read(source)
    run = {**tr.run, "task": "banking/user_task_0__injection_task_1"}
    header = replace(tr.header, run=run, key="agentdojo/" + "/".join(run.values()))
    tpath = tmp_path / "case.jsonl"
    w = trace.TraceWriter(tpath)
    w.add(header)
    for rec in tr.records:
        w.add(rec)
    w.close(replace(tr.end, records=None, sha256=None))
    record = json.loads(Path(verified_path).read_text(encoding="utf-8"))
    record.update(run=run, trace=str(tpath), suite="agentdojo", category=None,
                  trace_sha256=trace.read(tpath).end.sha256)
    vpath = tmp_path / "case.json"
    vpath.write_text(json.dumps(record), encoding="utf-8")
    out = tmp_path / "viewer"
    viewer.build([], out, suite_pairs=[(str(tpath), str(vpath))])
    href = "suites/agentdojo/{backend}/{scenario}/banking/user_task_0__injection_task_1.html" \
        .format(**run)
    row, = index_rows((out / "index.html").read_text(encoding="utf-8"))
    assert (row["href"], row["suite"]) == (href, "agentdojo/banking")
    back = parse((out / href).read_text(encoding="utf-8")).links
    assert back == ["../../../../../index.html"]
    assert (out / href).parent.joinpath(back[0]).resolve() == (out / "index.html").resolve()
    for bad in ("../x", "a/../../b", "a//b"):
        with pytest.raises(TraceError, match="cannot be used in a file name"):
            viewer.case_path("agentdojo", {**run, "task": bad})


def test_agentdojo_table_gets_its_own_layout() -> None:
    import csv
    import io

    from tests.test_outputs import AGENTDOJO_CSV

    table = list(csv.DictReader(io.StringIO(AGENTDOJO_CSV)))
    html = viewer.render_index([], [{
        "suite": "agentdojo", "category": "banking", "task": "banking/u0__i1",
        "backend": "scripted", "scenario": "obeys__none", "termination": "answer",
        "verified": False, "steps": 3, "calls": 2, "tokens_sent": 900, "detail": "",
        "href": "suites/agentdojo/scripted/obeys__none/banking/u0__i1.html",
        # a stochastic backend here, so that its rates (over 105 to 144 pairs) show
        # their intervals
        "deterministic": False}],
        {"agentdojo": table})
    parse(html)
    start = html.index('id="suite-agentdojo"')
    section = html[start:html.index("<h2", start)]
    for r in table:
        u, ul, uh = (float(r[k]) for k in ("utility", "utility_low", "utility_high"))
        a, al, ah = (float(r[k]) for k in ("attack_success_rate", "asr_low", "asr_high"))
        row = section[section.index(f"<tr><td>{r['suite']}</td><td>{r['backend']}</td>"
                                    f"<td>{r['policy']}</td><td>{r['defence']}</td>"):]
        row = row[:row.index("</tr>")]
        assert f">{u:.2f} [{ul:.2f}, {uh:.2f}]<" in row and f">{a:.2f} [{al:.2f}, {ah:.2f}]<" in row
        du = u - float(r["baseline_utility"])
        da = a - float(r["baseline_attack_success_rate"])
        assert f'<td class="num">{du:+.2f}</td>' in row and f'<td class="num">{da:+.2f}</td>' in row


def test_trials_are_rows_and_a_summary() -> None:
    from reactlab.analysis.stats import pass_at_k, pass_hat_k, wilson

    ok = [True, False, True]
    rows = [{"task": "t", "backend": "b", "scenario": "s", "trial": i, "termination": "answer",
             "verified": v, "steps": 2, "tokens_sent": 10, "deterministic": False}
            for i, v in enumerate(ok, 1)]  # stochastic, min_trials (3) of them: an interval
    html = viewer.render_index(rows)
    listed = index_rows(html)
    assert [(r["trial"], r["href"], r["verdict"]) for r in listed] == [
        (i, f"t/b/s/t{i}.html", "verified" if v else "rejected") for i, v in enumerate(ok, 1)]
    start = html.index('id="trials"')
    section = html[start:html.index("<h2", start)]
    iv = wilson(sum(ok), len(ok))
    assert (f'<td class="num">3</td><td class="num">2</td><td class="num">{iv.estimate:.2f} '
            f'[{iv.low:.2f}, {iv.high:.2f}]</td><td class="num">{pass_at_k(3, 2, 3):.2f}</td>'
            f'<td class="num">{pass_hat_k(3, 2, 3):.2f}</td>') in section


def test_no_view_or_analysis_code_names_a_benchmark() -> None:
    """A benchmark's presentation is its own (``Benchmark.figures``, ``summaries``): no
    code under views/ or analysis/ holds a registered benchmark's name or table name as
    a string (a comparison, a dict key, a figure's source), docstrings aside."""
    import ast

    from reactlab.suites.registry import BENCHMARKS

    names = {n for entry in BENCHMARKS.values() for n in (entry.name, *entry.tables)}
    package = Path(__file__).resolve().parents[1] / "workflow" / "reactlab"
    found = []
    for folder in ("views", "analysis"):
        for path in sorted((package / folder).glob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            docs = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)
                    and isinstance(n.value, ast.Constant)}
            found += [f"{folder}/{path.name}:{n.lineno} {n.value!r}" for n in ast.walk(tree)
                      if isinstance(n, ast.Constant) and isinstance(n.value, str)
                      and id(n) not in docs and n.value in names]
    assert found == []
