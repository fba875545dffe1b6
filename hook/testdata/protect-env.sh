#!/bin/sh
# A typical Claude Code guard, used unchanged: refuse writes to .env files
# and log every other write's path from the tool response.
input=$(cat)
path=$(printf '%s' "$input" | jq -r '.tool_input.file_path // empty')
event=$(printf '%s' "$input" | jq -r '.hook_event_name')
if [ "$event" = PostToolUse ]; then
  printf '%s' "$input" | jq -r '.tool_response.filePath' >> "$1"
  exit 0
fi
case "$path" in
  *.env) echo "refusing to write $path: secrets live there" >&2; exit 2 ;;
esac
exit 0
