"""mypy where the project configures it: found, frozen from the baseline commit, run the
project's way in the sandbox, and its findings parsed (Tool.MYPY).

mypy is adopted from its configuration (`mypy.ini`, `.mypy.ini`, `[tool.mypy]`, `setup.cfg
[mypy]`), a mypy pre-commit hook, or a tox/nox command that runs it. It checks what the
project names: the paths and allow-listed flags of its tox/nox command, else its config's
`files`/`packages`/`modules`, else the whole tree. The configuration is the baseline's copy
in the gate's folder (with its `.py` plugins), so the change cannot relax it; options that
write (reports, the cache) are dropped, and the cache goes nowhere (`--no-incremental
--cache-dir /dev/null`). The mypy of the target's environment runs, else seed's own with
`--python-executable` (as seed's pyright resolves imports with the target's interpreter);
either in the test runs' sandbox, since a plugin or an editable install is the project's code.
"""

from __future__ import annotations

import configparser
import contextlib
import hashlib
import importlib.metadata
import json
import os
import posixpath
import re
import shlex
import sys
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import tomli_w

from domain import CheckName, Diagnostic, Measurement, Tool
from kernel.isolation import procs, sandbox
from kernel.isolation.jails import Jail
from kernel.measuring import pins

Read = Callable[[str], str | None]

_WRITING = frozenset(
    {
        "cache_dir",
        "sqlite_cache",
        "incremental",
        "python_executable",
        "install_types",
        "non_interactive",
        "junit_xml",
        "junit_format",
        "any_exprs_report",
        "cobertura_xml_report",
        "html_report",
        "linecount_report",
        "linecoverage_report",
        "lineprecision_report",
        "txt_report",
        "xml_report",
        "xslt_html_report",
        "xslt_txt_report",
    }
)
"""Config options that make mypy write files or install packages: dropped from the copy."""

_BOOL_FLAGS = frozenset(
    {
        "--strict",
        "--ignore-missing-imports",
        "--check-untyped-defs",
        "--disallow-untyped-defs",
        "--disallow-incomplete-defs",
        "--disallow-untyped-calls",
        "--disallow-untyped-decorators",
        "--disallow-any-generics",
        "--disallow-subclassing-any",
        "--warn-unused-ignores",
        "--warn-redundant-casts",
        "--warn-return-any",
        "--warn-unreachable",
        "--no-implicit-optional",
        "--no-implicit-reexport",
        "--strict-equality",
        "--namespace-packages",
        "--no-namespace-packages",
        "--explicit-package-bases",
        "--no-warn-no-return",
        "--allow-redefinition",
        "--local-partial-types",
    }
)
_VALUED_FLAGS = frozenset(
    {
        "-p",
        "--package",
        "-m",
        "--module",
        "--python-version",
        "--platform",
        "--enable-error-code",
        "--disable-error-code",
        "--exclude",
        "--follow-imports",
        "--always-true",
        "--always-false",
    }
)
"""The flags of a project's mypy command seed keeps (allow-listed): they change what mypy
checks, never what it writes."""
_DROPPED_VALUED = frozenset(
    {"--junit-xml", "--junit-format", "--cache-dir", "--python-executable", "--custom-typeshed-dir"}
)
"""Flags seed leaves out that take a value (with every `--*-report DIR`): they write or
point mypy elsewhere."""


NOT_CONFIGURED = (
    "mypy: off (no [tool.mypy], mypy.ini, .mypy.ini, setup.cfg [mypy], mypy pre-commit hook "
    "or tox/nox command running mypy)"
)


@dataclass(frozen=True)
class Setup:
    """How a project runs mypy, as read from its files ("" where: it does not)."""

    where: str = ""
    """How the project adopts mypy, for `status` ("": it does not)."""
    config: str = ""
    """The configuration file mypy reads, repository-relative ("": none)."""
    args: tuple[str, ...] = ()
    """Paths and allow-listed flags of the project's own mypy command."""
    command: str = ""
    """Where `args` come from ("": mypy's own default, its config's files or the tree)."""
    dropped: tuple[str, ...] = ()
    """Flags of the project's command seed does not pass (they write, or are not known)."""
    env: str = ""
    """The tox env that runs the project's mypy: its virtualenv (`.tox/<env>`) in the person's
    checkout is the target's environment for mypy when it has mypy ("": none)."""


