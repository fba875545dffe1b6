#!/bin/sh
# A Stop hook that limits itself the Claude Code way: it blocks once, and
# lets the turn stop when stop_hook_active is true.
if grep -q '"stop_hook_active":true'; then
  exit 0
fi
printf '{"decision":"block","reason":"run the tests before you stop"}\n'
