#!/usr/bin/env bash
# step.sh "WHAT" COMMAND...: one make phase as one line of progress. Says WHAT, runs COMMAND
# with its output kept in a log, says it is still at it every minute, then how long it took.
# On failure the log's last 40 lines are shown and its exit code is make's.
set -uo pipefail
what=$1
shift
log=$(mktemp -t goalfleet-step.XXXXXX)
echo "==> $what"
start=$SECONDS
"$@" >"$log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null; rm -f "$log"; exit 130' INT TERM
next=60
while kill -0 "$pid" 2>/dev/null; do
  sleep 1
  if [ $((SECONDS - start)) -ge "$next" ]; then
    echo "    ... still at it ($((next / 60)) min)"
    next=$((next + 60))
  fi
done
wait "$pid"
rc=$?
if [ "$rc" -ne 0 ]; then
  echo "    failed (exit $rc) after $((SECONDS - start)) s; the last lines of its output:" >&2
  tail -n 40 "$log" >&2
  rm -f "$log"
  exit "$rc"
fi
rm -f "$log"
echo "    done in $((SECONDS - start)) s"
