#!/bin/sh
# Adds context through hookSpecificOutput.additionalContext.
ev=$(sed -n 's/.*"hook_event_name":"\([A-Za-z]*\)".*/\1/p')
tag=${1:-context.sh}
printf '{"hookSpecificOutput":{"hookEventName":"%s","additionalContext":"%s for %s"}}\n' "$ev" "$tag" "$ev"
