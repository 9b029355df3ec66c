"""The HTML skeleton the viewer's pages share (run pages, suite case pages, the index):
escaping, the style sheet, the document with its Content-Security-Policy, badges, and the
small pieces of a page (JSON for display, a table cell, a metadata list).

Every piece of text that comes from a trace or a table is escaped here: :func:`h` for
element text (hidden characters such as control characters, bidirectional overrides and
lone surrogates appear as visible escapes in a ``ctl`` span), :func:`attr` for attribute
values and titles.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from reactlab.core.errors import TraceError
from reactlab.views.common import escape_char, is_hidden, visible

__all__ = ["CSS", "attr", "badge", "cell", "doc", "h", "json_text", "meta", "page_path",
           "script_hash", "verdict_badge"]

_NEWLINE_TAB = str.maketrans("", "", "\n\t")
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def h(text: object) -> str:
    """Escape any value for HTML; hidden characters appear as escapes in a ``ctl`` span."""
    s = text if isinstance(text, str) else str(text)
    if s.isprintable() or s.translate(_NEWLINE_TAB).isprintable():
        return html.escape(s)  # no hidden character (the common case, and fast)
    out: list[str] = []
    plain: list[str] = []
    for ch in s:
        if is_hidden(ch):
            if plain:
                out.append(html.escape("".join(plain)))
                plain = []
            out.append(f'<span class="ctl">{html.escape(escape_char(ch))}</span>')
        else:
            plain.append(ch)
    if plain:
        out.append(html.escape("".join(plain)))
    return "".join(out)


def attr(text: object) -> str:
    """Escape any value for an attribute or the title: hidden characters as plain escapes."""
    return html.escape(visible(text if isinstance(text, str) else str(text)))


#: The style sheet of every page (the index adds its own rules after it).
CSS = """
:root { color-scheme: light; }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif;
  margin: 0 auto; max-width: 1100px; padding: 1em 1.5em 3em; color: #1d2330;
  background: #fbfbfd; }