def _ini(text: str | None) -> configparser.RawConfigParser:
    parser = configparser.RawConfigParser(strict=False)
    with contextlib.suppress(configparser.Error):
        parser.read_string(text or "")
    return parser


def _toml(text: str | None) -> dict[str, Any]:
    try:
        return tomllib.loads(text or "")
    except tomllib.TOMLDecodeError:
        return {}


def _tool_mypy(text: str | None) -> dict[str, Any] | None:
    tool = _toml(text).get("tool")
    found = cast(dict[str, Any], tool).get("mypy") if isinstance(tool, dict) else None
    return cast(dict[str, Any], found) if isinstance(found, dict) else None


def config_file(read: Read) -> tuple[str, str] | None:
    """(file, how it configures mypy) of the configuration mypy itself picks, in its order."""
    for name in ("mypy.ini", ".mypy.ini"):
        if read(name) is not None:
            return name, name
    if _tool_mypy(read("pyproject.toml")) is not None:
        return "pyproject.toml", "[tool.mypy] in pyproject.toml"
    if _ini(read("setup.cfg")).has_section("mypy"):
        return "setup.cfg", "[mypy] in setup.cfg"
    return None


_HOOK = re.compile(
    r"pre-commit/mirrors-mypy|^\s*-\s*id:\s*['\"]?mypy['\"]?\s*$", re.MULTILINE | re.IGNORECASE
)
_NOX_RUN = re.compile(
    r"session\.run\(\s*(?:['\"]python['\"]\s*,\s*['\"]-m['\"]\s*,\s*)?['\"]mypy['\"]"
    r"(?P<rest>(?:\s*,\s*['\"][^'\"]*['\"])*)"
)
_STRING = re.compile(r"['\"]([^'\"]*)['\"]")


def _tox_commands(text: str | None) -> list[tuple[str, list[str]]]:
    """(section, words after `mypy`) of each tox command that runs mypy."""
    parser = _ini(text)
    found: list[tuple[str, list[str]]] = []
    for section in parser.sections():
        if not section.startswith("testenv"):
            continue
        for line in parser.get(section, "commands", fallback="").splitlines():
            line = re.sub(r"\{posargs:([^}]*)\}", r"\1", line.strip().removeprefix("- "))
            try:
                words = shlex.split(line)
            except ValueError:
                continue
            for i, word in enumerate(words):
                if word == "mypy" and (i == 0 or words[i - 1] in ("-m", "run")):
                    found.append((section, words[i + 1 :]))
                    break
    return found


def _kept(words: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...], str]:
    """(kept arguments, dropped flags, a `--config-file` named) of a project's mypy command."""
    kept: list[str] = []
    dropped: list[str] = []
    config = ""
    items = iter(words)
    for word in items:
        name, _, value = word.partition("=")
        if "{" in word or "$" in word:
            continue  # tox substitutions ({posargs}, {toxinidir}) and variables: not paths
        if name == "--config-file":
            config = value or next(items, "")
        elif name in _BOOL_FLAGS:
            kept.append(word)
        elif name in _VALUED_FLAGS:
            kept += [word] if value else [word, next(items, "")]
        elif word.startswith(("-", "@")):
            takes = name in _DROPPED_VALUED or name.endswith("-report")
            dropped += [word, next(items, "")] if takes and not value else [word]
        elif _clean(word):
            kept.append(word.removeprefix("./") or ".")
    return tuple(kept), tuple(dropped), config


def _merged(commands: Sequence[Sequence[str]]) -> tuple[list[str], int]:
    """One run for a tox env's several mypy commands: the first's words and the paths of each
    later one with the same flags, each a flag that takes no value (`mypy src`, then
    `mypy tests`); (words, how many commands are left out)."""
    first = list(commands[0])

    def flags(words: Sequence[str]) -> list[str] | None:
        found = [w for w in words if w.startswith("-")]
        plain = all(w.partition("=")[0] in _BOOL_FLAGS or "=" in w for w in found)
        return found if plain else None

    merged, left = first, 0
    for later in commands[1:]:
        same = flags(first) is not None and flags(later) == flags(first)
        if same:
            merged += [w for w in later if not w.startswith("-") and w not in merged]
        else:
            left += 1
    return merged, left


