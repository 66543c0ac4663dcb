"""What Ray adds to one candidate's run: the same trivial sandboxed agent run by `worker.work`
in this process, then as Ray tasks on a local instance (`RayEngine`, `[scale] address = ""`).

    python bench/ray_overhead.py [RUNS]

Prints the local instance's start, the first task (the worker's clone made from the bundle),
and the median seconds per candidate both ways (the agent itself takes a few milliseconds).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernel.config import ScaleConfig
from kernel.isolation import remote, worker
from kernel.isolation.paths import discover
from kernel.isolation.rayengine import RayEngine


def _repo(folder: Path) -> Path:
    root = folder / "repo"
    root.mkdir()
    for number in range(50):
        (root / f"m{number}.py").write_text(f"X = {number}\n" * 100)
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b"}
    env |= {"GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"}
    for argv in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "base"]):
        subprocess.run(["git", *argv], cwd=root, env=env, check=True)
    return root


def main(runs: int) -> None:
    """Run and print the figures."""
    with tempfile.TemporaryDirectory(prefix="seed-ray-bench-") as tmp:
        os.environ["XDG_CACHE_HOME"] = str(Path(tmp) / "cache")
        paths = discover(_repo(Path(tmp)))
        base = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=paths.root, capture_output=True, text=True
        ).stdout.strip()
        job = remote.Job(
            repository="bench",
            candidate="c",
            base=base,
            argv=("sh", "-c", "echo 'Y = 1' >> m0.py"),
            timeout_s=60.0,
        )
        bundle = remote.bundle(paths, base, "bench")
        local: list[float] = []
        for number in range(runs):
            t0 = time.monotonic()
            worker.work(remote.Job(**{**job.__dict__, "candidate": f"l{number}"}), bundle)
            local.append(time.monotonic() - t0)
        t0 = time.monotonic()
        engine = RayEngine(ScaleConfig(engine="ray"))
        engine.start()
        started = time.monotonic() - t0
        ref = engine.put(bundle)
        remote_s: list[float] = []
        for number in range(runs + 1):
            t0 = time.monotonic()
            sent = engine.submit(remote.Job(**{**job.__dict__, "candidate": f"r{number}"}), ref)
            done = engine.result(sent)
            assert not done.refused and done.patch, done
            remote_s.append(time.monotonic() - t0)
        engine.stop()
    print(f"bundle: {len(bundle):,} bytes; local Ray instance started in {started:.1f} s")
    print(f"first Ray task (clone from the bundle): {remote_s[0]:.2f} s")
    print(
        f"per candidate, median of {runs}: in process {statistics.median(local):.2f} s, "
        f"as a Ray task {statistics.median(remote_s[1:]):.2f} s"
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
