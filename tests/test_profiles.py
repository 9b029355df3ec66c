"""The SLURM and Kubernetes profiles: each dry run parses and plans the full matrix.

No cluster is reachable here (and none may be tried), so this proves what a dry run
can: the profile is read, its executor plugin is loaded and validates its settings, the
plan has the same jobs as the default local dry run, and every job carries the
resources the profile asks for. Every Snakemake runs in a temporary copy of the
workflow, with (1) a `sitecustomize` that refuses and records any IP connection or DNS
lookup in the Snakemake process, and (2) fake SLURM and Kubernetes commands first on
PATH (so the real ones of a login node are never reached). A fake that would submit,
cancel or change something (`sbatch`, `srun`, `scancel`, `scontrol update`, `kubectl`
...) records the try; both records must stay empty. A read-only query (`sinfo`,
`scontrol show config`, `squeue`, `sacct`, `sacctmgr list`) is what the SLURM plugin
legitimately asks during a dry run where SLURM is installed: the fakes answer it with
an error, as a machine without a reachable controller would, and log it apart. `sinfo`
is faked too, so the plugin sees SLURM installed on every machine and the test plans
the same way with or without SLURM.

The Kubernetes plugin needs a default storage provider even to dry-run (it assumes no
shared filesystem). The profile names the fs storage plugin: where
snakemake-storage-plugin-fs is installed the dry run plans the matrix; where it is not,
the test checks that the dry run stops with exactly that reason.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT

PROFILES = ROOT / "workflow" / "profiles"
CLUSTER_PLUGINS = ROOT / tomllib.loads(
    (ROOT / "pyproject.toml").read_text())["tool"]["reactlab"]["cluster-plugins"]
TIMEOUT = 300  # seconds for one dry run; the default matrix plans in a few seconds

# The faked commands. `sinfo` is among them: the SLURM plugin probes for it on import (a
# local `which`) and, where it exists, asks `scontrol show config` (MinJobAge) during a
# dry run.
CLUSTER_COMMANDS = ("sbatch", "srun", "salloc", "squeue", "sacct", "scancel", "scontrol",
                    "sacctmgr", "sshare", "sinfo", "kubectl")
# Read-only queries: {command: first arguments that only read} (None: any arguments).
READ_ONLY: dict[str, tuple[str, ...] | None] = {
    "sinfo": None, "squeue": None, "sacct": None, "sshare": None,
    "scontrol": ("show",), "sacctmgr": ("list", "show"),
}

SITECUSTOMIZE = '''\
"""Test guard: the Snakemake process may not open an IP connection or resolve a name."""
import os
import socket

_LOG = os.environ["REACTLAB_NET_LOG"]
_connect = socket.socket.connect
_connect_ex = socket.socket.connect_ex


def _record(what):
    with open(_LOG, "a") as fh:
        fh.write(f"{what}\\n")
    raise OSError(f"network access refused in a test dry run: {what}")


def _guard(original):
    def guarded(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6):
            _record(f"connect {address!r}")
        return original(self, address)
    return guarded


socket.socket.connect = _guard(_connect)
socket.socket.connect_ex = _guard(_connect_ex)
socket.getaddrinfo = lambda host, *a, **k: _record(f"getaddrinfo {host!r}")
socket.gethostbyname = lambda host: _record(f"gethostbyname {host!r}")
'''

# A query gets "no controller" (exit 1) and is logged as a query; anything else is
# logged as an attempt to reach the cluster.
FAKE_COMMAND = """#!/bin/sh
case "$1" in
  {read_only}) echo "$(basename "$0") $*" >> "{queries}"
        echo "$(basename "$0"): error: Unable to contact slurm controller (test sandbox)" >&2
        exit 1 ;;