def _clean(path: str) -> bool:
    """A repository-relative path that stays inside the tree."""
    norm = posixpath.normpath(path)
    return not posixpath.isabs(norm) and norm != ".." and not norm.startswith("../")


def _command(read: Read) -> tuple[str, list[str], str] | None:
    """(where, words after `mypy`, its tox env's name or "") of the project's own mypy command
    in tox or nox."""
    commands = _tox_commands(read("tox.ini"))
    if commands:
        section = commands[0][0]
        words, left = _merged([w for s, w in commands if s == section])
        env = section.split(":", 1)[1].strip() if ":" in section else ""
        where = f"`mypy` in tox.ini [{section}]"
        if left:
            where += f" (its first command; {left} more with other flags not run)"
        return where, words, env if _ENV_NAME.match(env) else ""
    match = _NOX_RUN.search(read("noxfile.py") or "")
    if match:
        return "`mypy` in noxfile.py", _STRING.findall(match["rest"]), ""
    return None


_ENV_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
_HOOK_ARGS = re.compile(r"^\s*args:\s*\[(?P<args>[^\]]*)\]", re.MULTILINE)
_BLOCK_ARGS = re.compile(r"^\s*args:\s*\n(?P<items>(?:[ \t]*-[^\n]*\n?)+)", re.MULTILINE)
"""`args:` followed by a block sequence, one `- item` a line."""
MIRRORS_DEFAULT_ARGS = ("--ignore-missing-imports", "--scroll-output")
"""What pre-commit's mirrors-mypy hook passes when the project gives no `args`."""


def _hook_args(text: str) -> list[str]:
    """The `args` of the project's mypy hook (flow or block style), else the mirrors' default."""
    at = re.search(r"^\s*-\s*id:\s*['\"]?mypy['\"]?\s*$", text, re.MULTILINE)
    if at is None:
        return list(MIRRORS_DEFAULT_ARGS)
    rest = text[at.end() :]
    nxt = re.search(r"^\s*-\s*(?:id|repo):", rest, re.MULTILINE)
    hook = rest[: nxt.start() if nxt else len(rest)]
    found = _HOOK_ARGS.search(hook)
    if found is not None:
        return [a.strip().strip("'\"") for a in found["args"].split(",") if a.strip()]
    block = _BLOCK_ARGS.search(hook)
    if block is None:
        return list(MIRRORS_DEFAULT_ARGS)
    items = re.findall(r"^\s*-\s*(.*?)\s*$", block["items"], re.MULTILINE)
    return [a.strip("'\"") for a in items if a]


def configured(read: Read) -> Setup:
    """How the project runs mypy (Setup().where == "": it does not)."""
    found = config_file(read)
    command = _command(read)
    hooks = read(".pre-commit-config.yaml") or ""
    hook = bool(_HOOK.search(hooks))
    ways = [found[1]] if found else []
    ways += [command[0]] if command else []
    ways += ["a mypy pre-commit hook"] if hook else []
    if not ways:
        return Setup()
    words = command[1] if command else _hook_args(hooks) if hook else []
    args, dropped, named = _kept(words)
    config = named if named and _clean(named) and read(named) is not None else ""
    return Setup(
        where=", ".join(ways),
        config=config or (found[0] if found else ""),
        args=args,
        command=command[0] if command and args else "the mypy hook" if hook and args else "",
        dropped=dropped,
        env=command[2] if command else "",
    )


def _sanitised(name: str, text: str) -> str:
    """The configuration without the options that write, in mypy's own format for its name."""
    if name.endswith(".toml"):
        table = _tool_mypy(text) or {}
        kept = {k: v for k, v in table.items() if k not in _WRITING}
        return tomli_w.dumps({"tool": {"mypy": kept}})
    parser = _ini(text)
    out = configparser.RawConfigParser()
    for section in parser.sections():
        if section == "mypy" or section.startswith("mypy-"):
            out.add_section(section)
            for key, value in parser.items(section):
                if key not in _WRITING:
                    out.set(section, key, value)
    lines: list[str] = []
    for section in out.sections():
        lines.append(f"[{section}]")
        lines += [f"{k} = {v}" for k, v in out.items(section)]
        lines.append("")
    return "\n".join(lines)


