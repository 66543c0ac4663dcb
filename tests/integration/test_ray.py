"""A patch a Ray worker sends back is judged as a local agent's checkout: applied into a fresh
checkout (`remote.apply`), then `Judge.judge` builds, guards and verifies it. Every refusal of
a local run holds for it: a link into .git, an oversized file, a protected path, a weakened
test; an honest patch passes."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from domain import FailureCategory
from kernel.config import ScaleConfig
from kernel.host.answers import Backend
from kernel.host.context import Context, open_context
from kernel.isolation import agentgit, gitops, procs, relay, remote
from kernel.isolation.rayengine import RayEngine, adopting
from kernel.judging.iteration import Ending, Iteration, noop_phase
from kernel.judging.judge import Judge, Passed
from kernel.loop.analysis import measure_base
from kernel.measuring.baseline import Baseline
from tests.agents_real.model import say, serving
from tests.integration.test_ratchet import BUGGY
from tests.reliability.helpers import FILES
from tests.support import AGENT as AGENT_SCRIPT
from tests.support import binary_patch, git, make_repo, records, seed, start_daemon, wait_for
from tests.unit.factories import gap, plan

CONFIG = '[quality]\ntools = ["ruff", "pytest"]\n\n[guard]\nmax_file_bytes = 4000\n'


@dataclass
class Judged:
    """The repository, its context and its baseline, shared by the module's tests."""

    ctx: Context
    head: str
    baseline: Baseline
    tmp: Path

    def patch(self, edit: Callable[[Path], None]) -> bytes:
        """What a worker sends for an agent that did `edit` in its checkout."""
        copy = self.tmp / "copy"
        shutil.rmtree(copy, ignore_errors=True)
        git(self.tmp, "clone", "-q", str(self.ctx.paths.root), str(copy))
        edit(copy)
        return binary_patch(copy)

    def judge(self, patch: bytes, name: str) -> Passed | Ending:
        """The patch applied into a fresh checkout and judged as the loop judges a run."""
        checkout = remote.apply(self.ctx.paths, name, self.head, patch)
        try:
            it = Iteration(
                plan(gap(), seq=len(name)),
                self.head,
                datetime.now(UTC),
                Backend("command", "remote"),
                checkout,
            )
            it.sandboxed = True
            verdict = Judge(self.ctx, noop_phase).judge(it, self.baseline)
            assert isinstance(verdict, Passed | Ending), verdict
            return verdict
        finally:
            agentgit.remove(checkout)


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Judged]:
    tmp = tmp_path_factory.mktemp("remote-judge")
    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp / "cache")
    try:
        root = make_repo(tmp / "repo", FILES)
        config = tmp / "seed.toml"
        config.write_text(CONFIG)
        ctx = open_context(root, config, quiet=True)
        head = git(root, "rev-parse", "HEAD").strip()
        base = agentgit.create(ctx.paths, "wt-base", head)
        yield Judged(ctx, head, measure_base(ctx, base, head), tmp)
        agentgit.remove(base)
    finally:
        if old is None:
            os.environ.pop("XDG_CACHE_HOME", None)
        else:
            os.environ["XDG_CACHE_HOME"] = old


def _append(path: str, text: str) -> Callable[[Path], None]:
    def edit(copy: Path) -> None:
        with (copy / path).open("a") as handle:
            handle.write(text)

    return edit


def _link_into_git(copy: Path) -> None:
    os.symlink(".git/config", copy / "settings.cfg")


def _oversized(copy: Path) -> None:
    (copy / "data.bin").write_bytes(os.urandom(6000))


def _weakened(copy: Path) -> None:
    test = copy / "tests" / "test_calc.py"
    test.write_text(test.read_text().replace("assert mul(2, 3) == 6", "assert True"))


