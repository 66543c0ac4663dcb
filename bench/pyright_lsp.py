"""pyright's language server against a cold `run_pyright`, after a one-file change.

Issue 26 item 5 asks whether a resident type checker earns a place in the kernel: a re-check
of a one-file change in at most 0.10 of a cold run, with the cold run's diagnostics. This is
the prototype that measures it (bench only, no kernel code): `pyright-langserver --stdio`
(the pyright the kernel runs) in workspace diagnostic mode on a folder holding the tree,
told of each changed file with `workspace/didChangeWatchedFiles` (one stream, in order; the
client declares that it watches files, so pyright does not watch them itself). A re-check
has settled when pyright's analysis progress ends after the notification (the
`$/progress` "end" pyright sends when no file is left to check) and no message came for
`--quiet-ms` after it; the diagnostics are then the last ones published per file.

For each repository of bench/speed.py (generated 1k, 10k, 50k lines; sqlparse when its clone
is there): the server's first full check, then `--repeat` edits of one module in the middle
of the import graph (a line appended), each timed from the notification to the settled
state, against the same tree checked cold (`run_pyright`'s argv and config, timed the same
way). `--stress N` flips the return type of a module every importer uses N times (errors
move between a module and its importers) and counts re-checks whose diagnostics differ from
the cold run's. Medians, with the load average.

    .venv/bin/python -m bench.pyright_lsp                         # speed.py's repositories
    .venv/bin/python -m bench.pyright_lsp --stress 20
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.generate import MODULES_PER_PACKAGE, env_git, generate
from kernel.config import QualityConfig
from kernel.measuring.gate import Gate, freeze_gate, pyright_config, pyright_config_outside
from kernel.measuring.measure import PYRIGHT_FLAGS, Target, tool_env

REAL = Path("/work/bench-repos/sqlparse")
REAL_PYTHON = "/work/bench-venv/bin/python"
REAL_MODULE = "sqlparse/filters/right_margin.py"
_CREATED, _CHANGED, _DELETED = 1, 2, 3
"""FileChangeType in the language server protocol."""

Fact = tuple[str, int, int, str, str]
"""One error: file (relative to the tree), line, column (1-based), rule, first message line."""


def _config(gate: Gate, tree: Path, target: Target, config_dir: Path) -> Path:
    """run_pyright's config (gate settings, outside the tree) written into config_dir."""
    config_dir.mkdir(parents=True, exist_ok=True)
    own = pyright_config(gate, tree, target.strict, target.root)
    path = config_dir / "pyrightconfig.json"
    config = pyright_config_outside(own, tree, config_dir)
    (config_dir / "sync").mkdir(exist_ok=True)
    config["include"] = [*config["include"], "sync"]  # the sentinels (Server.changed)
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def cold(tree: Path, config: Path, python: str) -> tuple[float, set[Fact]]:
    """run_pyright's argv on the tree: seconds and errors."""
    argv = [sys.executable, "-m", "pyright", *PYRIGHT_FLAGS, "-p", str(config)]
    argv += ["--pythonpath", python]
    started = time.perf_counter()
    # not procs.run: it ends child processes it did not start (the language server here)
    result = subprocess.run(argv, cwd=tree, timeout=900, env=tool_env(), capture_output=True)
    took = time.perf_counter() - started
    data = cast(dict[str, Any], json.loads(result.stdout))
    facts: set[Fact] = set()
    for item in cast(list[dict[str, Any]], data.get("generalDiagnostics", [])):
        if item.get("severity") != "error" or not Path(item["file"]).is_relative_to(tree):
            continue  # a warning, or the sentinel (outside the tree)
        start = item["range"]["start"]
        facts.add(
            (
                os.path.relpath(item["file"], tree),
                start["line"] + 1,
                start["character"] + 1,
                str(item.get("rule") or "syntax"),
                str(item.get("message", "")).splitlines()[0],
            )
        )
    return took, facts


