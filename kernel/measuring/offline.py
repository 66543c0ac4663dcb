"""Tests that fail only for want of the network, in a run the sandbox cut off from it: named
as a difference ("17 tests need the network"), never a gap. Read at the analysis of HEAD
only; the judge still counts any test that passed at the base and fails after a change."""

from __future__ import annotations

from domain import Diagnostic, Measurements, Tool

_EXC_TYPES = frozenset(
    {
        "ConnectionRefusedError",
        "socket.gaierror",
        "gaierror",
        "urllib.error.URLError",
        "URLError",
        "requests.exceptions.ConnectionError",
        "httpx.ConnectError",
        "urllib3.exceptions.NewConnectionError",
        "urllib3.exceptions.MaxRetryError",
        "urllib3.exceptions.NameResolutionError",
    }
)
"""Exceptions a refused connection or a name that does not resolve raises."""
_WORDS = (
    "Temporary failure in name resolution",
    "Name or service not known",
    "Network is unreachable",
    "Connection refused",
    "No matching distribution found",
    "Could not fetch URL",
)
"""What a message says when a connection, a name or a package index cannot be reached."""


def _offline(d: Diagnostic) -> bool:
    """Whether a failing test's error is one of a network that is not there."""
    text = f"{d.message}\n{d.detail}"
    return bool(d.node_id) and (d.exc_type in _EXC_TYPES or any(w in text for w in _WORDS))


def split_offline(measured: Measurements, cut: bool) -> tuple[Measurements, tuple[str, ...]]:
    """The measurements without the pytest failures of tests that need the network (when
    the sandbox `cut` it), and the difference that names them."""
    pytest = measured.get(Tool.PYTEST)
    if not cut or pytest is None:
        return measured, ()
    offline = {d.node_id for d in pytest.diagnostics if _offline(d)}
    if not offline:
        return measured, ()
    kept = tuple(d for d in pytest.diagnostics if d.node_id not in offline)
    items = tuple(
        m.model_copy(update={"diagnostics": kept}) if m is pytest else m for m in measured.items
    )
    said = f"{len(offline)} tests need the network: they fail in seed's sandbox, which has none"
    return measured.model_copy(update={"items": items}), (said,)
