"""The example plugin (examples/plugin, docs/plugins.md): an agent, a model server, a
benchmark and a tool source, each one module of the package ``reactlab-example-plugin``
and one entry point, with nothing in reactlab naming them.

The first tests are fast and in-process (no install): each entry point names an object of
its kind, the benchmark's cases, scorer and table run through the rule jobs' functions
(the benchmark and the provider registered in-process, as tests/toy_benchmark.py does),
a case replays from its recording, the tool source's tools answer and refuse as data.

The tests marked ``e2e`` run docs/plugins.md's commands as written ("Install and run":
``pip install -e``, ``reactlab check``, the overlay's run, then ``all exports``) in a copy
of the checkout whose ``.venv`` sees this environment's packages and keeps its own
installs (pip offline, as a pip.conf would set it; the shared environment untouched),
then read its tables, viewer pages and exports; ``reactlab check`` without the package
must stop with one line naming the distribution.
"""

from __future__ import annotations

import csv
import importlib
import json
import math
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, run_specs
from tests.doc_commands import Ran

PLUGIN = ROOT / "examples" / "plugin"
OVERLAY = "examples/plugin/config.yaml"
DIST = "reactlab-example-plugin"
GROUPS = ("reactlab.agents", "reactlab.providers", "reactlab.benchmarks",
          "reactlab.tool_sources")


@pytest.fixture(scope="module")
def plugin() -> Iterator[None]:
    """The package importable in this process, from its source folder."""
    sys.path.insert(0, str(PLUGIN))
    try:
        yield
    finally:
        sys.path.remove(str(PLUGIN))


def entry_points() -> dict[str, dict[str, str]]:
    data = tomllib.loads((PLUGIN / "pyproject.toml").read_text(encoding="utf-8"))
    assert data["project"]["name"] == DIST
    return {g: dict(data["project"]["entry-points"][g]) for g in GROUPS}


def load(target: str) -> Any:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


@pytest.fixture(scope="module")
def registered(plugin: None) -> Any:
    """The benchmark and the provider, registered in this process."""
    from reactlab_example.benchmark import BENCHMARK
    from reactlab_example.provider import PROVIDER

    from reactlab.backends.registry import register as register_provider
    from reactlab.suites.registry import register

    register_provider(PROVIDER)
    return register(BENCHMARK)


# ------------------------------------------------------------------ in process (fast)

MEMBERS = {"reactlab.agents": ("name", "providers", "settings", "packages", "mcp", "run"),
           "reactlab.providers": ("name", "sessions", "api", "packages", "load"),
           "reactlab.benchmarks": ("name", "tables", "categories", "policies", "only", "code",
                                   "specs", "run_case", "record", "build_tables"),
           "reactlab.tool_sources": ("name", "settings", "packages", "tools", "open")}


@pytest.mark.parametrize("group", GROUPS)
def test_each_entry_point_names_an_object_of_its_kind(plugin: None, group: str) -> None:
    (name, target), = entry_points()[group].items()
    module = target.partition(":")[0]
    if not (PLUGIN / (module.replace(".", "/") + ".py")).is_file():
        pytest.skip(f"{module} is not in this checkout")
    entry = load(target)
    assert [m for m in MEMBERS[group] if not hasattr(entry, m)] == []
    assert entry.name == name
    if group == "reactlab.benchmarks":
        assert entry.tables == (name,)
        assert all(load(f"{m}:__name__") == m for m in entry.code.values())


def test_nothing_in_reactlab_names_the_plugins() -> None:
    """No code, rule, schema, caption or config of reactlab names the package or its
    plugins: they come in through the entry points alone."""
    names = [DIST, "reactlab_example", "conversiones", "divisas", "model_server",
             "text_react", "tipo_cambio", "respuesta_final"]
    found = [f"{path.relative_to(ROOT)}: {name}"
             for path in [*(ROOT / "workflow").rglob("*"), ROOT / "config.yaml",
                          ROOT / "Snakefile"]
             if path.is_file() and path.suffix in (".py", ".smk", ".yaml", ".rst", "")
             for name in names if name in path.read_text(encoding="utf-8", errors="replace")]
    assert found == []


