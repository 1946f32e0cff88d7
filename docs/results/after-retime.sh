#!/usr/bin/env bash
# After the retime, on the GPU machine in one call (a warm machine goes back after 30 s idle, so the steps that
# follow one another run together):
#
#   source .gpu/setup-device.sh >/dev/null && bash docs/results/after-retime.sh OUTDIR FRESH.csv [SECONDS]
#
# 1. refit.sh OUTDIR: both fits of the retimed tables (ranker-max.json, ranker-p4.json).
# 2. Which one ships is decided on FRESH.csv (fresh draws, never tuned on: `draw train --start ... --stop ...`):
#    `choose` with the correction in use and with each fit (put where `calibrate` writes one); the shapes either
#    fit moves (up to 40) are run by `heldout` at all three (moved-inuse.csv, moved-p4.csv, moved-max.csv).
# 3. The held-out sets with the 4-norm fit, the one the offline trials favour (decisions.md), as time allows:
#    test-p4.csv, llm-p4.csv, anchors-p4.csv. If step 2 says otherwise, it is not shipped and these are not quoted.
# SECONDS (default 540): each step is stopped at that budget, so the call ends inside the device's 600 s. Run
# again with OUTDIR's files put back there and it goes on: a step whose output is there is not run again.
set -uo pipefail
out=${1:?usage: after-retime.sh OUTDIR FRESH.csv [SECONDS]}
fresh=${2:?usage: after-retime.sh OUTDIR FRESH.csv [SECONDS]}
budget=${3:-540}
ranker=$(python3 -c 'from ctgraph import knobs; print(knobs.cache_dir() / "ranker" / "ranker-sm90.json")')
mkdir -p "$(dirname "$ranker")"
rm -f "$ranker"
use() { # use FIT: put ranker-FIT.json where calibrate writes a correction ("inuse": the shipped one)
    rm -f "$ranker"
    if [ "$1" != inuse ]; then cp "$out/ranker-$1.json" "$ranker"; fi
}
step() { # step NAME OUTPUT COMMAND...: run it within what is left of the budget, unless OUTPUT is there
    local left=$((budget - SECONDS)) name=$1 output=$2
    shift 2
    if [ -f "$output" ]; then
        echo "after-retime: $name done before ($output)"
        return 0
    elif [ "$left" -le 20 ]; then
        echo "after-retime: out of time before $name"
        return 1
    fi
    timeout -k 10 "$left" "$@"
    local status=$?
    echo "after-retime: $name exit $status at ${SECONDS} s"
    return $status
}

step refit "$out/ranker-p4.json" bash docs/results/refit.sh "$out" || exit 1
use inuse
python3 -m ctgraph choose "$fresh" --device "NVIDIA H200" --out "$out/fresh-inuse.csv"
for f in p4 max; do
    use $f
    python3 -m ctgraph choose "$fresh" --device "NVIDIA H200" --against "$out/fresh-inuse.csv" --out "$out/fresh-$f.csv"
done
python3 - "$out" "$fresh" <<'EOF'
import csv, sys
out, fresh = sys.argv[1:]
moved = set()
for f in ("p4", "max"):
    with open(f"{out}/fresh-{f}.csv") as fh:
        moved |= {(r["m"], r["n"], r["k"]) for r in csv.DictReader(fh)}
with open(fresh) as fh:
    rows = [key for r in csv.DictReader(fh) if (key := (r["m"], r["n"], r["k"])) in moved]
with open(f"{out}/moved.csv", "w") as fh:
    fh.write("m,n,k\n" + "".join(f"{m},{n},{k}\n" for m, n, k in rows[:40]))
print(f"after-retime: {len(rows)} fresh shapes moved by either fit, the first {len(rows[:40])} timed")
EOF
for f in inuse p4 max; do
    use $f
    step "moved at $f" "$out/moved-$f.csv" python3 -m ctgraph heldout "$out/moved.csv" --rounds 2 --out "$out/moved-$f.csv"
done
use p4
step test "$out/test-p4.csv" python3 -m ctgraph heldout test --rounds 2 --out "$out/test-p4.csv"
step llm "$out/llm-p4.csv" python3 -m ctgraph heldout llm --rounds 2 --out "$out/llm-p4.csv"
step anchors "$out/anchors-p4.csv" python3 -m ctgraph heldout anchors --rounds 3 --out "$out/anchors-p4.csv"
use inuse
