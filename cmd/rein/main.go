// Command rein is rein's command line: headless runs (`rein run`), shell
// injects (`rein inject`), the keyless demo (`rein demo`), session management
// (`rein sessions ...`) and the effective configuration (`rein config show`).
//
// It is the one place that wires concrete backends: the JSONL store, the
// model catalog, the built-in tools, the permission guard and command hooks.
// Exit codes are defined here and nowhere else (see exitcodes.go and
// docs/cli.md).
package main

import (
	"os"
)

func main() {
	os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