def test_the_benchmark_has_its_cases_and_their_tool_agrees(plugin: None) -> None:
    """24 cases in four categories; each case's expected value (written in the data
    file) is what its converter computes, and the faulty policy's unit gives a value
    outside the scorer's tolerance (so the scorer can tell it)."""
    from reactlab_example.benchmark import CASES, within_tolerance
    from reactlab_example.units import UNITS, convert

    assert len(CASES) >= 20 and len({c.id for c in CASES}) == len(CASES)
    assert sorted({c.category for c in CASES}) == ["longitud", "masa", "temperatura",
                                                   "volumen"]
    for c in CASES:
        got = convert(c.category, c.valor, c.desde, c.hasta)
        assert math.isclose(got, c.esperado, rel_tol=1e-5, abs_tol=1e-4), c.id
        other = next(u for u in UNITS[c.category] if u not in (c.desde, c.hasta))
        assert not within_tolerance(convert(c.category, c.valor, c.desde, other),
                                    c.esperado), c.id


@pytest.mark.parametrize(("question", "answer", "value"), [
    ("¿Cuántos kilómetros son 26,2 millas?", "Son 42.164813 km.", 42.164813),
    ("¿Cuántos kilómetros son 26,2 millas?", "42,16 km (26,2 millas)", 42.16),
    ("¿Cuántos metros cúbicos son 1200 litros?", "Son 1.2 m3.", 1.2),
    ("¿Cuántos grados Celsius son 77 K?", "Unos −196,15 °C", -196.15),
    ("¿Cuántos metros son 100 yardas?", "No lo sé: 100 yardas.", None),
    ("¿Cuántos metros son 100 yardas?", None, None),
])
def test_the_scorer_reads_the_answers_value(plugin: None, question: str, answer: str | None,
                                            value: float | None) -> None:
    from reactlab_example.benchmark import answer_value

    assert answer_value(question, answer) == value


def bench_config(**entry: Any) -> dict[str, Any]:
    from reactlab.config import load_yaml

    raw = load_yaml(ROOT / "config.yaml")
    raw["suites"] = {"conv": {"benchmark": "conversiones", "backends": ["local", "openai"],
                              "sample": 2, "shard_size": 16, **entry}}
    return raw