def _plugins(name: str, text: str) -> list[str]:
    """The configuration's plugins given as `.py` files, relative to its folder."""
    if name.endswith(".toml"):
        value: Any = (_tool_mypy(text) or {}).get("plugins", [])
        listed = [str(v) for v in cast(list[Any], value)] if isinstance(value, list) else []
        if isinstance(value, str):
            listed = value.split(",")
    else:
        listed = _ini(text).get("mypy", "plugins", fallback="").split(",")
    return [p.strip() for p in listed if p.strip().endswith(".py") and _clean(p.strip())]


def freeze(read: Read, setup: Setup, out_dir: Path) -> Path | None:
    """The baseline's mypy configuration (and its `.py` plugins) copied into out_dir, at their
    repository paths: the copy mypy runs with (None: the project has no configuration file)."""
    if not setup.config:
        return None
    text = read(setup.config)
    if text is None:
        return None
    dest = out_dir / setup.config
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(_sanitised(setup.config, text), encoding="utf-8")
    folder = posixpath.dirname(setup.config)
    for plugin in _plugins(setup.config, text):
        rel = posixpath.normpath(posixpath.join(folder, plugin))
        source = read(rel) if _clean(rel) else None
        if source is not None:
            (out_dir / rel).parent.mkdir(parents=True, exist_ok=True)
            (out_dir / rel).write_text(source, encoding="utf-8")
    return dest


def material(setup: Setup, folder: Path | None) -> str:
    """Everything of the frozen setup that decides what mypy reports (the cache's key)."""
    digest = hashlib.sha256(json.dumps([setup.where, setup.config, setup.args]).encode())
    if folder is not None and folder.is_dir():
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            rel = path.relative_to(folder).as_posix()
            digest.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def installed(python: str) -> str:
    """The version of mypy installed in this interpreter's environment ("": none), read from
    its package metadata without running it."""
    if (
        Path(python) == Path(sys.executable)
        or Path(python).resolve() == Path(sys.executable).resolve()
    ):
        try:
            return importlib.metadata.version("mypy")
        except importlib.metadata.PackageNotFoundError:
            return ""
    prefix = Path(python).parent.parent
    for site in sorted(prefix.glob("lib/python3*/site-packages")):
        for dist in importlib.metadata.distributions(path=[str(site)]):
            if (dist.metadata["Name"] or "").lower() == "mypy":
                return dist.version
    return ""


def own_version() -> str:
    """The version of the mypy installed with seed ("": none)."""
    try:
        return importlib.metadata.version("mypy")
    except importlib.metadata.PackageNotFoundError:
        return ""


def interpreter(setup: Setup, python: str, root: Path | None) -> tuple[str, str, str]:
    """(interpreter, where, version) of the mypy the project runs: its tox env's virtualenv in
    the person's checkout when that has mypy, else the target's environment ("": neither)."""
    candidates: list[tuple[str, str]] = []
    if setup.env and root is not None:
        tox = root / ".tox" / setup.env / "bin" / "python"
        if tox.exists():
            candidates.append((str(tox), f"the tox env .tox/{setup.env}"))
    candidates.append((python, "the target's environment"))
    for exe, where in candidates:
        version = installed(exe)
        if version:
            return exe, where, version
    return "", "", ""


def version_line(
    python: str, pin: pins.Pin | None, setup: Setup | None = None, root: Path | None = None
) -> str:
    """One line for `status`: which mypy runs, and how it differs from the project's pin."""
    _, where, target = interpreter(setup or Setup(), python, root)
    own = own_version()
    pinned = f" as pinned in {pin.where}" if pin else ""
    if target and (pin is None or pin.version == target):
        return f"mypy: version {target} in {where}{pinned}"
    if target and pin is not None:
        return f"mypy: differs: {where} has {target}, not {pin.version} as pinned in {pin.where}"
    if own:
        versus = (
            f", not {pin.version} as pinned in {pin.where}" if pin and pin.version != own else ""
        )
        return (
            f"mypy: differs: not installed in the target's environment ({python}): "
            f"seed's own mypy {own} runs{versus}"
        )
    return f"mypy: not run: not installed in the target's environment ({python}) nor with seed"


