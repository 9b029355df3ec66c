"""The exports (reactlab.export, docs/exports.md): Inspect logs and OpenTelemetry GenAI spans.

* Golden files: the lesson's ``correcto`` runs on the three scripted backends, exported
  from committed traces (``tests/golden/exports/input/``, checked below to be what the
  loop writes today), must give the committed bytes; every export is written twice and
  compared byte for byte.
* Inspect: each log is read back with ``read_eval_log`` and checked against its traces
  (messages, model and tool events, usage, the verdict, guardrails, limits, errors,
  epochs); ``inspect view`` started on loopback lists and serves them
  (``test_inspect_view_lists_and_serves_the_logs``; the browser look is in
  ``tests/test_exports_browser.py``).
* OTel: each file is parsed with the OTLP protobuf JSON mapping
  (``ExportTraceServiceRequest`` via ``google.protobuf.json_format``) and every attribute
  name is checked against the package ``opentelemetry-semantic-conventions``.

``--regen-golden`` rewrites the golden exports (review the diff before committing).
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from reactlab import config, trace
from reactlab.analysis import verify
from reactlab.cli import main
from reactlab.core.errors import ReactlabError
from reactlab.export import (
    EPOCH_NS,
    STEP_NS,
    ExportRun,
    find_pairs,
    inspect_log,
    load_runs,
    otel,
    unrecorded_facts,
)
from reactlab.runner import run_to_trace
from reactlab.tools.messages import tool_message, unwrap
from tests.conftest import ROOT
from tests.test_viewer import make_runs

GOLDEN = ROOT / "tests" / "golden" / "exports"
CORRECTO = [("variacion_busi", b, "correcto") for b in ("openai", "anthropic", "local")]
# Between them: both verdicts, every guardrail but plan_failed, a backend error after
# retries, invalid JSON arguments, an unknown tool, a blocked call, the token budget.
RUNS = [
    *CORRECTO,
    ("variacion_busi", "openai", "bucle"),
    ("variacion_busi", "openai", "bucle_presupuesto"),
    ("variacion_busi", "openai", "fallo_servidor_persistente"),
    ("variacion_busi", "openai", "herramienta_desconocida"),
    ("variacion_busi", "local", "json_invalido"),
    ("cierre_acme", "openai", "cierre_inventado"),
    ("noticias_busi_abril", "openai", "inyeccion_obedece_alcance"),
    ("noticias_busi_abril", "local", "inyeccion_obedece_delimitada"),
]


@pytest.fixture(scope="module")
def pairs(toolbox: Any, tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, str]]:
    return make_runs(toolbox, tmp_path_factory.mktemp("exports"), RUNS)


@pytest.fixture(scope="module")
def runs(pairs: list[tuple[str, str]]) -> dict[str, ExportRun]:
    return {r.key: r for r in load_runs(pairs)}


@pytest.fixture(scope="module")
def logs_dir(pairs: list[tuple[str, str]], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("inspect") / "inspect"
    inspect_log.write_logs(pairs, out)
    return out


@pytest.fixture(scope="module")
def spans_dir(pairs: list[tuple[str, str]], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("otel") / "otel"
    otel.write_spans(pairs, out)
    return out


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_the_export_modules_import_their_libraries_lazily() -> None:
    from tests.test_imports import HEAVY, _loaded_after

    loaded = _loaded_after("import reactlab.export, reactlab.export.inspect_log, "
                           "reactlab.export.otel, reactlab.cli")
    assert "reactlab" in loaded
    assert not {"inspect_ai", "opentelemetry", "google", *HEAVY} & loaded


# --------------------------------------------------------------------------- golden files

def _golden_pairs() -> list[tuple[Path, Path]]:
    base = GOLDEN / "input"
    return [(base / "traces" / f"{t}/{b}/{s}.jsonl", base / "verified" / f"{t}/{b}/{s}.json")
            for t, b, s in CORRECTO]


def _same_records(fresh: Path, golden: Path, golden_verified: Path) -> None:
    """Two traces agree in everything but the package versions of their header (and so
    the checksum): the committed inputs are what the loop writes today, but for what the
    session sent (``system_prompt_sent``, ``tool_results_ascii``), which the runner now
    records and the committed inputs, written before, do not. For those, what the loop
    records today must be what the exports read for the committed trace
    (:func:`reactlab.export.unrecorded_facts`), so they export as a fresh trace would."""
    ta, tb = trace.read(fresh), trace.read(golden)
    assert ta.header.system_prompt_sent is not None and ta.header.tool_results_ascii is not None
    assert tb.header.system_prompt_sent is None and tb.header.tool_results_ascii is None
    old = ExportRun(tb, verify.load_verification(tb, golden_verified, str(golden)))
    assert (ta.header.system_prompt_sent, ta.header.tool_results_ascii) == unrecorded_facts(old)
    assert (old.system_prompt_sent, old.tool_results_ascii) == unrecorded_facts(old)
    unrecorded = {"versions": {}, "system_prompt_sent": None, "tool_results_ascii": None}
    assert replace(ta.header, **unrecorded) == replace(tb.header, **unrecorded)
    assert ta.records == tb.records
    assert replace(ta.end, sha256=None) == replace(tb.end, sha256=None)


def test_golden_inputs_are_what_the_loop_writes(toolbox: Any, tmp_path: Path,
                                                request: pytest.FixtureRequest) -> None:
    fresh = make_runs(toolbox, tmp_path, CORRECTO)
    if request.config.getoption("--regen-golden"):
        for (t, _), (gt, gv) in zip(fresh, _golden_pairs(), strict=True):
            gt.parent.mkdir(parents=True, exist_ok=True)
            gv.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(t, gt)
            record = verify.verification_record(trace.read(gt), gt.relative_to(ROOT).as_posix())
            trace.write_json_atomic(gv, record)
    for (t, _), (gt, gv) in zip(fresh, _golden_pairs(), strict=True):
        _same_records(Path(t), gt, gv)


@pytest.mark.parametrize("kind", ["inspect", "otel"])
def test_golden_export_of_the_correcto_runs(kind: str, tmp_path: Path,
                                            request: pytest.FixtureRequest) -> None:
    write = inspect_log.write_logs if kind == "inspect" else otel.write_spans
    first, second = tmp_path / "a", tmp_path / "b"
    write(_golden_pairs(), first)
    write(_golden_pairs(), second)
    assert _files(first) == _files(second), "two exports of the same traces differ"
    golden = GOLDEN / kind
    if request.config.getoption("--regen-golden"):
        shutil.rmtree(golden, ignore_errors=True)
        shutil.copytree(first, golden)
        pytest.skip(f"regenerated {golden.relative_to(ROOT)}; review `git diff tests/golden`")
    expected = _files(golden)
    actual = _files(first)
    assert sorted(actual) == sorted(expected)
    for name, data in expected.items():
        assert actual[name] == data, f"{kind}/{name} differs from tests/golden/exports"


def test_exports_are_byte_identical(pairs: list[tuple[str, str]], logs_dir: Path,
                                    spans_dir: Path, tmp_path: Path) -> None:
    inspect_log.write_logs(pairs, tmp_path / "inspect")
    otel.write_spans(pairs, tmp_path / "otel")
    assert _files(tmp_path / "inspect") == _files(logs_dir)
    assert _files(tmp_path / "otel") == _files(spans_dir)
    # the same again with the OTel variables that would change an SDK default
    env_run = subprocess.run(
        [sys.executable, "-m", "reactlab", "export", "otel", "--results",
         str(Path(pairs[0][0]).parents[3]), "--out", str(tmp_path / "otel_env")],
        env={**os.environ, "OTEL_RESOURCE_ATTRIBUTES": "service.instance.id=x,host.name=y",
             "OTEL_SERVICE_NAME": "other", "OTEL_TRACES_SAMPLER": "always_off",
             "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT": "5", "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT": "2",
             "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT": "5", "OTEL_ATTRIBUTE_COUNT_LIMIT": "2",
             "OTEL_SPAN_EVENT_COUNT_LIMIT": "0", "OTEL_SPAN_LINK_COUNT_LIMIT": "0",
             "OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT": "1"},
        capture_output=True, text=True, timeout=120, check=False)
    assert env_run.returncode == 0, env_run.stderr
    assert _files(tmp_path / "otel_env") == _files(spans_dir)
    # a disabled SDK records nothing: an error, not empty files
    disabled = subprocess.run(
        [sys.executable, "-m", "reactlab", "export", "otel", "--results",
         str(Path(pairs[0][0]).parents[3]), "--out", str(tmp_path / "otel_off")],
        env={**os.environ, "OTEL_SDK_DISABLED": "true"}, capture_output=True, text=True,
        timeout=120, check=False)
    assert disabled.returncode == 2
    assert "reactlab: error: the OpenTelemetry SDK is disabled" in disabled.stderr
    assert not (tmp_path / "otel_off").exists()


# --------------------------------------------------------------------------- Inspect

def _log_files(folder: Path) -> list[Path]:
    """The logs of an export folder (not its checksum manifest, ``.manifest.json``)."""
    return sorted(p for p in folder.glob("*.json") if not p.name.startswith("."))


def _read_logs(folder: Path) -> dict[tuple[str, str], Any]:
    from inspect_ai.log import read_eval_log

    out = {}
    for path in _log_files(folder):
        log = read_eval_log(str(path))
        out[(log.eval.task, log.eval.metadata["backend"])] = log
    return out


def _sample(logs: dict[tuple[str, str], Any], key: str, epoch: int = 1) -> Any:
    task, backend, scenario = key.split("/")[:3]
    found = [s for s in logs[(task, backend)].samples if s.id == scenario and s.epoch == epoch]
    assert len(found) == 1, key
    return found[0]


def test_one_log_per_task_and_backend(logs_dir: Path, runs: dict[str, ExportRun]) -> None:
    from inspect_ai.log import list_eval_logs

    groups = sorted({(r.task, r.backend) for r in runs.values()})
    names = [p.name for p in _log_files(logs_dir)]
    assert names == sorted(inspect_log.log_name(t, b) for t, b in groups)
    for name in names:  # the fixed timestamp, then Inspect's own {task}_{id} pattern
        assert name.startswith("2000-01-01T00-00-00+00-00_")
    listed = list_eval_logs(str(logs_dir), formats=["json"])
    assert sorted(Path(i.name).name for i in listed) == names  # Inspect lists every one
    logs = _read_logs(logs_dir)
    assert sorted(logs) == groups
    for (task, backend), log in logs.items():
        expected = sorted(r.scenario for r in runs.values()
                          if (r.task, r.backend) == (task, backend))
        assert sorted(s.id for s in log.samples) == expected
        assert log.status == "success" and log.eval.created.startswith("2000-01-01T00:00:00")
        assert log.results.total_samples == len(expected)


def test_a_sample_is_the_run_rebuilt_from_its_trace(logs_dir: Path,
                                                    runs: dict[str, ExportRun]) -> None:
    from inspect_ai.event import ModelEvent, ScoreEvent, SpanBeginEvent, ToolEvent

    logs = _read_logs(logs_dir)
    for key, run in runs.items():
        sample = _sample(logs, key)
        tr = run.trace
        requests, calls = tr.requests(), tr.tool_calls()
        models = [e for e in sample.events if isinstance(e, ModelEvent)]
        tools = [e for e in sample.events if isinstance(e, ToolEvent)]
        assert len(models) == len(requests) + len(tr.errors()), key
        assert [e.id for e in tools] == [c.id for c in calls], key
        assert [e.function for e in tools] == [c.name or "" for c in calls], key
        delimit = tr.header.defences.get("delimit_tool_output", False)
        for event, call in zip(tools, calls, strict=True):
            assert (event.error is None) == (call.status == "ok"), key
            # the result as the backend wrote it into the message the model read
            assert event.result == tool_message(call.result, delimit=delimit,
                                                ensure_ascii=run.provider != "local"), key
            if not delimit:
                assert json.loads(event.result) == call.result, key
            else:
                assert unwrap(event.result) != event.result, key
        for event, req in zip(models, requests, strict=False):
            assert event.output.usage.input_tokens == req.tokens_sent, key
            assert event.output.usage.output_tokens == req.tokens_out, key
            assert event.output.completion == req.text, key
            ids = [c.id for c in event.output.message.tool_calls or []]
            assert ids == [c.id for c in calls if c.step == req.step], key
        usage = sum(u.input_tokens for u in sample.model_usage.values())
        assert usage == tr.end.tokens_sent, key
        # the conversation: the question, then each turn and its results, in order
        expected = ["user"]
        for req in requests:
            expected += ["assistant"] + ["tool"] * sum(c.step == req.step for c in calls)
        assert [m.role for m in sample.messages if m.role != "system"] == expected, key
        user = [m for m in sample.messages if m.role == "user"]
        assert [m.content for m in user] == [tr.header.question], key
        system = [m for m in sample.messages if m.role == "system"]
        assert len(system) == (1 if run.provider == "local" else 0), key  # as each sends
        if tr.end.answer is not None:
            assert sample.messages[-1].text == tr.end.answer == sample.output.completion
        # each model event's input is the conversation so far
        for event in models:
            assert [m.id for m in event.input] == [m.id for m in sample.messages[
                :len(event.input)]], key
        # the verdict
        score = sample.scores["verifier"]
        assert score.value == ("C" if run.verification.verified else "I"), key
        for finding in run.verification.findings:
            assert finding.message in score.explanation, key
        assert score.metadata["findings"] == [f.to_json() for f in run.verification.findings]
        scores = [e for e in sample.events if isinstance(e, ScoreEvent)]
        assert len(scores) == 1 and scores[0].score.value == score.value, key
        # Inspect's layout: init, solvers, scorers spans; every event inside one
        spans = {e.id: e for e in sample.events if isinstance(e, SpanBeginEvent)}
        assert [s.type for s in spans.values()] == ["init", "solvers", "solver", "scorers",
                                                     "scorer"], key
        assert all(e.span_id in spans for e in sample.events), key
        assert {spans[e.span_id].name for e in models + tools} == {"reactlab_agent_loop"}
        # time is the step axis: never backwards, within the run's steps
        stamps = [e.timestamp for e in sample.events]
        assert stamps == sorted(stamps), key
        epoch = datetime(2000, 1, 1, tzinfo=UTC)
        assert stamps[0] >= epoch
        assert (stamps[-1] - epoch).total_seconds() == tr.end.steps, key
        assert sample.metadata["trace_sha256"] == tr.end.sha256


def test_guardrails_limits_and_errors_are_visible(logs_dir: Path,
                                                  runs: dict[str, ExportRun]) -> None:
    from inspect_ai.event import InfoEvent, ModelEvent, SampleLimitEvent

    logs = _read_logs(logs_dir)
    seen_rules = set()
    for key, run in runs.items():
        sample = _sample(logs, key)
        infos = [e for e in sample.events if isinstance(e, InfoEvent)]
        rules = [g.rule for g in run.guardrails()]
        assert [e.data["rule"] for e in infos] == rules, key
        assert all(e.source == "reactlab guardrail" and e.data["text"] for e in infos)
        assert [g["rule"] for g in sample.metadata["guardrails"]] == rules
        seen_rules |= set(rules)
        limits = [e for e in sample.events if isinstance(e, SampleLimitEvent)]
        if run.trace.end.termination in ("step_limit", "token_budget"):
            kind = {"step_limit": "turn", "token_budget": "token"}[run.trace.end.termination]
            assert [e.type for e in limits] == [kind], key
            assert sample.limit is not None and sample.limit.type == kind
        else:
            assert limits == [] and sample.limit is None, key
        errors = run.trace.errors()
        if errors:
            assert sample.error is not None and errors[0].message in sample.error.message
            failed = [e for e in sample.events if isinstance(e, ModelEvent) and e.error]
            assert len(failed) == 1 and failed[0].retries == errors[0].attempts - 1
        else:
            assert sample.error is None, key
    assert seen_rules == {"step_limit", "repeated_call", "token_budget", "scope_rule"}
    statuses = {c.status for r in runs.values() for c in r.trace.tool_calls()}
    assert {"invalid", "unknown", "blocked", "repeated", "ok"} <= statuses


def test_trials_are_epochs_of_one_sample(toolbox: Any, tmp_path: Path) -> None:
    cfg = config.load(ROOT / "config.yaml")
    base = cfg.run("variacion_busi", "local", "correcto")
    paths = []
    for trial in (1, 2):
        spec = replace(base, trial=trial, seed=trial)
        tpath = tmp_path / "traces" / f"{spec.key}.jsonl"
        vpath = tmp_path / "verified" / f"{spec.key}.json"
        run_to_trace(spec, toolbox, tpath)
        trace.write_json_atomic(vpath, verify.verification_record(trace.read(tpath),
                                                                  str(tpath)))
        paths.append((tpath, vpath))
    written = inspect_log.write_logs(paths, tmp_path / "inspect")
    from inspect_ai.log import read_eval_log

    log = read_eval_log(str(written[0]))
    assert [(s.id, s.epoch) for s in log.samples] == [("correcto", 1), ("correcto", 2)]
    assert log.eval.config.epochs == 2
    assert log.eval.dataset.sample_ids == ["correcto"]
    # a single run and a trial of the same scenario cannot share epoch 1
    plain = make_runs(toolbox, tmp_path / "plain", [("variacion_busi", "local", "correcto")])
    with pytest.raises(ReactlabError, match="would both be epoch 1"):
        inspect_log.write_logs([*paths, *plain], tmp_path / "clash")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_inspect_view(log_dir: Path, tmp_path: Path) -> tuple[subprocess.Popen[bytes], str]:
    """``inspect view`` on a free loopback port (its own process group); waits until it
    answers. Stop it with :func:`stop_inspect_view`."""
    port = _free_port()
    exe = Path(sys.executable).with_name("inspect")
    log = open(tmp_path / "inspect-view.log", "wb")  # noqa: SIM115 (kept open for the child)
    proc = subprocess.Popen([str(exe), "view", "--log-dir", str(log_dir), "--host",
                             "127.0.0.1", "--port", str(port)], stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            with urllib.request.urlopen(f"{url}/api/log-files", timeout=5) as resp:
                if resp.status == 200:
                    return proc, url
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_inspect_view(proc)
            pytest.fail("inspect view did not start: "
                        + (tmp_path / "inspect-view.log").read_text(errors="replace")[-2000:])
        time.sleep(0.5)


def stop_inspect_view(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=15)


def _get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as resp:
        assert resp.status == 200, url
        return json.loads(resp.read())


def test_inspect_view_lists_and_serves_the_logs(logs_dir: Path, tmp_path: Path,
                                                loopback: None) -> None:
    proc, url = start_inspect_view(logs_dir, tmp_path)
    try:
        listing = _get_json(f"{url}/api/log-files")
        names = sorted(Path(urllib.parse.urlparse(f["name"]).path).name
                       for f in listing["files"])
        assert names == [p.name for p in _log_files(logs_dir)]
        for entry in listing["files"]:
            served = _get_json(f"{url}/api/logs/{urllib.parse.quote(entry['name'], safe='')}")
            local = json.loads((logs_dir / Path(urllib.parse.urlparse(entry["name"]).path)
                                .name).read_text())
            assert served["eval"]["eval_id"] == local["eval"]["eval_id"]
            assert [s["id"] for s in served["samples"]] == [s["id"] for s in local["samples"]]
        with urllib.request.urlopen(f"{url}/", timeout=30) as resp:  # the viewer's page
            assert b'<div id="app">' in resp.read()
    finally:
        stop_inspect_view(proc)
    assert proc.poll() is not None


# --------------------------------------------------------------------------- OTel

def semconv_attributes() -> tuple[set[str], set[str]]:
    """(every attribute name, the deprecated ones) of opentelemetry-semantic-conventions:
    the string constants of its ``*_attributes.py`` modules, stable and incubating (a
    namespace folder), deprecated when the docstring after the constant says so."""
    import opentelemetry.semconv as semconv

    names: set[str] = set()
    deprecated: set[str] = set()
    for path in sorted(Path(next(iter(semconv.__path__))).rglob("*_attributes.py")):
        body = ast.parse(path.read_text(encoding="utf-8")).body
        for node, after in zip(body, [*body[1:], None], strict=True):
            if not (isinstance(node, ast.AnnAssign) and isinstance(node.value, ast.Constant)
                    and isinstance(node.value.value, str)):
                continue
            names.add(node.value.value)
            doc = (after.value.value if isinstance(after, ast.Expr)
                   and isinstance(after.value, ast.Constant) else "")
            # "Deprecated: Replaced by …" / "Removed" / "Obsoleted" …; but neither "Deprecated
            # in favor of stable …" (the incubating copy of a stable name) nor "Deprecated:
            # Moved to the … GenAI semantic conventions repository" (every gen_ai.* name of
            # this release: the names live on in that repository, FACTS.md)
            text = doc.strip() if isinstance(doc, str) else ""
            if text.startswith("Deprecated:") and not text.startswith("Deprecated: Moved to"):
                deprecated.add(node.value.value)
    return names, deprecated


def _parse(path: Path) -> Any:
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1, f"{path}: one OTLP JSON line expected"
    return json_format.Parse(lines[0], ExportTraceServiceRequest())


def _attrs(items: Any) -> dict[str, Any]:
    from google.protobuf import json_format

    out = {}
    for kv in items:
        value = json_format.MessageToDict(kv.value)
        out[kv.key] = next(iter(value.values())) if value else None
    return out


def test_semconv_helper_sees_the_package() -> None:
    names, deprecated = semconv_attributes()
    assert {"gen_ai.operation.name", "gen_ai.tool.call.result", "error.type",
            "service.instance.id"} <= names
    assert "gen_ai.system" in deprecated and "gen_ai.provider.name" not in deprecated
    assert len(names) > 500  # the stable and the incubating modules


def test_every_span_file_parses_with_the_otlp_mapping(spans_dir: Path,
                                                      runs: dict[str, ExportRun]) -> None:
    from opentelemetry.proto.trace.v1.trace_pb2 import Span
    from opentelemetry.semconv._incubating.attributes.gen_ai_attributes import (
        GenAiOperationNameValues,
    )

    names, deprecated = semconv_attributes()
    operations = {v.value for v in GenAiOperationNameValues}
    files = sorted(p for p in spans_dir.rglob("*.jsonl"))
    assert [p.relative_to(spans_dir).as_posix() for p in files] == sorted(
        otel.run_path(k) for k in runs)
    for path in files:
        key = path.relative_to(spans_dir).as_posix()[:-len(".jsonl")]
        run = runs[key]
        request = _parse(path)
        assert len(request.resource_spans) == 1
        resource = _attrs(request.resource_spans[0].resource.attributes)
        assert resource["service.name"] == "reactlab" and resource["service.instance.id"]
        spans = [s for ss in request.resource_spans[0].scope_spans for s in ss.spans]
        used = set(resource)
        for span in spans:
            used |= {kv.key for kv in span.attributes}
            used |= {kv.key for ev in span.events for kv in ev.attributes}
        assert used <= names, f"{key}: not semantic-convention names: {sorted(used - names)}"
        assert not used & deprecated, f"{key}: deprecated names {sorted(used & deprecated)}"
        assert len({s.trace_id for s in spans}) == 1
        roots = [s for s in spans if not s.parent_span_id]
        assert len(roots) == 1 and roots[0].name == "invoke_agent reactlab"
        root = roots[0]
        ra = _attrs(root.attributes)
        assert ra["gen_ai.operation.name"] == "invoke_agent"
        assert ra["gen_ai.conversation.id"] == key
        assert int(ra["gen_ai.usage.input_tokens"]) == run.trace.end.tokens_sent
        assert root.start_time_unix_nano == EPOCH_NS
        assert root.end_time_unix_nano == EPOCH_NS + run.trace.end.steps * STEP_NS
        for span in spans:
            a = _attrs(span.attributes)
            assert a["gen_ai.operation.name"] in operations
            assert root.start_time_unix_nano <= span.start_time_unix_nano
            assert span.end_time_unix_nano <= root.end_time_unix_nano
            if span is not root:
                assert span.parent_span_id == root.span_id
        chats = [s for s in spans if _attrs(s.attributes)["gen_ai.operation.name"] == "chat"]
        tools = [s for s in spans
                 if _attrs(s.attributes)["gen_ai.operation.name"] == "execute_tool"]
        assert len(chats) == len(run.trace.requests()) + len(run.trace.errors())
        assert all(s.kind == Span.SPAN_KIND_CLIENT for s in chats)
        answered = run.trace.requests()  # a backend error's chat span comes last
        assert [int(_attrs(s.attributes)["gen_ai.usage.input_tokens"])
                for s in chats[:len(answered)]] == [r.tokens_sent for r in answered]
        calls = run.trace.tool_calls()
        assert [_attrs(s.attributes)["gen_ai.tool.call.id"] for s in tools] == [
            c.id for c in calls]
        chat_ids = {s.span_id for s in chats}
        for span, call in zip(tools, calls, strict=True):
            a = _attrs(span.attributes)
            assert a["gen_ai.tool.name"] == (call.name or "")
            assert json.loads(a["gen_ai.tool.call.result"]) == call.result
            assert ("error.type" in a) == (call.status != "ok")
            assert [link.span_id for link in span.links] and span.links[0].span_id in chat_ids
        evaluation = [e for e in root.events if e.name == "gen_ai.evaluation.result"]
        assert len(evaluation) == 1
        ea = _attrs(evaluation[0].attributes)
        assert ea["gen_ai.evaluation.score.label"] == (
            "verified" if run.verification.verified else "rejected")
        guardrails = [_attrs(e.attributes)["error.type"] for e in root.events
                      if e.name == "reactlab.guardrail"]
        assert guardrails == [g.rule for g in run.guardrails()]
        assert ("error.type" in ra) == (run.trace.end.termination != "answer")


# --------------------------------------------------------------------------- command line

def test_cli_exports_an_existing_results_folder(pairs: list[tuple[str, str]], logs_dir: Path,
                                                spans_dir: Path, tmp_path: Path) -> None:
    results = Path(pairs[0][0]).parents[3]
    assert sorted(str(t) for t, _ in find_pairs(results)) == sorted(t for t, _ in pairs)
    assert main(["export", "inspect", "--results", str(results), "--out",
                 str(tmp_path / "i")]) == 0
    assert _files(tmp_path / "i") == _files(logs_dir)
    assert main(["export", "otel", "--results", str(results), "--out",
                 str(tmp_path / "o")]) == 0
    assert _files(tmp_path / "o") == _files(spans_dir)


def test_cli_names_a_missing_verification(toolbox: Any, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    made = make_runs(toolbox, tmp_path, CORRECTO[:1])
    Path(made[0][1]).unlink()
    assert main(["export", "otel", "--results", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "reactlab: error:" in err and "has no verification" in err and made[0][1] in err
    assert main(["export", "inspect", "--results", str(tmp_path / "nothing")]) == 2
    assert "no such folder" in capsys.readouterr().err


# --------------------------------------------------------------------------- the pipeline

SMALL = """matrix:
  - tasks: [variacion_busi]
    backends: [openai, anthropic, local]
    scenarios: [correcto, bucle_sin_limite]
