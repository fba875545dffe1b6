#!/bin/sh
# Plain context listing a few environment variables.
cat >/dev/null
echo "FOO=${FOO:-unset} SECRET=${SECRET:-unset} PROJECT=${CLAUDE_PROJECT_DIR:+set}"
