#!/usr/bin/env bash
# After a refit is shipped, on the GPU machine in one call (a warm machine goes back after 30 s idle, so the steps
# run together):
#
#   git show REV:ctgraph/data/ranker-sm90.json > BEFORE.json   # the fit it replaced (here, before the call)
#   source .gpu/setup-device.sh >/dev/null && bash docs/results/after-refit.sh OUTDIR BEFORE.json FRESH.csv [SECONDS]
#
# 1. The held-out sets with the shipped fit: test.csv, llm.csv (2 rounds), anchors.csv (4 rounds: an even count
#    puts cuBLAS and ctgraph first as often).
# 2. The shapes of FRESH.csv (fresh draws, never tuned on: `draw train --start ... --stop ...`) whose config the
#    refit moves on this GPU: `choose` with BEFORE.json put where `calibrate` writes a correction, then with the
#    shipped fit; up to 40 of them run by `heldout` at both (moved-before.csv, moved-after.csv; `heldout
#    moved-after.csv --summarize --against moved-before.csv` compares them).
# 3. The selection's GPU tests (tests/gpu/test_select.py): select-tests.log.
# The held-out sets come first: they are the figures README quotes, and a loan is often cut short.
# SECONDS (default 540): each step is stopped at that budget, so the call ends inside the device's 600 s. Run
# again with OUTDIR's files put back there and it goes on: a step whose output is there is not run again.
set -uo pipefail
usage="usage: after-refit.sh OUTDIR BEFORE.json FRESH.csv [SECONDS]"
out=${1:?$usage}
before=${2:?$usage}
fresh=${3:?$usage}
budget=${4:-540}
mkdir -p "$out"
# a cache of its own (kept on a warm machine, for nvcc's builds): an autotune cache left by an earlier run would
# put its winners in place of the ranker's choice (heldout warns, and each row's reason says "autotune cache")
export CTGRAPH_CACHE_DIR=${TMPDIR:-/tmp}/after-refit-cache
ranker=$(python3 -c 'from ctgraph.select.model import user_correction_path; print(user_correction_path("sm90"))')
mkdir -p "$(dirname "$ranker")"
rm -f "$ranker" # none there: the shipped fit ranks; BEFORE.json is copied there for the "before" runs
step() { # step NAME OUTPUT COMMAND...: run it within what is left of the budget, unless OUTPUT is there
    local left=$((budget - SECONDS)) name=$1 output=$2
    shift 2
    if [ -f "$output" ]; then
        echo "after-refit: $name done before ($output)"
        return 0
    elif [ "$left" -le 20 ]; then
        echo "after-refit: out of time before $name"
        return 1
    fi
    timeout -k 10 "$left" "$@"
    local status=$?
    echo "after-refit: $name exit $status at ${SECONDS} s"
    return $status
}

heldout() { # heldout NAME SHAPES ROUNDS: a step writing OUTDIR/NAME.csv
    step "$1" "$out/$1.csv" python3 -m ctgraph heldout "$2" --rounds "$3" --out "$out/$1.csv"
}
heldout test test 2
heldout llm llm 2
heldout anchors anchors 4

device=$(python3 -c 'import torch; print(torch.cuda.get_device_name())')
echo "after-refit: $device"
cp "$before" "$ranker"
python3 -m ctgraph choose "$fresh" --device "$device" --out "$out/fresh-before.csv"
rm -f "$ranker"
python3 -m ctgraph choose "$fresh" --device "$device" --against "$out/fresh-before.csv" --out "$out/fresh-moved.csv"
python3 - "$out" <<'PY'
import csv, sys
out = sys.argv[1]
with open(f"{out}/fresh-moved.csv") as fh:
    rows = [(r["m"], r["n"], r["k"]) for r in csv.DictReader(fh)][:40]
with open(f"{out}/moved.csv", "w") as fh:
    fh.write("m,n,k\n" + "".join(f"{m},{n},{k}\n" for m, n, k in rows))
PY
cp "$before" "$ranker"
heldout moved-before "$out/moved.csv" 2
rm -f "$ranker"
heldout moved-after "$out/moved.csv" 2
# the selection's GPU tests, their log renamed once they end (timeout runs a command, not a function: bash -c)
tests='python3 -m pytest -m gpu -q -p no:cacheprovider tests/gpu/test_select.py >"$0.part" 2>&1'
step "select tests" "$out/select-tests.log" bash -c "$tests"'; s=$?; mv "$0.part" "$0"; exit $s' "$out/select-tests.log"
