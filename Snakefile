# reactlab: every (task x backend x scenario) of config.yaml as a job writing a JSONL
# trace, then verification, tables and the cumulative-token figure.
#
#   snakemake --cores 4            regenerate everything under results/
#   snakemake -n                   show what would run
#
# The top level stays cheap: it validates config.yaml (no SDK, pandas or torch import)
# and includes the rule files. Helpers live in workflow/rules/common.smk.

from snakemake.utils import min_version

min_version("9.0")


configfile: "config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/model.smk"
include: "workflow/rules/run.smk"
include: "workflow/rules/verify.smk"
include: "workflow/rules/report.smk"


rule all:
    default_target: True
    input:
        TABLES,
        FIGURES,
        VIEWER,
