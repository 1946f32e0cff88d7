#!/usr/bin/env bash
# The refit after the retime (docs/benchmarks.md), no GPU: the retimed tables in OUTDIR (what retime.sh wrote
# there), fitted twice, a K step's bounds joined by their largest and by their 4-norm (docs/decisions.md):
#
#   bash docs/results/refit.sh OUTDIR
#
# writes OUTDIR/ranker-max.json and OUTDIR/ranker-p4.json, each with its regret on every table it fitted, after
# the regrets of the correction in use on the same tables. The H200's pairs in the shipped fit's order (the trees'
# bagging follows the rows' order), then the H100's where OUTDIR holds them (`retime.sh OUTDIR SECONDS h100`, on an
# H100; without them the fit is the H200's alone, as shipped). Which to ship is then chosen on
# fresh draws, on a GPU: `choose --against` with each put where `calibrate` writes a correction, `heldout
# moved.csv` at both (docs/selection.md).
set -euo pipefail
out=${1:?usage: refit.sh OUTDIR}
args=("$out/tune-h200-2-train.json" "$out/tune-h200-2-validation.json")
for p in "" -midm -swap64 -thin -m128 -m16 -l2edge -narrowmid; do
    args+=(--also "$out/tune-h200$p-train.json" "$out/tune-h200$p-validation.json")
done
for p in "" -smallm; do # the H100's, timed again on these kernels
    if [ -f "$out/tune-h100$p-train.json" ]; then
        args+=(--also "$out/tune-h100$p-train.json" "$out/tune-h100$p-validation.json")
    fi
done
echo "refit: the correction in use (fitted on the old timings), on the new ones"
tables=()
for a in "${args[@]}"; do [ "$a" = --also ] || tables+=("$a"); done
python3 -m ctgraph fit --report "${tables[@]}"
for p in max 4; do
    name=$([ "$p" = max ] && echo max || echo "p$p")
    echo "refit: bounds joined by $p -> $out/ranker-$name.json"
    python3 -m ctgraph fit "${args[@]}" --bounds-norm "$p" --out "$out/ranker-$name.json" --report
done
