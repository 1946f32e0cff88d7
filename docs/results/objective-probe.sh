#!/usr/bin/env bash
# Kernel time against call time (docs/selection.md, "The objective"), on the GPU machine in one call:
#
#   source .gpu/setup-device.sh >/dev/null && bash docs/results/objective-probe.sh OUTDIR FRESH.csv [SECONDS]
#
# The shapes of FRESH.csv (fresh draws, never tuned on: `draw train --start ... --stop ...`) whose config
# CTGRAPH_OBJECTIVE=call changes on this GPU (`choose` both ways), up to 60 of them, each timed by `heldout` with
# the kernel objective's config (kernel.csv) and the call objective's (call.csv), cuBLAS in the same runs; both
# CSVs hold kernel and call ratios. `heldout OUTDIR/call.csv --summarize --against OUTDIR/kernel.csv` compares them
# (changed_before/after by kernel time, changed_call_before/after by call time).
# What decides the default: the call ratio gained on these shapes against the kernel ratio lost. First,
# `overhead` (overhead.md) sets this host's times per call, by host time and by call time, against those the call
# objective assumes (fitted on back-to-back calls: results/host_fit.py).
# SECONDS (default 540): each step is stopped at that budget, so the call ends inside the device's 600 s.
set -uo pipefail
usage="usage: objective-probe.sh OUTDIR FRESH.csv [SECONDS]"
out=${1:?$usage}
fresh=${2:?$usage}
budget=${3:-540}
mkdir -p "$out"
export CTGRAPH_CACHE_DIR=${TMPDIR:-/tmp}/objective-probe-cache # no autotune cache of an earlier run
device=$(python3 -c 'import torch; print(torch.cuda.get_device_name())')
echo "objective-probe: $device"
python3 -m ctgraph choose "$fresh" --device "$device" --out "$out/fresh-kernel.csv"
python3 -m ctgraph choose "$fresh" --device "$device" --objective call --against "$out/fresh-kernel.csv" \
    --out "$out/fresh-moved.csv"
timeout -k 10 120 python3 -m ctgraph overhead >"$out/overhead.md"
echo "objective-probe: overhead exit $? at ${SECONDS} s"
for objective in kernel call; do
    left=$((budget - SECONDS))
    [ "$left" -le 20 ] && { echo "objective-probe: out of time before $objective"; exit 1; }
    timeout -k 10 "$left" python3 -m ctgraph heldout "$out/fresh-moved.csv" --limit 60 --objective "$objective" \
        --rounds 2 --out "$out/$objective.csv"
    echo "objective-probe: $objective exit $? at ${SECONDS} s"
done