h1 { font-size: 1.35em; margin: .4em 0; word-break: break-all; }
h2 { font-size: 1.1em; margin: 1.4em 0 .5em; border-bottom: 1px solid #d8dbe3; }
a { color: #1f5fbf; }
code, pre, .mono { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace;
  font-size: 13px; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; margin: .3em 0;
  background: #f1f3f7; border: 1px solid #e0e3ea; border-radius: 4px; padding: .45em .6em; }
.text { white-space: pre-wrap; overflow-wrap: anywhere; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: .3em .55em; border-bottom: 1px solid #e3e6ec;
  vertical-align: top; }
th { background: #eef0f5; font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: .15em 1em; margin: 0; }
dl.meta dt { color: #5a6275; }
dl.meta dd { margin: 0; overflow-wrap: anywhere; }
.question { font-size: 1.1em; background: #fff; border-left: 4px solid #1f5fbf;
  padding: .5em .8em; margin: .6em 0; }
.step { background: #fff; border: 1px solid #dde1e8; border-radius: 6px; margin: .8em 0;
  padding: .6em .9em; }
.step h3 { font-size: 1em; margin: 0 0 .4em; display: flex; gap: 1em; align-items: baseline;
  flex-wrap: wrap; }
.tokens { color: #5a6275; font-weight: normal; font-size: .92em; }
.bar { display: inline-block; height: .55em; background: #8fb3e8; border-radius: 2px;
  vertical-align: middle; }
.call { border-left: 3px solid #c9ced9; padding: .2em 0 .2em .7em; margin: .5em 0; }
.call-head { display: flex; gap: .6em; align-items: baseline; flex-wrap: wrap; }
.label { color: #5a6275; font-size: .85em; text-transform: uppercase; letter-spacing: .04em; }
.badge { display: inline-block; padding: 0 .5em; border-radius: 999px; font-size: .8em;
  font-weight: 600; border: 1px solid transparent; }
.s-ok { background: #e3f4e6; color: #1c6b2c; border-color: #b9e0c1; }
.s-error { background: #fde8e6; color: #a3261a; border-color: #f3c1bb; }
.s-invalid { background: #fdeede; color: #9a4a00; border-color: #f4cfa5; }
.s-unknown { background: #f1e6fb; color: #6a2b9c; border-color: #d9c1ee; }
.s-repeated { background: #fff6d6; color: #7a5c00; border-color: #ecd98f; }
.s-blocked { background: #e6e9f0; color: #333b4d; border-color: #c5cad6; }
.v-verified { background: #e3f4e6; color: #1c6b2c; border-color: #b9e0c1; }
.v-rejected { background: #fde8e6; color: #a3261a; border-color: #f3c1bb; }
.event { border-radius: 4px; padding: .35em .7em; margin: .5em 0; }
.guardrail { background: #fff6d6; border: 1px solid #ecd98f; }
.backend-error { background: #fde8e6; border: 1px solid #f3c1bb; }
.answer { background: #fff; border: 2px solid #1c6b2c; border-radius: 6px;
  padding: .6em .9em; font-size: 1.05em; }
.answer.rejected { border-color: #a3261a; }
.no-answer { background: #f1f3f7; border: 2px dashed #9aa1b1; border-radius: 6px;
  padding: .6em .9em; color: #333b4d; }
mark.finding { background: #ffd2cc; color: #7d1206; border-bottom: 2px solid #d0311f;
  padding: 0 .1em; border-radius: 2px; }
mark.finding mark.finding { background: #ffb3a8; }
mark.finding[data-rule="headline_not_verbatim"] { background: #ffe9b8; color: #6b4700;
  border-bottom-color: #d08b00; }
mark.finding[data-rule="percentage_without_calculation"] { background: #ffd9ec;
  color: #7d0640; border-bottom-color: #c2185b; }
ul.findings { margin: .4em 0; padding-left: 1.3em; }
ul.findings li { margin: .15em 0; }
.ctl { background: #333b4d; color: #fff; border-radius: 2px; padding: 0 .15em;
  font-family: "DejaVu Sans Mono", monospace; font-size: .85em; }
.muted { color: #6b7285; }
.summary { display: flex; gap: 1.2em; flex-wrap: wrap; margin: .5em 0; }
.summary div { background: #fff; border: 1px solid #dde1e8; border-radius: 6px;
  padding: .35em .8em; }
.summary b { display: block; font-size: 1.15em; }
td.findings { min-width: 24em; font-size: .9em; }
nav { margin: .3em 0 .8em; font-size: .95em; }
"""


def script_hash(script: str) -> str:
    """The CSP source that allows exactly this inline script: ``'sha256-…'``."""
    digest = hashlib.sha256(script.encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode('ascii')}'"


def doc(title: str, body: str, *, css: str = "", script: str | None = None) -> str:
    """A complete page: no external asset, and a Content-Security-Policy that allows no
    fetch at all and no script but ``script`` (inline, allowed by its hash)."""
    policy = "default-src 'none'; style-src 'unsafe-inline'"
    if script is not None:
        policy += f"; script-src {script_hash(script)}"
    tail = "" if script is None else f"<script>{script}</script>\n"
    return ("<!DOCTYPE html>\n<html lang=\"es\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<meta http-equiv=\"Content-Security-Policy\" content=\"{policy}\">\n"
            f"<title>{attr(title)}</title>\n<style>{CSS}{css}</style>\n</head>\n<body>\n"
            f"{body}{tail}</body>\n</html>\n")


def badge(cls: str, text: str) -> str:
    return f'<span class="badge {cls}">{h(text)}</span>'


def verdict_badge(verified: bool) -> str:
    return badge("v-verified", "verified") if verified else badge("v-rejected", "rejected")


def json_text(value: Any) -> str:
    """JSON for display: on one line when short, indented otherwise."""
    compact = json.dumps(value, ensure_ascii=False)
    return compact if len(compact) <= 100 else json.dumps(value, ensure_ascii=False, indent=1)


def cell(value: object) -> str:
    """A value for a table cell; ``None`` is a dash."""
    return "—" if value is None else h(value)


def meta(items: Iterable[tuple[str, str]]) -> str:
    """A definition list of (name, HTML value) pairs; the names are escaped here."""
    rows = "".join(f"<dt>{h(k)}</dt><dd>{v}</dd>" for k, v in items)
    return f'<dl class="meta">{rows}</dl>\n'


def page_path(run: Mapping[str, Any]) -> str:
    """The page of a run relative to the viewer folder: ``{task}/{backend}/{scenario}.html``.

    Raises :class:`TraceError` for a name that could leave the folder.
    """
    parts = [str(run.get(k, "")) for k in ("task", "backend", "scenario")]
    for p in parts:
        if not _SAFE_NAME.fullmatch(p):
            raise TraceError(f"run name {p!r} cannot be used in a file name")
    if run.get("trial") is not None:  # trial i of a run with trials: {scenario}/t{i}.html
        parts.append(f"t{int(str(run['trial']))}")
    return "/".join(parts) + ".html"