BOOT = (
    "import json, os, sys, tempfile\n"
    "c = json.loads(sys.stdin.read())\n"
    "with tempfile.TemporaryDirectory(prefix='seed-mypy-') as d:\n"
    "    for rel, text in c['files'].items():\n"
    "        p = os.path.join(d, rel)\n"
    "        os.makedirs(os.path.dirname(p), exist_ok=True)\n"
    "        open(p, 'w', encoding='utf-8').write(text)\n"
    "    os.chdir(c['cwd'])\n"
    "    from mypy import api\n"
    "    from mypy.version import __version__ as v\n"
    "    n = tuple(int(p) for p in v.split('+')[0].split('.')[:2] if p.isdigit())\n"
    "    a = [os.path.join(d, x[1:]) if x.startswith('@') else x for x in c['args']]\n"
    "    o, e, code = api.run((['--output', 'json'] if n >= (1, 11) else []) + a)\n"
    "    os.chdir('/')\n"
    "sys.stdout.write(o)\n"
    "sys.stderr.write(e)\n"
    "sys.exit(code)\n"
)
"""What the interpreter runs (`-I -c`): the frozen configuration (and its plugins) written
from stdin into a folder of the run's own (the kernel's copy lies where no sandbox sees it),
into the tree (its folder never on sys.path), then mypy's API, with JSON output where mypy has
it (1.11 on), else its one-line text. An argument `@rel` names a file of that folder."""

FLAGS: tuple[str, ...] = (
    "--no-incremental",
    "--cache-dir",
    os.devnull,
    "--show-column-numbers",
    "--show-error-codes",
    "--no-error-summary",
    "--no-color-output",
    "--no-pretty",
    "--hide-error-context",
)
"""No cache read or written (the tree is the agent's: nothing of it may feed the next run),
one finding a line."""

_LINE = re.compile(
    r"^(?P<file>[^\n:]+?):(?P<line>\d+):(?:(?P<column>\d+):)?\s*(?P<severity>error|note|warning):"
    r"\s*(?P<message>.*?)(?:\s\s\[(?P<code>[a-z0-9_-]+)\])?$"
)
MAX_DETAIL = 2000


def _relative(path: str, root: Path) -> str:
    if not os.path.isabs(path):
        return posixpath.normpath(path.replace(os.sep, "/"))
    with contextlib.suppress(ValueError):
        return Path(path).relative_to(root).as_posix()
    return path


def parse(text: str, root: Path) -> list[Diagnostic]:
    """mypy's errors, from its JSON lines or its one-line text (notes and warnings are not)."""
    found: list[Diagnostic] = []
    for raw in text.splitlines():
        line = raw.strip()
        item: dict[str, Any] | None = None
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                loaded = json.loads(line)
                item = cast(dict[str, Any], loaded) if isinstance(loaded, dict) else None
        if item is not None:
            if item.get("severity") != "error" or not item.get("file"):
                continue
            file, number = str(item["file"]), int(item.get("line") or 0)
            column = int(item.get("column") or 0) + 1  # JSON counts from 0, the text from 1
            message, code = str(item.get("message", "")), str(item.get("code") or "misc")
        else:
            match = _LINE.match(line)
            if match is None or match["severity"] != "error":
                continue
            file, number = match["file"], int(match["line"])
            column, message = int(match["column"] or 0), match["message"]
            code = match["code"] or "misc"
        found.append(
            Diagnostic(
                tool=Tool.MYPY,
                file=_relative(file, root),
                line=number,
                column=column,
                rule=code,
                message=message.splitlines()[0][:MAX_DETAIL] if message else "",
                detail=message[:MAX_DETAIL],
            )
        )
    return found


def _failed(result: procs.Completed, why: str) -> Measurement:
    words = (result.err_text() + "\n" + result.text()).strip()[-MAX_DETAIL:]
    return Measurement(
        tool=Tool.MYPY,
        ran=False,
        exit_code=result.exit_code,
        timed_out=result.timed_out,
        error=f"{why}: {words}" if words else why,
        duration_s=result.duration_s,
    )


