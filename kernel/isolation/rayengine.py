"""The Ray engine ([scale] engine = "ray"): agent runs as Ray tasks on a cluster's workers.

Ray is an optional extra (`pip install seed[ray]`, requirements-ray.lock): it is imported
here only when an engine starts, so nothing of it loads otherwise. A task runs
`worker.work` (`remote.Job` in, `remote.Outcome` out) with no automatic retry: the kernel
decides what is retried. The base commit's bundle is put in the object store once per
iteration and passed to every candidate's task by reference. A worker that dies, or a task
that does not answer in time, ends as an Outcome that says so: that candidate fails alone.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import shutil
import tempfile
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kernel.config import ScaleConfig
from kernel.errors import ConfigError
from kernel.isolation import procs, remote, worker
from kernel.isolation.paths import SEED_HOME

SLACK_S = 600.0
"""Seconds a task may take beyond its agent's timeout (the clone, the fetch, the patch)."""

MISSING = (
    '[scale] engine = "ray" needs the optional extra: `pip install -r requirements-ray.lock` '
    "(`python seed.py` installs it when seed.toml asks for the Ray engine)"
)


def run_candidate(job: remote.Job, bundle: bytes) -> remote.Outcome:
    """The task a worker runs (Ray hands it the bundle's bytes for the reference)."""
    ray = _ray()
    outcome = worker.work(job, bundle)
    return replace(outcome, node=str(ray.get_runtime_context().get_node_id()))


def _ray() -> Any:
    """Ray, imported only now (untyped here: its own annotations are partial)."""
    ray = importlib.import_module("ray")
    importlib.import_module("ray.job_config")
    return ray


@dataclass
class Sent:
    """A candidate's task under way."""

    job: remote.Job
    ref: Any
    """Ray's ObjectRef of its Outcome."""


class RayEngine:
    """A connection to Ray (a cluster's address, or a local instance it starts)."""

    def __init__(self, scale: ScaleConfig) -> None:
        self.scale = scale
        self._ray: Any = None
        self._task: Any = None
        self._adopted: list[int] = []
        self._started = False
        self._code: Path | None = None

    def start(self) -> None:
        """Join the cluster at `address`, or start a local instance (ConfigError without Ray)."""
        try:
            ray = _ray()
        except ImportError as exc:
            raise ConfigError(MISSING) from exc
        self._ray = ray
        self._task = ray.remote(max_retries=0)(run_candidate)
        if not ray.is_initialized():
            # '' is a fresh local instance: "local", as None would join RAY_ADDRESS's cluster
            # or the latest `ray start` on this machine (another person's Ray)
            address = self.scale.address or "local"
            # the job's working folder holds a copy of kernel/ and domain/ only: Ray ships it to
            # every worker and puts it first on its sys.path, in place of seed's folder and the
            # daemon's working folder (a repository, whose other files an agent may write)
            self._code = own_packages()
            job = ray.job_config.JobConfig(runtime_env={"working_dir": str(self._code)})
            with adopting() as self._adopted:
                ray.init(
                    address=address, job_config=job, log_to_driver=False, configure_logging=False
                )
            self._started = True

    def put(self, bundle: bytes) -> Any:
        """The base's bundle in Ray's object store, once per iteration."""
        return self._ray.put(bundle)

    def submit(
        self,
        job: remote.Job,
        bundle: Any,
        *,
        resources: Mapping[str, float] | None = None,
        runtime_env: Mapping[str, Any] | None = None,
    ) -> Sent:
        """Start a candidate's task: never retried by Ray, spread over the nodes unless
        `resources` names where it must run (a custom resource a node was started with);
        `runtime_env` is Ray's own (variables a worker process starts with)."""
        options: dict[str, Any] = {"max_retries": 0, "num_cpus": 1}
        if resources:
            options["resources"] = dict(resources)
        else:
            options["scheduling_strategy"] = "SPREAD"
        if runtime_env:
            options["runtime_env"] = dict(runtime_env)
        return Sent(job, self._task.options(**options).remote(job, bundle))

    def ready(self, sent: Sent, timeout_s: float) -> bool:
        """Whether the task's outcome is there, waiting at most timeout_s."""
        done, _ = self._ray.wait([sent.ref], timeout=timeout_s)
        return bool(done)

    def results(self, sent: Sequence[Sent]) -> list[remote.Outcome]:
        """Each candidate's outcome, in order: a worker that died or a task past its time
        becomes an outcome that says so (the candidate fails with it, alone)."""
        return [self.result(one) for one in sent]

    def result(self, sent: Sent) -> remote.Outcome:
        """One candidate's outcome (waits at most its agent's timeout plus SLACK_S)."""
        ray = self._ray
        try:
            done: object = ray.get(sent.ref, timeout=sent.job.timeout_s + SLACK_S)
            if isinstance(done, remote.Outcome) and type(done.patch) is bytes:
                return done
            said = f"the worker sent no outcome but a {type(done).__name__}"
        except ray.exceptions.GetTimeoutError:
            self.cancel(sent)
            said = f"the worker did not answer within {sent.job.timeout_s + SLACK_S:.0f}s"
        except ray.exceptions.RayError as exc:
            said = f"the worker failed: {type(exc).__name__}: {str(exc)[:500]}"
        return remote.Outcome(sent.job.candidate, refused=said)

    def cancel(self, sent: Sent) -> None:
        """End a candidate's task (its sandbox ends with its worker's process)."""
        with contextlib.suppress(Exception):
            self._ray.cancel(sent.ref, force=True)

    def stop(self) -> None:
        """Disconnect; a local instance this engine started ends with it."""
        if self._ray is not None and self._started:
            self._ray.shutdown()
        for pid in self._adopted:
            procs.forget_known(pid)
        self._started, self._adopted = False, []
        if self._code is not None:
            shutil.rmtree(self._code, ignore_errors=True)
            self._code = None


def own_packages() -> Path:
    """A fresh folder holding a copy of the kernel's own packages (kernel/, domain/), nothing else."""
    folder = Path(tempfile.mkdtemp(prefix="seed-ray-code-"))
    for name in ("kernel", "domain"):
        shutil.copytree(
            SEED_HOME / name, folder / name, ignore=shutil.ignore_patterns("__pycache__")
        )
    return folder


@contextlib.contextmanager
def adopting() -> Generator[list[int]]:
    """The processes started inside (a local Ray instance's: its GCS, raylet, dashboard) are
    registered as known children, so the orphan sweep after every run leaves them alone (it
    ends every unknown child, and its process group, which Ray's share with this process)."""
    before = set(_children())
    adopted: list[int] = []
    try:
        yield adopted
    finally:
        for pid in _children():
            if pid not in before:
                procs.register_known(pid)
                adopted.append(pid)


def _children() -> list[int]:
    """This process's children, read from /proc."""
    me, found = os.getpid(), list[int]()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                stat = (entry / "stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) == me:
                    found.append(int(entry.name))
    return found
