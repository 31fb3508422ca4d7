#!/usr/bin/env bash
# A rehearsal you can run: the contract server under a realistic fault mix, a batch of webhook
# deliveries sent through it twice with hodoflow-send, then the server's ledger checked.
#
#   bash crates/hodoflow-mock/rehearse.sh [EVENTS]       (default 200 events)
#
# It starts hodoflow-mock on 127.0.0.1 on a free port with its control routes, injects over
# HTTP (POST /_mock/faults), in this order (the first fault that fires takes a request):
#   - a trigger's 429 with Retry-After: 2, on the first two deliveries;
#   - lost answers after the commit (the run starts, the connection closes), 10%;
#   - 503 with Retry-After: 1, nothing run, 10%;
#   - a slow answer: the run starts, the answer comes after the client's 2 s timeout, 3%;
# sends EVENTS deliveries with `hodoflow-send batch`, sends the same file again (every event
# should now answer `duplicate`), reads the ledger (GET /_mock/ledger) and prints the check:
# events sent, runs started, duplicate runs (must be 0), events without a run (must be 0).
# Exit status 0 when the check holds, 1 when it does not.
#
# Needs cargo, curl and jq. Everything it writes goes to a temporary directory, kept on failure.
set -euo pipefail
cd "$(dirname "$0")/../.."

events=${1:-200}
[[ $events =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 [EVENTS]" >&2; exit 2; }
for tool in cargo curl jq; do
  command -v "$tool" >/dev/null || { echo "rehearse: $tool is needed" >&2; exit 2; }
done

work=$(mktemp -d)
mock_pid=
finish() {
  local status=$?
  if [ -n "$mock_pid" ]; then kill "$mock_pid" 2>/dev/null || true; wait "$mock_pid" 2>/dev/null || true; fi
  if [ "$status" -eq 0 ]; then rm -rf "$work"; else echo "rehearse: files kept in $work" >&2; fi
  exit "$status"
}
trap finish EXIT

echo "== building hodoflow-mock and hodoflow-send"
# One at a time, as `cargo run` builds each below (together, their features would unify
# differently and `cargo run` would build again).
cargo build --quiet --locked -p hodoflow-mock
cargo build --quiet --locked -p hodoflow-send

echo "== starting hodoflow-mock on 127.0.0.1 (a free port)"
# A wide trigger window, so the batch is paced by the faults, not by the documented 100 a minute.
cargo run --quiet --locked -p hodoflow-mock -- \
  --listen 127.0.0.1:0 --control --webhook-rate-limit 100000 >"$work/mock.log" 2>&1 &
mock_pid=$!
base=
for _ in $(seq 1 1200); do # up to 2 minutes: cargo may wait for a lock held by another build
  base=$(sed -n 's/^hodoflow-mock listening on \(http:[^ ]*\).*/\1/p' "$work/mock.log" | head -n 1)
  [ -n "$base" ] && break
  kill -0 "$mock_pid" 2>/dev/null || { cat "$work/mock.log" >&2; exit 1; }
  sleep 0.1
done
[ -n "$base" ] || { echo "rehearse: the server did not start" >&2; exit 1; }
echo "   $base"

inject() { # a fault as JSON: POST /_mock/faults answers 204, or 400 with the reason
  local answer
  answer=$(curl -sS -o "$work/fault.out" -w '%{http_code}' "$base/_mock/faults" \
    -H 'content-type: application/json' -d "$1")
  [ "$answer" = 204 ] || { echo "rehearse: fault refused ($answer): $(cat "$work/fault.out")" >&2; exit 1; }
}

echo "== injecting the fault mix"
inject '{"action": {"respond": {"status": 429, "headers": {"Retry-After": "2"},
                                "body": "{\"error\":\"Rate limit exceeded\"}"}},
         "method": "POST", "path_prefix": "/api/v1/webhooks/", "firing": {"times": 2}}'
inject '{"action": "execute_then_close",
         "method": "POST", "path_prefix": "/api/v1/webhooks/",
         "firing": {"probability": {"p": 0.10, "seed": 7}}}'
inject '{"action": {"respond": {"status": 503, "headers": {"Retry-After": "1"},
                                "body": "{\"error\":\"Processing temporarily unavailable\"}"}},
         "method": "POST", "path_prefix": "/api/v1/webhooks/",
         "firing": {"probability": {"p": 0.10, "seed": 11}}}'
inject '{"action": {"execute_then_delay": {"delay_ms": 3000}},
         "method": "POST", "path_prefix": "/api/v1/webhooks/",
         "firing": {"probability": {"p": 0.03, "seed": 13}}}'

for n in $(seq 1 "$events"); do
  printf '{"event_id":"order-%d:shipped","body":{"order":%d}}\n' "$n" "$n"
done >"$work/events.ndjson"

export HODOFLOW_BASE_URL=$base HODOFLOW_CLIENT_ID=demo-client HODOFLOW_CLIENT_SECRET=demo-secret
batch() { # pass: sends the file, one result line per event in $work/results-<pass>.ndjson
  local status=0
  cargo run --quiet --locked -p hodoflow-send -- batch trg_demo_4b1d9c0e7f \
    --events "$work/events.ndjson" --concurrency 16 --max-attempts 8 --attempt-timeout 2s \
    >"$work/results-$1.ndjson" 2>"$work/batch-$1.log" || status=$?
  echo "   exit $status; $(grep '^batch:' "$work/batch-$1.log" || echo 'no summary')"
}
echo "== hodoflow-send batch: $events events, 16 at a time"
batch 1
echo "== the same file again: every event should answer duplicate"
batch 2

curl -sS "$base/_mock/ledger" >"$work/ledger.json"
jq -r --slurpfile sent <(jq -s 'map(.delivery_id)' "$work/results-1.ndjson") '
  def count(f): [.requests[] | select(.path | startswith("/api/v1/webhooks/")) | select(f)] | length;
  ($sent[0]) as $ids
  | ($ids | length) as $events
  | [$ids[] as $id | (.deliveries[$id] // []) | length] as $runs
  | ($runs | map(select(. == 0)) | length) as $none
  | ($runs | map(select(. > 1)) | length) as $more
  | ([.deliveries[] | length] | add // 0) as $started
  | ([.duplicates[]] | add // 0) as $recognised
  | "the server'"'"'s ledger says",
    "  deliveries  \(count(true)) requests: 429 \(count(.status == 429 and .fault == "respond")), answer lost \(count(.fault == "execute_then_close")), 503 \(count(.status == 503)), slow answer \(count(.fault == "execute_then_delay"))",
    "  events      \($events) sent (each twice), \($recognised) answered duplicate (retries and resends recognised)",
    "  runs        \($started) started: one for \($runs | map(select(. == 1)) | length) events, none for \($none), more than one for \($more)",
    "",
    (if $none == 0 and $more == 0 and $started == $events
     then "check: passed (events sent \($events), runs started \($started), duplicate runs 0)"
     else "check: FAILED (events sent \($events), runs started \($started), duplicate runs \($more), without a run \($none))" end)
' "$work/ledger.json" | tee "$work/check.txt"
grep -q '^check: passed' "$work/check.txt"