@pytest.mark.parametrize(
    ("edit", "category", "said"),
    [
        (_link_into_git, FailureCategory.SANDBOX_VIOLATION, "settings.cfg"),
        (_oversized, FailureCategory.GROWTH_LIMIT, "data.bin: 6000 bytes"),
        (_append("VISION.md", "the agent's vision\n"), None, "VISION.md"),
        (_weakened, FailureCategory.HYGIENE_VIOLATION, "test_mul"),
    ],
    ids=["link-into-git", "oversized", "protected", "weakened-test"],
)
def test_a_hostile_patch_from_a_worker_is_refused_as_a_local_run_would_be(
    judged: Judged,
    edit: Callable[[Path], None],
    category: FailureCategory | None,
    said: str,
    bwrap: None,
) -> None:
    verdict = judged.judge(judged.patch(edit), "wt-hostile")
    assert isinstance(verdict, Ending), verdict
    assert category is None or verdict.category == category, verdict
    assert said in f"{verdict.reason} {' '.join(verdict.evidence)}", verdict


def test_an_honest_patch_from_a_worker_passes_the_judge(judged: Judged, bwrap: None) -> None:
    sub = "\n\ndef sub(a, b):\n    return a - b\n"
    test = "\n\ndef test_sub():\n    from calc import sub\n\n    assert sub(5, 3) == 2\n"

    def edit(copy: Path) -> None:
        _append("calc.py", sub)(copy)
        _append("tests/test_calc.py", test)(copy)

    verdict = judged.judge(judged.patch(edit), "wt-honest")
    assert isinstance(verdict, Passed), verdict
    shown = gitops.git(
        judged.ctx.paths.root, "show", f"{verdict.tree}:calc.py", env=verdict.store.env()
    )
    assert shown.text().endswith(sub)


# -- on a local Ray cluster of two nodes (skipped only where seed[ray] is not installed) --

AGENT = r"""
import os, pathlib, sys, time
here, shared, name, action = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3], sys.argv[4]
with (shared / f"{name}.count").open("a") as count:
    count.write("ran\n")
# whole or not at all: the test reads it the moment it exists
(shared / f"{name}.started.part").write_text(str(here))
(shared / f"{name}.started.part").rename(shared / f"{name}.started")
if action == "sleep":
    time.sleep(120)
elif action == "link":
    os.symlink(".git/config", here / "settings.cfg")
with (here / "calc.py").open("a") as calc:
    calc.write(f"\n\nWHO = {name!r}\n")
"""


@dataclass
class Cluster:
    """Two Ray nodes on this machine (custom resources node_a and node_b) and the engine."""

    engine: RayEngine
    shared: Path
    """Writable by every sandboxed agent (SEED_SANDBOX_WRITABLE): the runs' counters."""
    address: str = ""
    """The cluster's address, for a daemon to join."""

    def job(self, judged: Judged, name: str, action: str = "") -> remote.Job:
        argv = (sys.executable, "-c", AGENT, "{worktree}", str(self.shared), name, action)
        return remote.Job(
            repository="demo", candidate=name, base=judged.head, argv=argv, timeout_s=90.0
        )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    pytest.importorskip("ray")
    from ray.cluster_utils import Cluster as RayCluster

    tmp = tmp_path_factory.mktemp("ray")
    shared = tmp / "shared"
    shared.mkdir()
    # the nodes' processes start from this one's environment: what a worker's agent may write
    # (the counters) and where the workers keep their clones and checkouts
    saved = {k: os.environ.get(k) for k in ("SEED_SANDBOX_WRITABLE", "XDG_CACHE_HOME")}
    os.environ["SEED_SANDBOX_WRITABLE"] = str(shared)
    os.environ["XDG_CACHE_HOME"] = str(tmp / "workers")
    store = 80 * 1024 * 1024
    with (
        adopting() as adopted
    ):  # the nodes are this process's children: the orphan sweep spares them
        nodes = RayCluster(
            initialize_head=True,
            head_node_args={
                "num_cpus": 2,
                "resources": {"node_a": 2},
                "object_store_memory": store,
            },
        )
        nodes.add_node(num_cpus=2, resources={"node_b": 2}, object_store_memory=store)
    engine = RayEngine(ScaleConfig(engine="ray", address=str(nodes.address)))
    try:
        engine.start()
        yield Cluster(engine, shared, str(nodes.address))
    finally:
        engine.stop()
        nodes.shutdown()
        for pid in adopted:
            procs.forget_known(pid)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _ran(cluster: Cluster, name: str) -> int:
    counter = cluster.shared / f"{name}.count"
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def test_candidates_spread_over_both_nodes_each_patch_its_own(
    cluster: Cluster, judged: Judged, bwrap: None
) -> None:
    engine = cluster.engine
    bundle = engine.put(remote.bundle(judged.ctx.paths, judged.head, "spread"))
    sent = [
        engine.submit(cluster.job(judged, name), bundle, resources={node: 1})
        for name, node in (("left", "node_a"), ("right", "node_b"))
    ]
    left, right = engine.results(sent)
    assert (left.refused, right.refused) == ("", ""), (left, right)
    assert left.node and right.node and left.node != right.node
    assert left.usage_said == right.usage_said == "reported by the worker"
    for outcome, name in ((left, "left"), (right, "right")):
        checkout = remote.apply(judged.ctx.paths, f"wt-{name}", judged.head, outcome.patch)
        assert (checkout / "calc.py").read_text().endswith(f"\n\nWHO = {name!r}\n")
        agentgit.remove(checkout)


