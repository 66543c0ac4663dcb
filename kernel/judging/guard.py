"""The guard: every plan is clamped before its agent runs, and every diff is inspected before
the verifier runs anything on it.

The clamp drops protected paths from a plan, keeps catalogue checks only and caps its budget
from config.

Protected paths and path safety are SANDBOX_VIOLATION, a path outside the plan's allowlist
is ALLOWLIST_VIOLATION, weakened tests are HYGIENE_VIOLATION (read from syntax trees, not
text), growth over the risk class's limits is GROWTH_LIMIT, and a public function or class of
the base left defined nowhere in the tree, for a gap that does not name it, is
PUBLIC_NAME_REMOVED.
"""

from __future__ import annotations

import os
import posixpath
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from domain import (
    AcceptanceCriterion,
    CheckName,
    FailureCategory,
    IterationPlan,
    PlanBudget,
    TaskKind,
)
from kernel import asks
from kernel.config import Config, GrowthConfig, GuardConfig
from kernel.contracts import matches, matches_any, protected_patterns
from kernel.isolation import gitops, trees
from kernel.judging import frozen, hygiene, taskkind, uncovered
from kernel.measuring.gate import ALL_TOOLS, TYPE_CHECKS

CONFIG_NAMES = hygiene.PYTEST_FILES | {"pyproject.toml", "tox.ini", "setup.cfg"}
"""Files that may hold pytest configuration, wherever they are."""


@dataclass(frozen=True)
class Finding:
    """One thing the guard refuses."""

    category: FailureCategory
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.category.value}: {self.path}: {self.message}"


def is_test_path(path: str) -> bool:
    """Test modules and their helpers, by the conventions pytest collects."""
    pure = PurePosixPath(path)
    name = pure.name
    if name == "conftest.py":
        return True
    if name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py")):
        return True
    return any(part in ("tests", "test") for part in pure.parts[:-1])


def growth_limits(plan: IterationPlan, growth: GrowthConfig | None = None) -> tuple[int, int]:
    """(new files, changed lines) this plan may add: its risk class's limit, or less if it asks."""
    limit = (growth or GrowthConfig()).for_risk(plan.estimated_risk)
    return (
        min(plan.budget.max_new_files, limit.new_files),
        min(plan.budget.max_changed_lines, limit.changed_lines),
    )


def _path_safety(worktree: Path, change: gitops.Change, real_root: str) -> list[Finding]:
    findings: list[Finding] = []
    if any(part == ".git" for part in PurePosixPath(change.path).parts):
        findings.append(
            Finding(FailureCategory.SANDBOX_VIOLATION, change.path, "a path inside a .git folder")
        )
    if change.status == "D":
        return findings
    full = worktree / change.path
    if full.is_symlink():
        target = os.path.realpath(full)
        outside = not (target == real_root or target.startswith(real_root + os.sep))
        # the guard reads every file by its own path (conftests, pytest's configuration,
        # tests): a link would let a file be judged as one thing and run as another
        findings.append(
            Finding(
                FailureCategory.SANDBOX_VIOLATION,
                change.path,
                f"a symlink points outside the worktree ({os.readlink(full)})"
                if outside
                else f"a new or changed symlink ({os.readlink(full)}): links are refused",
            )
        )
    elif not os.path.realpath(full).startswith(real_root + os.sep):
        findings.append(
            Finding(
                FailureCategory.SANDBOX_VIOLATION, change.path, "the file lies outside the worktree"
            )
        )
    return findings


def inspect_tree(
    repo: Path,
    place: Path,
    base: str,
    changes: Sequence[gitops.Change],
    plan: IterationPlan,
    config: GuardConfig,
    lines: tuple[int, int],
    tree: tuple[str, trees.ObjectStore],
) -> list[Finding]:
    """The guard's whole pass on a tree (the first one and the one after a rebase): what the
    change may not do (`lines`: inserted, deleted) and the links it may not carry."""
    findings = inspect_changes(
        place, base, changes, plan, protected_patterns(config.protected), *lines, config, repo=repo
    )
    findings += [
        Finding(FailureCategory.SANDBOX_VIOLATION, link, why)
        for link, why in trees.unsafe_links(repo, *tree)
    ]
    findings += _removal_findings(repo, place, base, changes, plan, config.max_file_bytes)
    return findings


