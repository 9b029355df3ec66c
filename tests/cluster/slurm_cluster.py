"""A single-node SLURM cluster from Debian's packages, on the machine this runs on.

    python -m tests.cluster.slurm_cluster up [--accounting] [--dir DIR]   # prints DIR
    python -m tests.cluster.slurm_cluster down --dir DIR

`up` installs what is missing with apt-get (slurmctld, slurmd, slurm-client, munge; with
--accounting also slurmdbd and mariadb-server), writes a configuration under DIR, starts
each daemon in the foreground as a child (munged, then mariadbd and slurmdbd with
accounting, then slurmctld and slurmd), records their PIDs in DIR/pids.json and waits
until the node is idle. `down` stops exactly those PIDs (TERM, then KILL) and removes the
configuration. Running `up` twice on a live DIR changes nothing.

Everything lives under DIR except one file: the client commands that the SLURM
executor's job step runs inside a job (srun) read /etc/slurm/slurm.conf, because the
plugin strips every SLURM_* variable (SLURM_CONF included) from the job step's
environment. So `up` writes /etc/slurm/slurm.conf, marked as ours, refuses to start if a
configuration it did not write is already there (a real cluster's login node: use that
cluster instead), and `down` removes it. Ports are picked free on loopback; munged gets
its own socket, so a munged of the machine is left alone. SlurmUser is root, the
processes run as root (a container or a disposable CI machine: that is what the test
suite's `tests/test_slurm_cluster.py` uses it for).

The configuration is the one proved in docs/cluster.md: proctrack/linuxproc, task/none,
select/cons_tres with CR_Core_Memory, MinJobAge=300, one node with every CPU and 90 % of
the memory, one default partition `debug`; accounting none, or slurmdbd backed by a
mariadbd of its own (loopback TCP, data under DIR).
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

SYSTEM_CONF = Path("/etc/slurm/slurm.conf")
MARKER = "# written by reactlab tests/cluster/slurm_cluster.py for "
PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge")
ACCOUNTING_PACKAGES = ("slurmdbd", "mariadb-server")
# a binary of each package: installed when all are on the PATH
BINARIES = {"slurmctld": "slurmctld", "slurmd": "slurmd", "slurm-client": "sbatch",
            "munge": "munged", "slurmdbd": "slurmdbd", "mariadb-server": "mariadbd"}
SBIN = ("/usr/sbin", "/sbin", "/usr/bin")
PARTITION = "debug"
CLUSTER = "reactlab"
READY_TIMEOUT_S = 90


class Unavailable(RuntimeError):
    """This machine cannot host the test cluster (not root, no apt-get, a real SLURM)."""


def which(name: str) -> str | None:
    path = os.pathsep.join([os.environ.get("PATH", ""), *SBIN])
    return shutil.which(name, path=path)


def missing_packages(accounting: bool) -> list[str]:
    wanted = PACKAGES + (ACCOUNTING_PACKAGES if accounting else ())
    return [p for p in wanted if which(BINARIES[p]) is None]


def install(accounting: bool, say=print) -> None:
    """apt-get install what is missing (nothing when all binaries are there)."""
    missing = missing_packages(accounting)
    if not missing:
        return
    if os.geteuid() != 0:
        raise Unavailable(f"SLURM packages missing ({', '.join(missing)}) and not root")
    if which("apt-get") is None:
        raise Unavailable(f"SLURM packages missing ({', '.join(missing)}) and no apt-get")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    say(f"apt-get install -y {' '.join(missing)}")
    t0 = time.monotonic()
    for cmd in (["apt-get", "update", "-q"],
                ["apt-get", "install", "-y", "-q", *missing]):
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stdout[-2000:]}"
                               f"\n{proc.stderr[-2000:]}")
    say(f"installed in {time.monotonic() - t0:.0f} s")
    still = missing_packages(accounting)
    if still:
        raise RuntimeError(f"apt-get ran but these are still missing: {still}")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def mem_total_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    raise RuntimeError("no MemTotal in /proc/meminfo")


@dataclass
class Cluster:
    """A running (or stopped) test cluster rooted at ``root``."""

    root: Path
    accounting: bool = False
    # the daemons this process started, reaped after `stop` (no zombies in a long run)
    _children: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    @property
    def pids_file(self) -> Path:
        return self.root / "pids.json"

    @property
    def munge_socket(self) -> Path:
        return self.root / "munge" / "munge.socket"

    @property
    def env(self) -> dict[str, str]:
        """Variables for client commands (they also find /etc/slurm/slurm.conf)."""
        return {"SLURM_CONF": str(self.conf)}

    # --- processes ------------------------------------------------------------------

    def pids(self) -> dict[str, int]:
        if not self.pids_file.exists():
            return {}
        return {k: int(v) for k, v in json.loads(self.pids_file.read_text()).items()}

    def _record(self, name: str, pid: int) -> None:
        pids = self.pids()
        pids[name] = pid
        self.pids_file.write_text(json.dumps(pids, indent=1))

    def alive(self, name: str) -> bool:
        pid = self.pids().get(name)
        if pid is None:
            return False
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        # the process name from stat (comm, 15 characters at most): /proc/PID/cmdline is
        # briefly empty while a freshly started daemon execs, which read as "exited"
        comm, state = stat[stat.index("(") + 1:stat.rindex(")")], stat.rsplit(")", 1)[1].split()[0]
        return comm == name[:15] and state != "Z"

    def _start(self, name: str, argv: list[str], user: str | None = None) -> None:
        if self.alive(name):
            return
        log = open(self.root / "log" / f"{name}.out", "ab")  # noqa: SIM115 (the child keeps it)
        if user is not None:
            argv = ["runuser", "-u", user, "--", *argv]
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                env={**os.environ, **self.env})
        log.close()
        self._children[name] = proc
        pid = proc.pid
        if user is not None:  # runuser execs nothing: wait for the real daemon
            pid = self._child_of(pid, name)
        self._record(name, pid)

    @staticmethod
    def _child_of(parent: int, name: str, timeout: float = 10.0) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for entry in Path("/proc").iterdir():
                if not entry.name.isdigit():
                    continue
                try:
                    stat = (entry / "stat").read_text()
                except OSError:
                    continue
                comm = stat[stat.index("(") + 1:stat.rindex(")")]
                ppid = int(stat.rsplit(")", 1)[1].split()[1])
                if ppid == parent and comm == name:
                    return int(entry.name)
            time.sleep(0.05)
        raise RuntimeError(f"{name} did not start (see its log under the cluster folder)")

    def stop(self) -> None:
        """TERM each recorded daemon (newest first), then KILL what is left."""
        order = ["slurmd", "slurmctld", "slurmdbd", "mariadbd", "munged"]
        pids = self.pids()
        for name in order:
            if name in pids and self.alive(name):
                os.kill(pids[name], signal.SIGTERM)
                deadline = time.monotonic() + 15
                while self.alive(name) and time.monotonic() < deadline:
                    time.sleep(0.1)
                if self.alive(name):
                    os.kill(pids[name], signal.SIGKILL)
            if name in self._children:
                self._children.pop(name).wait(timeout=30)
        if self.pids_file.exists():
            self.pids_file.unlink()
        if SYSTEM_CONF.exists() and SYSTEM_CONF.read_text().startswith(
                MARKER + str(self.root) + "\n"):
            SYSTEM_CONF.unlink()

    # --- configuration --------------------------------------------------------------

    def write_config(self) -> None:
        for sub in ("log", "ctld", "spool", "db"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        munge_dir = self.root / "munge"
        munge_dir.mkdir(exist_ok=True)
        munge = pwd.getpwnam("munge")
        os.chown(munge_dir, munge.pw_uid, munge.pw_gid)
        munge_dir.chmod(0o755)  # munged wants its socket folder open to all
        key = munge_dir / "munge.key"
        if not key.exists():
            key.write_bytes(os.urandom(128))
            os.chown(key, munge.pw_uid, munge.pw_gid)
            key.chmod(0o400)
        if self.conf.exists():
            return  # ports and names are fixed for the life of the folder
        host = socket.gethostname().split(".")[0]
        cpus = os.cpu_count() or 1
        memory = int(mem_total_mb() * 0.9)
        ports = {"ctld": free_port(), "slurmd": free_port(), "dbd": free_port(),
                 "mysql": free_port()}
        (self.root / "ports.json").write_text(json.dumps(ports))
        if self.accounting:
            accounting = (f"AccountingStorageType=accounting_storage/slurmdbd\n"
                          f"AccountingStorageHost=127.0.0.1\n"
                          f"AccountingStoragePort={ports['dbd']}\n"
                          # the munge socket of connections to slurmdbd (AuthInfo's is
                          # not used for them)
                          f"AccountingStoragePass={self.munge_socket}\n"
                          "JobAcctGatherType=jobacct_gather/linux\n")
        else:
            accounting = ("AccountingStorageType=accounting_storage/none\n"
                          "JobAcctGatherType=jobacct_gather/none\n")
        text = f"""{MARKER}{self.root}
