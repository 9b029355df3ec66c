"""The exception tree of reactlab.

Every error the project raises on purpose derives from :class:`ReactlabError`::

    ReactlabError
    ├── ConfigError       config.yaml (or an override) is invalid; the message names the field
    ├── DataError         a parquet file is missing or does not fit the expected schema
    ├── TokenizerError    the offline o200k_base file is missing or its hash differs
    ├── TraceError        a trace file is damaged, truncated or of another schema version
    ├── ScriptError       a scripted scenario cannot produce its next action
    └── BackendError      a model backend failed; ``kind`` says how
                          (rate_limit, server, client, protocol, timeout, connection)

Tool failures are *not* exceptions: tools return ``{"error": ...}`` as data so that the
model can read them.
"""

from __future__ import annotations


class ReactlabError(Exception):
    """Base class of every error raised on purpose by reactlab."""


class ConfigError(ReactlabError):
    """The configuration is invalid. ``field`` is a dotted path to the culprit."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"config: {field}: {message}" if field else f"config: {message}")


class DataError(ReactlabError):
    """Input data is missing or does not have the expected schema."""


class TokenizerError(ReactlabError):
    """The tokenizer file could not be provisioned offline."""


class TraceError(ReactlabError):
    """A trace file is not a complete, valid trace."""


class ScriptError(ReactlabError):
    """A scripted scenario could not render its next action."""


class BackendError(ReactlabError):
    """A backend call failed. ``kind`` classifies the failure."""

    KINDS = ("rate_limit", "server", "client", "protocol", "timeout", "connection")

    def __init__(self, kind: str, message: str, *, status: int | None = None) -> None:
        if kind not in self.KINDS:
            raise ValueError(f"unknown backend error kind: {kind}")
        self.kind = kind
        self.status = status
        super().__init__(f"{kind}: {message}")
