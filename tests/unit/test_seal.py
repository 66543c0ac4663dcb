"""The kernel's state is sealed: what was not written by this kernel is never used."""

from __future__ import annotations

import json
from pathlib import Path

from domain import Measurements
from kernel.host.context import open_context
from kernel.isolation import gitops, seal
from kernel.isolation.integrity import Checkout
from kernel.measuring.baseline import _Entry, _load, _store  # pyright: ignore[reportPrivateUsage]
from tests.support import SAMPLE, make_repo


def test_a_forged_or_edited_cache_entry_is_not_used(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", SAMPLE)
    ctx = open_context(root, quiet=True)
    path = ctx.paths.cache / "key-tree.json"
    ctx.paths.cache.mkdir(parents=True, exist_ok=True)
    _store(ctx, path, _Entry("tree", Measurements(tree="tree"), 0, {"out.html": "ab12"}))
    entry = _load(ctx, path)
    assert entry is not None and entry.written == {"out.html": "ab12"}
    sealed = json.loads(path.read_text())
    sealed["body"] = sealed["body"].replace("out.html", "other.html")
    path.write_text(json.dumps(sealed))
    assert _load(ctx, path) is None
    body = json.dumps({"since_full": 0, "measurements": {"tree": "tree", "items": []}})
    path.write_text(json.dumps({"body": body, "seal": "0" * 64}))
    assert _load(ctx, path) is None
    # a seal made with another key (another kernel's state) is not this kernel's
    other = tmp_path / "other-state"
    path.write_text(json.dumps({"body": body, "seal": seal.seal(other, body.encode())}))
    assert _load(ctx, path) is None


def test_an_edited_snapshot_or_an_altered_kept_blob_is_not_restored_from(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {**SAMPLE, "VISION.md": "the vision\n"})
    state = gitops.common_dir(root) / "seed"
    checkout = Checkout(root, state, ("VISION.md",))
    snapshot = checkout.begin("iter-0001-20260101-000000")
    assert checkout.saved() is not None
    sealed = json.loads(checkout.snapshot_path.read_text())
    sealed["body"] = sealed["body"].replace("iter-0001", "iter-0002")
    checkout.snapshot_path.write_text(json.dumps(sealed))
    assert checkout.saved() is None
    (root / "VISION.md").write_text("rewritten\n")
    for blob in checkout.blobs.iterdir():
        blob.write_bytes(b"the attacker's bytes\n")
    report = checkout.check(snapshot, tmp_path / "evidence")
    assert (root / "VISION.md").read_text() == "rewritten\n"
    assert any("altered" in p for p in report.problems)


def test_program_settings_are_seen_and_never_run(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", SAMPLE)
    assert gitops.program_settings(root) == {}
    marker = tmp_path / "ran"
    script = tmp_path / "monitor.sh"
    script.write_text(f"#!/bin/sh\ntouch {marker}\n")
    script.chmod(0o755)
    config = root / ".git" / "config"
    config.write_text(
        config.read_text()
        + f"[core]\n\tfsmonitor = {script}\n"
        + '[filter "x"]\n\tclean = sh -c true\n'
        + "[alias]\n\ty = !sh\n\tz = log\n"
        + "[include]\n\tpath = /elsewhere\n"
    )
    found = gitops.program_settings(root)
    assert set(found) == {"core.fsmonitor", "filter.x.clean", "alias.y", "include.path"}
    gitops.git(root, "status")
    gitops.git(root, "diff", "HEAD")
    gitops.git(root, "ls-files", "--others")
    assert not marker.exists()
