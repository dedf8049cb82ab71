#!/bin/bash
# Measure full headless remediations of ghost-topic on a running lab and
# split each run's wall time (from its journal) into broker stop/start,
# Kafka's own work for the recreated topic, and kremedy's own work.
#
#   bin/kremedy lab up && scripts/measure-cleanup.sh PREFIX N [LABDIR]
#
# Each iteration breaks a fresh topic PREFIXi with `lab break ghost-topic`
# and repairs it with `run topic-cleanup --set recreate=true --headless`.
set -euo pipefail
prefix=${1:?prefix}; n=${2:?count}; lab=${3:-$HOME/.cache/kremedy/lab}
cd "$(dirname "$0")/.."
out=$(mktemp -d)
for i in $(seq 1 "$n"); do
  t=$prefix$i
  bin/kremedy lab break ghost-topic --dir "$lab" --topic "$t" >/dev/null
  bin/kremedy run topic-cleanup --inventory "$lab/inventory.yaml" --set topic="$t" --set recreate=true \
    --run-dir "$out/$t" --headless --yes --confirm "$t" >"$out/$t.out" 2>&1
  python3 scripts/split-journal.py "$out/$t/journal.jsonl"
done