def test_the_benchmark_runs_through_the_rules_jobs(registered: Any, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Planned from a ``suites:`` entry, its shards run, verified and tabled by the
    functions the rules call: the right policy scores every case, the wrong unit none,
    each of its cases with a finding."""
    from reactlab import jobs
    from reactlab.config import parse
    from reactlab.suites.plan import plan
    from reactlab.suites.shards import listed, shard_files, table_paths

    raw = bench_config()
    parse(raw)
    shards = plan(raw)
    assert table_paths(shards) == ["results/tables/conversiones.csv"]
    monkeypatch.chdir(tmp_path)
    manifests = []
    for shard in shards:
        files = shard_files(shard.suite, shard.id)
        jobs.suite_run(shard.to_json(), files.traces, f"logs/{shard.id}.run.log", model=False)
        jobs.suite_verify(files.traces, files.verified, f"logs/{shard.id}.verify.log")
        manifests.append(files.traces)
        for path in listed(files.verified):
            rec = json.loads(Path(path).read_text(encoding="utf-8"))
            rules = [f["rule"] for f in rec["findings"]]
            assert rules == ([] if shard.scenario == "directo"
                             else ["conversiones:fuera_de_tolerancia"]), path
    jobs.suite_tables("conversiones", manifests, "results/tables", "logs/tables.log")
    with open("results/tables/conversiones.csv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 2 * 2 * 4  # backends x policies x categories
    for row in rows:
        assert row["cases"] == "2"
        assert row["correct"] == ("2" if row["scenario"] == "directo" else "0"), row
        assert (float(row["median_rel_error"]) < 1e-5) == (row["scenario"] == "directo")


def test_a_model_backend_runs_the_model_on_each_case(registered: Any) -> None:
    from reactlab.suites.plan import plan

    specs = [s for shard in plan(bench_config(backends=["smollm2"], sample=1))
             for s in shard.specs]
    assert len(specs) == 4 and {s.scenario for s in specs} == {"react"}
    assert all(s.agent.send_system_prompt and len(s.tools) == 1 for s in specs)


@pytest.mark.parametrize(("settings", "field"), [
    ({"max_pasos": 0}, "suites.conv.settings.max_pasos"),
    ({"max_pasos": "3"}, "suites.conv.settings.max_pasos"),
    ({"max_steps": 3}, "suites.conv.settings.max_steps"),
])
def test_the_benchmarks_own_settings_are_checked_by_its_model(
        registered: Any, settings: dict[str, Any], field: str) -> None:
    from reactlab.config import ConfigError, parse
    from reactlab.suites.plan import plan

    with pytest.raises(ConfigError) as info:
        parse(bench_config(settings=settings))
    assert info.value.field == field
    # a valid one reaches its cases: the model's step limit on each
    specs = [s for shard in plan(bench_config(backends=["smollm2"], sample=1,
                                              settings={"max_pasos": 6}))
             for s in shard.specs]
    assert {s.limits.max_steps for s in specs} == {6}


def test_a_case_replays_from_its_recording(registered: Any, tmp_path: Path) -> None:
    from reactlab.suites.plan import plan

    spec = plan(bench_config(backends=["openai_chat"], sample=1))[0].specs[0]
    registered.run_case(spec, tmp_path / "a.jsonl", recording=str(tmp_path / "rec.jsonl"))
    registered.run_case(spec, tmp_path / "b.jsonl", replay=str(tmp_path / "rec.jsonl"))
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()


def test_the_tool_source_answers_and_refuses_as_data(plugin: None) -> None:
    import pydantic
    from reactlab_example.tools import TOOL_SOURCE

    settings = TOOL_SOURCE.settings(comision=0.01)
    tools = {t["name"]: t for t in TOOL_SOURCE.tools(settings)}
    assert sorted(tools) == ["convertir", "tipo_cambio"]
    assert "comisión del 1 %" in tools["convertir"]["description"]
    for t in tools.values():
        params = t["parameters"]
        assert params["type"] == "object" and set(params["required"]) <= set(params["properties"])
    run = TOOL_SOURCE.open(settings)
    rate = run.execute("tipo_cambio", {"origen": "USD", "destino": "EUR", "fecha": "2024-03-15"})
    assert rate == {"resultado": {"origen": "USD", "destino": "EUR", "fecha": "2024-03-15",
                                  "tipo": 0.91391}}
    # a Saturday takes Friday's rate; the amount is converted less 1 %
    got = run.execute("convertir", {"importe": 250, "origen": "USD", "destino": "EUR",
                                    "fecha": "2024-03-16"})["resultado"]
    assert got["fecha"] == "2024-03-15" and got["importe_convertido"] == round(
        250 * 0.91391 * 0.99, 2)
    refused = {
        ("convertir", json.dumps({"importe": 250, "origen": "USD", "destino": "EUROS",
                                  "fecha": "2024-03-15"})): "moneda desconocida 'EUROS'",
        ("convertir", json.dumps({"importe": -5, "origen": "USD", "destino": "EUR",
                                  "fecha": "2024-03-15"})): "importe: debe ser un número",
        ("tipo_cambio", json.dumps({"origen": "USD", "destino": "EUR"})): "fecha: falta",
        ("tipo_cambio", json.dumps({"origen": "USD", "destino": "EUR", "fecha": "2024-02-30",
                                    "x": 1})): "fecha inexistente",
        ("tipo_cambio", json.dumps({"origen": "USD", "destino": "EUR",
                                    "fecha": "2024-01-02"})): "no hay tipos de cambio antes",
        ("cotizar", "{}"): "herramienta desconocida: cotizar",
        ("convertir", "[1, 2]"): "se esperaba un objeto JSON",
    }
    for (name, args), message in refused.items():
        out = run.execute(name, json.loads(args))
        assert list(out) == ["error"] and message in out["error"], (name, args, out)
    assert "error" in run.execute("convertir", {}, allowed={"tipo_cambio"})
    with pytest.raises(pydantic.ValidationError):
        TOOL_SOURCE.settings(comision=0.5)
    with pytest.raises(pydantic.ValidationError):
        TOOL_SOURCE.settings.model_validate({"comisiones": 0.01})


def test_the_provider_runs_a_lesson_scenario(registered: Any, raw_config: dict[str, Any],
                                             toolbox: Any, tmp_path: Path) -> None:
    """A backend of provider ``model_server`` plays the lesson's correct script on its
    simulated Chat Completions API; the trace names the provider."""
    from reactlab import trace
    from reactlab.config import parse

    raw_config["backends"]["model_server"] = {"provider": "model_server", "mode": "simulated"}
    raw_config["matrix"].append({"tasks": ["variacion_busi"], "backends": ["model_server"],
                                 "scenarios": ["correcto"]})
    specs = [s for s in parse(raw_config).runs if s.backend == "model_server"]
    (ran,) = run_specs(specs, toolbox, tmp_path, verified=True)
    tr = trace.read(ran.trace)
    assert tr.header.spec["backend_config"]["provider"] == "model_server"
    assert tr.end.termination == "answer"
    assert json.loads(ran.verified.read_text(encoding="utf-8"))["verified"] is True


# ------------------------------------------------------------------ installed (e2e)

def install(dest: Path) -> Path:
    """The package installed into ``dest/site`` as pip installs it (from a copy of its
    folder, so that the build leaves nothing in the checkout): offline, with this
    environment's setuptools, the shared environment untouched."""
    shutil.copytree(PLUGIN, dest / "src", ignore=shutil.ignore_patterns("build", "*.egg-info",
                                                                       "__pycache__"))
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps",
                           "--no-build-isolation", "--no-index", "--quiet", "--target",
                           str(dest / "site"), str(dest / "src")],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return dest / "site"


