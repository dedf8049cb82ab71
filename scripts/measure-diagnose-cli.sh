#!/bin/bash
# kremedy diagnose beside Kafka's own CLI on a running lab, measured side by
# side: N pairs, alternating, each timed as one process's wall time; then
# the medians and their ratio.
#
#   bin/kremedy lab up --kraft --dir D && scripts/measure-diagnose-cli.sh D [N]
#
# The CLI is what an operator runs to see the same: kafka-topics --describe
# (every partition's leader, replicas, ISR), kafka-log-dirs --describe
# (every broker's logs) and, on a KRaft cluster, kafka-metadata-quorum
# describe --status. They run from the lab's own Kafka jars plus the
# release's kafka-tools jar (fetched from Maven Central into the cache).
set -euo pipefail
lab=${1:?lab dir}; n=${2:-5}
cd "$(dirname "$0")/.."
read -r v kraft < <(python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s["kafka_version"], s["config"].get("kraft", False))' "$lab/lab.json")
home=${KREMEDY_CACHE:-$HOME/.cache/kremedy}/kafka-$v
tools=${KREMEDY_CACHE:-$HOME/.cache/kremedy}/kafka-tools-$v
if [ ! -e "$tools/kafka-tools-$v.jar" ]; then
  mkdir -p "$tools"
  mvn -q -B dependency:copy -Dartifact="org.apache.kafka:kafka-tools:$v" -DoutputDirectory="$tools"
fi
boot=$(python3 -c 'import sys,re; t=open(sys.argv[1]).read(); print(re.search(r"bootstrap:\n\s+- \"?([^\"\n]+)", t).group(1))' "$lab/inventory.yaml")
cp="$home/libs/*:$tools/*"
log4j=(-Dlog4j.configuration=file:/dev/null -Dlog4j2.configurationFile=/dev/null)
cli() {
  java "${log4j[@]}" -cp "$cp" org.apache.kafka.tools.TopicCommand --bootstrap-server "$boot" --describe >/dev/null 2>&1
  java "${log4j[@]}" -cp "$cp" org.apache.kafka.tools.LogDirsCommand --bootstrap-server "$boot" --describe >/dev/null 2>&1
  if [ "$kraft" = True ]; then
    java "${log4j[@]}" -cp "$cp" org.apache.kafka.tools.MetadataQuorumCommand --bootstrap-server "$boot" describe --status >/dev/null 2>&1
  fi
}
kremedy() { bin/kremedy diagnose --inventory "$lab/inventory.yaml" >/dev/null 2>&1 || true; }
ms() { local s=$(date +%s%N); "$@"; echo $(( ($(date +%s%N) - s) / 1000000 )); }
k=(); c=()
for i in $(seq 1 "$n"); do
  k+=("$(ms kremedy)"); c+=("$(ms cli)")
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
km=$(median "${k[@]}"); cm=$(median "${c[@]}")
echo "Kafka $v (kraft: $kraft), $n pairs: kremedy diagnose ${k[*]} ms (median $km); CLI ${c[*]} ms (median $cm); ratio $(python3 -c "print(round($km/$cm, 2))")"
