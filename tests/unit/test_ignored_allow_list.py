"""Which git-ignored files of the person's checkout a test run may be shown: an allow-list,
bounded, with secret-like names, dotted parts, seed's folders, virtualenvs and caches out."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import pytest

from kernel.isolation import ignored
from tests.support import make_repo


def test_only_plain_data_files_are_shown(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {".gitignore": "*\n!.gitignore\n"}).resolve()
    made = [
        "pkg/locale/de/LC_MESSAGES/pkg.mo",  # shown
        "data/generated.json",  # shown
        ".env.local",
        "conf/.env",
        "server.pem",
        "tls.key",
        "cert.p12",
        "id_ed25519",
        "my_secret.txt",
        "aws_credentials.json",
        "github_token",
        ".venv/lib/x.py",
        "venv/lib/x.py",
        ".tox/py/x.txt",
        "pkg/__pycache__/m.cpython-311.pyc",
        "history/daemon.log",
        "inbox/task.md",
        "build/lib/pkg/x.py",
        ".hidden/data.bin",
    ]
    for name in made:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("x", encoding="utf-8")
    (root / "linked.mo").symlink_to(root / "data" / "generated.json")
    shown = ignored.ignored_files(root)
    names = sorted(p.relative_to(root).as_posix() for p in shown.files)
    assert names == ["data/generated.json", "pkg/locale/de/LC_MESSAGES/pkg.mo"]
    assert shown.bytes == 2 and shown.over_bounds == 0


def test_the_bounds_cut_and_say_how_many(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_repo(tmp_path / "repo", {".gitignore": "*.dat\n"}).resolve()
    for n in range(5):
        (root / f"f{n}.dat").write_text("12345", encoding="utf-8")

    monkeypatch.setattr(ignored, "MAX_BYTES", 12)
    shown = ignored.ignored_files(root)
    assert len(shown.files) == 2 and shown.over_bounds == 3
    assert "3 left out over the bounds" in ignored.said(root, True)[0]


def test_a_source_and_its_built_file_share_a_stem() -> None:
    shown = ["pkg/_speedups.cpython-311-x86_64-linux-gnu.so", "loc/x.mo", "loc/y.mo"]
    assert ignored.rebuilt_from(["pkg/_speedups.c", "loc/x.po"], shown) == shown[:2]
    assert ignored.stem(PurePosixPath("a/x.tar.gz")) == "x"
