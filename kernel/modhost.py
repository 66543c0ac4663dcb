"""The module host's life: boot with the self-check, restart after a landed module change,
and fall back to the last commit whose modules passed the self-check.

The last good commit is the ref refs/seed/last-good in seed's own repository; a fallback
runs the modules from a worktree of it under <git-common-dir>/seed/last-good. The kernel
itself never falls back: it is protected and only people change it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from kernel import gitops
from kernel.context import Context
from kernel.errors import HostError
from kernel.fsutil import atomic_write_text
from kernel.host import ModuleHost
from kernel.selfcheck import selfcheck

LAST_GOOD_REF = "refs/seed/last-good"
RELOAD_PATHS = ("modules/", "domain/")
"""A landed change under these paths reloads the module host (when seed works on itself)."""


def _seed_repo(home: Path) -> Path | None:
    result = gitops.git(home, "rev-parse", "--show-toplevel", check=False)
    return Path(result.text().strip()).resolve() if result.ok else None


def _code_is_committed(repo: Path) -> bool:
    """Whether modules/ and domain/ in seed's checkout are exactly HEAD's (so HEAD is what was checked)."""
    status = gitops.git(repo, "status", "--porcelain", "--", "modules", "domain", check=False)
    return status.ok and not status.text().strip()


def _fallback_dir(repo: Path) -> Path:
    return gitops.common_dir(repo) / "seed" / "last-good"


def _start(ctx: Context, code_dir: Path, check: bool) -> tuple[bool, str]:
    """Start a host from code_dir (after its self-check when check is set); (ok, why not)."""
    evidence = "started"
    if check:
        ok, evidence = selfcheck(code_dir, ctx.paths.state / "selfcheck.log")
        if not ok:
            return False, f"self-check failed: {evidence}"
    host = ModuleHost(code_dir, ctx.paths.state / "host.log")
    try:
        host.start()
    except HostError as exc:
        return False, str(exc)
    ctx.host.stop()
    ctx.host = host
    return True, evidence


def boot(ctx: Context, *, record: bool = True) -> str:
    """Start the module host from seed's own code, or from the last good commit if that fails.

    Returns what happened, for the log. record=False (read-only commands) skips the
    self-check and leaves no event, inbox item or ref behind.
    """
    home = ctx.paths.seed_home
    ok, why = _start(ctx, home, check=record)
    repo = _seed_repo(home)
    if ok:
        if record and repo is not None and _code_is_committed(repo):
            head = gitops.head(repo)
            if head:
                gitops.git(repo, "update-ref", LAST_GOOD_REF, head)
        _drop_fallback_worktree(repo)
        return f"modules loaded from {home} ({why})"
    if repo is None:
        raise HostError(
            f"the modules in {home} do not load and there is no git history to fall back to: {why}"
        )
    good = gitops.git(
        repo, "rev-parse", "--verify", "--quiet", f"{LAST_GOOD_REF}^{{commit}}", check=False
    )
    if not good.ok:
        raise HostError(
            f"the modules in {home} do not load and no commit has passed the self-check yet: {why}"
        )
    commit = good.text().strip()
    where = _fallback_dir(repo)
    if not (where / ".git").exists() or gitops.head(where) != commit:
        gitops.worktree_remove(repo, where)
        gitops.worktree_add(repo, where, commit)
    started, fallback_why = _start(ctx, where, check=False)
    if not started:
        raise HostError(
            f"the modules in {home} do not load ({why}), nor do those of {commit[:12]}: {fallback_why}"
        )
    head = gitops.head(repo) or "HEAD"
    message = (
        f"the modules at {head[:12]} do not load ({why}); running the modules of {commit[:12]}"
    )
    if record:
        ctx.store.event("module_fallback", message, reason=why, last_good=commit)
        _report_breakage(ctx, repo, why, commit)
    return message


def _drop_fallback_worktree(repo: Path | None) -> None:
    if repo is None:
        return
    where = _fallback_dir(repo)
    if where.exists():
        with contextlib.suppress(gitops.GitError):
            gitops.worktree_remove(repo, where)


def _report_breakage(ctx: Context, repo: Path, why: str, last_good: str) -> None:
    """Drop an inbox item that describes the breakage, so the loop repairs it (once per HEAD)."""
    head = gitops.head(repo) or "unknown"
    name = f"module-fallback-{head[:12]}.md"
    inbox = ctx.paths.inbox
    already = [
        p
        for p in (
            inbox / name,
            inbox / ".active" / name,
            inbox / "done" / name,
            inbox / "failed" / name,
        )
        if p.exists()
    ]
    if already:
        return
    text = (
        "+++\n"
        f'title = "Repair the modules: they fail to load at {head[:12]}"\n'
        'priority = "critical"\n'
        "+++\n"
        f"The module host could not start from the modules at commit {head} "
        f"(self-check or import failure), so the daemon runs the modules of the last good commit {last_good} "
        f"instead.\n\nWhat failed:\n\n    {why}\n\n"
        "Find the change since the last good commit that breaks loading and fix it; "
        "`python seed.py selfcheck` must pass.\n"
    )
    inbox.mkdir(parents=True, exist_ok=True)
    atomic_write_text(inbox / name, text)
    ctx.log(f"dropped inbox/{name} describing the module breakage ({datetime.now(UTC):%H:%M:%S})")


def needs_reload(ctx: Context, touched: Sequence[str]) -> bool:
    """A landed change that touched modules/ or domain/ of seed itself."""
    return ctx.paths.selfhost and any(path.startswith(RELOAD_PATHS) for path in touched)


def reload_after_landing(ctx: Context, touched: Sequence[str]) -> str:
    """Restart the host so the landed modules run (falling back if they do not load)."""
    if not needs_reload(ctx, touched):
        return ""
    message = boot(ctx)
    ctx.log(f"reloaded the module host after a landed module change: {message}")
    return message


__all__ = ["LAST_GOOD_REF", "boot", "needs_reload", "reload_after_landing"]
