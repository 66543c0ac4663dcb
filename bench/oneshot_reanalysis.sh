#!/bin/bash
# A whole `seed.py gaps` process after `gaps`: the re-analysis of a one-line change against the
# first analysis (issue 44 item 2). Usage:
#   bench/oneshot_reanalysis.sh SEED_CHECKOUT PROJECT_GIT_DIR FILE [LABEL]
# e.g. bench/oneshot_reanalysis.sh "$PWD" /work/.mirror/mahmoud+boltons/repo boltons/strutils.py
# The project is cloned to /tmp, gets a .venv with pytest and itself (editable), and seed.toml
# measuring pytest alone. Prints both times, their ratio and the load average; asserts nothing.
set -eu
SEEDDIR=$1; PROJECT=$2; FILE=$3; LABEL=${4:-run}
W=$(mktemp -d /tmp/oneshot-XXXX)
git clone -q "$PROJECT" "$W/p" && cd "$W/p" && git checkout -q -B main
python -m venv .venv && .venv/bin/pip -q install pytest >/dev/null && .venv/bin/pip -q install -e . >/dev/null
printf '[quality]\ntools = ["pytest"]\n' > seed.toml
git add seed.toml && git -c user.email=b@b -c user.name=bench commit -qm seed
t0=$(date +%s.%N); python "$SEEDDIR/seed.py" gaps >/dev/null 2>&1 || true; t1=$(date +%s.%N)
printf '\nx = 1\n' >> "$FILE"
git -c user.email=b@b -c user.name=bench commit -qam "one line"
t2=$(date +%s.%N); python "$SEEDDIR/seed.py" gaps >/dev/null 2>&1 || true; t3=$(date +%s.%N)
python - "$LABEL" "$t0" "$t1" "$t2" "$t3" <<'PY'
import os, sys
label, t0, t1, t2, t3 = sys.argv[1], *map(float, sys.argv[2:])
first, again = t1 - t0, t3 - t2
print(f"{label}: first {first:.2f}s, re-analysis {again:.2f}s, ratio {again / first:.2f}, load {os.getloadavg()[0]:.2f}")
PY
rm -rf "$W"
