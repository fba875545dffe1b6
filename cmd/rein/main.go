// Command rein is rein's command line: headless runs (`rein run`), shell
// injects (`rein inject`), the keyless demo (`rein demo`), session management
// (`rein sessions ...`), the effective configuration (`rein config show`) and
// workspace trust (`rein trust`).
//
// It is the one place that wires concrete backends: the JSONL store, the
// model catalog, the built-in tools, the permission guard and command hooks;
// it decides workspace trust before any of them is set up, and routes all
// it prints and logs through one redactor (docs/security.md).
// Exit codes are defined here and nowhere else (see exitcodes.go and
// docs/cli.md).
package main

import (
	"os"
)

func main() {
	os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
