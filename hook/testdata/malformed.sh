#!/bin/sh
# Prints JSON that does not parse.
cat >/dev/null
echo '{"decision": "block", "reason": '
