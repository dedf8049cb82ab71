#!/usr/bin/env python3
"""Split a kremedy run's wall time, from its journal.jsonl, into broker
stop/start (the stop-brokers and start-brokers steps, health gate included),
Kafka's own work for the recreated topic (verify's create, wait and canary
actions: creation, the controller's metadata reaching every broker, the
acks=all acknowledgement, the canary's removal), and
the rest: kremedy's own work.  Usage: split-journal.py JOURNAL..."""
import datetime
import json
import sys


def ts(s):
    base, _, frac = s.rstrip("Z").partition(".")
    return datetime.datetime.fromisoformat(base + "+00:00").timestamp() + float("0." + (frac or "0"))


for path in sys.argv[1:]:
    recs = [json.loads(line) for line in open(path)]
    total = ts(recs[-1]["time"]) - ts(recs[0]["time"])
    steps, kafka = {}, 0.0
    for r in recs:
        if r["type"] == "step-done":
            steps[r["step"]] = r["data"]["took_ms"] / 1000
        if r["type"] == "action-end" and r.get("step") == "verify" and r["data"]["action"]["op"] in ("kafka", "wait"):
            kafka += r["data"]["took_ms"] / 1000
    brokers = steps.get("stop-brokers", 0) + steps.get("start-brokers", 0)
    other = total - brokers
    print(f"{path}: total {total:.2f} s, brokers {brokers:.2f} s, everything else {other:.2f} s ({100*other/total:.1f} %): "
          f"Kafka for the recreated topic {kafka:.2f} s, kremedy's own {other-kafka:.2f} s ({100*(other-kafka)/total:.1f} %); steps {steps}")
