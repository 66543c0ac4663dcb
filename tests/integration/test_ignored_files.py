"""The files the person's tests need that git ignores (generated data, compiled translations)
are used read-only in seed's test runs the way the person's checkout has them; secret-named
ones never are, and none of them is ever written into the tree (issue 41 item 2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

import pytest

from kernel.isolation import sandbox
from tests.support import agent_config, git, make_repo, records, seed

needs_bwrap = pytest.mark.skipif(not sandbox.available().ok, reason="needs bubblewrap")

_QUALITY = '[quality]\ntools = ["pytest"]\n'

FILES = {
    ".gitignore": "*.mo\n__pycache__/\nhistory/\napi_token.txt\n.env.local\n",
    "trans/__init__.py": "",
    "trans/locale/de.po": 'msgid "hello"\nmsgstr "hallo"\n',
    "make_mo.py": (
        "import pathlib\n\n"
        "for po in pathlib.Path('trans/locale').glob('*.po'):\n"
        "    po.with_suffix('.mo').write_text(po.read_text().upper())\n"
    ),
    "tests/test_trans.py": (
        "import pathlib\n\nimport pytest\n\n"
        "MO = pathlib.Path(__file__).parents[1] / 'trans' / 'locale' / 'de.mo'\n\n\n"
        "@pytest.mark.skipif(not MO.exists(), reason='de.mo missing: run make_mo.py')\n"
        "def test_the_compiled_translation_says_hallo() -> None:\n"
        "    assert 'HALLO' in MO.read_text()\n\n\n"
        "def test_no_secret_of_the_person_is_there() -> None:\n"
        "    top = pathlib.Path(__file__).parents[1]\n"
        "    assert not (top / 'api_token.txt').exists()\n"
        "    assert not (top / '.env.local').exists()\n"
    ),
}


def _project(tmp_path: Path, translation: str) -> Path:
    root = make_repo(tmp_path / "repo", FILES, config=_QUALITY)
    (root / "trans" / "locale" / "de.mo").write_text(translation, encoding="utf-8")
    (root / "api_token.txt").write_text("s3cret\n", encoding="utf-8")
    (root / ".env.local").write_text("TOKEN=1\n", encoding="utf-8")
    return root


def _gaps(root: Path) -> dict[str, object]:
    shown = seed(root, "gaps", "--json")
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)


def _keys(report: dict[str, object]) -> list[str]:
    return [str(g["key"]) for g in report["gaps"]]  # type: ignore[index, union-attr]


@needs_bwrap
def test_a_good_generated_file_is_used_and_passes(tmp_path: Path) -> None:
    root = _project(tmp_path, 'MSGID "HELLO"\nMSGSTR "HALLO"\n')
    report = _gaps(root)
    assert _keys(report) == []
    assert report["errors"] == []
    assert (root / "trans" / "locale" / "de.mo").exists()  # the person's file is left alone


@needs_bwrap
def test_a_broken_generated_file_fails_as_a_gap(tmp_path: Path) -> None:
    root = _project(tmp_path, "broken\n")
    keys = _keys(_gaps(root))
    assert any("test_the_compiled_translation_says_hallo" in k for k in keys), keys
    # the secret-named files stayed unseen: that test still passes
    assert not any("test_no_secret" in k for k in keys), keys


@needs_bwrap
def test_status_lists_the_shown_files_and_never_a_secret(tmp_path: Path) -> None:
    root = _project(tmp_path, "HALLO\n")
    status = json.loads(seed(root, "status", "--json").stdout)
    said = "\n".join(status["differences"])
    assert "1 git-ignored files (6 bytes)" in said and "trans/locale/de.mo" in said
    assert "token" not in said and ".env" not in said
    assert "differs:" in seed(root, "status").stdout


def test_with_the_sandbox_off_nothing_is_shown_and_status_says_why(tmp_path: Path) -> None:
    root = _project(tmp_path, "broken\n")
    (root / "seed.toml").write_text(_QUALITY + '[guard]\nsandbox = "off"\n', encoding="utf-8")
    status = json.loads(seed(root, "status", "--json").stdout)
    assert any("sandbox is off" in line for line in status["differences"])


def test_tests_that_skip_for_a_missing_file_are_named_in_differences(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", FILES, config=_QUALITY)  # make_mo.py never ran
    report = _gaps(root)
    assert _keys(report) == []
    assert report["errors"] == []
    said = cast(list[str], report["differences"])
    assert "1 tests skip in seed's runs: de.mo missing: run make_mo.py" in said, said
    seed(root, "once")  # the daemon's analysis keeps what it found for status
    status = json.loads(seed(root, "status", "--json").stdout)
    assert any("1 tests skip in seed's runs" in d for d in status["differences"]), status


NETWORK = {
    ".gitignore": "__pycache__/\nhistory/\n",
    "tests/test_net.py": (
        "import socket\nimport urllib.request\n\n\n"
        "def test_fetches_a_page() -> None:\n"
        "    urllib.request.urlopen('http://example.com/', timeout=5)\n\n\n"
        "def test_resolves_a_name() -> None:\n"
        "    socket.create_connection(('pypi.org', 443), timeout=5)\n\n\n"
        "def test_a_real_failure() -> None:\n"
        "    assert 1 == 2\n"
    ),
}


@needs_bwrap
def test_a_test_that_needs_the_network_is_a_difference_not_a_gap(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", NETWORK, config=_QUALITY)
    report = _gaps(root)
    keys = _keys(report)
    assert any("test_a_real_failure" in k for k in keys), keys
    assert not any("test_fetches_a_page" in k or "test_resolves_a_name" in k for k in keys), keys
    said = cast(list[str], report["differences"])
    assert "2 tests need the network: they fail in seed's sandbox" in " ".join(said), said
    assert report["errors"] == []


SOURCES = {
    **FILES,
    "tests/test_po.py": (
        "import pathlib\n\n"
        "PO = pathlib.Path(__file__).parents[1] / 'trans' / 'locale' / 'de.po'\n\n\n"
        "def test_the_source_says_hallo() -> None:\n"
        "    assert 'hallo' in PO.read_text()\n"
    ),
    "trans/locale/de.po": 'msgid "hello"\nmsgstr "hullo"\n',
}


@needs_bwrap
def test_a_change_to_a_shown_files_source_is_kept_and_the_file_never_lands(
    tmp_path: Path,
) -> None:
    steps = [{"replace": "trans/locale/de.po", "old": "hullo", "new": "hallo"}]
    config = agent_config(tmp_path, steps, extra=_QUALITY)
    root = make_repo(tmp_path / "repo", SOURCES, config=config)
    (root / "trans" / "locale" / "de.mo").write_text("HALLO\n", encoding="utf-8")
    head = git(root, "rev-parse", "HEAD").strip()
    seed(root, "once")
    [record] = records(root)
    assert record["outcome"] == "KEPT", record["reason"]
    assert "trans/locale/de.mo" in record["reason"] and "cannot rebuild" in record["reason"]
    assert git(root, "rev-parse", "HEAD").strip() == head  # nothing landed
    kept = git(root, "ls-tree", "-r", "--name-only", record["kept_branch"])
    assert "trans/locale/de.po" in kept and "de.mo" not in kept  # never in a tree
    assert (root / "trans" / "locale" / "de.mo").read_text() == "HALLO\n"


MANY = {
    ".gitignore": "__pycache__/\nhistory/\n",
    "calc.py": "READY = True\n\n\ndef add(a: int, b: int) -> int:\n    return a - b\n",
    "tests/test_calc.py": "from calc import add\n\n\ndef test_add() -> None:\n    assert add(1, 1) == 2\n",
    "tests/test_many.py": "import pytest\n\nimport calc\n\n\n"
    + "".join(
        f"@pytest.mark.skipif(not calc.READY, reason='not ready')\ndef test_{n}() -> None:\n"
        "    assert True\n\n\n"
        for n in range(6)
    ),
}


@needs_bwrap
def test_a_jump_in_skipped_tests_is_evidence_in_the_record(tmp_path: Path) -> None:
    steps = [
        {"replace": "calc.py", "old": "a - b", "new": "a + b"},
        {"replace": "calc.py", "old": "READY = True", "new": "READY = False"},
    ]
    root = make_repo(tmp_path / "repo", MANY, config=agent_config(tmp_path, steps, extra=_QUALITY))
    seed(root, "once")
    [record] = records(root)
    said = "\n".join(record["evidence"])
    assert "skipped tests rose from 0 at the base to 6" in said, record