def _removal_findings(
    repo: Path,
    place: Path,
    base: str,
    changes: Sequence[gitops.Change],
    plan: IterationPlan,
    max_bytes: int,
) -> list[Finding]:
    """Public functions and classes of the base that the change leaves defined nowhere in the
    tree, for a gap that does not name them (a move or a duplicate removed is no removal)."""
    before: dict[str, bytes] = {}
    for change in changes:
        old = change.old_path or change.path
        if change.status == "A" or not old.endswith(".py") or is_test_path(old):
            continue
        shown = gitops.git(repo, "show", f"{base}:{old}", check=False)
        if shown.ok:
            before[old] = shown.stdout
    if not before:
        return []
    gone = uncovered.removed_names(
        before, _python_files(place, max_bytes), plan.gap.model_dump_json()
    )
    if not gone:
        return []
    names = ", ".join(g.split(": ", 1)[1] for g in gone[:10])
    return [
        Finding(
            FailureCategory.PUBLIC_NAME_REMOVED,
            gone[0].split(": ", 1)[0],
            f"removes public names the gap does not name, defined nowhere in the tree now: {names}",
        ),
        *(Finding(FailureCategory.PUBLIC_NAME_REMOVED, *g.split(": ", 1)) for g in gone),
    ]


def _python_files(place: Path, max_bytes: int) -> Iterator[tuple[str, bytes]]:
    """The tree's Python files (regular files, no links), from the export before any test ran."""
    for folder, dirs, files in os.walk(place):
        dirs[:] = [d for d in dirs if d != ".git" and not os.path.islink(os.path.join(folder, d))]
        for name in files:
            path = os.path.join(folder, name)
            if not name.endswith((".py", ".pyi")) or os.path.islink(path):
                continue
            try:
                if max_bytes and os.path.getsize(path) > max_bytes:
                    continue
                with open(path, "rb") as handle:
                    data = handle.read()
            except OSError:
                continue
            yield os.path.relpath(path, place), data


def inspect_changes(
    worktree: Path,
    base: str,
    changes: Sequence[gitops.Change],
    plan: IterationPlan,
    protected: Sequence[str],
    inserted: int,
    deleted: int,
    guard_config: GuardConfig | None = None,
    repo: Path | None = None,
) -> list[Finding]:
    """Everything the guard refuses in a change (empty when it may be verified).

    `worktree` holds the changed tree's files (the kernel's export of the candidate); the
    base's files are read from git objects in `repo` (default: the worktree's repository).
    """
    config = guard_config or GuardConfig()
    repo = repo or worktree
    findings: list[Finding] = []
    real_root = os.path.realpath(worktree)
    for change in changes:
        findings += _path_findings(change, plan, protected)
        findings += _path_safety(worktree, change, real_root)
        if change.status != "D" and config.max_file_bytes:
            findings += _size_findings(worktree, repo, base, change, config.max_file_bytes)
    at_base = trees.entry_map(repo, base)  # the base tree listed once, for modes and links
    findings += _mode_findings(worktree, at_base, changes)
    findings += _linked_findings(worktree, at_base, changes)
    for change in changes:
        findings += _hygiene_findings(worktree, repo, base, change)
    findings += _specification(worktree, repo, base, changes, plan)
    if plan.task_kind == TaskKind.DOCS:
        findings += _docs_findings(worktree, repo, base, changes)
    findings += _growth_findings(plan, config.growth, changes, inserted + deleted)
    return findings


