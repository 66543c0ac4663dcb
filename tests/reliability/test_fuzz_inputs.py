"""Fuzzing what people and agents put in front of the kernel: inbox names and contents,
ROADMAP.md, seed.toml. Nothing crashes; bad input is set aside or refused with a reason;
the daemon (a real seed.py where it matters) keeps running. Examples are capped (200 per
in-process fuzz, SEED_FUZZ_EXAMPLES scales them; one generated case and one explicit for the
daemon runs), with no example database, so the file runs in well under a minute on 2 cores."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import tomli_w
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from kernel.bounds import ROADMAP_MAX_BYTES, ROADMAP_MAX_ITEMS, printable
from kernel.config import Config, load_config
from kernel.errors import ConfigError
from kernel.loop.analysis import bound_roadmap
from kernel.records import inbox
from modules.analyzers.roadmap import parse_roadmap
from tests.reliability.helpers import make_project
from tests.support import read_tasks, records, start_daemon, wait_for

LATER = datetime.now(UTC) + timedelta(hours=1)
EXAMPLES = int(os.environ.get("SEED_FUZZ_EXAMPLES", "200"))
"""Examples per in-process fuzz (SEED_FUZZ_EXAMPLES, as for test_fuzz_logs.py)."""
FAST = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
SLOW = settings(FAST, max_examples=1)
"""Examples that start a real seed.py each."""


def _valid_on_disk(raw: bytes) -> bool:
    return b"/" not in raw and b"\0" not in raw and raw not in (b".", b"..") and len(raw) <= 255


NAMES = st.binary(min_size=1, max_size=255).filter(_valid_on_disk)
HOSTILE = st.one_of(
    st.tuples(st.binary(max_size=40), st.binary(max_size=40)).map(
        lambda p: b"x" + p[0] + b"\xff" + p[1] + b".md"
    ),
    st.integers(201, 252).map(lambda n: b"t" * n + b".md"),
    st.tuples(st.text(max_size=20), st.sampled_from("\n\r\t\x1b\x7f\u2028")).map(
        lambda p: ("x" + p[0] + p[1] + ".md").encode("utf-8", "surrogatepass")
    ),
).filter(_valid_on_disk)
"""Names no task may have: not UTF-8, over 200 bytes, or holding a control character."""


def _write(folder: Path, raw: bytes, data: bytes) -> None:
    with open(os.fsencode(folder) + b"/" + raw, "wb") as handle:
        handle.write(data)


@FAST
@given(names=st.lists(NAMES, min_size=1, max_size=6, unique=True))
def test_any_inbox_file_name_is_taken_left_alone_or_set_aside_with_its_bytes(
    names: list[bytes],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        box = Path(tmp) / "inbox"
        box.mkdir()
        for i, raw in enumerate(names):
            _write(box, raw, f"task {i}\n".encode())

        intake = inbox.scan(box, LATER, read=read_tasks)

        taken = {item.name for item in intake.items}
        for item in intake.items:
            assert not inbox.name_problem(item.name)
        moved = {r.moved_to for r in intake.rejected}
        for rejection in intake.rejected:
            reason = rejection.moved_to.with_name(rejection.moved_to.name + ".reason.txt")
            assert reason.read_text(encoding="utf-8").strip(), rejection
            assert rejection.moved_to.name.encode("utf-8")  # a name that can be shown
            assert len(rejection.moved_to.name.encode("utf-8")) <= 200
            assert "\n" not in rejection.name and "\n" not in rejection.reason
        # every file is somewhere, byte for byte: queued, left alone, or set aside
        for i, raw in enumerate(names):
            name = os.fsdecode(raw)
            here = box / name
            if name in taken or inbox.ignored(name):
                assert here.read_bytes() == f"task {i}\n".encode()
                continue
            [where] = [m for m in moved if m.read_bytes() == f"task {i}\n".encode()]
            assert where.parent == box / "rejected"


FRONT_CHARS = st.text(alphabet=st.sampled_from(list("[]{}=\"'.,#+ \n\t\\abtuxyz0123456789-_")))
FRONT = st.one_of(
    FRONT_CHARS,
    st.dictionaries(
        st.sampled_from(["title", "priority", "acceptance", "allowed", "forbidden", "owner"]),
        st.recursive(
            st.one_of(st.text(max_size=30), st.integers(), st.booleans(), st.floats()),
            lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner),
            max_leaves=20,
        ),
    ).map(lambda d: tomli_w.dumps({k: v for k, v in d.items()})),
)
CONTENTS = st.one_of(
    st.binary(max_size=2048),
    st.tuples(FRONT, st.text(max_size=300)).map(lambda p: f"+++\n{p[0]}\n+++\n{p[1]}".encode()),
    st.tuples(st.integers(0, 3 * inbox.MAX_BYTES), st.sampled_from(b"x\n\xff\x00")).map(
        lambda p: bytes([p[1]]) * p[0]
    ),
)


@FAST
@given(data=CONTENTS)
def test_any_inbox_contents_are_a_task_or_refused_with_a_short_reason(data: bytes) -> None:
    try:
        item = inbox.parse_item("task.md", data, LATER, read=read_tasks)
    except inbox.InboxError as exc:
        assert str(exc) and len(str(exc)) <= 2000 and "\n" not in str(exc).strip()
        return
    assert len(data) <= inbox.MAX_BYTES and data.strip()
    assert item.title and len(item.title) <= 200
    for values in (item.acceptance, item.allowed, item.forbidden):
        assert len(values) <= 50 and all(len(v) <= 1000 for v in values)


ITEM_LINES = st.lists(
    st.one_of(
        st.text(max_size=40).map(lambda t: f"- [ ] {t}"),
        st.text(max_size=40).map(lambda t: f"## {t}"),
        st.sampled_from(["```", "- [x] done", "", "* [ ] star item"]),
        st.text(max_size=80),
    ),
    max_size=60,
)


@FAST
@given(
    head=st.one_of(st.binary(max_size=4096), ITEM_LINES.map(lambda ls: "\n".join(ls).encode())),
    repeat=st.integers(1, 400),
    rest=st.integers(0, 10**9),
)
def test_any_roadmap_is_read_within_its_bounds_and_says_what_it_left_out(
    head: bytes, repeat: int, rest: int
) -> None:
    data = (head + b"\n") * repeat
    shown = data[:ROADMAP_MAX_BYTES]  # what git hands over, at most
    total = len(data) + rest

    text, notes = bound_roadmap(shown, total)

    assert len(text.encode("utf-8")) <= len(shown) * 3  # U+FFFD for a bad byte: 3 bytes
    assert len(text) <= ROADMAP_MAX_BYTES
    items = parse_roadmap(text)
    assert len(items) <= ROADMAP_MAX_ITEMS
    cut = total > len(shown)
    assert any("bytes left out" in n for n in notes) == cut
    if any("items in what is read" in n for n in notes):
        assert f"only the first {ROADMAP_MAX_ITEMS:,} are taken" in " ".join(notes)


def _numeric_fields(model: type[BaseModel], prefix: str = "") -> list[tuple[str, Any]]:
    found: list[tuple[str, Any]] = []
    for name, info in model.model_fields.items():
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            found += _numeric_fields(annotation, f"{prefix}{name}.")
        elif annotation in (int, float, float | None):
            found.append((f"{prefix}{name}", info))
    return found


NUMERIC = _numeric_fields(Config) + [
    (f"agent.prices.m.{k}", None) for k in ("input", "output", "cached_input")
]
VALUES = st.one_of(
    st.integers(-(2**70), 2**70).filter(lambda v: -(2**63) <= v < 2**63),
    st.integers(-(2**16), 2**16),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.text(max_size=8),
)


def _nest(dotted: str, value: Any) -> dict[str, Any]:
    keys = dotted.split(".")
    doc: dict[str, Any] = {keys[-1]: value}
    for key in reversed(keys[:-1]):
        doc = {key: doc}
    if dotted.startswith("agent.prices."):  # a price needs both of these
        doc["agent"]["prices"]["m"].setdefault("input", 1.0)
        doc["agent"]["prices"]["m"].setdefault("output", 1.0)
    if dotted.startswith("guard.growth."):  # a risk class needs both of these
        limit = doc["guard"]["growth"][keys[2]]
        limit.setdefault("new_files", 1)
        limit.setdefault("changed_lines", 1)
    return doc


@FAST
@given(field=st.sampled_from([name for name, _ in NUMERIC]), value=VALUES)
def test_any_seed_toml_number_is_taken_within_its_range_or_refused_naming_the_key(
    field: str, value: Any
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "seed.toml"
        path.write_text(tomli_w.dumps(_nest(field, value)))
        try:
            config = load_config(path)
        except ConfigError as exc:
            assert f"key '{field}'" in str(exc) and str(path) in str(exc)
            return
    taken: Any = config
    for part in field.split("."):
        taken = taken[part] if isinstance(taken, dict) else getattr(taken, part)
    assert isinstance(taken, int | float) and math.isfinite(taken)
    assert taken >= 0 and taken <= 10**12


@FAST
@given(data=st.binary(max_size=512))
def test_any_seed_toml_bytes_are_a_config_or_one_clear_error(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "seed.toml"
        path.write_bytes(data)
        try:
            load_config(path)
        except ConfigError as exc:
            assert str(path) in str(exc)


@SLOW
@given(hostile=st.lists(HOSTILE, min_size=1, max_size=3, unique=True))
@example(hostile=[b"bad\xff\xfe.md", b"x" * 250 + b".md", b"new\nline.md"])
def test_once_sets_hostile_inbox_names_aside_and_plans_the_good_task(hostile: list[bytes]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        project = make_project(Path(tmp))
        good = project.task()
        past = time.time() - 60
        for i, raw in enumerate(hostile):
            _write(good.parent, raw, f"task {i} under a hostile name\n".encode())
            os.utime(os.fsencode(good.parent) + b"/" + raw, (past, past))

        result = project.seed(project.plan_only(), "once")

        assert result.returncode == 5, result.stderr[-2000:]
        assert "Traceback" not in result.stderr
        [record] = project.records()
        assert record["gap"]["key"] == "inbox:sub.md" and record["outcome"] == "WAITING"
        rejected = good.parent / "rejected"
        for i, raw in enumerate(hostile):
            [aside] = [
                p
                for p in rejected.iterdir()
                if p.read_bytes() == f"task {i} under a hostile name\n".encode()
            ]
            reason = (rejected / (aside.name + ".reason.txt")).read_text()
            shown = printable(os.fsdecode(raw), 400)
            assert reason.startswith(f"inbox/{shown} was moved here as {aside.name}: ")
            assert f"inbox/{shown} set aside as inbox/rejected/{aside.name}" in result.stderr
        assert sorted(p.name for p in good.parent.iterdir()) == ["rejected", "sub.md"]


def test_run_keeps_going_through_hostile_names_dropped_while_it_watches(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    box = project.root / "inbox"
    box.mkdir()
    (box / "rejected").write_text("a file where the daemon's folder goes\n")
    daemon = start_daemon(
        project.root, "--config", str(project.plan_only()), "run", stdout=subprocess.DEVNULL
    )
    log = project.root / "history" / "daemon.log"
    try:
        wait_for(lambda: log.exists() and "watching" in log.read_text(), 120, "start", daemon)
        for raw in (b"bad\xff\xfe.md", b"y" * 250 + b".md", b"new\nline.md"):
            _write(box, raw, b"hostile\n")
        wait_for(lambda: log.read_text().count("set aside as") >= 3, 60, "set-asides", daemon)
        project.task(name="after.md")
        wait_for(lambda: len(records(project.root)) >= 1, 120, "the good task", daemon)
        wait_for(lambda: log.read_text().count("set aside as") >= 4, 60, "the file", daemon)
        daemon.send_signal(signal.SIGINT)
        _, stderr = daemon.communicate(timeout=60)
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
    assert daemon.returncode == 0, stderr[-2000:]
    text = log.read_text()
    assert "unexpected error" not in text and "Traceback" not in stderr
    [record] = records(project.root)
    assert record["gap"]["key"] == "inbox:after.md"
    rejected = box / "rejected"
    assert rejected.is_dir()
    kept = sorted(p.read_bytes() for p in rejected.iterdir() if not p.name.endswith(".txt"))
    # the file that stood where the daemon's folder goes was moved aside, never deleted
    assert kept == [b"a file where the daemon's folder goes\n"] + [b"hostile\n"] * 3
    assert "rejected.not-a-folder" in text
    assert sorted(p.name for p in box.iterdir()) == ["after.md", "rejected"]
