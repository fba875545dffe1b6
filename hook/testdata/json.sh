#!/bin/sh
# Prints its first argument (a JSON reply) on stdout, exit 0.
cat >/dev/null
printf '%s\n' "$1"
