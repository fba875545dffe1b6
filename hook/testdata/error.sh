#!/bin/sh
# A failing hook: exit 1 is a non-blocking error.
cat >/dev/null
echo "error.sh: something broke" >&2
exit 1