def argv_for(setup: Setup, folder: Path | None, python: str) -> list[str]:
    """mypy's arguments: the frozen configuration, the project's own command's arguments (else
    its config's files, else the whole tree), imports resolved with the target's interpreter."""
    args = [*FLAGS, "--python-executable", python]
    if folder is not None and setup.config:
        args += ["--config-file", "@" + setup.config]
    else:
        args += ["--config-file", os.devnull]  # no file of the tree's may configure it
    if _has_targets(setup.args):
        return [*args, *setup.args]
    args += setup.args
    config = folder / setup.config if folder is not None and setup.config else None
    if config is not None and _names_targets(setup.config, config.read_text(encoding="utf-8")):
        return args
    return [*args, "."]


def _has_targets(args: Sequence[str]) -> bool:
    """Whether a project's arguments name what mypy checks (a path, `-p` or `-m`)."""
    items = iter(args)
    for word in items:
        name, _, value = word.partition("=")
        if name in ("-p", "--package", "-m", "--module"):
            return True
        if name in _VALUED_FLAGS and not value:
            next(items, "")
        elif not word.startswith("-"):
            return True
    return False


def _names_targets(name: str, text: str) -> bool:
    """Whether a configuration names what mypy checks (`files`, `packages` or `modules`)."""
    if name.endswith(".toml"):
        table = _tool_mypy(text) or {}
        return any(table.get(k) for k in ("files", "packages", "modules"))
    parser = _ini(text)
    return any(parser.get("mypy", k, fallback="").strip() for k in ("files", "packages", "modules"))


def _frozen_files(folder: Path | None) -> dict[str, str]:
    """The gate's mypy files by repository path (the run writes them where it can read them)."""
    if folder is None:
        return {}
    return {
        p.relative_to(folder).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def run_mypy(
    tree: Path,
    setup: Setup,
    folder: Path | None,
    python: str,
    jail: Jail | None,
    timeout_s: float,
    root: Path | None = None,
) -> Measurement:
    """The project's mypy on a tree: its tox env's or the target environment's (else seed's
    own, imports resolved with the target's interpreter), sandboxed."""
    found, _, _ = interpreter(setup, python, root)
    python = found or python
    runner = found or (sys.executable if own_version() else "")
    if not runner:
        return Measurement(
            tool=Tool.MYPY,
            ran=False,
            error=f"mypy is configured ({setup.where}) but not installed in the target's "
            f"environment ({python}) nor with seed",
        )
    argv = [runner, "-I", "-c", BOOT]
    seen, made = tree, ()
    if jail is not None:
        # seed's own mypy resolves imports with the target's interpreter: shown too
        jailed = jail(argv, tree, (), pythons=(Path(python),))
        argv, seen, made = jailed.argv, jailed.seen, jailed.made
    files = _frozen_files(folder)
    config = {"cwd": str(seen), "args": argv_for(setup, folder, python), "files": files}
    env = procs.run_env(PYTHONDONTWRITEBYTECODE="1", PYTHONNOUSERSITE="1")
    env = {k: v for k, v in env.items() if not k.startswith("MYPY")}
    try:
        result = procs.run(
            argv,
            cwd="/",
            timeout_s=timeout_s,
            env=env,
            stdin=json.dumps(config).encode("utf-8"),
        )
    finally:
        sandbox.settle(made)
    if result.timed_out:
        return _failed(result, f"mypy did not finish in {timeout_s:.0f}s")
    found = parse(result.text(), seen)
    # exit 2: a blocking error (a file it cannot parse: a finding) or mypy could not run
    if result.exit_code not in (0, 1) and not (result.exit_code == 2 and found):
        return _failed(result, f"mypy failed (exit {result.exit_code})")
    return Measurement(
        tool=Tool.MYPY,
        ran=True,
        exit_code=result.exit_code,
        diagnostics=tuple(found),
        duration_s=result.duration_s,
    )


TYPE_TOOLS: tuple[Tool, ...] = (Tool.PYRIGHT, Tool.MYPY)
"""The type checkers: a new finding of either is a type error."""
TYPE_CHECKS: tuple[CheckName, ...] = (CheckName.PYRIGHT, CheckName.MYPY)
"""Their acceptance checks, each named as its tool."""
