"""A scripted agent for the real-fixes benchmark: applies one patch file in its cwd.

seed runs it as `[agent] backend = "command"` with the iteration's worktree as the working
directory. It uses `git apply` (no index, so it works in a worktree or a plain tree) and
writes a one-line summary to SEED_RESULT_FILE when seed asks for one. In a repair round
(SEED_ROUND > 1, the same worktree) it changes nothing and exits 0: a replayed fix has
nothing better to offer. (No "applied already" check in round 1: the reverse of a patch that
only deletes lines applies to a file that still holds them, so it misfired.)
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
    if int(os.environ.get("SEED_ROUND") or 1) > 1:
        # a repair round in the same worktree: the change is in place already (perhaps
        # reformatted by the kernel), and a scripted agent has nothing better to offer
        code, summary = 0, "the patch was applied in round 1; nothing to add"
    else:
        done = _git_apply(patch)
        sys.stdout.write(done.stdout)
        sys.stderr.write(done.stderr)
        code = done.returncode
        summary = f"applied {os.path.basename(patch)}" if code == 0 else "git apply failed"
    print(summary)
    result = os.environ.get("SEED_RESULT_FILE")
    if result:
        with open(result, "w", encoding="utf-8") as handle:
            json.dump({"summary": summary, "tokens_used": 0, "cost_usd": 0.0}, handle)
    return code


def _git_apply(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "apply", "--whitespace=nowarn", *args], capture_output=True, text=True, check=False
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
