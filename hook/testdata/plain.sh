#!/bin/sh
# Plain stdout: context for UserPromptSubmit and SessionStart.
cat >/dev/null
echo "plain context from plain.sh"
