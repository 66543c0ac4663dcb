"""A scripted agent for the real-fixes benchmark: applies one patch file in its cwd.

seed runs it as `[agent] backend = "command"` with the iteration's worktree as the working
directory. It uses `git apply` (no index, so it works in a worktree or a plain tree) and
writes a one-line summary to SEED_RESULT_FILE when seed asks for one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: apply_patch.py PATCHFILE", file=sys.stderr)
        return 2
    patch = argv[0]
    done = subprocess.run(
        ["git", "apply", "--whitespace=nowarn", patch], capture_output=True, text=True, check=False
    )
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    result = os.environ.get("SEED_RESULT_FILE")
    if result:
        summary = (
            f"applied {os.path.basename(patch)}" if done.returncode == 0 else "git apply failed"
        )
        with open(result, "w", encoding="utf-8") as handle:
            json.dump({"summary": summary, "tokens_used": 0, "cost_usd": 0.0}, handle)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