def with_path(*paths: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(str(p) for p in paths)}


def project_venv(work: Path) -> Path:
    """``work/.venv``: a virtual environment that sees this environment's packages (a
    ``.pth`` adds its site-packages) and keeps what pip installs in its own, with
    reactlab's and Snakemake's console scripts; the docs' commands run there as written
    (``.venv/bin/...``), the shared environment untouched."""
    venv = work / ".venv"
    if venv.is_symlink():  # copy_checkout's link to the shared environment
        venv.unlink()
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    (site,) = (venv / "lib").glob("python3*/site-packages")
    shared = sysconfig.get_paths()["purelib"]
    (site / "_shared_env.pth").write_text(f"import site; site.addsitedir({shared!r})\n")
    for name in ("reactlab", "snakemake"):
        script = (Path(sys.executable).parent / name).read_text().split("\n", 1)[1]
        (venv / "bin" / name).write_text(f"#!{venv / 'bin' / 'python'}\n{script}")
        (venv / "bin" / name).chmod(0o755)
    return venv


#: The environment of the docs' commands: the copy's code first, and pip offline (no
#: index, no dependencies, this environment's setuptools), as a pip.conf would set it
DOC_ENV = {"PIP_NO_INDEX": "1", "PIP_NO_DEPS": "1", "PIP_NO_BUILD_ISOLATION": "0",
           "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def doc_commands() -> list[str]:
    """docs/plugins.md's "Install and run" block, then its `all exports` command."""
    from tests.doc_commands import extract

    found = [c for c, where in extract().items() if ".venv" in c and "examples/plugin" in c
             and any(w.startswith("docs/plugins.md:") for w in where)]
    return sorted(found, key=lambda c: ("pip install" not in c, "check" not in c,
                                        "exports" in c))


class Project:
    def __init__(self, work: Path, ran: list[tuple[str, Ran]]) -> None:
        self.work, self.ran = work, ran

    def run(self, *args: str, plugin: bool = True) -> subprocess.CompletedProcess[str]:
        """``python -m args`` in the copy: in its `.venv` (the plugin installed there) or,
        with ``plugin=False``, in this environment (no plugin)."""
        python = str(self.work / ".venv" / "bin" / "python") if plugin else sys.executable
        return subprocess.run([python, "-m", *args], cwd=self.work,
                              env=with_path(self.work / "workflow"), capture_output=True,
                              text=True, timeout=600, check=False)

    def table(self, name: str) -> list[dict[str, str]]:
        with open(self.work / "results" / "tables" / f"{name}.csv", encoding="utf-8") as fh:
            return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    """docs/plugins.md's commands, as written, in a checkout copy with its own `.venv`:
    the editable install, the check, the run and the run with `exports`."""
    from tests.doc_commands import copy_checkout, shell

    work = tmp_path_factory.mktemp("plugin") / "work"
    work.mkdir()
    copy_checkout(work)
    project_venv(work)
    env = {**DOC_ENV, "PYTHONPATH": str(work / "workflow")}
    ran = []
    for command in doc_commands():
        ran.append((command, shell(command, work, env=env, timeout=600)))
        if ran[-1][1].rc != 0:
            break
    return Project(work, ran)


def test_the_docs_commands_are_the_four_run_here() -> None:
    assert doc_commands() == [
        ".venv/bin/python -m pip install -e examples/plugin",
        ".venv/bin/reactlab check --configfile examples/plugin/config.yaml",
        ".venv/bin/snakemake --cores 2 --configfile config.yaml examples/plugin/config.yaml",
        ".venv/bin/snakemake --cores 2 all exports --configfile config.yaml "
        "examples/plugin/config.yaml"]


@pytest.mark.e2e
def test_the_overlay_runs_with_the_plugin_installed(project: Project) -> None:
    assert len(project.ran) == 4
    for command, ran in project.ran:
        assert ran.rc == 0, (command, (ran.out + ran.err)[-5000:])
    assert "valid; 10 runs" in project.ran[1][1].err
    installed = project.run("pip", "show", DIST)
    assert installed.returncode == 0 and "Editable project location" in installed.stdout
    again = project.run("snakemake", "--cores", "2", "-n", "all", "exports",
                        "--configfile", "config.yaml", OVERLAY)
    assert "Nothing to be done" in again.stdout + again.stderr, again.stderr[-3000:]


@pytest.mark.e2e
def test_the_benchmarks_table(project: Project) -> None:
    rows = project.table("conversiones")
    assert {(r["backend"], r["scenario"]) for r in rows} == {
        (b, p) for b in ("local", "model_server") for p in ("directo", "unidad_equivocada")}
    assert sum(int(r["cases"]) for r in rows) == 4 * 24
    for r in rows:
        assert r["correct"] == (r["cases"] if r["scenario"] == "directo" else "0"), r


@pytest.mark.e2e
def test_the_runs_on_the_tool_source_and_the_agent(project: Project) -> None:
    runs = {(r["task"], r["backend"], r["scenario"]): r for r in project.table("runs")}
    for backend in ("local", "model_server"):
        for scenario, verified in (("divisas_correcto", "True"), ("divisas_corrige", "True"),
                                   ("divisas_inventa", "False")):
            row = runs[("cambio_usd_eur", backend, scenario)]
            assert (row["termination"], row["verified"]) == ("answer", verified), row
    (agent,) = [r for r in project.table("agents") if r["agent"] == "text_react"]
    assert (agent["framework"], agent["termination"], agent["verified"]) == (
        "text_react", "answer", "True"), agent
    from reactlab import trace

    tr = trace.read(project.work / "results" / "traces" / "cambio_usd_eur" / "model_server"
                    / "divisas_correcto.jsonl")
    calls = [(c.name, sorted(c.result)) for c in tr.tool_calls()]
    assert calls == [("tipo_cambio", ["resultado"]), ("convertir", ["resultado"])]
    assert "226.19 EUR" in str(tr.end.answer)  # 250 x 0.91391, less the 1 % commission
    assert tr.header.versions.get(DIST) == "0.1.0"  # the tool source's `packages`


@pytest.mark.e2e
def test_the_viewer_and_the_exports_show_the_plugins_runs(project: Project) -> None:
    viewer = project.work / "results" / "viewer"
    index = (viewer / "index.html").read_text(encoding="utf-8")
    assert "conversiones" in index and "cambio_usd_eur" in index
    page = viewer / "cambio_usd_eur" / "model_server" / "divisas_correcto.html"
    assert "tipo_cambio" in page.read_text(encoding="utf-8")
    case = viewer / "suites" / "conversiones" / "local" / "unidad_equivocada" / "masa_1.html"
    assert "conversiones:fuera_de_tolerancia" in case.read_text(encoding="utf-8")
    assert (viewer / "variacion_busi" / "openai_chat" / "correcto__text_react.html").is_file()
    inspect = [p.name for p in (project.work / "results" / "inspect").glob("*.json")]
    assert any("cambio-usd-eur" in n and "model-server" in n for n in inspect), inspect
    spans = "".join(p.read_text(encoding="utf-8") for p in
                    (project.work / "results" / "otel" / "cambio_usd_eur").rglob("*.jsonl"))
    assert '"model_server"' in spans and "tipo_cambio" in spans


@pytest.mark.e2e
def test_check_without_the_plugin_names_the_distribution(project: Project) -> None:
    """With the package on the path the overlay checks; without it, `reactlab check` and
    Snakemake stop with one line naming the distribution to install."""
    ok = project.run("reactlab", "check", "--configfile", OVERLAY)
    assert ok.returncode == 0 and "valid; 10 runs" in ok.stderr, ok.stderr
    missing = project.run("reactlab", "check", "--configfile", OVERLAY, plugin=False)
    assert missing.returncode != 0
    lines = missing.stderr.strip().splitlines()
    assert len(lines) == 1 and DIST in lines[0], missing.stderr
    dry = project.run("snakemake", "--cores", "2", "-n", "--configfile", "config.yaml",
                      OVERLAY, plugin=False)
    assert dry.returncode != 0 and DIST in dry.stdout + dry.stderr
