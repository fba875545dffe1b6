#!/bin/sh
# Hangs: a child sleeps (its pid written to $1 when given) and the hook waits.
cat >/dev/null
sleep 30 &
[ -n "$1" ] && echo $! > "$1"
wait
