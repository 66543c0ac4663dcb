"""The allowlist: the gap's files, their module folder and their tests; never free text's paths."""

from __future__ import annotations

import pytest

from kernel.contracts import matches_any
from modules.planner import allowlist
from modules.planner.allowlist import (
    ROOT_DOCS,
    STUBS,
    clean_path,
    covered,
    derive,
    globs_for_tests,
    module_of,
    package_of,
)
from modules.planner.fsport import MemoryFS
from modules.planner.tests.factory import (
    TREE as TREE_FILES,
)
from modules.planner.tests.factory import (
    fs,
    inbox_gap,
    lint_gap,
    must_plan,
    plan,
    pytest_gap,
    state,
)


def test_a_module_file_brings_its_module_folder() -> None:
    tree = fs()
    assert module_of("modules/planner/planner.py", tree) == "modules/planner"
    assert module_of("calc.py", tree) is None
    allowed = derive(["modules/planner/planner.py"], tree, (), wide=True)
    assert allowed[:2] == ("modules/planner/planner.py", "modules/planner/**")
    assert covered("modules/planner/tests/test_new.py", allowed)
    assert not covered("modules/other/x.py", allowed)


def test_a_folder_with_a_spec_is_a_module_anywhere() -> None:
    tree = fs({"src/pkg/SPEC.md": "", "src/pkg/deep/a.py": ""})
    assert module_of("src/pkg/deep/a.py", tree) == "src/pkg"


def test_a_source_file_brings_its_tests() -> None:
    assert globs_for_tests("pkg/calc.py") == (
        "tests/**/test_calc.py",
        "tests/**/test_calc_*.py",
        "pkg/tests/**",
        "pkg/test_calc.py",
    )
    assert globs_for_tests("tests/test_calc.py") == ("tests/test_calc.py",)
    allowed = derive(["calc.py"], fs(), (), wide=True)
    assert covered("tests/unit/test_calc.py", allowed)
    assert not covered("tests/test_other.py", allowed)


def test_type_and_test_gaps_get_the_wide_allowlist_lint_gaps_only_their_files() -> None:
    typed = lint_gap("modules/planner/planner.py", "reportX", "pyright")
    assert "modules/planner/**" in must_plan([typed]).allowed_paths
    lint = lint_gap("modules/planner/planner.py", "F401", "ruff")
    assert must_plan([lint]).allowed_paths == ("modules/planner/planner.py",)
    failing = must_plan([pytest_gap()])
    assert covered("calc.py", failing.allowed_paths)
    assert covered("tests/test_calc.py", failing.allowed_paths)
    assert not covered("domain/models.py", failing.allowed_paths)


def test_a_suite_that_does_not_run_may_be_fixed_anywhere() -> None:
    gap = pytest_gap().model_copy(update={"key": "pytest:run", "evidence": (), "files": ()})
    assert must_plan([gap]).allowed_paths == ()


def test_an_inbox_items_allowed_and_forbidden_lists_are_kept_clean() -> None:
    gap = inbox_gap(
        allowed=["src/**", "../escape.py", "/etc/passwd", "kernel/**", "docs/a\nb.md"],
        forbidden=["src/secret.py", "/abs"],
    )
    result = must_plan([gap])
    assert result.allowed_paths == ("src/**",)
    assert result.forbidden_paths == ("src/secret.py",)


def test_an_item_allowed_only_protected_paths_is_refused() -> None:
    gap = inbox_gap(allowed=["kernel/**", "seed.toml"])
    assert plan([gap]) is None


def test_paths_are_cleaned() -> None:
    assert clean_path("./src//a.py") == "src/a.py"
    assert clean_path("src/") == "src/"
    for bad in ("", "/abs", "../x", "a/../../x", "a\x00b", "a\nb"):
        assert clean_path(bad) is None, bad


def test_derived_entries_under_a_protected_path_are_dropped() -> None:
    result = must_plan([pytest_gap()], st=state(protected=("tests/**",)))
    assert result.allowed_paths == ("calc.py", *ROOT_DOCS, STUBS)  # a fix's docs come with it
    assert result.suspect_files == ("calc.py",)


