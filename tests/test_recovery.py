"""The one place where a run recovers: reactlab.analysis.recovery.start (docs/workflow.md,
"Recovery and lints"). The damage cases themselves are tests/test_damage.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO

import pytest

from reactlab.analysis import recovery
from reactlab.core.errors import DiskFull, RunActive
from tests.conftest import ROOT
from tests.test_damage import RUNS, out, small_project, snakemake

KEY = "variacion_busi/anthropic/correcto"


def _start() -> IO[str]:
    return recovery.start([KEY], tables=[], figures=[], viewer="results/viewer",
                          say=lambda line: None)


def test_start_holds_the_folder_until_released(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    lock = _start()
    assert (tmp_path / ".snakemake" / "reactlab.flock").read_text() == f"{os.getpid()}\n"
    with pytest.raises(RunActive, match=rf"another run is active .*process {os.getpid()}"):
        _start()
    lock.close()
    _start().close()  # released: the next run starts


def test_a_killed_run_leaves_no_stale_lock(tmp_path: Path) -> None:
    """The lock is an flock: the kernel drops it when its process dies, even by SIGKILL,
    so a plain rerun needs no --unlock."""
    holder = subprocess.Popen(
        [sys.executable, "-c", "import time\nfrom reactlab.analysis.recovery import "
         "hold_folder\nh = hold_folder()\nprint('held', flush=True)\ntime.sleep(60)"],
        cwd=tmp_path, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(RunActive, match=rf"process {holder.pid}"):
            recovery.hold_folder(tmp_path / ".snakemake" / "reactlab.flock")
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    recovery.hold_folder(tmp_path / ".snakemake" / "reactlab.flock").close()


def test_start_checks_disk_then_data_then_results(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    trace = tmp_path / "results" / "traces" / f"{KEY}.jsonl"
    trace.parent.mkdir(parents=True)
    trace.write_text('{"type": "header"}\n')
    monkeypatch.setenv("REACTLAB_MIN_FREE_BYTES", str(2**62))
    with pytest.raises(DiskFull, match="ENOSPC"):
        _start()
    assert trace.exists()  # nothing removed when the run cannot start
    monkeypatch.delenv("REACTLAB_MIN_FREE_BYTES")
    lines: list[str] = []
    recovery.start([KEY], tables=[], figures=[], viewer="results/viewer",
                   check_data=lambda: ["your data lacks X"], say=lines.append).close()
    assert lines[0] == "reactlab: warning: your data lacks X"
    assert any("removed, it will be regenerated" in line for line in lines[1:]), lines
    assert not trace.exists()


def test_reactlab_recover_is_the_same_step_by_hand(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]
                                                   ) -> None:
    from reactlab import cli

    monkeypatch.chdir(tmp_path)
    trace = tmp_path / "results" / "traces" / f"{KEY}.jsonl"
    trace.parent.mkdir(parents=True)
    trace.write_text('{"type": "header"}\n')
    assert cli.main(["recover", "--config", str(ROOT / "config.yaml")]) == 0
    err = capsys.readouterr().err
    assert f"results/traces/{KEY}.jsonl" in err and "it will be regenerated" in err
    assert not trace.exists()


@pytest.mark.e2e
def test_a_jobs_own_snakemake_process_does_not_recover(tmp_path: Path) -> None:
    """Without the default profile every `run:` job is its own Snakemake process, which
    parses the Snakefile again (as a cluster job does): it must neither take the folder
    (the main run holds it) nor check results again. One report of the stray file, and
    the jobs succeed."""
    work = small_project(tmp_path / "work")
    stray = work / "results" / "traces" / "notes.txt"
    stray.parent.mkdir(parents=True)
    stray.write_text("mine")
    proc = snakemake(work, "--workflow-profile", "none", f"results/verified/{RUNS[0]}.json")
    assert proc.returncode == 0, out(proc)[-3000:]
    assert out(proc).count("belong to no run of the config") == 1, out(proc)[-3000:]
    assert "another run is active" not in out(proc)
    assert (work / "results" / "verified" / f"{RUNS[0]}.json").is_file()