def _path_findings(
    change: gitops.Change, plan: IterationPlan, protected: Sequence[str]
) -> list[Finding]:
    """A protected path changed, or a path outside the allowlist or inside the forbidden list."""
    findings = [
        Finding(FailureCategory.SANDBOX_VIOLATION, path, "a protected path was changed")
        for path in filter(None, (change.path, change.old_path))
        if matches_any(path, protected)
    ]
    if plan.allowed_paths and not matches_any(change.path, plan.allowed_paths):
        findings.append(
            Finding(
                FailureCategory.ALLOWLIST_VIOLATION,
                change.path,
                f"outside the plan's allowlist ({', '.join(plan.allowed_paths)}); "
                "say why it must change, or leave it",
            )
        )
    if plan.forbidden_paths and matches_any(change.path, plan.forbidden_paths):
        findings.append(
            Finding(
                FailureCategory.ALLOWLIST_VIOLATION,
                change.path,
                "a path the task forbids was changed",
            )
        )
    return findings


def _linked_findings(
    worktree: Path, at_base: dict[str, tuple[str, str]], changes: Sequence[gitops.Change]
) -> list[Finding]:
    """A change to what an existing link shows under a name the guard reads (a test, a
    conftest, pytest's configuration): the guard would judge it by the wrong name."""
    changed = {c.path for c in changes if c.status != "D"} | {
        c.old_path for c in changes if c.old_path
    }
    findings: list[Finding] = []
    for link, (mode, _oid) in at_base.items():
        if mode != "120000" or link in changed:
            continue
        if not (is_test_path(link) or PurePosixPath(link).name in CONFIG_NAMES):
            continue
        try:
            pointed = os.readlink(worktree / link)
        except OSError:
            continue
        target = posixpath.normpath(posixpath.join(posixpath.dirname(link), pointed))
        findings += [
            Finding(
                FailureCategory.SANDBOX_VIOLATION,
                path,
                f"changes what the symlink {link} shows under its name",
            )
            for path in sorted(changed)
            if path == target or path.startswith(target + "/")
        ]
    return findings


def _hygiene_findings(
    worktree: Path, repo: Path, base: str, change: gitops.Change
) -> list[Finding]:
    """A changed pytest configuration, and tests weakened (or moved where pytest does not look)."""
    names = [change.path] if not change.old_path else [change.old_path, change.path]
    config_file = any(PurePosixPath(n).name in CONFIG_NAMES for n in names)
    if not (config_file or any(is_test_path(n) for n in names)):
        return []
    findings: list[Finding] = []
    before = gitops.as_text(gitops.blob_at(repo, base, change.old_path or change.path))
    after = gitops.as_text(gitops.written(worktree, change))
    if change.old_path and hygiene.pytest_config_changed(change.old_path, before, None):
        findings.append(_config_finding(change.old_path))
    elif hygiene.pytest_config_changed(change.path, before, after):
        findings.append(_config_finding(change.path))
    old_name = change.old_path or change.path
    if (
        old_name.endswith(".py")
        and is_test_path(old_name)
        and PurePosixPath(old_name).name != "conftest.py"
    ):
        # a test file moved where pytest does not look has lost its tests
        kept = after if change.status == "D" or is_test_path(change.path) else None
        findings += [
            Finding(FailureCategory.HYGIENE_VIOLATION, change.path, message)
            for message in hygiene.weakening(before, kept)
        ]
    return findings


def _docs_findings(
    worktree: Path, repo: Path, base: str, changes: Sequence[gitops.Change]
) -> list[Finding]:
    """A documentation task that changed code (the kind the kernel fixed lets it land untested)."""
    return [
        Finding(
            FailureCategory.ALLOWLIST_VIOLATION,
            path,
            f"a documentation task changed code: {why}; a task that changes code says "
            'kind = "feature" in its front matter and comes with a test',
        )
        for path, why in taskkind.code_changes(repo, base, worktree, changes)
    ]


