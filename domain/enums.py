"""Closed vocabularies shared by the kernel and the modules."""

from __future__ import annotations

from enum import StrEnum


class GapCategory(StrEnum):
    """Where a gap comes from."""

    QUALITY = "quality"
    INBOX = "inbox"
    ROADMAP = "roadmap"


class Severity(StrEnum):
    """How urgent a gap is; the ranked order of a GapReport is the authority."""

    CRITICAL = "critical"
    HIGH = "high"
    NORMAL = "normal"
    LOW = "low"


class Tool(StrEnum):
    """The catalogue of measurements the kernel can run."""

    RUFF = "ruff"
    RUFF_FORMAT = "ruff-format"
    PYRIGHT = "pyright"
    MYPY = "mypy"
    PYTEST = "pytest"
    PY_COMPILE = "py_compile"
    SELFCHECK = "selfcheck"


class CheckName(StrEnum):
    """Acceptance checks the verifier knows; nothing else can be asked of it."""

    RUFF = "ruff"
    RUFF_FORMAT = "ruff_format"
    PYRIGHT = "pyright"
    MYPY = "mypy"
    PYTEST = "pytest"
    PYTEST_ALL = "pytest_all"
    PY_COMPILE = "py_compile"
    SELFCHECK = "selfcheck"
    GAP_CLOSED = "gap_closed"


class Risk(StrEnum):
    """Estimated risk of a plan; it sets the growth limits the guard applies."""

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


class ActionType(StrEnum):
    """What a planned action does to its target files."""

    CREATE = "create"
    MODIFY = "modify"
    DELETE = "delete"


class TaskKind(StrEnum):
    """The kind of work a plan asks for; memory keeps success rates per kind."""

    FIX_TEST = "fix_test"
    FIX_TYPES = "fix_types"
    FIX_LINT = "fix_lint"
    FEATURE = "feature"
    REFACTOR = "refactor"
    DOCS = "docs"
    """Documentation, comments or docstrings only: no new test, and no code changed (the kernel
    fixes this kind from what the task asks and its front matter, kernel/asks.py)."""


class IterationOutcome(StrEnum):
    """How an iteration ended."""

    SUCCESS = "SUCCESS"
    ROLLBACK = "ROLLBACK"
    FAILURE = "FAILURE"
    NO_CHANGE = "NO_CHANGE"
    WAITING = "WAITING"
    MERGE_BLOCKED = "MERGE_BLOCKED"
    KEPT = "KEPT"
    """Verified except for base tests the change deliberately edits: kept on a branch for a
    person (`seed.py approve ITER`)."""
    ABORTED = "ABORTED"
    PROPOSED = "PROPOSED"
    """Verified and pushed to the person's remote as seed/<id> (`[landing] mode` "branch" or
    "pr"), waiting there; with "pr", its pull request is the record's `pull_request`."""
    LIMITED = "LIMITED"
    """The run's model answered a usage or rate limit (its upstream's status and headers, or
    the CLI's structured result): no failure of anyone's; the daemon waits for the reset."""


class FailureCategory(StrEnum):
    """Why an iteration did not land."""

    TEST_REGRESSION = "TEST_REGRESSION"
    """A test that passed at the base fails after the change (or a new or changed test fails)."""
    GAP_NOT_CLOSED = "GAP_NOT_CLOSED"
    """The gap's own tests still fail and nothing that passed at the base fails (ROLLBACK;
    never halts by itself)."""
    TEST_TIMEOUT = "TEST_TIMEOUT"
    FLAKY_TEST = "FLAKY_TEST"
    COMPILATION_ERROR = "COMPILATION_ERROR"
    TYPE_ERROR = "TYPE_ERROR"
    LINT_ERROR = "LINT_ERROR"
    IMPORT_ERROR = "IMPORT_ERROR"
    SANDBOX_VIOLATION = "SANDBOX_VIOLATION"
    HYGIENE_VIOLATION = "HYGIENE_VIOLATION"
    ALLOWLIST_VIOLATION = "ALLOWLIST_VIOLATION"
    BUDGET_EXCEEDED = "BUDGET_EXCEEDED"
    GROWTH_LIMIT = "GROWTH_LIMIT"
    RUN_LIMIT = "RUN_LIMIT"
    """A run passed a bound on what it may use of the daemon: it ends, the daemon goes on."""
    PUBLIC_NAME_REMOVED = "PUBLIC_NAME_REMOVED"
    FITNESS_REGRESSION = "FITNESS_REGRESSION"
    AGENT_ERROR = "AGENT_ERROR"
    AGENT_TIMEOUT = "AGENT_TIMEOUT"
    MERGE_BLOCKED = "MERGE_BLOCKED"
    STUCK = "STUCK"
    """The run's model requests repeated with no change: ended before its caps (FAILURE; a
    failure of the run, not evidence about the gap's scope)."""
    UNKNOWN = "UNKNOWN"


class Priority(StrEnum):
    """Priority a person gives an inbox item."""

    CRITICAL = "critical"
    HIGH = "high"
    NORMAL = "normal"
    LOW = "low"
