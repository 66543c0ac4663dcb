"""Which changed files may land without a person: text the project has or its docs, never a
binary, an extension, a .pth, package metadata, a new executable or an unknown file type."""

from __future__ import annotations

import os
from pathlib import Path

from kernel.measuring import filetypes
from tests.support import git, make_repo


def test_docs_land_and_what_no_diff_shows_waits_for_a_person(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {"pkg/calc.py": "X = 1\n"})
    written = {
        "pkg/calc.py": "X = 2\n",  # a known type: lands
        "NOTES.txt": "why\n",  # docs, though the project had no .txt: lands
        "docs/guide.rst": "Guide\n=====\n",
        "pkg/table.dat": "1 2 3\n",  # text of a type the project has none of
        "pkg/hook.pth": "import os\n",
        "pkg/_fast.so": "ELF",
        "pkg/blob.py": "\0\1\2",
        "pkg/x.dist-info/entry_points.txt": "[pytest11]\nx = pkg\n",
        "run.py": "print(1)\n",
    }
    for name, text in written.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    os.chmod(root / "run.py", 0o755)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "change")
    found = dict(
        line.split(": ", 1)
        for line in filetypes.unvetted(root, git(root, "rev-parse", "HEAD").strip())
    )
    assert sorted(found) == [
        "pkg/_fast.so",
        "pkg/blob.py",
        "pkg/hook.pth",
        "pkg/table.dat",
        "pkg/x.dist-info/entry_points.txt",
        "run.py",
    ], found
    assert found["pkg/table.dat"] == "a file type the project has none of (.dat)"
    assert found["run.py"] == "a new executable (mode 755)"
