#!/usr/bin/env bash
# The H200 retime (docs/benchmarks.md; docs/decisions.md: half of each table fits about as well as all of it): a
# seeded half of each fitted H200 table, all of the m16 pair, one round a config, on the GPU machine, within one
# device call (two for all of it). Done on 2026-12-05 for kernels 5072151f: docs/results/retime-h200/.
#
#   source .gpu/setup-device.sh >/dev/null && bash docs/results/retime.sh OUTDIR [SECONDS]
#
# Each table's share goes to OUTDIR/tune-h200-<name>.json (its workers' parts beside it until it is done). Run
# again with the files of OUTDIR put back there and it goes on where it stopped (tune --retime keeps what they
# hold); after a kernel change, start from an empty OUTDIR (the shares are drawn from the tables as tuned).
# SECONDS (default 540): no table starts after that long, and the one running is stopped then, workers and all
# (timeout signals the whole process group), so the call ends inside the device's 600 s. The device tool brings
# back only a few files a call: tar OUTDIR into one.
set -uo pipefail
out=${1:?usage: retime.sh OUTDIR [SECONDS]}
budget=${2:-540}
mkdir -p "$out"
tables="m16-train m16-validation 2-train 2-validation train validation l2edge-train l2edge-validation"
tables+=" narrowmid-train narrowmid-validation m128-train m128-validation midm-train midm-validation"
tables+=" thin-train thin-validation swap64-train swap64-validation"
for t in $tables; do
    left=$((budget - SECONDS))
    if [ "$left" -le 30 ]; then
        echo "retime: out of time before tune-h200-$t"
        break
    fi
    share=0.5
    case $t in m16-*) share=1 ;; esac
    timeout -k 10 "$left" python3 -m ctgraph tune "docs/results/tune-h200-$t.json" --retime --fraction "$share" \
        --out "$out/tune-h200-$t.json"
    status=$?
    echo "retime: tune-h200-$t exit $status at ${SECONDS} s"
    if [ "$status" -eq 0 ]; then # the table is whole: its workers' parts are not needed to go on
        rm -f "$out/tune-h200-$t".part*.json
    fi
done
