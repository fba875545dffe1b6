#!/bin/sh
# Prints 3 MB of x to stdout, or to stderr when $1 is "stderr", then exits
# with $2 (default 0).
cat >/dev/null
if [ "$1" = stderr ]; then
  head -c 3000000 /dev/zero | tr '\0' x >&2
else
  head -c 3000000 /dev/zero | tr '\0' x
fi
exit ${2:-0}