def test_a_worker_killed_mid_run_fails_that_candidate_only_and_is_not_retried(
    cluster: Cluster, judged: Judged, bwrap: None
) -> None:
    engine = cluster.engine
    bundle = engine.put(remote.bundle(judged.ctx.paths, judged.head, "killed"))
    slow = engine.submit(cluster.job(judged, "slow", "sleep"), bundle, resources={"node_a": 1})
    quick = engine.submit(cluster.job(judged, "quick"), bundle, resources={"node_b": 1})
    started = cluster.shared / "slow.started"
    deadline = time.monotonic() + 60
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    # the worker's checkout is named wt-<its pid>-<candidate>
    pid = int(Path(started.read_text()).name.split("-")[1])
    os.kill(pid, signal.SIGKILL)
    t0 = time.monotonic()
    failed, done = engine.results([slow, quick])
    assert failed.refused.startswith("the worker failed:") and failed.patch == b"", failed
    assert time.monotonic() - t0 < 30
    assert done.refused == "" and b"WHO = 'quick'" in done.patch
    time.sleep(1)  # a retry would have started by now
    assert (_ran(cluster, "slow"), _ran(cluster, "quick")) == (1, 1)


def test_a_hostile_patch_from_a_ray_worker_is_refused_by_the_judge(
    cluster: Cluster, judged: Judged, bwrap: None
) -> None:
    engine = cluster.engine
    bundle = engine.put(remote.bundle(judged.ctx.paths, judged.head, "hostile"))
    (outcome,) = engine.results([engine.submit(cluster.job(judged, "hostile", "link"), bundle)])
    assert outcome.refused == "" and b"settings.cfg" in outcome.patch, outcome
    verdict = judged.judge(outcome.patch, "wt-from-ray")
    assert isinstance(verdict, Ending) and verdict.category == FailureCategory.SANDBOX_VIOLATION
    assert "settings.cfg" in f"{verdict.reason} {' '.join(verdict.evidence)}"


def _without_bwrap(tmp: Path) -> str:
    """PATH as it is, each folder holding bwrap replaced by one that links everything else in
    it: a worker started with it finds git, python and the rest, but no bubblewrap."""
    folders: list[str] = []
    for number, folder in enumerate(os.environ["PATH"].split(os.pathsep)):
        if not (Path(folder) / "bwrap").exists():
            folders.append(folder)
            continue
        shadow = tmp / f"bin-{number}"
        shadow.mkdir()
        for entry in Path(folder).iterdir():
            if entry.name != "bwrap":
                (shadow / entry.name).symlink_to(entry)
        folders.append(str(shadow))
    return os.pathsep.join(folders)


