"""Mechanical repair: ruff's own fixers on the touched files, before the candidate is judged."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kernel.config import QualityConfig
from kernel.isolation import gitops, trees
from kernel.isolation.exports import Export
from kernel.judging.repair import Repair, repair
from kernel.measuring.gate import freeze_gate
from kernel.measuring.measure import measure
from tests.planted import target_for
from tests.support import make_repo

CONFIG = '[tool.ruff.lint]\nselect = ["F"]\n\n[tool.ruff.format]\n'
NEAT = "import os\n\n\ndef size(path: str) -> int:\n    return os.path.getsize(path)\n"
UGLY = "x  =  1\n"


def _repair(
    tmp: Path, files: dict[str, str], edits: dict[str, str], quality: QualityConfig
) -> tuple[Repair, Callable[[str], str]]:
    root = make_repo(tmp / "repo", files)
    base = gitops.head(root)
    assert base is not None
    gate = freeze_gate(root, tmp / "gate", quality)
    baseline = measure(root, target_for(root, strict=()), gate, tmp / "work")
    for path, text in edits.items():
        (root / path).write_text(text)
    store = trees.ObjectStore(tmp / "store", root / ".git" / "objects")
    candidate = trees.build_candidate(root, root, base, store)
    place = Export(root, tmp / "exports", candidate.tree, "candidate", store)
    touched = [c.path for c in candidate.changes]
    fixed = repair(root, store, candidate.tree, place(), touched, baseline, gate, 60, base)
    place.close()

    def blob(path: str) -> str:
        return gitops.git(root, "cat-file", "blob", f"{fixed.tree}:{path}", env=store.env()).text()

    return fixed, blob


def test_an_unused_import_and_its_blank_lines_are_repaired(tmp_path: Path) -> None:
    # the agent dropped the only use of os and left the import and two blank lines behind
    agent = "import os\n\n\n\n\ndef size(path: str) -> int:\n    return len(path)\n"
    fixed, blob = _repair(
        tmp_path, {"pyproject.toml": CONFIG, "a.py": NEAT}, {"a.py": agent}, QualityConfig()
    )
    assert blob("a.py") == "def size(path: str) -> int:\n    return len(path)\n"
    assert fixed.notes == ("ruff's safe fixes for F401: a.py", "ruff format: a.py")
    assert fixed.files == {"a.py": blob("a.py").encode()}


def test_findings_the_baseline_had_and_the_persons_lines_are_left_alone(tmp_path: Path) -> None:
    files = {
        "pyproject.toml": CONFIG,
        "a.py": NEAT.replace("os.path.getsize(path)", "1"),
        "b.py": UGLY + "\n\ndef  keep( a ):\n    return a\n",
    }
    edits = {"a.py": files["a.py"] + "y  =  2\n", "b.py": files["b.py"] + "z  =  [1,\n  2]\n"}
    fixed, blob = _repair(tmp_path, files, edits, QualityConfig())
    assert blob("a.py").startswith("import os\n")  # F401 was there before the agent
    assert blob("a.py").endswith("y = 2\n")
    # only the lines the change wrote are formatted: the person's own stay as they were
    assert blob("b.py") == files["b.py"] + "z = [1, 2]\n"
    assert fixed.notes == ("ruff format: a.py", "ruff format: b.py")


def test_a_project_without_ruff_format_gets_the_agents_bytes(tmp_path: Path) -> None:
    # formatted at the baseline is no adoption: no [tool.ruff.format], no ruff-format hook
    files = {"pyproject.toml": '[tool.ruff.lint]\nselect = ["F"]\n', "a.py": NEAT}
    agent = NEAT + "\nx  =  {'a':1}\n"
    fixed, blob = _repair(tmp_path, files, {"a.py": agent, "new.py": "y  =  2\n"}, QualityConfig())
    assert blob("a.py") == agent and blob("new.py") == "y  =  2\n"
    assert fixed.notes == () and fixed.files == {}


def test_a_ruff_format_pre_commit_hook_is_adoption(tmp_path: Path) -> None:
    hook = "repos:\n  - repo: https://github.com/astral-sh/ruff-pre-commit\n    rev: v0.17.6\n"
    hook += "    hooks:\n      - id: ruff-format\n"
    files = {".pre-commit-config.yaml": hook, "a.py": NEAT}
    fixed, blob = _repair(tmp_path, files, {"new.py": "y  =  2\n"}, QualityConfig())
    assert blob("new.py") == "y = 2\n" and fixed.notes == ("ruff format: new.py",)


def test_tools_that_take_no_part_repair_nothing(tmp_path: Path) -> None:
    agent = "import os\n\n\n\n\ndef size(path: str) -> int:\n    return len(path)\n"
    only_tests = QualityConfig(tools=["pytest"])
    fixed, blob = _repair(
        tmp_path, {"pyproject.toml": CONFIG, "a.py": NEAT}, {"a.py": agent}, only_tests
    )
    assert blob("a.py") == agent and fixed.notes == () and fixed.files == {}


def test_a_touched_file_behind_a_link_is_never_repaired_through_it(tmp_path: Path) -> None:
    # the kernel runs ruff outside the sandbox: a link in the agent's tree (as a file, or as a
    # folder on the way) must not let it rewrite a file outside the export
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.py").write_text("import os\nx  =  1\n")
    root = make_repo(tmp_path / "repo", {"pyproject.toml": CONFIG, "a.py": NEAT})
    base = gitops.head(root)
    assert base is not None
    gate = freeze_gate(root, tmp_path / "gate", QualityConfig())
    baseline = measure(root, target_for(root, strict=()), gate, tmp_path / "work")
    (root / "lib.py").symlink_to(outside / "victim.py")
    (root / "pkg").symlink_to(outside)
    store = trees.ObjectStore(tmp_path / "store", root / ".git" / "objects")
    candidate = trees.build_candidate(root, root, base, store)
    place = Export(root, tmp_path / "exports", candidate.tree, "candidate", store)
    touched = ["lib.py", "pkg/victim.py"]
    fixed = repair(root, store, candidate.tree, place(), touched, baseline, gate, 60)
    place.close()
    assert (outside / "victim.py").read_text() == "import os\nx  =  1\n"
    assert fixed.tree == candidate.tree and fixed.notes == () and fixed.files == {}
