from __future__ import annotations

import functools
import os
import socket
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
_CONNECT = socket.socket.connect
_CREATE_CONNECTION = socket.create_connection


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--regen-golden", action="store_true", default=False,
                     help="rewrite tests/golden/ from this run instead of comparing (review "
                          "the diff before committing)")


#: The test modules that take longest, longest first (docs/workflow.md, "Where the test
#: time goes", measured with --durations=0): under `--dist loadfile` each pytest-xdist
#: worker takes whole modules in this order, so a long module does not start last while
#: the other worker runs out of work. test_pipeline builds the default run (the start of
#: make test-full's longest chain); test_slurm_cluster, mostly waiting on its cluster,
#: runs on the other worker meanwhile; the default run's users follow.
SLOW_MODULES = ("test_pipeline", "test_slurm_cluster", "test_local_model", "test_suites",
                "test_docs_commands", "test_decoding", "test_damage", "test_reruns")


def pytest_configure(config: pytest.Config) -> None:
    if getattr(config.option, "dist", "no") == "loadfile":
        # xdist would re-sort the modules by their number of tests; keep the order below
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In a pytest-xdist worker (whose collection the scheduler follows): the modules of
    :data:`SLOW_MODULES` first, in its order, then the others by their number of tests,
    most first (what xdist's own reordering does); the tests of a module keep their
    order. A run without workers keeps pytest's order."""
    if not hasattr(config, "workerinput"):
        return
    count: dict[str, int] = {}
    for item in items:
        count[item.nodeid.split("::")[0]] = count.get(item.nodeid.split("::")[0], 0) + 1

    def rank(pair: tuple[int, pytest.Item]) -> tuple[int, int, int]:
        module = pair[1].nodeid.split("::")[0]
        stem = Path(module).stem
        first = SLOW_MODULES.index(stem) if stem in SLOW_MODULES else len(SLOW_MODULES)
        return first, -count[module], pair[0]

    items[:] = [item for _, item in sorted(enumerate(items), key=rank)]


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may open a network connection: everything goes through injected transports."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a test tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def _host(address: Any) -> str | None:
    return address[0] if isinstance(address, tuple) and address else None


@pytest.fixture
def loopback(_no_network: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Allow connections to loopback addresses only (after the blanket refusal above):
    for the tests that drive the simulator server over a real socket."""

    def connect(self: socket.socket, address: Any) -> Any:
        if _host(address) not in LOOPBACK:
            raise RuntimeError(f"a test tried to connect to {address!r} (not loopback)")
        return _CONNECT(self, address)

    def create_connection(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
        if _host(address) not in LOOPBACK:
            raise RuntimeError(f"a test tried to connect to {address!r} (not loopback)")
        return _CREATE_CONNECTION(address, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket, "create_connection", create_connection)


@pytest.fixture(scope="session")
def data_seed() -> int:
    """The seed of the shipped config's synthetic data."""
    from reactlab import config

    return int(config.load(ROOT / "config.yaml").data["seed"])


@pytest.fixture(scope="session")
def data_files(tmp_path_factory: pytest.TempPathFactory, data_seed: int) -> tuple[Path, Path]:
    """The prices and news files generated from the shipped seed, once per session."""
    from reactlab import data

    return data.write(tmp_path_factory.mktemp("data"), data_seed)


@pytest.fixture(scope="session")
def toolbox(data_files: tuple[Path, Path]):
    """The tools over :func:`data_files`, built once per session (read-only once built)."""
    from reactlab.tools import ToolBox

    return ToolBox.from_files(*data_files)


#: Where the converted local model is kept for the test processes of one checkout
#: (git-ignored `build/`), one folder per fingerprint of the checkout.
MODELS_HOME = ROOT / "build" / "test-models"


@functools.cache
def converted_model() -> Path:
    """SmolLM2 converted from the environment's GGUF (≈ 20 s of CPU), once for every test
    process of this checkout: into ``$REACTLAB_MODEL_CACHE`` when it is set, else into
    :data:`MODELS_HOME`/<fingerprint> (``tests/doc_commands.checkout_key``: every file of
    the checkout and the environment), so that the pytest-xdist workers of `make test` and
    `make test-full` share one conversion and a changed file converts again. A process
    that finds another converting waits for it (a file lock). The conversion itself (its
    verification against the GGUF's own tokens included) is what every first call runs;
    ``tests/test_local_model.py`` also converts into fresh folders."""
    import fcntl
    import shutil
    import subprocess
    import tempfile

    from reactlab.backends.local.model import ensure_converted
    from tests.doc_commands import checkout_key

    cache = os.environ.get("REACTLAB_MODEL_CACHE")
    if cache:
        return ensure_converted(Path(cache))
    try:
        key = checkout_key()
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: this process only
        return ensure_converted(Path(tempfile.mkdtemp(prefix="reactlab-models-")))
    MODELS_HOME.mkdir(parents=True, exist_ok=True)
    home = MODELS_HOME / key
    with open(MODELS_HOME / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        folder = ensure_converted(home)
        others = sorted((p for p in MODELS_HOME.iterdir() if p.is_dir() and p != home),
                        key=lambda p: p.stat().st_mtime, reverse=True)
        for old in others[1:]:  # the newest other fingerprint's kept, as for the runs
            shutil.rmtree(old, ignore_errors=True)
    return folder


class Ran(NamedTuple):
    """One run made by :func:`run_specs`: its spec, the end record's fields that
    ``run_to_trace`` returned, the trace's path and its verification's path (or None)."""

    spec: Any
    end: dict[str, Any]
    trace: Path
    verified: Path | None


def run_suite_shards(raw: dict[str, Any], root: Path) -> list[tuple[str, str]]:
    """Every shard a ``suites:`` config plans, as its jobs run it (one run job, one verify
    job, under ``root``): the (trace, verification) paths of every case."""
    from reactlab.suites.plan import plan
    from reactlab.suites.registry import run_case, suite_record
    from reactlab.suites.run import run_shard
    from reactlab.suites.score import verify_shard

    pairs: list[tuple[str, str]] = []
    for shard in plan(raw):
        traces, verified = shard.traces(str(root)), shard.verified(str(root))
        run_shard(shard.to_json(), traces, run_case)
        verify_shard(traces, verified, suite_record)
        pairs += list(zip(traces, verified, strict=True))
    return pairs


def run_specs(specs: Iterable[Any], toolbox: Any, out: Path, *,
              verified: bool = False) -> list[Ran]:
    """Run each ``RunSpec`` in process into ``out/traces/{key}.jsonl`` (the pipeline's
    layout) and, with ``verified``, write its verification to ``out/verified/{key}.json``.

    Retry waits of the fault scenarios are not slept (they are recorded all the same).
    """
    from reactlab import trace
    from reactlab.analysis import verify
    from reactlab.backends import retry
    from reactlab.runner import run_to_trace

    done = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(retry, "default_sleep", lambda seconds: None)
        for spec in specs:
            tpath = out / "traces" / f"{spec.key}.jsonl"
            end = run_to_trace(spec, toolbox, tpath)
            vpath = None
            if verified:
                vpath = out / "verified" / f"{spec.key}.json"
                trace.write_json_atomic(vpath, verify.verification_record(trace.read(tpath),
                                                                          str(tpath)))
            done.append(Ran(spec, end, tpath, vpath))
    return done


@pytest.fixture
def raw_config() -> dict:
    from reactlab.config import load_yaml

    return load_yaml(ROOT / "config.yaml")


def with_own_mcp_server(raw: dict, data_files: tuple[Path, Path]) -> dict:
    """A copy of ``raw`` without the shipped MCP slice (its server is listed elsewhere) and
    with the project's own server, `python -m reactlab mcp` over stdio on ``data_files``,
    as ``mcp_servers.reactlab`` (its argument schemas the model's own, results read as the
    lesson's JSON; docs/mcp.md)."""
    import copy
    import sys

    raw = copy.deepcopy(raw)
    raw["matrix"] = [b for b in raw["matrix"]
                     if not any("mcp_server" in raw["tasks"][t] for t in b["tasks"])]
    raw["mcp_servers"]["reactlab"] = {
        "command": sys.executable,
        "args": ["-m", "reactlab", "mcp", "--lesson-schemas", "--prices", str(data_files[0]),
                 "--news", str(data_files[1])],
        "env": {"PYTHONPATH": str(ROOT / "workflow")}, "results": "lesson"}
    return raw


def framework_docs_table(providers: Iterable[str], rows: Iterable[tuple[str, str]],
                         run_one: Any) -> str:
    """The table docs/agents.md prints for a framework: one line per provider and
    (scenario, agent) of ``rows``, each the end record of ``run_one(provider, scenario,
    agent)``'s trace."""
    lines = ["| provider | scenario (agent) | termination | ending | requests | tool errors "
             "| tokens sent |", "|---|---|---|---|---|---|---|"]
    rows = list(rows)
    for provider in providers:
        for scenario, agent in rows:
            end = run_one(provider, scenario, agent).end.to_json()
            lines.append(f"| {provider} | {scenario} ({agent}) | {end['termination']} | "
                         f"{end['ending']} | {end['steps']} | {end['errors']} | "
                         f"{end['tokens_sent']:,} |")
    return "\n".join(lines)


def offline_blocks(raw: dict) -> list[dict]:
    """The matrix blocks that run by default: those without a live backend (live blocks
    run only with `live: {enabled: true}`)."""
    return [b for b in raw["matrix"]
            if not any(raw["backends"][x]["mode"] == "live" for x in b["backends"])]


def overlay_stacks() -> list[list[Path]]:
    """Each overlay of workflow/configs/ with the overlays it is documented to go on top
    of: the `workflow/configs/*.yaml` its leading comment names before it names itself
    ("on top of workflow/configs/bfcl.yaml", "Use with: ... --configfile A B THIS")."""
    import re

    stacks = []
    for overlay in sorted((ROOT / "workflow" / "configs").glob("*.yaml")):
        header = []
        for line in overlay.read_text(encoding="utf-8").splitlines():
            if not line.startswith("#"):
                break
            header.append(line)
        stack: list[Path] = []
        for name in re.findall(r"workflow/configs/([a-z0-9_]+\.yaml)", "\n".join(header)):
            if name == overlay.name:
                break
            if ROOT / "workflow" / "configs" / name not in stack:
                stack.append(ROOT / "workflow" / "configs" / name)
        stacks.append([*stack, overlay])
    return stacks


def interrupt(proc: Any, timeout: float = 15) -> None:
    """Stop a server process this test started, as a user's Ctrl-C does (SIGINT), killing
    it if it has not ended within ``timeout`` seconds."""
    import signal
    import subprocess

    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def stages(output: str) -> dict[str, int]:
    """{rule: jobs done} from a run's terminal output: the progress line per stage that
    reactlab's logger plugin prints (profiles/default; workflow/snakemake_logger_plugin_
    reactlab), each when the stage has finished all its jobs."""
    import re

    return {m[1]: int(m[2]) for m in re.finditer(
        r"^\[\s*\d+:\d\d\] (\w+)\s+(\d+)/(\d+)\s+jobs", output, re.M) if m[2] == m[3]}