def test_a_ray_worker_without_bubblewrap_refuses_work(
    cluster: Cluster, judged: Judged, tmp_path: Path
) -> None:
    """A worker process whose PATH finds no bwrap, as on a machine without bubblewrap."""
    engine = cluster.engine
    bundle = engine.put(remote.bundle(judged.ctx.paths, judged.head, "nobwrap"))
    job = cluster.job(judged, "unsandboxed")
    path = _without_bwrap(tmp_path)
    sent = engine.submit(job, bundle, runtime_env={"env_vars": {"PATH": path}})
    (outcome,) = engine.results([sent])
    assert outcome.refused.startswith("refused: no sandbox on this worker: bubblewrap"), outcome
    assert outcome.patch == b"" and outcome.exit_code is None
    assert _ran(cluster, "unsandboxed") == 0


def test_a_daemon_runs_its_candidates_on_the_cluster_and_lands_the_one_that_is_right(
    cluster: Cluster, tmp_path: Path, bwrap: None
) -> None:
    """Each candidate gets its repair round on a worker, starting from its own refused files:
    the second's round 2 turns its round 1's `a * b` into `a + b` (from the base, the
    replacement would find nothing to replace)."""
    wrong = [{"replace": "calc.py", "old": "return a - b", "new": "return a * b"}]
    mended = [{"replace": "calc.py", "old": "return a * b", "new": "return a + b"}]
    script = tmp_path / "candidates.json"
    script.write_text(
        json.dumps({"candidates": {"1": {"steps": wrong}, "2": {"rounds": [wrong, mended]}}})
    )
    argv = json.dumps([sys.executable, str(AGENT_SCRIPT), str(script)])
    config = (
        f'[agent]\nbackend = "command"\ncommand = {argv}\nrepair_rounds = 1\n'
        '[quality]\ntools = ["ruff", "pytest"]\n[candidates]\nn = 2\n'
        f'[scale]\nengine = "ray"\naddress = "{cluster.address}"\n'
    )
    repo = make_repo(tmp_path / "repo", BUGGY, config)

    result = seed(repo, "once", python=sys.executable)

    assert result.returncode == 0, result.stderr[-3000:]
    [record] = records(repo)
    assert record["outcome"] == "SUCCESS", record["reason"]
    one, two = record["candidates"]
    assert (one["failure_category"], two["won"]) == ("GAP_NOT_CLOSED", True)
    # on the workers, usage as they reported it; two rounds each, the second from the first's
    assert one["host"] and "node" in one["host"] and two["host"]
    assert one["usage_from"] == two["usage_from"] == "reported by the worker"
    assert (one["rounds"], two["rounds"]) == (2, 2)
    assert "return a + b" in git(repo, "show", "HEAD:calc.py")
    assert git(repo, "branch", "--list", "seed/iter-*").strip() == ""


# -- a model-only candidate on a worker: through its relay and the kernel's door --