def _growth_findings(
    plan: IterationPlan, growth: GrowthConfig, changes: Sequence[gitops.Change], lines: int
) -> list[Finding]:
    """More new files or changed lines than the plan's risk class allows."""
    findings: list[Finding] = []
    new_files = sum(1 for c in changes if c.status == "A")
    max_files, max_lines = growth_limits(plan, growth)
    risk = plan.estimated_risk.value
    if new_files > max_files:
        findings.append(
            Finding(
                FailureCategory.GROWTH_LIMIT,
                ".",
                f"{new_files} new files; a {risk}-risk plan may add {max_files}",
            )
        )
    if lines > max_lines:
        findings.append(
            Finding(
                FailureCategory.GROWTH_LIMIT,
                ".",
                f"{lines} changed lines; a {risk}-risk plan may change {max_lines}",
            )
        )
    return findings


def _size_findings(
    worktree: Path, repo: Path, base: str, change: gitops.Change, limit: int
) -> list[Finding]:
    """A file over the size limit that this change created or made bigger."""
    full = worktree / change.path
    size = full.lstat().st_size if full.exists() or full.is_symlink() else 0
    if size <= limit:
        return []
    old = gitops.git(
        repo, "cat-file", "-s", f"{base}:{change.old_path or change.path}", check=False
    )
    before = int(old.text().strip()) if old.ok and old.text().strip().isdigit() else -1
    if 0 <= size <= before:
        return []  # an existing big file (a lock file) that did not grow
    return [
        Finding(
            FailureCategory.GROWTH_LIMIT,
            change.path,
            f"{size} bytes; [guard] max_file_bytes is {limit}",
        )
    ]


def _specification(
    worktree: Path, repo: Path, base: str, changes: Sequence[gitops.Change], plan: IterationPlan
) -> list[Finding]:
    """The gap's own tests are frozen, and no new assertion may compare a thing with itself."""
    findings: list[Finding] = []
    nodes = [
        d.node_id
        for d in plan.gap.evidence
        if plan.gap.source == "pytest" and d.node_id and d.rule in ("failed", "error")
    ]
    frozen_tests = frozen.frozen_names(nodes)
    for change in changes:
        old_name = change.old_path or change.path
        if (
            not (is_test_path(change.path) and change.path.endswith(".py"))
            and old_name not in frozen_tests
        ):
            continue
        before = gitops.as_text(gitops.blob_at(repo, base, old_name))
        after = gitops.as_text(gitops.written(worktree, change))
        if is_test_path(change.path) and change.path.endswith(".py"):
            findings += [
                Finding(FailureCategory.HYGIENE_VIOLATION, change.path, message)
                for message in frozen.empty_assertions(change.path, before, after)
            ]
        if old_name in frozen_tests:
            findings += [
                Finding(FailureCategory.HYGIENE_VIOLATION, old_name, message)
                for message in frozen.frozen_changes(
                    old_name, before, after, frozen_tests[old_name]
                )
            ]
    return findings


def _config_finding(path: str) -> Finding:
    return Finding(
        FailureCategory.HYGIENE_VIOLATION,
        path,
        "pytest configuration was changed (conftest.py, pytest.ini/.toml, or a pytest section)",
    )


def _mode_of(path: Path) -> str:
    """The git mode a file on disk would get."""
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode):
        return "120000"
    if stat.S_ISDIR(info.st_mode):
        return "160000"
    return "100755" if info.st_mode & 0o111 else "100644"


def _mode_findings(
    worktree: Path, at_base: dict[str, tuple[str, str]], changes: Sequence[gitops.Change]
) -> list[Finding]:
    """Executable test data, and nested repositories (gitlinks), in the change."""
    findings: list[Finding] = []
    for change in changes:
        path = change.path
        if change.status == "D" or (
            not (worktree / path).is_symlink() and not (worktree / path).exists()
        ):
            continue
        old_mode = at_base.get(path, ("", ""))[0]
        new_mode = _mode_of(worktree / path)
        if new_mode == "160000" and old_mode != "160000":
            findings.append(
                Finding(
                    FailureCategory.SANDBOX_VIOLATION,
                    path,
                    "a nested git repository (gitlink) was added",
                )
            )
        if (
            new_mode.endswith("755")
            and not old_mode.endswith("755")
            and is_test_path(path)
            and not path.endswith((".py", ".sh"))
        ):
            findings.append(
                Finding(FailureCategory.SANDBOX_VIOLATION, path, "test data was made executable")
            )
    return findings