esac
echo "$(basename "$0") $*" >> "{log}"
exit 1
"""


def copy_workflow(dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "Snakefile", dest / "Snakefile")
    shutil.copy(ROOT / "config.yaml", dest / "config.yaml")
    shutil.copytree(ROOT / "workflow", dest / "workflow",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copytree(ROOT / "profiles", dest / "profiles")  # the default profile (threads)
    return dest


@dataclass
class Sandbox:
    """Environment for Snakemake subprocesses that records any try to leave the machine."""

    root: Path
    env: dict[str, str] = field(default_factory=dict)

    @property
    def net_log(self) -> Path:
        return self.root / "network.log"

    @property
    def cmd_log(self) -> Path:
        return self.root / "commands.log"

    @property
    def query_log(self) -> Path:
        return self.root / "queries.log"

    def queries(self) -> list[str]:
        return self.query_log.read_text().splitlines() if self.query_log.exists() else []

    def attempts(self) -> list[str]:
        return [line for log in (self.net_log, self.cmd_log) if log.exists()
                for line in log.read_text().splitlines()]


def make_sandbox(root: Path) -> Sandbox:
    guard, fakebin = root / "guard", root / "bin"
    guard.mkdir(parents=True)
    fakebin.mkdir()
    (guard / "sitecustomize.py").write_text(SITECUSTOMIZE)
    box = Sandbox(root)
    for name in CLUSTER_COMMANDS:
        path = fakebin / name
        first = READ_ONLY.get(name, ())
        pattern = "*" if first is None else "|".join(first) or "__never__"
        path.write_text(FAKE_COMMAND.format(log=box.cmd_log, queries=box.query_log,
                                            read_only=pattern))
        path.chmod(0o755)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("KUBERNETES_", "SLURM_"))}
    env["PATH"] = f"{fakebin}{os.pathsep}{env.get('PATH', '')}"
    # The executor plugins live outside the default import path (docs/cluster.md); a
    # cluster dry run finds them the way docs/cluster.md says: on PYTHONPATH.
    paths = (str(guard), str(CLUSTER_PLUGINS), env.get("PYTHONPATH"))
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    env["REACTLAB_NET_LOG"] = str(box.net_log)
    env["KUBECONFIG"] = str(root / "no-kube-config")  # no cluster to find, even by accident
    box.env = env
    return box


def snakemake(workdir: Path, box: Sandbox, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=workdir,
                          env=box.env, capture_output=True, text=True, timeout=TIMEOUT)


def job_stats(output: str) -> dict[str, int]:
    """The last "Job stats" table of a dry run, as {rule: count} (with "total")."""
    tables = re.findall(r"^Job stats:\njob\s+count\n[- ]+\n((?:\S+\s+\d+\n)+)", output,
                        flags=re.M)
    assert tables, "no job stats in the dry run output:\n" + output[-3000:]
    return {rule: int(n) for rule, n in
            (line.split() for line in tables[-1].strip().splitlines())}


@dataclass
class PlannedJob:
    rule: str
    wildcards: dict[str, str]
    threads: int
    resources: dict[str, str]
    priority: int = 0
    fields: dict[str, str] = field(default_factory=dict)


def planned_jobs(output: str) -> Iterator[PlannedJob]:
    """Each job block of a dry run: rule, wildcards, threads and resources."""
    for block in re.split(r"^\[[^\]]+\]\n", output, flags=re.M):
        m = re.match(r"(?:local)?rule (\w+):\n", block)
        if not m:
            continue
        fields = dict(re.findall(r"^    (\w+): (.*)$", block, flags=re.M))

        def pairs(text: str) -> dict[str, str]:
            return dict(p.split("=", 1) for p in text.split(", ") if "=" in p)

        yield PlannedJob(m.group(1), pairs(fields.get("wildcards", "")),
                         int(fields.get("threads", 1)), pairs(fields.get("resources", "")),
                         int(fields.get("priority", 0)), fields)


def load_profile(name: str) -> dict:
    return yaml.safe_load((PROFILES / name / "config.yaml").read_text(encoding="utf-8"))


def write_profile(workdir: Path, name: str, profile: dict) -> Path:
    folder = workdir / "workflow" / "profiles" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.yaml").write_text(yaml.safe_dump(profile, sort_keys=False))
    return folder.relative_to(workdir)


def has_fs_storage_plugin() -> bool:
    return importlib.util.find_spec("snakemake_storage_plugin_fs") is not None


@dataclass
class DryRuns:
    workdir: Path
    box: Sandbox
    default: subprocess.CompletedProcess[str]
    slurm: subprocess.CompletedProcess[str]
    kubernetes: subprocess.CompletedProcess[str]


@pytest.fixture(scope="module")
def dry_runs(tmp_path_factory: pytest.TempPathFactory) -> DryRuns:
    tmp = tmp_path_factory.mktemp("profiles")
    work = copy_workflow(tmp / "work")
    box = make_sandbox(tmp / "sandbox")
    default = snakemake(work, box, "-n", "--cores", "4")
    assert default.returncode == 0, default.stderr[-4000:]
    slurm = snakemake(work, box, "-n", "--workflow-profile", "workflow/profiles/slurm")
    kube = snakemake(work, box, "-n", "--workflow-profile", "workflow/profiles/kubernetes")
    return DryRuns(work, box, default, slurm, kube)


def output(proc: subprocess.CompletedProcess[str]) -> str:
    return proc.stdout + proc.stderr


def model_runs(workdir: Path) -> set[str]:
    from reactlab import config

    return {r.key for r in config.load(workdir / "config.yaml").runs
            if r.backend_config.mode == "model"}


def mcp_runs(workdir: Path) -> set[str]:
    """The runs whose task takes its tools from an MCP server: run_mcp jobs locally, in
    the batches on a cluster (workflow/rules/cluster.smk)."""
    from reactlab import config

    return {r.key for r in config.load(workdir / "config.yaml").runs if r.mcp is not None}


def all_runs(workdir: Path) -> set[str]:
    from reactlab import config

    return {r.key for r in config.load(workdir / "config.yaml").runs}


def cluster_setting(name: str) -> object:
    """A `config:` entry of the SLURM profile (KEY=VALUE, as Snakemake's --config)."""
    entries = dict(e.split("=", 1) for e in load_profile("slurm")["config"])
    value = entries[name]
    return {"True": True, "False": False}.get(value, int(value) if value.isdigit() else value)


def run_key(job: PlannedJob) -> str:
    w = job.wildcards
    return f"{w['task']}/{w['backend']}/{w['scenario']}"


# --- both profiles -------------------------------------------------------------------

def test_profiles_exist() -> None:
    assert {p.name for p in PROFILES.iterdir() if p.is_dir()} >= {"slurm", "kubernetes"}
    # not under workflow/profiles/: Snakemake looks for profiles/default beside the Snakefile
    assert not (PROFILES / "default").exists()


def executor_plugins(pythonpath: str | None) -> list[str]:
    """The executor plugins a fresh Snakemake start registers with this PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    code = ("from snakemake_interface_executor_plugins.registry import ExecutorPluginRegistry\n"
            "print(' '.join(sorted(ExecutorPluginRegistry().plugins)))")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=TIMEOUT, check=True)
    return proc.stdout.split()


def test_a_local_start_imports_no_cluster_plugin() -> None:
    """Snakemake imports every executor plugin it can find at each start (the SLURM one
    pulls in pandas): out of the default import path, a local run or no-op rerun does not
    pay for them; with docs/cluster.md's PYTHONPATH a cluster run finds them."""
    cluster = {"slurm", "slurm-jobstep", "kubernetes"}
    assert not cluster & set(executor_plugins(None))
    assert cluster <= set(executor_plugins(str(CLUSTER_PLUGINS)))


def test_default_profile_only_runs_jobs_as_threads_and_resumes_a_killed_run() -> None:
    """The profile Snakemake reads by itself changes how `run:` jobs execute (threads of
    the Snakemake process) and how a killed run is taken up again (the pipeline's flock
    instead of Snakemake's lock, interrupted jobs rerun: docs/workflow.md, "Recovery and
    lints"), nothing about what a run plans or where."""
    profile = yaml.safe_load((ROOT / "profiles" / "default" / "config.yaml").read_text())
    assert profile == {"force-use-threads": True, "nolock": True, "rerun-incomplete": True}


@pytest.mark.parametrize("name", ["slurm", "kubernetes"])
def test_every_setting_is_commented(name: str) -> None:
    """Each top-level setting has a comment just above it or on its own line."""
    lines = (PROFILES / name / "config.yaml").read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if re.match(r"^[a-z][\w-]*:", line):
            assert "#" in line or lines[i - 1].startswith("#"), f"{name}: {line!r}"


def test_default_dry_run_reads_only_the_default_profile(dry_runs: DryRuns) -> None:
    out = output(dry_runs.default)
    assert "Using workflow specific profile profiles/default" in out
    assert "workflow/profiles/" not in out


def test_longest_runs_are_scheduled_first(dry_runs: DryRuns) -> None:
    """Real-model runs come before the millisecond-long simulated ones, forced-decoding
    runs (which make the most steps) before the others: longest-first packing of the two
    model lanes, measured in docs/workflow.md."""
    config = yaml.safe_load((ROOT / "config.yaml").read_text(encoding="utf-8"))
    seen = set()
    for job in planned_jobs(output(dry_runs.default)):
        if job.rule != "run_agent":
            continue
        backend = config["backends"][job.wildcards["backend"]]
        expected = 0
        if backend["mode"] == "model":
            expected = 2 if backend.get("decoding") in ("forced", "forced_scored") else 1
        assert job.priority == expected, job
        seen.add(expected)
    assert seen == {0, 1, 2}


def test_cluster_dry_runs_do_not_read_the_default_profile(dry_runs: DryRuns) -> None:
    for proc in (dry_runs.slurm, dry_runs.kubernetes):
        assert "profiles/default" not in output(proc)


def test_no_dry_run_tried_to_reach_a_cluster(dry_runs: DryRuns) -> None:
    assert dry_runs.box.attempts() == []


# --- SLURM ---------------------------------------------------------------------------

def test_slurm_dry_run_plans_the_matrix_in_batches(dry_runs: DryRuns) -> None:
    """The same work as the local plan, packed as the profile says (cluster_batch,
    workflow/rules/cluster.smk): every simulated or scripted run and its verification in
    a run_batch_<i> job of at most `cluster_batch` runs (a run on an MCP server's tools
    with its recording), the model runs in run_agent and verify jobs of their own,
    everything else one job each as locally."""
    out = output(dry_runs.slurm)
    assert dry_runs.slurm.returncode == 0, out[-4000:]
    assert "Using workflow specific profile workflow/profiles/slurm" in out
    local, slurm = job_stats(output(dry_runs.default)), job_stats(out)
    batch = cluster_setting("cluster_batch")
    models, mcp = model_runs(dry_runs.workdir), mcp_runs(dry_runs.workdir)
    assert mcp and local["run_mcp"] == len(mcp)
    batches = {rule: n for rule, n in slurm.items() if rule.startswith("run_batch_")}
    n_sim = local["run_agent"] + local["run_mcp"] - len(models)
    assert len(batches) == -(-n_sim // batch) and set(batches.values()) == {1}
    assert slurm["run_agent"] == len(models) and "run_mcp" not in slurm
    assert slurm["verify"] == len(models)
    rest = {r: n for r, n in slurm.items()
            if r not in batches and r not in ("run_agent", "verify", "total")}
    assert rest == {r: n for r, n in local.items()
                    if r not in ("run_agent", "run_mcp", "verify", "total")}
    # each simulated run's trace and verification is an output of exactly one batch, and
    # each MCP run's recording of the batch that runs it
    traces: list[str] = []
    recordings: list[str] = []
    sizes = []
    for job in planned_jobs(out):
        if job.rule.startswith("run_batch_"):
            files = job.fields["output"].split(", ")
            ran = [f for f in files if f.startswith("results/traces/")]
            sizes.append(len(ran))
            traces += ran
            recordings += [f for f in files if f.startswith("results/recordings/")]
            assert len(files) == 2 * len(ran) + len(
                [f for f in files if f.startswith("results/recordings/")]), job
    sim = sorted(f"results/traces/{k}.jsonl" for k in all_runs(dry_runs.workdir) - models)
    assert sorted(traces) == sim
    assert sorted(recordings) == sorted(f"results/recordings/{k}.mcp.jsonl" for k in mcp)
    assert max(sizes) <= batch and max(sizes) - min(sizes) <= 1


def test_slurm_jobs_carry_the_profile_resources(dry_runs: DryRuns) -> None:
    """No partition or account is named (the cluster's default partition, the user's
    default account); model jobs keep their threads and memory."""
    profile = load_profile("slurm")
    assert not {"slurm_partition", "slurm_account"} & set(profile["default-resources"])
    models = model_runs(dry_runs.workdir)
    jobs = list(planned_jobs(output(dry_runs.slurm)))
    assert sum(j.rule == "run_agent" for j in jobs) == len(models)
    for job in jobs:
        if job.rule == "all":
            continue
        assert "slurm_partition" not in job.resources, job
        assert "slurm_account" not in job.resources, job
        if job.rule == "run_agent":
            assert run_key(job) in models, job
            assert job.threads == 2, job
            assert (job.resources["mem_mb"], job.resources["runtime"]) == ("4000", "30"), job
        elif job.rule == "convert_smollm2":
            assert (job.resources["mem_mb"], job.resources["runtime"]) == ("4000", "15")
        else:  # the defaults, unless a rule declares its own
            assert "mem_mb" in job.resources and "runtime" in job.resources, job


def test_slurm_dry_run_only_asks_read_only_questions(dry_runs: DryRuns) -> None:
    """Where SLURM is installed (here: faked sinfo) the plugin asks `scontrol show
    config` for MinJobAge during a dry run; that is allowed, nothing else is."""
    queries = dry_runs.box.queries()
    assert "scontrol show config" in queries
    assert {q.split()[0] for q in queries} <= set(READ_ONLY)


def test_slurm_plugin_validates_its_settings_in_a_dry_run(dry_runs: DryRuns) -> None:
    """The plugin's own settings check runs: the profile really loads the SLURM plugin."""
    proc = snakemake(dry_runs.workdir, dry_runs.box, "-n", "--workflow-profile",
                     "workflow/profiles/slurm", "--slurm-requeue", "--slurm-no-requeue")
    assert proc.returncode != 0
    assert "--slurm-requeue and --slurm-no-requeue are mutually exclusive" in output(proc)


def test_slurm_profile_is_a_remote_executor(dry_runs: DryRuns) -> None:
    """Without `jobs`, Snakemake refuses as it does for any cluster executor."""
    profile = load_profile("slurm")
    del profile["jobs"]
    folder = write_profile(dry_runs.workdir, "slurm_nojobs", profile)
    proc = snakemake(dry_runs.workdir, dry_runs.box, "-n", "--workflow-profile", str(folder))
    assert proc.returncode != 0
    assert "has to be specified for remote execution" in output(proc)


# --- Kubernetes ----------------------------------------------------------------------

@pytest.mark.skipif(not has_fs_storage_plugin(),
                    reason="snakemake-storage-plugin-fs is not installed")
def test_kubernetes_dry_run_plans_the_default_jobs(dry_runs: DryRuns) -> None:
    out = output(dry_runs.kubernetes)
    assert dry_runs.kubernetes.returncode == 0, out[-4000:]
    assert "Using workflow specific profile workflow/profiles/kubernetes" in out
    assert job_stats(out) == job_stats(output(dry_runs.default))
    models = model_runs(dry_runs.workdir)
    prefix = load_profile("kubernetes")["default-storage-prefix"].strip("/")
    for job in planned_jobs(out):
        if job.rule == "run_agent":
            model = run_key(job) in models
            assert job.threads == (2 if model else 1), job
            assert job.resources["mem_mb"] == ("4000" if model else "1000"), job
    # inputs and outputs are mapped into the default storage (the run jobs are `run:`
    # jobs: the plan shows their storage paths, not a shell command)
    assert re.search(rf"^    output: /{prefix}/results/traces/\S+\.jsonl \(send to storage\)$",
                     out, flags=re.M)


@pytest.mark.skipif(has_fs_storage_plugin(),
                    reason="snakemake-storage-plugin-fs is installed: the dry run plans")
def test_kubernetes_dry_run_names_the_missing_storage_plugin(dry_runs: DryRuns) -> None:
    assert dry_runs.kubernetes.returncode != 0
    assert "The package snakemake-storage-plugin-fs is not installed" in output(
        dry_runs.kubernetes)


@pytest.mark.skipif(not has_fs_storage_plugin(),
                    reason="snakemake-storage-plugin-fs is not installed")
def test_suites_refuse_a_default_storage_provider(dry_runs: DryRuns, tmp_path: Path) -> None:
    """A suite shard writes its traces beside its manifest, which a storage provider does
    not carry between jobs: a real run (not a dry run) with the Kubernetes profile's kind
    of storage stops before its first job, naming the reason, and writes nothing."""
    store = tmp_path / "store"
    proc = snakemake(dry_runs.workdir, dry_runs.box, "--cores", "1",
                     "--default-storage-provider", "fs",
                     "--default-storage-prefix", str(store))
    assert proc.returncode != 0
    assert "a shard writes its traces beside its manifest, which a default storage " \
        "provider (fs) does not carry between jobs" in output(proc), output(proc)[-3000:]
    assert not (dry_runs.workdir / "results").exists()
    assert not store.exists() or not any(store.rglob("*.jsonl"))


def test_kubernetes_needs_a_default_storage_provider(dry_runs: DryRuns) -> None:
    """The plugin implies no shared filesystem: without storage even `-n` stops."""
    profile = load_profile("kubernetes")
    for key in ("default-storage-provider", "default-storage-prefix"):
        del profile[key]
    folder = write_profile(dry_runs.workdir, "kubernetes_nostorage", profile)
    proc = snakemake(dry_runs.workdir, dry_runs.box, "-n", "--workflow-profile", str(folder))
    assert proc.returncode != 0
    assert "a default storage provider (--default-storage-provider)" in output(proc)


def test_kubernetes_plugin_parses_its_settings_in_a_dry_run(dry_runs: DryRuns) -> None:
    """The plugin's own parser reads the profile's volume spec."""
    profile = load_profile("kubernetes")
    profile["kubernetes-persistent-volumes"] = ["no-mount-path"]
    folder = write_profile(dry_runs.workdir, "kubernetes_badvolume", profile)
    proc = snakemake(dry_runs.workdir, dry_runs.box, "-n", "--workflow-profile", str(folder))
    assert proc.returncode != 0
    assert "Invalid persistent volume spec (no-mount-path)" in output(proc)
    assert dry_runs.box.attempts() == []


def test_the_guards_record_what_they_refuse(tmp_path: Path) -> None:
    """The sandbox above is live: a connection and a cluster command are both recorded."""
    box = make_sandbox(tmp_path)
    code = "import socket; socket.create_connection(('192.0.2.1', 80), timeout=1)"
    proc = subprocess.run([sys.executable, "-c", code], env=box.env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode != 0 and "network access refused" in proc.stderr
    for cmd in (["sbatch", "--wrap", "true"], ["srun", "hostname"],
                ["scontrol", "update", "nodename=n1", "state=drain"],
                ["scontrol", "show", "config"], ["sinfo", "-o", "%P"]):
        proc = subprocess.run(cmd, env=box.env, capture_output=True, text=True, timeout=60)
        assert proc.returncode != 0, cmd
    assert box.attempts() == ["getaddrinfo '192.0.2.1'", "sbatch --wrap true",
                              "srun hostname", "scontrol update nodename=n1 state=drain"]
    assert box.queries() == ["scontrol show config", "sinfo -o %P"]