"""


@pytest.mark.e2e
def test_the_exports_target_builds_both_and_a_damaged_copy_is_rebuilt(tmp_path: Path) -> None:
    from tests.test_pipeline import copy_workflow, snakemake

    copy_workflow(tmp_path)
    (tmp_path / "small.yaml").write_text(SMALL)
    overlay = ("--configfile", "small.yaml")
    # (the target first: --configfile takes every word after it)
    plan = snakemake(tmp_path, "--dry-run", *overlay)  # the default target: no export
    assert plan.returncode == 0, plan.stderr[-3000:]
    assert "export_" not in plan.stdout
    proc = snakemake(tmp_path, "exports", *overlay)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = tmp_path / "results"
    assert len(_log_files(results / "inspect")) == 3
    assert len(list((results / "otel").rglob("*.jsonl"))) == 6
    # the rule and the command line write the same bytes
    assert main(["export", "inspect", "--results", str(results), "--out",
                 str(tmp_path / "cli_inspect")]) == 0
    assert main(["export", "otel", "--results", str(results), "--out",
                 str(tmp_path / "cli_otel")]) == 0
    # (Snakemake marks a folder output with an empty .snakemake_timestamp file)
    built = {k: {n: b for n, b in _files(results / k).items() if n != ".snakemake_timestamp"}
             for k in ("inspect", "otel")}
    assert built["inspect"] == _files(tmp_path / "cli_inspect")
    assert built["otel"] == _files(tmp_path / "cli_otel")
    again = snakemake(tmp_path, "exports", "--dry-run", *overlay)
    assert "Nothing to be done" in again.stdout + again.stderr
    # an edited export is removed before the next run and rebuilt from the traces
    log = _log_files(results / "inspect")[0]
    log.write_bytes(log.read_bytes() + b" ")
    rerun = snakemake(tmp_path, "exports", *overlay)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "checksum mismatch" in rerun.stderr and "results/inspect will be rebuilt" in rerun.stderr
    assert {n: b for n, b in _files(results / "inspect").items()
            if n != ".snakemake_timestamp"} == built["inspect"]


def test_an_old_trace_exports_from_what_it_holds_alone() -> None:
    """A trace whose header does not record what its session sent takes the default of
    its backend's mode, read from the trace: not from the provider registry, so a trace of
    a provider not registered here exports all the same (a TraceError before)."""
    for gt, gv in _golden_pairs():
        tr = trace.read(gt)
        spec = json.loads(json.dumps(tr.header.spec))
        spec["backend_config"]["provider"] = "registered_nowhere"
        moved = replace(tr, header=replace(tr.header, spec=spec))
        run = ExportRun(moved, verify.load_verification(tr, gv, str(gt)))
        old = ExportRun(tr, verify.load_verification(tr, gv, str(gt)))
        http = tr.header.spec["backend_config"]["mode"] in ("simulated", "live")
        assert unrecorded_facts(run) == unrecorded_facts(old) == (
            (False, True) if http else (True, False))  # send_system_prompt: false


def test_the_exports_read_only_the_traces() -> None:
    """No export module asks the provider registry (what is registered now says nothing
    of a trace written before)."""
    for path in (ROOT / "workflow" / "reactlab" / "export").glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        named = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                 for alias in node.names if node.module == "reactlab.backends"}
        modules = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        assert "registry" not in named and "reactlab.backends.registry" not in modules, path
