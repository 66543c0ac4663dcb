"""The one reader of files a sandboxed run wrote: links, FIFOs and sizes (kernel/isolation/readback.py)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from kernel.isolation import readback


def test_a_regular_file_is_read_up_to_its_cap(tmp_path: Path) -> None:
    (tmp_path / "result.json").write_bytes(b"x" * 10)
    assert readback.read(Path("result.json"), 100, within=tmp_path).data == b"x" * 10
    cut = readback.read(tmp_path / "result.json", 4)
    assert (cut.data, cut.truncated, cut.ok) == (b"xxxx", True, True)


def test_a_missing_file_is_missing_not_refused(tmp_path: Path) -> None:
    found = readback.read(Path("none.json"), 10, within=tmp_path)
    assert found.missing and not found.ok and found.data == b""


def test_a_link_is_never_followed_even_on_the_way(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET")
    run = tmp_path / "run"
    run.mkdir()
    (run / "result.json").symlink_to(secret)
    (run / "sub").symlink_to(tmp_path)
    for name in ("result.json", "sub/secret.txt"):
        found = readback.read(Path(name), 100, within=run)
        assert not found.ok and not found.missing and b"TOPSECRET" not in found.data, name
    assert "link" in readback.read(run / "result.json", 100).problem
    assert not readback.read(Path("../secret.txt"), 100, within=run).ok


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "result.json")
    found: list[readback.Readback] = []
    reader = threading.Thread(
        target=lambda: found.append(readback.read(Path("result.json"), 100, within=tmp_path))
    )
    reader.start()
    reader.join(5)
    assert not reader.is_alive(), "reading a FIFO blocked"
    assert "FIFO" in found[0].problem


def test_a_folder_or_device_is_refused(tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()
    assert "folder" in readback.read(Path("dir"), 10, within=tmp_path).problem
    assert "device" in readback.read(Path("/dev/null"), 10).problem


def test_copy_writes_only_what_was_read(tmp_path: Path) -> None:
    (tmp_path / "data").write_bytes(b"abc")
    (tmp_path / "link").symlink_to(tmp_path / "data")
    assert readback.copy(Path("data"), tmp_path / "out" / "a", 10, within=tmp_path).ok
    assert (tmp_path / "out" / "a").read_bytes() == b"abc"
    assert not readback.copy(Path("link"), tmp_path / "out" / "b", 10, within=tmp_path).ok
    assert not (tmp_path / "out" / "b").exists()
