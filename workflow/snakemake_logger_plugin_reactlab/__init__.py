"""reactlab's Snakemake logger plugin: one progress line per stage instead of a block per job.

Snakemake finds it by its package name (``snakemake_logger_plugin_*`` on the import path,
which the project's editable install puts there); ``make run`` turns it on (``.venv/bin/
snakemake --logger reactlab``; any command line may add that option). Not in the default
profile: there a Snakemake without reactlab on its path would refuse the option before
the Snakefile could say how to build the environment. It is Snakemake's stream handler,
so the terminal shows:

- one line when the jobs are planned (how many, in how many stages);
- one line each time a stage (a rule) has finished all its jobs: the stage's jobs done /
  total, all jobs done / total, and the time since the start;
- every warning and error in full (a failed job's block names its log file), and
  Snakemake's own messages that are not about single jobs (``Nothing to be done``, the
  complete log's path).

What it leaves out (each job's block, ``k of n steps done``, the scheduler's rounds) is
still in Snakemake's complete log (``.snakemake/log/``), and each job's own output is in
its log file under ``results/logs/``. A dry run (``-n``) prints everything as Snakemake
does: there the job list is what the user asked for.

Deliberately free of reactlab imports: Snakemake imports every logger plugin at each start.
"""

from __future__ import annotations

import logging
import sys
import time
from collections import Counter
from typing import Any

from snakemake_interface_logger_plugins.base import LogHandlerBase
from snakemake_interface_logger_plugins.common import LogEvent

__all__ = ["LogHandler", "progress_line"]

#: Events about single jobs: counted, not printed.
_PER_JOB = {LogEvent.JOB_INFO, LogEvent.JOB_STARTED, LogEvent.JOB_FINISHED,
            LogEvent.PROGRESS, LogEvent.SHELLCMD, LogEvent.RESOURCES_INFO,
            LogEvent.GROUP_INFO, LogEvent.WORKFLOW_STARTED}
#: Snakemake's informational lines about scheduling rounds and set-up, one or more per
#: round: left to the complete log.
_ROUTINE = ("Select jobs to execute", "Execute ", "Using shell", "Provided cores",
            "Rules claiming more threads", "Building DAG of jobs", "Assuming unrestricted",
            "host:", "Job stats:", "Singularity containers: ignored",
            "Conda environments: ignored")


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes:d}:{secs:02d}"


def progress_line(elapsed: float, stage: str, done: int, total: int, all_done: int,
                  all_total: int) -> str:
    """The line printed when a stage has finished its jobs."""
    return (f"[{_clock(elapsed):>6}] {stage:<24} {done:>4}/{total:<4} jobs"
            f"   (all stages: {all_done}/{all_total})")


class LogHandler(LogHandlerBase):
    """Condenses a run's log to a line per stage (module docstring)."""

    def __post_init__(self) -> None:
        self._start = time.monotonic()
        self._rule_of: dict[Any, str] = {}
        self._total: Counter[str] = Counter()
        self._done: Counter[str] = Counter()
        self._stream = sys.stdout if self.common_settings.stdout else sys.stderr

    @property
    def writes_to_stream(self) -> bool:
        return True

    @property
    def writes_to_file(self) -> bool:
        return False

    @property
    def has_filter(self) -> bool:
        return False  # Snakemake's default filter (its --quiet settings) applies first

    @property
    def has_formatter(self) -> bool:
        return False  # Snakemake's default formatter writes what is passed on

    @property
    def needs_rulegraph(self) -> bool:
        return False

    def emit(self, record: logging.LogRecord) -> None:
        try:
            for line in self.lines(record):
                self._stream.write(line + "\n")
            self._stream.flush()
        except Exception:  # a logging handler must not raise into Snakemake
            self.handleError(record)

    def lines(self, record: logging.LogRecord) -> list[str]:
        """What the terminal shows for one record (nothing, a line, or the record)."""
        event = getattr(record, "event", None)
        if self.common_settings.dryrun or record.levelno >= logging.WARNING:
            return [self.format(record)]
        if event == LogEvent.RUN_INFO:
            return self._planned(getattr(record, "stats", {}) or {})
        if event == LogEvent.JOB_INFO:
            self._rule_of[getattr(record, "jobid", None)] = str(getattr(record, "rule_name",
                                                                        "?"))
            return []
        if event == LogEvent.JOB_FINISHED:
            return self._finished(getattr(record, "job_id", None))
        if event in _PER_JOB or record.levelno < logging.INFO:
            return []
        text = self.format(record)
        if event is None and text.lstrip().startswith(_ROUTINE):
            return []
        return [text] if text.strip() else []

    def _planned(self, stats: dict[str, int]) -> list[str]:
        self._total = Counter({rule: n for rule, n in stats.items() if rule != "total"})
        self._done = Counter()
        total = sum(self._total.values())
        return [f"[{_clock(time.monotonic() - self._start):>6}] {total} jobs in "
                f"{len(self._total)} stages; each job's log is under results/logs/, "
                f"Snakemake's complete log under .snakemake/log/"]

    def _finished(self, jobid: Any) -> list[str]:
        rule = self._rule_of.pop(jobid, None)
        if rule is None:
            return []
        self._done[rule] += 1
        if self._done[rule] < self._total.get(rule, 0):
            return []
        return [progress_line(time.monotonic() - self._start, rule, self._done[rule],
                              self._total.get(rule, self._done[rule]),
                              sum(self._done.values()), sum(self._total.values()))]
