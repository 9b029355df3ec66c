"""One log file per job, also when jobs run as threads of one process.

The pipeline runs its simulated jobs as threads of the Snakemake process
(docs/workflow.md), so the process-wide ``logging`` configuration and ``sys.stderr`` cannot
separate them. :func:`job_log` opens the job's own log file, routes the log records that
this thread emits (``reactlab``, the SDKs' retry messages) into it, and gives back a
``say`` function for the job's summary line; an exception is written there too before it
propagates. Nothing of one job reaches another job's log.
"""

from __future__ import annotations

import errno
import logging
import threading
import traceback
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from reactlab.core.errors import ReactlabError, TraceError

#: Loggers whose INFO records belong in a job's log: the package's, and those each
#: provider registers (its SDK logs its retries; :func:`register_loggers`).
LOGGERS: list[str] = ["reactlab"]
#: Per-request chatter that stays out of the logs (one line per HTTP request): the HTTP
#: libraries the providers register.
QUIET: list[str] = []


class _ThisJob(logging.Filter):
    """Records of this thread from the loggers of :data:`LOGGERS` (read at each record:
    a provider registered during the job counts)."""

    def __init__(self) -> None:
        super().__init__()
        self.ident = threading.get_ident()

    def filter(self, record: logging.LogRecord) -> bool:
        return (record.thread == self.ident
                and record.name.partition(".")[0] in LOGGERS)


def error_line(exc: BaseException, command: str | None = None) -> str | None:
    """The one line that reports a deliberate error (a ReactlabError, or a full disk) of
    the CLI ``command`` or the pipeline job of that name; None for anything else (a bug:
    its traceback is shown)."""
    if isinstance(exc, ReactlabError):
        hint = ""
        if (isinstance(exc, TraceError) and command in ("verify", "tables", "viewer")
                and "snakemake" not in str(exc)):
            hint = ("; to repair, run the pipeline again (`snakemake --cores 4`): damaged "
                    "results are removed and regenerated before any job starts")
        return f"reactlab: error: {exc}{hint}"
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        where = f" writing {exc.filename}" if exc.filename else ""
        return (f"reactlab: error: no space left on device (ENOSPC){where}; nothing partial "
                f"was published (files are written to a temporary name and renamed): free "
                f"some space, then run the same command again")
    return None


_LEVELS_LOCK = threading.Lock()
_live_jobs = 0
_saved_levels: dict[str, int] = {}


def _set_level(name: str, loud: bool) -> None:
    """Save ``name``'s level and set the job level (lock held, jobs live)."""
    logger = logging.getLogger(name)
    _saved_levels.setdefault(name, logger.level)
    if not loud:
        logger.setLevel(logging.WARNING)
    elif _saved_levels[name] == logging.NOTSET:
        logger.setLevel(logging.INFO)


def register_loggers(loud: Iterable[str] = (), quiet: Iterable[str] = ()) -> None:
    """Add logger names to :data:`LOGGERS` (``loud``) and :data:`QUIET` (the provider
    registry calls this for each provider). Names registered while jobs run take their
    job level at once, and their records reach the running jobs' logs."""
    with _LEVELS_LOCK:
        for names, target, is_loud in ((loud, LOGGERS, True), (quiet, QUIET, False)):
            for name in names:
                if name in LOGGERS or name in QUIET:
                    continue
                target.append(name)
                if _live_jobs:
                    _set_level(name, is_loud)


@contextmanager
def _job_levels() -> Iterator[None]:
    """While any job runs, INFO for :data:`LOGGERS` (unless set explicitly) and WARNING for
    :data:`QUIET`; the first job sets the levels, the last one puts back what it found,
    so the process (a test session, an embedding program) keeps its own configuration."""
    global _live_jobs
    with _LEVELS_LOCK:
        if _live_jobs == 0:
            _saved_levels.clear()
            for name in LOGGERS:
                _set_level(name, True)
            for name in QUIET:
                _set_level(name, False)
        _live_jobs += 1
    try:
        yield
    finally:
        with _LEVELS_LOCK:
            _live_jobs -= 1
            if _live_jobs == 0:
                for name, level in _saved_levels.items():
                    logging.getLogger(name).setLevel(level)


@contextmanager
def job_log(path: str | Path, command: str | None = None) -> Iterator[Callable[[str], None]]:
    """Write this thread's log records and the job's messages to ``path`` (truncated).
    An error is written there as :func:`error_line` puts it for ``command``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _job_levels(), open(path, "w", encoding="utf-8") as fh:
        handler = logging.StreamHandler(fh)
        handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
        handler.addFilter(_ThisJob())
        # On the root logger: the records of every logger in LOGGERS reach it (they
        # propagate), also of one registered after the job started.
        root = logging.getLogger()
        root.addHandler(handler)

        def say(message: str) -> None:
            fh.write(message + "\n")
            fh.flush()

        try:
            yield say
        except BaseException as exc:
            line = error_line(exc, command)
            say(line if line is not None else "".join(traceback.format_exception(exc)).rstrip())
            raise
        finally:
            root.removeHandler(handler)
