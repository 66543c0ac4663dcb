"""A Ray worker of seed's imports only the kernel's own packages from what seed gives it
(issue 39, item 3): a copy of kernel/ and domain/ as the job's working folder, never seed's
folder or the daemon's working folder (a repository, whose other files an agent may write)."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from kernel.config import ScaleConfig
from kernel.isolation import procs, rayengine
from kernel.isolation.rayengine import RayEngine, adopting
from tests.support import SEED_HOME

_PROBE = """
def probe():
    import os, sys
    import kernel.config
    import kernel.isolation.worker
    return {
        "path": list(sys.path),
        "cwd": os.getcwd(),
        "kernel": kernel.config.__file__,
        "tomllib": sys.modules["tomllib"].__file__,
    }
"""


def test_the_copy_holds_the_kernels_own_packages_only() -> None:
    folder = rayengine.own_packages()
    try:
        assert sorted(p.name for p in folder.iterdir()) == ["domain", "kernel"]
        assert (folder / "kernel" / "isolation" / "worker.py").is_file()
        assert not list(folder.rglob("__pycache__"))
    finally:
        shutil.rmtree(folder)


@pytest.mark.slow
def test_a_ray_worker_imports_nothing_from_seeds_or_the_daemons_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("ray")
    where = tmp_path / "repository"
    where.mkdir()
    marker = tmp_path / "pwned"
    (where / "tomllib.py").write_text(f"open({str(marker)!r}, 'w').write('ran in a worker')\n")
    monkeypatch.chdir(where)  # the daemon's working folder: a repository
    # the probe is a module of that folder too: a worker that has the folder on its path
    # imports it from there; one that has not gets it by value
    (where / "seed_ray_probe.py").write_text(_PROBE)
    spec = importlib.util.spec_from_file_location("seed_ray_probe", where / "seed_ray_probe.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setitem(sys.modules, "seed_ray_probe", module)
    engine = RayEngine(ScaleConfig(engine="ray", address=""))
    with adopting() as adopted:
        engine.start()
    try:
        ray = engine._ray
        ray.cloudpickle.register_pickle_by_value(module)
        seen: dict[str, Any] = ray.get(ray.remote(module.probe).remote(), timeout=300)
    finally:
        engine.stop()
        for pid in adopted:
            procs.forget_known(pid)
    assert not marker.exists(), "a module of the daemon's working folder ran in a worker"
    folders = {Path(p or ".").resolve() for p in seen["path"]}
    assert where.resolve() not in folders and SEED_HOME.resolve() not in folders
    assert not Path(seen["kernel"]).resolve().is_relative_to(SEED_HOME.resolve())
