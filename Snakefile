# reactlab: every (task x backend x scenario) of config.yaml as a job writing a JSONL
# trace, then verification, tables and the cumulative-token figure.
#
#   snakemake --cores 4            regenerate everything under results/
#   snakemake -n                   show what would run
#
# The top level stays cheap: it validates config.yaml (no SDK, pandas or torch import)
# and includes the rule files. Helpers live in workflow/rules/common.smk.

import os
import sys

from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version

min_version("9.0")


# Snakemake's own loader keeps the last of duplicate keys and reports syntax errors
# without their place: every config file is first read with reactlab's loader (the one
# `reactlab check` uses), so the pipeline runs exactly what `check` validates.
try:
    from reactlab.config import check_files as _check_config_files
    from reactlab.config.loading import configfile_groups, single_configfile
    from reactlab.core.errors import ConfigError as _ConfigError
except ImportError as _exc:
    raise WorkflowError(
        f"cannot import reactlab ({_exc}): run `make env`, which creates the "
        "environment in .venv, then .venv/bin/snakemake")
# `--configfile A --configfile B` would run B alone (Snakemake keeps the last occurrence of
# the option): refused, as `reactlab check` refuses it, naming `--configfile A B`.
if workflow.is_main_process:
    try:
        single_configfile(configfile_groups(sys.argv[1:]))
    except _ConfigError as _exc:
        raise WorkflowError(f"invalid configuration: {_exc}") from None
# The working folder's own config.yaml, else the project's beside this Snakefile: with
# `--directory elsewhere` the project's config (and overlays) run there, results and
# generated data under that folder.
CONFIG_YAML = ("config.yaml" if os.path.exists("config.yaml")
               else os.path.join(workflow.basedir, "config.yaml"))
try:
    _check_config_files([CONFIG_YAML, *workflow.overwrite_configfiles])
except _ConfigError as _exc:
    raise WorkflowError(f"invalid configuration: {_exc}") from None


configfile: CONFIG_YAML


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/model.smk"
include: "workflow/rules/run.smk"
include: "workflow/rules/verify.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/suites.smk"
include: "workflow/rules/export.smk"
include: "workflow/rules/cluster.smk"


# A target outside the matrix or the suites' shards (a mistyped run key): one line
# naming it and the nearest planned ones, before recovery takes the folder's lock.
_unplanned = unplanned_target(sys.argv[1:])
if _unplanned:
    raise WorkflowError(_unplanned)

# Whose results these are (reactlab.analysis.stamp): the config files, the planned runs
# and suite shards, and their fingerprint. The main process checks it against the
# folder's stamp below. The report's captions (workflow/report/*.rst, templates) name its
# files and fingerprint and the n they show: CAPTION, the `caption` param of the table and
# figure rules. The runs of a server that cannot be listed now (LEFT_OUT) are still the
# configuration's: their results are kept, not replaced.
STAMP = _stamp.stamp([os.path.relpath(p)
                      for p in (CONFIG_YAML, *workflow.overwrite_configfiles)],
                     [*RUNS, *LEFT_OUT], SUITE_BY_ID)
CAPTION = _stamp.caption(STAMP, {**_planned(RUNS.values()), "cases": {
    b: sum(len(s.specs) for s in shards) for b, shards in SUITE_SHARDS_OF.items()}})

# Recovery, once per invocation, after every rule file has said what it publishes
# (reactlab.jobs.recover; docs/workflow.md, "Recovery and lints"): take the folder's lock,
# check the disk and the user's data, remove damaged results and what was built from
# them. Only in the main Snakemake process: a job's own Snakemake process (a cluster job,
# a `run:` job without the default profile) parses this file again and must not touch
# what the main process runs. A dry run (`-n`), or an option that only inspects the
# folder, checks the same and removes nothing.
if workflow.is_main_process:
    try:
        RUN_LOCK = jobs.recover(
            runs=list(RUNS.values()), tables=TABLES, figures=FIGURES, viewer=VIEWER,
            live_replay=LIVE.get("replay", False), check_data=_check_user_data,
            suite_shards=SUITE_SHARDS, suite_figures=SUITE_FIGURE_KINDS,
            exports=[INSPECT, OTEL], mcp_replay=MCP_REPLAY_TASKS,
            apply=jobs.executes(workflow.output_settings.dryrun, sys.argv[1:]))
    except ReactlabError as _exc:
        raise WorkflowError(str(_exc)) from None
    # Whose results the folder holds (reactlab.analysis.stamp; docs/configuration.md,
    # "Overlays"): a run that would drop runs or suite shards of the configuration that
    # built them (an overlay's matrix or suites replacing the default's) is refused.
    # Written by `onstart` (workflow/rules/cluster.smk), after the checks there: a run
    # they stop leaves the folder as it was.
    try:
        _stamp_note = _stamp.check(
            STAMP, apply=jobs.executes(workflow.output_settings.dryrun, sys.argv[1:]),
            write=False)
    except ReactlabError as _exc:
        RUN_LOCK.close()
        raise WorkflowError(str(_exc)) from None
    if _stamp_note:
        print(f"reactlab: {_stamp_note}", file=sys.stderr)


# Every run's trace and verification and every suite shard's manifests are asked for
# here, not only through the tables: a run the config gained, or a result recovery
# removed, is then built by Snakemake's own rule (a missing target), and everything after
# it rebuilt ("input files updated by another job"), without removing the tables first.
rule all:
    default_target: True
    input:
        TRACES,
        VERIFIED,
        [m.traces for m in SUITE_MANIFESTS],
        [m.verified for m in SUITE_MANIFESTS],
        TABLES,
        FIGURES,
        VIEWER,
        SUITE_TABLES,
        SUITE_LATEX,
        SUITE_FIGURES,
