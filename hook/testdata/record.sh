#!/bin/sh
# Appends the payload to file $1, then sleeps $2 seconds (default 0).
cat >> "$1"
sleep ${2:-0}
