#!/bin/sh
# Blocks with exit 2; stderr is the reason.
ev=$(sed -n 's/.*"hook_event_name":"\([A-Za-z]*\)".*/\1/p')
echo "blocked by block.sh on $ev" >&2
exit 2