ClusterName={CLUSTER}
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ports['ctld']}
SlurmdPort={ports['slurmd']}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.munge_socket}
StateSaveLocation={self.root / 'ctld'}
SlurmdSpoolDir={self.root / 'spool'}
SlurmctldPidFile={self.root / 'slurmctld.pid'}
SlurmdPidFile={self.root / 'slurmd.pid'}
SlurmctldLogFile={self.root / 'log' / 'slurmctld.log'}
SlurmdLogFile={self.root / 'log' / 'slurmd.log'}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
{accounting}JobCompType=jobcomp/none
MinJobAge=300
ReturnToService=2
InactiveLimit=0
KillWait=5
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory} State=UNKNOWN
PartitionName={PARTITION} Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""
        self.conf.write_text(text)
        if self.accounting:
            dbd = self.root / "slurmdbd.conf"
            dbd.write_text(f"""AuthType=auth/munge
AuthInfo=socket={self.munge_socket}
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort={ports['dbd']}
SlurmUser=root
LogFile={self.root / 'log' / 'slurmdbd.log'}
PidFile={self.root / 'slurmdbd.pid'}
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={ports['mysql']}
StorageUser=slurm
StoragePass=reactlab-test
StorageLoc=slurm_acct_db
""")
            dbd.chmod(0o600)

    def _install_system_conf(self) -> None:
        if SYSTEM_CONF.exists():
            text = SYSTEM_CONF.read_text()
            if not text.startswith(MARKER):
                raise Unavailable(f"{SYSTEM_CONF} exists and was not written by this helper "
                                  "(a configured SLURM: use that cluster)")
            if not text.startswith(MARKER + str(self.root) + "\n"):
                owner = Cluster(Path(text.splitlines()[0][len(MARKER):]))
                live = [name for name in owner.pids() if owner.alive(name)]
                if live:  # a stale file of a killed run is taken over
                    raise Unavailable(
                        f"another test cluster ({owner.root}: {', '.join(live)}) is running "
                        f"here; stop it with `python -m tests.cluster.slurm_cluster down "
                        f"--dir {owner.root}`")
        SYSTEM_CONF.parent.mkdir(parents=True, exist_ok=True)
        tmp = SYSTEM_CONF.with_suffix(".reactlab-tmp")
        shutil.copy(self.conf, tmp)
        tmp.replace(SYSTEM_CONF)

    # --- start ----------------------------------------------------------------------

    def up(self, say=print) -> None:
        install(self.accounting, say)
        self.root.mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o755)
        self.write_config()
        self._install_system_conf()
        self._start("munged", [which("munged") or "munged", "-F",
                               f"--socket={self.munge_socket}",
                               f"--key-file={self.root / 'munge' / 'munge.key'}",
                               f"--pid-file={self.root / 'munge' / 'munged.pid'}",
                               f"--seed-file={self.root / 'munge' / 'munged.seed'}",
                               f"--log-file={self.root / 'munge' / 'munged.log'}"],
                    user="munge")
        self._wait_for(self.munge_socket.exists, "munged socket")
        if self.accounting:
            self._start_accounting()
        self._start("slurmctld", [which("slurmctld") or "slurmctld", "-D", "-i",
                                  "-f", str(self.conf)])
        self._start("slurmd", [which("slurmd") or "slurmd", "-D", "-f", str(self.conf)])
        self._wait_for(self._node_idle, "the node to be idle (sinfo)")

    def _start_accounting(self) -> None:
        ports = json.loads((self.root / "ports.json").read_text())
        datadir, sock = self.root / "db", self.root / "mysqld.sock"
        if not (datadir / "mysql").exists():
            subprocess.run([which("mariadb-install-db") or "mariadb-install-db",
                            "--user=root", f"--datadir={datadir}",
                            "--auth-root-authentication-method=socket", "--skip-test-db"],
                           check=True, capture_output=True, text=True)
        self._start("mariadbd", [which("mariadbd") or "mariadbd", "--no-defaults",
                                 "--user=root", f"--datadir={datadir}", f"--socket={sock}",
                                 f"--port={ports['mysql']}", "--bind-address=127.0.0.1",
                                 f"--pid-file={self.root / 'mariadbd.pid'}",
                                 "--innodb-buffer-pool-size=64M", "--skip-log-bin"])
        client = which("mariadb") or "mariadb"

        def sql(statement: str) -> bool:
            proc = subprocess.run([client, "--no-defaults", f"--socket={sock}", "-uroot",
                                   "-e", statement], capture_output=True, text=True)
            return proc.returncode == 0

        self._wait_for(lambda: sql("SELECT 1"), "mariadbd")
        for statement in (
                "CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'reactlab-test'",
                "CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'reactlab-test'",
                "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1'",
                "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost'"):
            if not sql(statement):
                raise RuntimeError(f"mariadb refused: {statement}")
        # slurmdbd reads slurmdbd.conf from the folder of SLURM_CONF (self.env)
        self._start("slurmdbd", [which("slurmdbd") or "slurmdbd", "-D"])
        sacctmgr = which("sacctmgr") or "sacctmgr"

        def cluster_registered() -> bool:
            proc = subprocess.run([sacctmgr, "-n", "-P", "list", "cluster", "format=cluster"],
                                  capture_output=True, text=True, env={**os.environ, **self.env})
            if proc.returncode != 0:
                return False
            if CLUSTER in proc.stdout.split():
                return True
            subprocess.run([sacctmgr, "-i", "add", "cluster", CLUSTER], capture_output=True,
                           text=True, env={**os.environ, **self.env})
            return False

        self._wait_for(cluster_registered, "slurmdbd (sacctmgr list cluster)")

    def _node_idle(self) -> bool:
        proc = subprocess.run([which("sinfo") or "sinfo", "-h", "-o", "%T"],
                              capture_output=True, text=True, env={**os.environ, **self.env})
        return proc.returncode == 0 and proc.stdout.strip() == "idle"

    def _wait_for(self, check, what: str) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            for name in self.pids():
                if not self.alive(name):
                    raise RuntimeError(f"{name} exited while waiting for {what}; logs: "
                                       f"{self.root / 'log'}\n{self.tail_logs()}")
            if check():
                return
            time.sleep(0.2)
        raise RuntimeError(f"timed out waiting for {what}; logs: {self.root / 'log'}\n"
                           + self.tail_logs())

    def tail_logs(self, lines: int = 15) -> str:
        out = []
        for log in sorted((self.root / "log").glob("*")) + sorted(
                (self.root / "munge").glob("*.log")):
            try:
                text = log.read_text(errors="replace").splitlines()[-lines:]
            except OSError:
                continue
            out.append(f"--- {log.name}\n" + "\n".join(text))
        return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.cluster.slurm_cluster",
                                description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="install if missing, start, wait until the node is idle")
    up.add_argument("--accounting", action="store_true", help="with slurmdbd + mariadbd")
    up.add_argument("--dir", type=Path, help="the cluster's folder (default: a new one "
                                             "under /tmp)")
    down = sub.add_parser("down", help="stop the daemons `up` started in this folder")
    down.add_argument("--dir", type=Path, required=True)
    a = p.parse_args(argv)
    if a.cmd == "up":
        root = a.dir or Path(tempfile.mkdtemp(prefix="reactlab-slurm-"))
        cluster = Cluster(root.resolve(), accounting=a.accounting)
        try:
            cluster.up(say=lambda s: print(s, file=sys.stderr))
        except Unavailable as e:
            print(f"cannot host a test cluster here: {e}", file=sys.stderr)
            return 2
        print(cluster.root)
        return 0
    Cluster(a.dir.resolve()).stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
