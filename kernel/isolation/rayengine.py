"""The Ray engine ([scale] engine = "ray"): agent runs as Ray tasks on a cluster's workers.

Ray is an optional extra (`pip install seed[ray]`, requirements-ray.lock): it is imported
here only when an engine starts, so nothing of it loads otherwise. A task runs
`worker.work` (`remote.Job` in, `remote.Outcome` out) with no automatic retry: the kernel
decides what is retried. The base commit's bundle is put in the object store once per
iteration and passed to every candidate's task by reference. A worker that dies, or a task
that does not answer in time, ends as an Outcome that says so: that candidate fails alone.

The local instance the engine starts (`address = ""`) is closed to every sandbox: a run of
repository code or a model-only agent has no network, but an agent with `network = "full"`
shares this machine's, so every port Ray opens is one it can reach. That instance starts
with Ray's token authentication on, whatever RAY_AUTH_MODE the person's environment says,
with a token of the daemon's own that no file holds (Ray would write ~/.ray/auth_token),
on 127.0.0.1 only, without a dashboard; once started, both are checked, and an instance
that is not so is ended and refused. A cluster `address` names is the person's own: its
token authentication is set up as docs/ray.md says.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.metadata
import os
import secrets
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


LOOPBACK = "127.0.0.1"
AUTH_SINCE = (2, 52)
"""The first Ray with token authentication."""
CLOSED = (
    "a local instance of the daemon's own, with token authentication (a token no file holds) "
    f"and every port on {LOOPBACK}"
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
        self._saved: dict[str, Any] = {}
        """What _close changed for a local instance, put back when it stops."""
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
            # the job's working folder holds a copy of kernel/ and domain/ only: Ray ships it to
            # every worker and puts it first on its sys.path, in place of seed's folder and the
            # daemon's working folder (a repository, whose other files an agent may write)
            self._code = own_packages()
            job = ray.job_config.JobConfig(runtime_env={"working_dir": str(self._code)})
            quiet: dict[str, Any] = {"log_to_driver": False, "configure_logging": False}
            with adopting() as self._adopted:
                if self.scale.address:
                    ray.init(address=self.scale.address, job_config=job, **quiet)
                else:
                    # "local": a fresh instance (None would join RAY_ADDRESS's cluster or the
                    # latest `ray start` on this machine: another person's Ray)
                    self._saved = _close(ray)
                    local = {"_node_ip_address": LOOPBACK, "include_dashboard": False}
                    try:
                        ray.init(address="local", job_config=job, **quiet, **local)
                    except BaseException:
                        _reopen(self._saved)
                        self._saved = {}
                        raise
            self._started = True
            problem = "" if self.scale.address else _open(ray)
            if problem:
                self.stop()
                raise ConfigError(f"seed does not start a local Ray open to its agents: {problem}")

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
        _reopen(self._saved)
        self._started, self._adopted, self._saved = False, [], {}
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


@functools.cache
def _token() -> str:
    """The daemon's own token for the Ray instances it starts (made once, held in memory)."""
    return secrets.token_hex(32)


_CLOSED_ENV = {"RAY_AUTH_MODE": "token", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
"""Token authentication on; "local Ray only", so a node named 127.0.0.1 stays on it (Ray
otherwise swaps in the machine's address, and its servers listen on every interface)."""


def _close(ray: Any) -> dict[str, Any]:
    """Token authentication and loopback for the local instance about to start: the variables
    its processes start with, and Ray's own reading of them in this process (taken when it was
    imported) made again. Returns what was there before."""
    wanted = {**_CLOSED_ENV, "RAY_AUTH_TOKEN": _token()}
    saved: dict[str, Any] = {k: os.environ.get(k) for k in wanted}
    os.environ.update(wanted)
    try:
        raylet: Any = importlib.import_module("ray._raylet")
        constants: Any = importlib.import_module("ray._private.ray_constants")
        saved[_CLUSTER] = constants.ENABLE_RAY_CLUSTER
        constants.ENABLE_RAY_CLUSTER = False
        raylet.Config.initialize("")
        raylet.AuthenticationTokenLoader.instance().reset_cache()
    except (ImportError, AttributeError) as exc:
        _reopen(saved)
        raise ConfigError(
            f"seed does not start a local Ray without token authentication, which Ray "
            f"{ray.__version__} lacks (Ray {'.'.join(map(str, AUTH_SINCE))} has it): "
            f"`pip install -r requirements-ray.lock`"
        ) from exc
    return saved


_CLUSTER = "ray_constants.ENABLE_RAY_CLUSTER"


def _reopen(saved: dict[str, Any]) -> None:
    """The environment and Ray's settings as they were before _close (a cluster joined
    later in this process is joined as the person's environment says)."""
    for name, value in saved.items():
        if name == _CLUSTER:
            constants: Any = importlib.import_module("ray._private.ray_constants")
            constants.ENABLE_RAY_CLUSTER = value
        elif value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    if saved:
        with contextlib.suppress(ImportError, AttributeError):
            raylet: Any = importlib.import_module("ray._raylet")
            raylet.Config.initialize("")
            raylet.AuthenticationTokenLoader.instance().reset_cache()


def _open(ray: Any) -> str:
    """How the local instance that started is open to an agent ('' when it is closed)."""
    raylet: Any = importlib.import_module("ray._raylet")
    if raylet.get_authentication_mode() != raylet.AuthenticationMode.TOKEN:
        return "it started without token authentication"
    gcs = str(ray.get_runtime_context().gcs_address).rsplit(":", 1)[0]
    nodes = [str(n.get("NodeManagerAddress", "")) for n in ray.nodes()]
    outside = [a for a in (gcs, *nodes) if a != LOOPBACK]
    return f"it listens on {outside[0]}, not on {LOOPBACK} alone" if outside else ""


def door(scale: ScaleConfig) -> tuple[str, ...]:
    """What status and the daemon's log say of Ray's door (nothing with the local engine)."""
    if scale.engine != "ray":
        return ()
    if scale.address:
        return (
            f"Ray: the cluster at {scale.address}, whose token authentication is its own "
            '(docs/ray.md, "Past one machine: Ray")',
        )
    try:
        version = importlib.metadata.version("ray")
    except importlib.metadata.PackageNotFoundError:
        return (f"Ray: {MISSING}",)
    numbers = tuple(int(p) for p in version.split(".")[:2] if p.isdigit())
    if numbers < AUTH_SINCE:
        return (f"Ray: no local instance starts: Ray {version} has no token authentication",)
    return (f"Ray: {CLOSED}",)


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
