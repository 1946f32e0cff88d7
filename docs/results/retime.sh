#!/usr/bin/env bash
# A retime after a kernel change (docs/benchmarks.md), within one device call (two for all of it), one round a
# config, on the GPU machine:
#
#   source .gpu/setup-device.sh >/dev/null && bash docs/results/retime.sh OUTDIR [SECONDS] [DEVICE]
#
# DEVICE h200 (default): a seeded half of each fitted H200 table and all of the m16 pair (docs/decisions.md: half of
# each table fits about as well as all of it); done on 2026-12-05 for kernels 5072151f: docs/results/retime-h200/.
# DEVICE h100: all four of the H100's tables (210 shapes, 2,514 timings; about 250 s by the H200's rate), on an
# H100 (`tune --retime` refuses another GPU), so that `refit.sh` can fit the family on both devices' timings.
# Each table's share goes to OUTDIR/tune-<device>-<name>.json (its workers' parts beside it until it is done). Run
# again with the files of OUTDIR put back there and it goes on where it stopped (tune --retime keeps what they
# hold); after a kernel change, start from an empty OUTDIR (the shares are drawn from the tables as tuned).
# SECONDS (default 540): no table starts after that long, and the one running is stopped then, workers and all
# (timeout signals the whole process group), so the call ends inside the device's 600 s. The device tool brings
# back only a few files a call: tar OUTDIR into one.
set -uo pipefail
usage="usage: retime.sh OUTDIR [SECONDS] [h200|h100]"
out=${1:?$usage}
budget=${2:-540}
device=${3:-h200}
mkdir -p "$out"
case $device in
h200)
    tables="m16-train m16-validation 2-train 2-validation train validation l2edge-train l2edge-validation"
    tables+=" narrowmid-train narrowmid-validation m128-train m128-validation midm-train midm-validation"
    tables+=" thin-train thin-validation swap64-train swap64-validation"
    ;;
h100) tables="smallm-train smallm-validation train validation" ;;
*)
    echo "$usage" >&2
    exit 2
    ;;
esac
for t in $tables; do
    name=tune-$device-$t
    left=$((budget - SECONDS))
    if [ "$left" -le 30 ]; then
        echo "retime: out of time before $name"
        break
    fi
    share=0.5
    case $device-$t in h200-m16-* | h100-*) share=1 ;; esac
    timeout -k 10 "$left" python3 -m ctgraph tune "docs/results/$name.json" --retime --fraction "$share" \
        --out "$out/$name.json"
    status=$?
    echo "retime: $name exit $status at ${SECONDS} s"
    if [ "$status" -eq 0 ]; then # the table is whole: its workers' parts are not needed to go on
        rm -f "$out/$name".part*.json
    fi
done