_ORDER = (
    FailureCategory.SANDBOX_VIOLATION,
    FailureCategory.HYGIENE_VIOLATION,
    FailureCategory.ALLOWLIST_VIOLATION,
    FailureCategory.GROWTH_LIMIT,
    FailureCategory.PUBLIC_NAME_REMOVED,
)


def worst(findings: Sequence[Finding]) -> FailureCategory:
    """The category that decides the outcome when the guard finds several things."""
    present = {f.category for f in findings}
    return next(c for c in _ORDER if c in present)


SELFCHECK_PATHS = ("modules", "domain")
_TOOL_OF: dict[CheckName, str] = {
    CheckName.RUFF: "ruff",
    CheckName.RUFF_FORMAT: "ruff-format",
    **{check: check.value for check in TYPE_CHECKS},
    CheckName.PYTEST: "pytest",
    CheckName.PYTEST_ALL: "pytest",
}


def _touches(patterns: Sequence[str], roots: Sequence[str]) -> bool:
    for pattern in patterns:
        for root in roots:
            if (
                matches(root, pattern)
                or pattern.startswith(root + "/")
                or pattern == root
                or pattern.startswith("**")
            ):
                return True
    return False


def is_clean_path(path: str) -> bool:
    """A repository path or glob as git would name it: relative, one line, no `.`, `..` or
    empty part (a trailing `/` aside). Anything else is words, never a path to allow."""
    if not path or path.startswith("/") or any(ord(c) < 32 or ord(c) == 127 for c in path):
        return False
    parts = path.removesuffix("/").split("/")
    return all(part not in ("", ".", "..") for part in parts)


def clamp_plan(
    plan: IterationPlan,
    config: Config,
    protected: Sequence[str],
    selfhost: bool,
    tools: Sequence[str] = ALL_TOOLS,
) -> IterationPlan:
    """The plan as the kernel will run it, whatever the planner said (its kind the kernel's)."""
    plan = asks.fix_kind(plan)
    allowed = tuple(
        p
        for p in plan.allowed_paths
        if is_clean_path(p) and not matches_any(p.rstrip("/").removesuffix("/**"), protected)
    )
    if plan.allowed_paths and not allowed:
        allowed = ("__nothing__",)  # every allowed path was protected: nothing may change
    actions = tuple(
        a.model_copy(
            update={
                "target_files": tuple(
                    f for f in a.target_files if is_clean_path(f) and not matches_any(f, protected)
                )
            }
        )
        for a in plan.actions
    )
    # a check of a tool that takes no part for this target could never pass: leave it out
    criteria = [c for c in plan.criteria if _TOOL_OF.get(c.check, "") in ("", *tools)]
    targets = [f for a in actions for f in a.target_files]
    needs_selfcheck = selfhost and (not allowed or _touches((*allowed, *targets), SELFCHECK_PATHS))
    if needs_selfcheck and not any(c.check == CheckName.SELFCHECK for c in criteria):
        criteria.append(
            AcceptanceCriterion(
                check=CheckName.SELFCHECK, text="the module host boots the changed modules"
            )
        )
    limit = config.guard.growth.for_risk(plan.estimated_risk)
    max_files, max_lines = limit.new_files, limit.changed_lines
    budget = plan.budget
    clamped = PlanBudget(
        timeout_s=min(budget.timeout_s, config.agent.timeout_s),
        max_tokens=min(
            budget.max_tokens or config.budget.max_tokens_per_iteration,
            config.budget.max_tokens_per_iteration,
        ),
        max_cost_usd=min(
            budget.max_cost_usd or config.budget.max_cost_usd_per_iteration,
            config.budget.max_cost_usd_per_iteration,
        ),
        max_new_files=min(budget.max_new_files, max_files),
        max_changed_lines=min(budget.max_changed_lines, max_lines),
    )
    return plan.model_copy(
        update={
            "allowed_paths": allowed,
            "actions": actions,
            "criteria": tuple(criteria),
            "budget": clamped,
        }
    )