class Server:
    """One pyright-langserver over stdio: requests answered, diagnostics and progress kept."""

    def __init__(self, workspace: Path, tree: Path, python: str, fresh: bool = False) -> None:
        self.tree = tree
        self.fresh = fresh
        """A fresh sentinel per check (deleted and created) instead of one changed in place."""
        self.sync = (workspace / "sync").resolve()
        self._sentinel: Path | None = None
        self._nonce = ""
        self.python = python
        exe = Path(sys.executable).parent / "pyright-langserver"
        self._proc = subprocess.Popen(
            [str(exe), "--stdio"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=tool_env(),
            start_new_session=True,
        )
        self._ids = 0
        self._events: queue.Queue[tuple[float, str]] = queue.Queue()
        self.diagnostics: dict[str, set[Fact]] = {}
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()
        uri = workspace.resolve().as_uri()
        self._request(
            "initialize",
            {
                "processId": os.getpid(),
                "rootUri": uri,
                "workspaceFolders": [{"uri": uri, "name": "w"}],
                "capabilities": {
                    "workspace": {
                        "configuration": True,
                        "workspaceFolders": True,
                        "didChangeWatchedFiles": {
                            "dynamicRegistration": True,
                            "relativePatternSupport": True,
                        },
                    },
                    "window": {"workDoneProgress": True},
                    "textDocument": {"publishDiagnostics": {"versionSupport": True}},
                },
            },
        )
        self._notify("initialized", {})
        self.changed([])  # the first sentinel: its report ends the first full check

    def _send(self, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        assert self._proc.stdin is not None
        self._proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self._proc.stdin.flush()

    def _request(self, method: str, params: Any) -> None:
        self._ids += 1
        self._send({"id": self._ids, "method": method, "params": params})

    def _notify(self, method: str, params: Any) -> None:
        self._send({"method": method, "params": params})

    def _settings(self, section: str | None) -> Any:
        python = {"pythonPath": self.python, "analysis": {"diagnosticMode": "workspace"}}
        if section == "python":
            return python
        if section == "python.analysis":
            return python["analysis"]
        return {} if section else {"python": python}

    def _read(self) -> None:
        out = self._proc.stdout
        assert out is not None
        while True:
            length = 0
            while (line := out.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            if not line:
                self._events.put((time.perf_counter(), "exit"))
                return
            message = json.loads(out.read(length))
            method = message.get("method", "")
            if "id" in message and method:  # a request of the server's
                result: Any = None
                if method == "workspace/configuration":
                    items = message["params"]["items"]
                    result = [self._settings(i.get("section")) for i in items]
                self._send({"id": message["id"], "result": result})
            elif method == "textDocument/publishDiagnostics":
                self._events.put((time.perf_counter(), self._publish(message["params"])))
            elif method == "$/progress":
                self._events.put((time.perf_counter(), message["params"]["value"]["kind"]))
            elif method:
                self._events.put((time.perf_counter(), method))

    def _publish(self, params: dict[str, Any]) -> str:
        """Keep one file's errors; "nonce N" for a sentinel's report naming nonce N."""
        path = Path(params["uri"].removeprefix("file://"))
        if path.parent == self.sync:
            words = " ".join(str(d.get("message", "")) for d in params["diagnostics"])
            found = re.search(r"_seed_nonce_([0-9a-f]+)", words)
            return f"nonce {found[1]}" if found else "diagnostics"
        rel = os.path.relpath(path, self.tree)
        facts = {
            (
                rel,
                d["range"]["start"]["line"] + 1,
                d["range"]["start"]["character"] + 1,
                str(d.get("code") or "syntax"),
                str(d.get("message", "")).splitlines()[0],
            )
            for d in params["diagnostics"]
            if d.get("severity", 1) == 1
        }
        with self._lock:
            self.diagnostics[rel] = facts
        return "diagnostics"

    def errors(self) -> set[Fact]:
        """Every file's last published errors."""
        with self._lock:
            return set().union(*self.diagnostics.values()) if self.diagnostics else set()

    def settle(self, since: float, quiet_s: float, timeout_s: float = 600) -> float:
        """Wait until the sentinel's error naming the current nonce is published, then
        `quiet_s` of silence; the time of that publication (seconds after `since`)."""
        seen = 0.0
        deadline = time.perf_counter() + timeout_s
        while True:
            wait = quiet_s if seen else deadline - time.perf_counter()
            try:
                at, kind = self._events.get(timeout=max(0.001, wait))
            except queue.Empty:
                if seen:
                    return seen - since
                raise TimeoutError("no report named the nonce") from None
            if os.environ.get("LSP_DEBUG"):
                print(round(at - since, 3), kind, file=sys.stderr)
            if kind == "exit":
                raise RuntimeError("the language server exited")
            if kind == f"nonce {self._nonce}":
                seen = at

    def changed(self, rels: list[str]) -> float:
        """Notify changed files (already written) and a new sentinel, in one notification;
        the moment of the notification."""
        changes = [{"uri": (self.tree / rel).resolve().as_uri(), "type": _CHANGED} for rel in rels]
        changes += self._new_sentinel()
        at = time.perf_counter()
        self._notify("workspace/didChangeWatchedFiles", {"changes": changes})
        return at

    def _new_sentinel(self) -> list[dict[str, Any]]:
        """The last sentinel deleted, a new one (a fresh name and nonce) created: a new file
        goes to the end of pyright's file list, so it is checked after every file the same
        notification made dirty, and its report comes last."""
        changes: list[dict[str, Any]] = []
        if self._sentinel is not None and not self.fresh:
            # changed in place: it stays where it was added (the end, after the first check)
            self._nonce = secrets.token_hex(6)
            self._sentinel.write_text(f"_seed_nonce_{self._nonce}\n", encoding="utf-8")
            return [{"uri": self._sentinel.as_uri(), "type": _CHANGED}]
        if self._sentinel is not None:
            self._sentinel.unlink()
            changes.append({"uri": self._sentinel.as_uri(), "type": _DELETED})
        self._nonce = secrets.token_hex(6)
        self._sentinel = self.sync / f"_seed_sync_{self._nonce}.py"
        self._sentinel.write_text(f"_seed_nonce_{self._nonce}\n", encoding="utf-8")
        changes.append({"uri": self._sentinel.as_uri(), "type": _CREATED})
        return changes

    def rss_bytes(self) -> int:
        """Resident memory of the server's process group (node and its wrapper)."""
        total = 0
        for status in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = status.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == self._proc.pid:  # field 5: the process group
                total += int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        return total

    def close(self) -> None:
        try:
            self._request("shutdown", None)
            self._notify("exit", None)
            self._proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            os.killpg(self._proc.pid, 9)
            self._proc.wait()


def _tree_of(source: Path, work: Path) -> Path:
    """The repository's files (git's listing) copied into a folder of their own."""
    tree = work / "tree"
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=source, capture_output=True, check=True
    ).stdout.split(b"\0")
    for raw in filter(None, listed):
        rel = raw.decode()
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / rel, tree / rel)
    return tree


def bench_repo(
    source: Path, rel: str, python: str, work: Path, repeat: int, quiet_s: float
) -> dict[str, Any]:
    """The server's first check, then one-file edits: cold and resident seconds, soundness."""
    tree = _tree_of(source, work)
    target = Target(root=source, python=python, quality=QualityConfig())
    gate = freeze_gate(source, work / "gate", QualityConfig())
    config = _config(gate, tree, target, work / "config")
    started = time.perf_counter()
    server = Server(config.parent, tree, python)
    first = server.settle(started, quiet_s)
    colds: list[float] = []
    warms: list[float] = []
    differing = 0
    try:
        for n in range(repeat):
            path = tree / rel
            path.write_text(
                path.read_text(encoding="utf-8") + f"\n_SEED_BENCH_{n}: int = {n}\n",
                encoding="utf-8",
            )
            warms.append(server.settle(server.changed([rel]), quiet_s))
            took, facts = cold(tree, config, python)
            colds.append(took)
            differing += facts != server.errors()
        rss = server.rss_bytes()
        count = len(server.errors())
    finally:
        server.close()
    lines = sum(p.read_bytes().count(b"\n") for p in tree.rglob("*.py"))
    return {
        "lines": lines,
        "cold_s": round(statistics.median(colds), 3),
        "resident_s": round(statistics.median(warms), 3),
        "ratio": round(statistics.median(warms) / statistics.median(colds), 3),
        "resident_max_s": round(max(warms), 3),
        "first_check_s": round(first, 3),
        "errors": count,
        "differing": differing,
        "rss_mb": round(rss / 2**20),
    }


def stress(work: Path, edits: int, quiet_s: float) -> dict[str, Any]:
    """Edits that move errors between a module and its importers: re-checks against cold."""
    source = work / "stress-src"
    generate(source, 1000, planted=False)
    tree = _tree_of(source, work / "stress")
    target = Target(root=source, python=sys.executable, quality=QualityConfig())
    gate = freeze_gate(source, work / "stress-gate", QualityConfig())
    config = _config(gate, tree, target, work / "stress-config")
    server = Server(config.parent, tree, sys.executable)
    server.settle(time.perf_counter() - 60, quiet_s)
    wrong, warms, counts = 0, list[float](), list[int]()
    try:
        for n in range(edits):
            rel = "pkg0/mod0.py"
            text = (tree / rel).read_text(encoding="utf-8")
            flip = (") -> int:", ") -> str:") if n % 2 == 0 else (") -> str:", ") -> int:")
            (tree / rel).write_text(text.replace(*flip, 1), encoding="utf-8")
            warms.append(server.settle(server.changed([rel]), quiet_s))
            _, facts = cold(tree, config, sys.executable)
            counts.append(len(facts))
            wrong += facts != server.errors()
    finally:
        server.close()
    return {
        "edits": edits,
        "differing": wrong,
        "errors_per_state": sorted(set(counts)),
        "resident_s": round(statistics.median(warms), 3),
    }


def main(argv: list[str] | None = None) -> int:
    """Print one JSON line per repository, then a table with the load average."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[1000, 10000, 50000])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quiet-ms", type=float, default=20.0)
    parser.add_argument("--stress", type=int, default=0, help="only: this many flipping edits")
    args = parser.parse_args(argv)
    quiet_s = args.quiet_ms / 1000
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="seed-bench-lsp-") as raw:
        work = Path(raw)
        if args.stress:
            print(json.dumps(stress(work, args.stress, quiet_s)))
            print(f"load average before: {load_before}, after: {os.getloadavg()}")
            return 0
        results: dict[str, dict[str, Any]] = {}
        for lines in args.sizes:
            source = work / f"gen{lines}"
            generate(source, lines, planted=True)
            packages = max(1, max(MODULES_PER_PACKAGE, round(lines / 113)) // MODULES_PER_PACKAGE)
            rel = f"pkg{packages // 2}/mod5.py"
            name = f"generated {lines}"
            results[name] = bench_repo(
                source, rel, sys.executable, work / f"w{lines}", args.repeat, quiet_s
            )
            print(json.dumps({name: results[name]}), flush=True)
        if (REAL / ".git").exists():
            source = work / "sqlparse"
            env_git(work, "clone", "-q", str(REAL), str(source))
            results["sqlparse"] = bench_repo(
                source, REAL_MODULE, REAL_PYTHON, work / "wreal", args.repeat, quiet_s
            )
            print(json.dumps({"sqlparse": results["sqlparse"]}), flush=True)
    print(
        "\n| repository | lines | cold s | resident s | resident / cold | max s | first s |"
        " errors | differing | RSS MiB |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, r in results.items():
        print(
            f"| {name} | {r['lines']} | {r['cold_s']} | {r['resident_s']} | {r['ratio']} |"
            f" {r['resident_max_s']} | {r['first_check_s']} | {r['errors']} | {r['differing']} |"
            f" {r['rss_mb']} |"
        )
    print(f"\nload average (1, 5, 15 min) before: {load_before}, after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
