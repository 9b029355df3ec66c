# reactlab: every (task x backend x scenario) of config.yaml as a job writing a JSONL
# trace, then verification, tables and the cumulative-token figure.
#
#   snakemake --cores 4            regenerate everything under results/
#   snakemake -n                   show what would run
#
# The top level stays cheap: it validates config.yaml (no SDK, pandas or torch import)
# and includes the rule files. Helpers live in workflow/rules/common.smk.

from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version

min_version("9.0")


# Snakemake's own loader keeps the last of duplicate keys and reports syntax errors
# without their place: every config file is first read with reactlab's loader (the one
# `reactlab check` uses), so the pipeline runs exactly what `check` validates.
try:
    from reactlab.config import check_files as _check_config_files
    from reactlab.core.errors import ConfigError as _ConfigError
except ImportError as _exc:
    raise WorkflowError(
        f"cannot import reactlab ({_exc}); run `make run`, which creates the environment")
try:
    _check_config_files(["config.yaml", *workflow.overwrite_configfiles])
except _ConfigError as _exc:
    raise WorkflowError(f"invalid configuration: {_exc}") from None


configfile: "config.yaml"


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


rule all:
    default_target: True
    input:
        TABLES,
        FIGURES,
        VIEWER,
        SUITE_TABLES,
        SUITE_FIGURES,