MODEL_AGENT = r"""
import json, os, pathlib, sys, time, urllib.request
shared, name = pathlib.Path(sys.argv[1]), os.environ["SEED_ITERATION_ID"].rsplit("-", 1)[1]
body = {"model": "scripted", "stream": True, "messages": [{"role": "user", "content": "fix"}],
        "stream_options": {"include_usage": True}, "max_tokens": 100}
asked = urllib.request.Request(
    os.environ["SEED_MODEL_BASE_URL"] + "/v1/chat/completions",
    data=json.dumps(body).encode(),
    headers={"content-type": "application/json"},
)
with urllib.request.urlopen(asked, timeout=30) as answer:
    answer.read()
calc = pathlib.Path("calc.py")
calc.write_text(calc.read_text().replace("return a - b", "return a + b"))
(shared / f"{name}.asked").write_text("")
said = {"tokens_used": 7, "cost_usd": 0.0}
if name == "c2":  # it lies about its usage, once the test has knocked at the door
    deadline = time.monotonic() + 60
    while not (shared / "knocked").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    said = {"tokens_used": 1_000_000, "cost_usd": 50.0}
pathlib.Path(os.environ["SEED_RESULT_FILE"]).write_text(json.dumps({"summary": "fixed", **said}))
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _knock(port: int, hello: bytes) -> bytes:
    """A request at the door after `hello` (a token line): every byte answered."""
    request = b"POST /v1/chat/completions HTTP/1.1\r\nHost: model\r\nContent-Length: 2\r\n\r\n{}"
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(hello + request)
        answer = b""
        with contextlib.suppress(ConnectionResetError):  # closed unread: reset
            while chunk := conn.recv(4096):
                answer += chunk
        return answer


def test_a_model_only_candidate_on_a_worker_is_counted_by_the_kernels_gateway_alone(
    cluster: Cluster, tmp_path: Path, bwrap: None
) -> None:
    """Two model-only candidates on the cluster reach the kernel's gateway through their
    worker's relay and the daemon's door; the second writes a false usage into its result
    file. Each candidate's usage in the record and the ledger is what the gateway counted, and
    the door answers no request without an open token."""
    port = _free_port()
    argv = json.dumps([sys.executable, "-c", MODEL_AGENT, str(cluster.shared)])
    config = (
        f'[agent]\nbackend = "command"\ncommand = {argv}\nrepair_rounds = 0\n'
        'api_base = "{origin}"\n[agent.prices."scripted"]\ninput = 100.0\noutput = 100.0\n'
        '[quality]\ntools = ["ruff", "pytest"]\n[candidates]\nn = 2\n'
        f'[scale]\nengine = "ray"\naddress = "{cluster.address}"\ndoor = "127.0.0.1:{port}"\n'
    )
    with serving([say("fixed")]) as model:
        repo = make_repo(tmp_path / "repo", BUGGY, config.replace("{origin}", model.origin))
        daemon = start_daemon(repo, "once", python=sys.executable)
        try:
            wait_for(lambda: (cluster.shared / "c2.asked").exists(), 120, "c2 asked", daemon)
            forged = relay.new_token().encode()
            knocked = [_knock(port, hello) for hello in (b"\n", forged + b"\n", b"x" * 65)]
        finally:
            (cluster.shared / "knocked").write_text("")
        _, err = daemon.communicate(timeout=240)
        asked = len(model.requests)

    assert daemon.returncode == 0, err[-3000:]
    assert knocked == [b"", b"", b""]  # refused unanswered: none reached a gateway
    assert asked == 2  # the two agents' requests, nothing of the knocks
    [record] = records(repo)
    assert record["outcome"] == "SUCCESS", record["reason"]
    one, two = record["candidates"]
    assert (one["won"], two["outcome"], two["eligible"]) == (True, "SUCCESS", True), (
        two["failure_category"],
        two["reason"],
    )
    for candidate in (one, two):  # 1,000 tokens in and 50 out at $100 a million
        assert candidate["usage_from"] == "the gateway", candidate
        assert (candidate["tokens_used"], candidate["cost_usd"]) == (1050, 0.105), candidate
        assert "node" in candidate["host"]
    assert (record["wire_tokens"], record["wire_requests"]) == (2100, 2)
    ledger = [
        json.loads(line) for line in (repo / "history" / "ledger.jsonl").read_text().splitlines()
    ]
    assert sum(line["tokens_used"] for line in ledger) == 2100
    assert sum(line["cost_usd"] for line in ledger) == pytest.approx(0.21)
    assert "return a + b" in git(repo, "show", "HEAD:calc.py")
