"""The shell commands that README.md and docs/*.md give, found in their text
(:func:`extract`), and what each one names checked against the repository
(:func:`problems`). ``tests/test_docs_commands.py`` classifies every one of them and
runs the cheap and slow ones.

What counts as a command (the rule the table follows):

* in a fenced block marked ``sh``, ``bash``, ``shell`` or ``console``: every line that is
  not blank and not a comment (``console``: the lines that start with ``$``), a line
  ending in ``\\`` joined with the next, a trailing ``# comment`` dropped;
* in a fenced block with no language: the lines that read as a command (below); the
  others are output, diagrams or layouts;
* in the text, an inline code span whose whole text reads as a command.

A text *reads as a command* when, after any ``NAME=value`` assignments, it starts with
``.venv/bin/PROGRAM`` and an argument, ``python -m MODULE``, ``snakemake``, ``pytest`` or
``conda`` and an argument, ``make TARGET``, or ``reactlab SUBCOMMAND`` (one of the CLI's).
A bare program name (`make`, `snakemake`) or a module name (`reactlab.jobs`) is prose.
Blocks in another language (``yaml``, ``python``) are examples, not commands; the YAML
examples of docs/configuration.md are checked by their own test. A command is identified by
its text with whitespace collapsed: the same text in two places is one command. How a
command is spelled (``.venv/bin/...``) is checked by ``tests/test_docs_facts.py``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
SHELL_LANGUAGES = frozenset({"sh", "bash", "shell", "console"})
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([^\s`]*)")
INLINE = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=\S*$")
MAKE_TARGET = re.compile(r"^[a-z][a-z0-9-]*$")
#: Marks of a synopsis rather than a command to paste: elided or optional parts,
#: alternatives, upper-case placeholders (N, DIR, OVERLAY, SPECS.json).
SYNOPSIS = re.compile(r"…|\.\.\.|\[|(?<=\S)\|(?=\S)"
                      r"|(?:^|\s)(?:[A-Z][A-Z_]*[A-Z]|N)(?:\.\w+)?(?=\s|$)")


def doc_files(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def subcommands() -> frozenset[str]:
    from reactlab.cli import build_parser

    return frozenset(_subparsers(build_parser()))


def _subparsers(parser: object) -> dict[str, object]:
    import argparse

    assert isinstance(parser, argparse.ArgumentParser)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def normalise(text: str) -> str:
    return " ".join(text.split())


def reads_as_command(text: str, subs: frozenset[str]) -> bool:
    words = text.split()
    while words and ASSIGNMENT.match(words[0]):
        words = words[1:]
    if len(words) < 2:
        return False
    prog, first = words[0], words[1]
    if prog in {"python", "python3", ".venv/bin/python"}:
        if first != "-m" or len(words) < 3:
            return False
        return words[2] != "reactlab" or (len(words) > 3 and words[3] in subs)
    if prog.startswith(".venv/bin/") or prog in {"snakemake", "pytest", "conda"}:
        return True
    if prog == "make":
        return bool(MAKE_TARGET.match(first))
    if prog == "reactlab":
        return first in subs
    return False


def _strip_comment(line: str) -> str:
    """``line`` without a trailing shell comment (a ``#`` after a blank, outside quotes)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def _logical_lines(lines: list[str]) -> Iterator[str]:
    pending = ""
    for line in lines:
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        yield pending + line
        pending = ""
    if pending:
        yield pending


def extract(root: Path = ROOT) -> dict[str, list[str]]:
    """Every command of the docs: its normalised text -> where it is (``file:line``)."""
    subs = subcommands()
    found: dict[str, list[str]] = {}

    def add(text: str, where: str) -> None:
        found.setdefault(normalise(text), []).append(where)

    for path in doc_files(root):
        rel = path.relative_to(root).as_posix()
        lines = path.read_text(encoding="utf-8").splitlines()
        prose: list[tuple[int, str]] = []
        i = 0
        while i < len(lines):
            m = FENCE.match(lines[i])
            if not m:
                prose.append((i + 1, lines[i]))
                i += 1
                continue
            fence, lang, start = m.group(1), m.group(2).lower(), i + 1
            i += 1
            body = []
            while i < len(lines) and not lines[i].strip().startswith(fence):
                body.append(lines[i])
                i += 1
            i += 1  # the closing fence
            if lang and lang not in SHELL_LANGUAGES:
                continue
            for line in _logical_lines(body):
                text = line.strip()
                if lang == "console":
                    if not text.startswith("$"):
                        continue
                    text = text[1:].strip()
                text = _strip_comment(text)
                if not text or (not lang and not reads_as_command(text, subs)):
                    continue
                add(text, f"{rel}:{start}")
        # inline spans may cross a line break: search the prose joined, map back to lines
        joined = "\n".join(line for _, line in prose)
        starts = [0]
        for _, line in prose:
            starts.append(starts[-1] + len(line) + 1)
        for m in INLINE.finditer(joined):
            text = normalise(m.group(2))
            if reads_as_command(text, subs):
                n = next(k for k in range(len(prose)) if starts[k + 1] > m.start())
                add(text, f"{rel}:{prose[n][0]}")
    return found


def is_synopsis(text: str) -> bool:
    return bool(SYNOPSIS.search(text))


# ------------------------------------------------------------------ what a command names

def _venv_bin() -> Path:
    return Path(sys.executable).parent


def _markers() -> set[str]:
    import tomllib

    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return {m.split(":")[0].strip() for m in data["tool"]["pytest"]["ini_options"]["markers"]}


def _repo_path(token: str) -> bool:
    return token.split("::")[0].startswith(
        ("workflow/", "tests/", "docs/", "profiles/", "config.yaml", "environment.yml",
         "Snakefile", "Makefile"))


def make_dry_run(args: list[str], cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """``make -n ARGS`` against this checkout's environment, which it never rebuilds (its
    stamp is taken as up to date, whatever the copy's file times say)."""
    venv = _venv_bin().parent
    return subprocess.run(["make", "-n", "-o", str(venv / ".installed-stamp"),
                           f"VENV={venv}", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=60, check=False)


def problems(text: str, subs: frozenset[str]) -> list[str]:
    """What ``text`` names that does not exist: a program, module, CLI subcommand or
    option, make target, overlay, profile, test file or pytest marker. A synopsis is
    checked for its program and options only."""
    synopsis = is_synopsis(text)
    out: list[str] = []
    try:
        words = shlex.split(text)
    except ValueError as exc:
        return [f"not a shell command line: {exc}"]
    parts: list[list[str]] = [[]]
    for w in words:
        if w in {"&&", ";", "||", "|"}:
            parts.append([])
        else:
            parts[-1].append(w)
    for part in parts:
        while part and ASSIGNMENT.match(part[0]):
            part = part[1:]
        if part and part[0] == "time":
            part = part[1:]
        if not part:
            continue
        prog, args = part[0], part[1:]
        if prog.startswith(".venv/bin/"):
            if not (_venv_bin() / prog.removeprefix(".venv/bin/")).exists():
                out.append(f"{prog}: not in the environment")
            prog = prog.removeprefix(".venv/bin/")
        if prog in {"python", "python3"} and args[:1] == ["-m"] and len(args) > 1:
            module, args = args[1], args[2:]
            if importlib.util.find_spec(module) is None:
                out.append(f"python -m {module}: no such module")
                continue
            if module == "reactlab":
                prog = "reactlab"
        if prog == "reactlab":
            out += _cli_problems(args, subs)
        elif prog == "make":
            if not synopsis:
                proc = make_dry_run(args)
                if proc.returncode != 0:
                    first = (proc.stderr.strip().splitlines() or ["failed"])[0]
                    out.append(f"make {' '.join(args)}: {first}")
        elif prog == "snakemake":
            out += _snakemake_problems(args)
        elif prog == "pytest":
            out += _pytest_problems(args)
        if not synopsis:
            out += [f"{a}: no such file in the repository" for a in args
                    if _repo_path(a) and not (ROOT / a.split("::")[0]).exists()]
    return out


def _cli_problems(args: list[str], subs: frozenset[str]) -> list[str]:
    from reactlab.cli import build_parser

    if not args:
        return []
    sub = args[0]
    if sub not in subs:
        return [f"reactlab {sub}: no such subcommand"]
    parser = _subparsers(build_parser())[sub]
    known = set(getattr(parser, "_option_string_actions", {}))
    return [f"reactlab {sub} {a}: no such option" for a in args[1:]
            if a.startswith("--") and a.split("=")[0] not in known]


def _snakemake_problems(args: list[str]) -> list[str]:
    out = []
    for i, a in enumerate(args):
        if a == "--configfile":
            for value in args[i + 1:]:
                if value.startswith("-"):
                    break
                if not (ROOT / value).is_file():
                    out.append(f"--configfile {value}: no such overlay")
        profile = args[i + 1] if a == "--workflow-profile" and i + 1 < len(args) else "none"
        if profile != "none" and not (ROOT / profile / "config.yaml").is_file():
            out.append(f"--workflow-profile {profile}: no such profile")
    return out


def _pytest_problems(args: list[str]) -> list[str]:
    out = []
    for i, a in enumerate(args):
        if a == "-m" and i + 1 < len(args):
            words = set(re.findall(r"[A-Za-z_]\w*", args[i + 1])) - {"not", "and", "or"}
            out += [f"pytest -m {w}: no such marker" for w in sorted(words - _markers())]
    return out


# ------------------------------------------------------------------ running a command

class Ran(NamedTuple):
    """What a command did: its exit status and what it printed."""

    rc: int | str | None
    out: str
    err: str

    def why(self) -> str:
        return f"exit {self.rc}\n--- stdout\n{self.out[-3000:]}\n--- stderr\n{self.err[-5000:]}"


#: What a first run in a folder computes and keeps: the code fingerprints' import cache
#: and AgentDojo's planning index (importing agentdojo: seconds), keyed by contents.
CACHES = Path(".snakemake", "reactlab")


#: mcp-server-sqlite's environment, built by `make env` (the Makefile's MCP_SQLITE).
MCP_SQLITE = ".venv-mcp-sqlite"


def checkout_files() -> list[str]:
    """The files a checkout copy holds (:func:`copy_checkout`): ``git ls-files`` of the
    tracked files and of the new ones git does not ignore."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=ROOT, capture_output=True,
                            check=True).stdout.decode().split("\0")
    return sorted(rel for rel in listed if rel and (ROOT / rel).is_file())


def copy_checkout(dest: Path, caches_from: Path | None = None) -> Path:
    """A copy of the repository as ``git ls-files`` lists it (tracked files and new ones
    git does not ignore, as they are in the working tree), with ``.venv`` a link to this
    checkout's environment so that the docs' ``.venv/bin/...`` commands run there, and the
    :data:`CACHES` of ``caches_from`` if it has them (what a user's second run has)."""
    for rel in checkout_files():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dest / rel)
    (dest / ".venv").symlink_to(_venv_bin().parent, target_is_directory=True)
    if (ROOT / MCP_SQLITE).is_dir():  # mcp-server-sqlite's own environment (docs/mcp.md)
        (dest / MCP_SQLITE).symlink_to(ROOT / MCP_SQLITE, target_is_directory=True)
    if caches_from is not None and (caches_from / CACHES).is_dir():
        shutil.copytree(caches_from / CACHES, dest / CACHES)
    return dest


def copy_run(src: Path, dest: Path) -> Path:
    """A copy of a finished run's folder, file times kept (Snakemake compares them); the
    converted model (hundreds of MB, only read) is hard-linked instead of copied."""
    def copy(a: str, b: str) -> object:
        if Path(a).is_relative_to(src / "data" / "models"):
            os.link(a, b)
            return b
        return shutil.copy2(a, b)

    shutil.copytree(src, dest, symlinks=True, copy_function=copy)
    return dest


def in_process(command: str, cwd: Path) -> Ran:
    """``.venv/bin/reactlab ...`` (or ``reactlab ...``, ``python -m reactlab ...``) run by
    :func:`reactlab.cli.main` in this process, in ``cwd`` (what the command does, without
    an interpreter's start)."""
    from reactlab.cli import main

    words = shlex.split(command)
    while words and words[0].rpartition("/")[2] != "reactlab":
        words = words[1:]  # .venv/bin/python -m
    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(cwd), contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):
        try:
            rc: int | str | None = main(words[1:])
        except SystemExit as exc:
            rc = exc.code
    return Ran(rc, out.getvalue(), err.getvalue())


def shell(command: str, cwd: Path, *, timeout: int = 1800,
          env: dict[str, str] | None = None) -> Ran:
    """``command`` as a user types it, by bash in ``cwd``, with this environment's
    ``bin`` first on the PATH (the docs' ``python``, ``snakemake``, ``pytest``) and
    ``CORES=2`` (the Makefile's default is 4). ``make`` never rebuilds the environment
    (``-o`` its stamp: the copy's files are newer than it)."""
    if command.startswith("make "):
        command = ("make -o .venv/.installed-stamp -o .venv-mcp-sqlite/.installed-stamp "
                   + command.removeprefix("make "))
    environ = {**os.environ, "PATH": f"{_venv_bin()}{os.pathsep}{os.environ['PATH']}",
               "CORES": "2", **(env or {})}
    proc = subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=environ, check=False)
    return Ran(proc.returncode, proc.stdout, proc.stderr)


#: Where finished default runs are kept between test processes (git-ignored `build/`):
#: one folder per fingerprint of the checkout (:func:`checkout_key`), so `make test` and
#: `make test-full` in one CI run build the default pipeline once.
RUNS_HOME = ROOT / "build" / "test-runs"
#: How many finished runs of other fingerprints are kept beside the current one.
KEEP_OTHER_RUNS = 1

_FINISHED: dict[str, tuple[Path, Ran]] = {}


def checkout_key() -> str:
    """A fingerprint of what a default run depends on: every file of the checkout (the
    commit and any uncommitted change: code, config, data, goldens alike) and the
    environment that runs it. Two test processes on the same checkout share one run."""
    import hashlib

    digest = hashlib.sha256(str(_venv_bin().resolve()).encode())
    for rel in checkout_files():
        digest.update(rel.encode() + b"\0")
        digest.update(hashlib.sha256((ROOT / rel).read_bytes()).digest())
    return digest.hexdigest()[:20]


@contextlib.contextmanager
def using_default_run() -> Iterator[None]:
    """Hold the shared default run for one test: test processes (pytest-xdist workers)
    run their commands in it one at a time (the pipeline's own lock would refuse a second
    run in the folder). Taken before :func:`finished_default_run`'s build lock, never
    inside it."""
    import fcntl

    RUNS_HOME.mkdir(parents=True, exist_ok=True)
    with open(RUNS_HOME / ".use.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _ran_file(home: Path) -> Path:
    return home / "make-run.json"


def finished_default_run(base: Path) -> tuple[Path, Ran]:
    """A checkout copy after the README's ``make run`` (the default pipeline,
    ``CORES=2``), and what it printed. Built once per fingerprint of the checkout
    (:func:`checkout_key`) under :data:`RUNS_HOME` and shared by every test and every test
    process (`make test`, then `make test-full`) that asks for it; tests copy it before
    changing it. A kept run is reused only when intact: its `make-run.json` was written
    after a successful build, and a rerun in it (the pipeline's own recovery: checksums of
    every trace, verification, table, figure and page, the damaged removed and rebuilt)
    exits 0. ``base`` is unused (the run outlives the test process's temporary folder)."""
    del base
    if "default" in _FINISHED:
        return _FINISHED["default"]
    import fcntl
    import json

    RUNS_HOME.mkdir(parents=True, exist_ok=True)
    key = checkout_key()
    home = RUNS_HOME / key
    with open(RUNS_HOME / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another test process may be building it
        work = home / "default-run"
        ran: Ran | None = None
        if _ran_file(home).is_file():
            kept = Ran(*json.loads(_ran_file(home).read_text(encoding="utf-8")))
            if kept.rc == 0 and shell("make run", work).rc == 0:
                ran = kept
        if ran is None:
            shutil.rmtree(home, ignore_errors=True)
            home.mkdir(parents=True)
            copy_checkout(work)
            ran = shell("make run", work)
            if ran.rc == 0:
                _ran_file(home).write_text(json.dumps(list(ran)), encoding="utf-8")
        others = sorted((p for p in RUNS_HOME.iterdir() if p.is_dir() and p != home),
                        key=lambda p: p.stat().st_mtime, reverse=True)
        for old in others[KEEP_OTHER_RUNS:]:
            shutil.rmtree(old, ignore_errors=True)
    _FINISHED["default"] = (work, ran)
    return _FINISHED["default"]