_GLOB_PATHS = (
    "kernel",
    "kernel/a.py",
    "seed.py",
    "sub/seed.py",
    "tests/test_a.py",
    "tests/unit/test_ab.py",
    "tests/unit/b.py",
    "docs/x/y.md",
    "README.md",
    "d/README.md",
    "a/b.py",
    "a/bc.py",
    "q/r/x",
)


@pytest.mark.parametrize(
    ("pattern", "matched"),
    [
        ("kernel/**", ["kernel", "kernel/a.py"]),
        ("seed.py", ["seed.py"]),
        ("tests/**/test_a*.py", ["tests/test_a.py", "tests/unit/test_ab.py"]),
        ("docs", ["docs/x/y.md"]),
        ("*.md", ["README.md"]),
        ("a/?.py", ["a/b.py"]),
        ("**/x", ["docs/x/y.md", "q/r/x"]),
    ],
)
def test_the_planner_matches_globs_as_the_kernel_does(pattern: str, matched: list[str]) -> None:
    # one matcher (kernel/contracts.py): its semantics pinned, anchored at the root,
    # `**` spanning folders, a folder covering what is below it
    assert [p for p in _GLOB_PATHS if allowlist.matches_any(p, [pattern])] == matched


def test_a_source_file_brings_its_package_but_never_the_root_or_a_test_folder() -> None:
    files = {
        "pkg/__init__.py": "",
        "pkg/a.py": "",
        "loose/b.py": "",
        "top.py": "",
        "tests/t.py": "",
    }
    assert package_of("pkg/a.py", fs(files)) == "pkg"
    assert package_of("loose/b.py", fs(files)) is None  # a folder without __init__.py
    assert package_of("top.py", fs(files)) is None
    assert package_of("tests/t.py", fs(files)) is None
    assert "pkg/**" in derive(["pkg/a.py"], fs(files), (), wide=True)
    assert "pkg/**" not in derive(["pkg/a.py"], fs(files), (), wide=False)


def test_a_feature_plan_allows_its_docs_but_not_what_decides_verification() -> None:
    """Issue 40: a real feature updates its docs, README and changelog with its code; the
    files that decide verification stay out unless the task names them."""
    files = {
        **TREE_FILES,
        "docs/conf.py": "project = 'x'\n",
        "docs/colls.rst": "Colls\n=====\n",
        "README.md": "# x\n",
        "tests/conftest.py": "",
    }
    gap = inbox_gap(title="Add a sub function to calc.py")
    plan = must_plan([gap], files=files)
    allowed = plan.allowed_paths
    for path in ("calc.py", "docs/colls.rst", "docs/conf.py", "README.md", "CHANGELOG.md"):
        assert covered(path, allowed), (path, allowed)
    assert covered("calc.pyi", allowed)
    for path in ("tests/conftest.py", "pyproject.toml", "requirements.txt"):
        assert matches_any(path, plan.forbidden_paths), (path, plan.forbidden_paths)
    # a task that names a verification file may change it
    named = must_plan(
        [inbox_gap(title="Add a sub function to calc.py and tests/conftest.py")], files=files
    )
    assert not matches_any("tests/conftest.py", named.forbidden_paths)


def test_the_docs_folder_is_the_one_the_config_names() -> None:
    mk = allowlist.docs_folders(
        MemoryFS({"mkdocs.yml": "docs_dir: site_src\n", "site_src/i.md": ""})
    )
    assert mk == ("site_src",)
    sphinx = allowlist.docs_folders(MemoryFS({"documentation/conf.py": "", "docs/x.md": ""}))
    assert sphinx == ("documentation",)
    assert allowlist.docs_folders(MemoryFS({"doc/x.rst": ""})) == ("doc",)


def test_a_feature_whose_words_name_only_a_changelog_is_not_held_to_it() -> None:
    """validators' "add validators for base16 and base32 ... fix: typos in CHANGES.md": the
    changelog is the only file the words name; the code it asks for is somewhere else."""
    files = {**TREE_FILES, "CHANGES.md": "# changes\n"}
    gap = inbox_gap(title="add base16 validators; fix: typos in `CHANGES.md`")
    plan = must_plan([gap], files=files)
    assert plan.allowed_paths == ()  # any file the guard does not protect
    assert matches_any("pyproject.toml", plan.forbidden_paths)  # verification's files still out
