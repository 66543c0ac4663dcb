"""Facts the kernel's measurements produce: one Diagnostic per finding."""

from __future__ import annotations

from pydantic import Field

from domain.base import Fact
from domain.enums import Tool


class Executed(Fact):
    """The lines of one project file a failing test executed, and how many passing tests
    of the same run executed each of them (the spectrum fault localisation ranks by)."""

    file: str
    lines: tuple[int, ...] = ()
    passing: tuple[int, ...] = ()
    """Per line in `lines`: passing tests of the localisation run that executed it."""


class Diagnostic(Fact):
    """One finding of a quality tool, in repository-relative terms."""

    tool: Tool
    file: str = ""
    """Repository-relative POSIX path; empty when the finding has no file."""
    line: int = 0
    """1-based line; 0 when unknown."""
    column: int = 0
    """1-based column; 0 when unknown."""
    rule: str = ""
    """Ruff code, pyright rule, or pytest outcome (failed, error, collection-error)."""
    message: str = ""
    severity: str = "error"
    """error or warning."""
    fixable: bool = False
    """Ruff has a safe fix for it."""
    node_id: str = ""
    """pytest node id, for test findings."""
    exc_type: str = ""
    """Exception type name, for test findings."""
    frame_file: str = ""
    """First traceback frame inside the project (repository-relative)."""
    frame_line: int = 0
    detail: str = ""
    """Longer text: the head of a traceback, capped."""
    executed: tuple[Executed, ...] = ()
    """A failing test: the project files and lines it executed (coverage.py, per test)."""
    passing_tests: int = 0
    """A failing test: the passing tests of its localisation run (the spectrum's size)."""


class Tampering(Fact):
    """Evidence that something between the tests and the kernel changed a test run's results
    (pytest's machinery replaced, a test module not loaded by pytest's own loader, an exit
    status that contradicts the facts). Evidence only: it names no file and never becomes a
    gap, a gap's file list or an allowlist."""

    what: str
    """What was seen, in words for people."""


class Measurement(Fact):
    """The result of running one catalogue tool on one tree."""

    tool: Tool
    ran: bool
    """The tool ran and its output was understood."""
    exit_code: int | None = None
    diagnostics: tuple[Diagnostic, ...] = ()
    error: str = ""
    """Why the tool could not be run or understood."""
    duration_s: float = 0.0
    collected: tuple[str, ...] = ()
    """pytest: every node id collected."""
    passed: tuple[str, ...] = ()
    """pytest: the node ids whose outcome was "passed" (not skipped, xfailed or xpassed)."""
    skips: tuple[tuple[str, int], ...] = ()
    """pytest: (reason, how many tests skipped for it), most first."""
    timed_out: bool = False
    advisory: bool = False
    """The target does not configure this tool: its findings offer no gaps, and the ratchet
    judges only the files it already passed at the baseline."""
    localised: bool = False
    """pytest: the failing tests' files were re-run under coverage (their diagnostics carry
    what each failing test executed)."""
    incremental: bool = False
    """Only changed files (and, for pyright, their importers) were checked; the findings
    of every other file were carried over from the measurement of an earlier tree."""
    suppressed: tuple[Diagnostic, ...] = ()
    """ruff, pyright: findings a suppression comment hides (`# noqa`, `# type: ignore`), and
    pyright's own suppression comments as findings. Gaps never come from them; the ratchet
    counts them with the diagnostics, so a new suppression is the finding it hides."""
    tampering: tuple[Tampering, ...] = ()
    """pytest: what changed the run's results (its facts cannot be trusted as they stand)."""


class Measurements(Fact):
    """Every measurement of one tree."""

    tree: str = ""
    """The git tree id that was measured (empty for a dirty tree)."""
    items: tuple[Measurement, ...] = Field(default=())

    def get(self, tool: Tool) -> Measurement | None:
        """The measurement of one tool, if it ran."""
        for item in self.items:
            if item.tool == tool:
                return item
        return None
