"""Reading config files: YAML with duplicate keys refused, and overlays merged.

Layer 1 of the config's validation (:mod:`reactlab.config`): YAML itself, where a
duplicate key is an error naming its path and line, not "last one wins", and a syntax
error names its line and column. :func:`merge` applies an overlay as
``snakemake --configfile`` does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from reactlab.core.errors import ConfigError

#: libyaml's loader when PyYAML has it (≈ 10× faster than the pure-Python one).
FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def field_path(parts: Iterable[Any]) -> str:
    """A config field's dotted path: ``("scenarios", "bucle", "steps", 0)`` →
    ``scenarios.bucle.steps[0]``."""
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def _duplicate_key(node: yaml.Node | None, path: tuple[Any, ...] = ()) -> tuple[str, int] | None:
    """(dotted path, line) of the first duplicate mapping key in a composed YAML tree."""
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = key_node.value
            if key in seen:
                return field_path([*path, key]), key_node.start_mark.line + 1
            seen.add(key)
            found = _duplicate_key(value_node, (*path, key))
            if found:
                return found
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            found = _duplicate_key(item, (*path, i))
            if found:
                return found
    return None


def _yaml_error(exc: yaml.YAMLError) -> str:
    """A YAML syntax error as 'invalid YAML at line L, column C: problem' (1-based)."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    if mark is None:
        return f"invalid YAML: {problem}"
    hint = ("; indent with spaces, YAML does not allow tabs" if "\\t" in problem
            or "\t" in problem else "")
    return f"invalid YAML at line {mark.line + 1}, column {mark.column + 1}: {problem}{hint}"


def check_files(paths: Iterable[str | Path]) -> None:
    """Load every config file Snakemake is about to read with :func:`load_yaml`.

    Snakemake's own ``configfile:`` loader keeps the last of duplicate keys and reports
    a syntax error without its place; the Snakefile calls this first, so the pipeline
    runs only a file that ``reactlab check`` would accept. Missing files are left to
    Snakemake (an override via ``--configfile`` may stand in for config.yaml).
    """
    for path in paths:
        if Path(path).is_file():
            load_yaml(path)


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML config file; duplicate keys are an error naming their path and line."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:  # a mistyped overlay: name the ones its folder holds
        there = sorted(p.name for p in path.parent.glob("*.yaml")) if not path.exists() else []
        raise ConfigError("", f"cannot read {path}: {exc.strerror}" + (
            f" ({path.parent} holds {', '.join(there)})" if there else "")) from exc
    try:
        # libyaml's loader when PyYAML has it (≈ 10× faster: every Snakemake start reads
        # the config through here); a file it refuses is re-read by the pure-Python
        # loader, whose error messages (and their tab hint) are the ones reported.
        dup = _duplicate_key(yaml.compose(text, Loader=FAST_LOADER))
        data = yaml.load(text, Loader=FAST_LOADER)
    except yaml.YAMLError:
        try:
            dup = _duplicate_key(yaml.compose(text, Loader=yaml.SafeLoader))
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError("", f"{path}: {_yaml_error(exc)}") from exc
    if dup is not None:
        field, line = dup
        raise ConfigError(field, f"{path}: duplicate key {field.rsplit('.', 1)[-1]!r} at line "
                                 f"{line} (YAML would silently keep the last one)")
    if not isinstance(data, dict):
        raise ConfigError("", f"{path}: the top level must be a mapping")
    return data


def merge(base: Mapping[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    """``overlay`` merged into ``base`` as Snakemake merges a --configfile (mappings
    recursively, anything else replaced)."""
    out = dict(base)
    for key, value in overlay.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


#: Snakemake's spellings of its overlay option (an alias of one another).
CONFIGFILE_OPTIONS = ("--configfile", "--configfiles")


def configfile_groups(argv: Sequence[str]) -> list[list[str]]:
    """The files after each ``--configfile`` (or ``--configfiles``, ``--configfile=A``) of
    a command line, one list per time the option is given: what Snakemake's parser reads
    as its values (up to the next option or ``--``)."""
    groups: list[list[str]] = []
    current: list[str] | None = None
    for arg in argv:
        name, eq, value = arg.partition("=")
        if name in CONFIGFILE_OPTIONS:
            groups.append([value] if eq else [])
            current = None if eq else groups[-1]
        elif arg.startswith("-"):
            current = None
        elif current is not None:
            current.append(arg)
    return groups


def single_configfile(groups: Sequence[Sequence[str]]) -> list[str]:
    """The overlays of a command line's ``--configfile`` groups (:func:`configfile_groups`).

    Snakemake 9 takes the option with ``nargs="+"``: ``--configfile A B`` merges A then B,
    but ``--configfile A --configfile B`` keeps only B, A dropped without a word. So the
    option given more than once is refused (ConfigError naming the form that merges them),
    by ``reactlab check`` and by the Snakefile alike."""
    if len(groups) <= 1:
        return list(groups[0]) if groups else []
    given = ", ".join("--configfile " + " ".join(g) for g in groups)
    merged = " ".join(f for g in groups for f in g)
    raise ConfigError("--configfile", f"given {len(groups)} times ({given}): Snakemake keeps "
                      f"only the last one's files ({' '.join(groups[-1])}) and drops the "
                      f"others without a word; name every overlay after one --configfile, "
                      f"in order: --configfile {merged}")
