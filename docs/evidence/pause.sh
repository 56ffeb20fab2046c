#!/usr/bin/env bash
# pause.sh stop|cont REASON: SIGSTOP/SIGCONT every fisherkit process of the evidence run, logged.
set -euo pipefail
LOG=/work/evidence/pauses.log
sig=$1; shift
pids=$(pgrep -f '/work/evidence/bin[0-9]*/(fisherkit|cnn_pass)' || true)
[ -n "$pids" ] || { echo "no run"; exit 0; }
case $sig in
  stop) kill -STOP $pids;;
  cont) kill -CONT $pids;;
esac
echo "$(date -u +%FT%T.%3NZ) $sig ${*:-} pids=$(echo $pids)" >> $LOG
