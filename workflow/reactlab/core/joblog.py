"""One log file per job, also when jobs run as threads of one process.

The pipeline runs its simulated jobs as threads of the Snakemake process (README
"Workflow"), so the process-wide ``logging`` configuration and ``sys.stderr`` cannot
separate them. :func:`job_log` opens the job's own log file, routes the log records that
this thread emits (``reactlab``, the SDKs' retry messages) into it, and gives back a
``say`` function for the job's summary line; an exception is written there too before it
propagates. Nothing of one job reaches another job's log.
"""

from __future__ import annotations

import logging
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

#: Loggers whose INFO records belong in a job's log (the SDKs log their retries).
LOGGERS = ("reactlab", "openai", "anthropic")
#: Per-request chatter that stays out of the logs (one line per HTTP request).
QUIET = ("httpx", "httpx2", "httpcore", "httpcore2")


class _ThisThread(logging.Filter):
    def __init__(self) -> None:
        super().__init__()
        self.ident = threading.get_ident()

    def filter(self, record: logging.LogRecord) -> bool:
        return record.thread == self.ident


@contextmanager
def job_log(path: str | Path) -> Iterator[Callable[[str], None]]:
    """Write this thread's log records and the job's messages to ``path`` (truncated)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    for name in LOGGERS:
        if logging.getLogger(name).level == logging.NOTSET:
            logging.getLogger(name).setLevel(logging.INFO)
    for name in QUIET:
        logging.getLogger(name).setLevel(logging.WARNING)
    with open(path, "w", encoding="utf-8") as fh:
        handler = logging.StreamHandler(fh)
        handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
        handler.addFilter(_ThisThread())
        loggers = [logging.getLogger(name) for name in LOGGERS]
        for logger in loggers:
            logger.addHandler(handler)

        def say(message: str) -> None:
            fh.write(message + "\n")
            fh.flush()

        try:
            yield say
        except BaseException as exc:
            from reactlab.core.errors import ReactlabError

            if isinstance(exc, ReactlabError):  # a deliberate error: one clear line
                say(f"reactlab: error: {exc}")
            else:
                say("".join(traceback.format_exception(exc)).rstrip())
            raise
        finally:
            for logger in loggers:
                logger.removeHandler(handler)
