package config

import "path/filepath"

// ProtectedDirs are the directories whose files decide what rein runs and
// what it remembers, for the user whose environment getenv reads: rein's
// configuration directory (UserDir: config.toml, settings.json hooks,
// trusted.json), Claude Code's ~/.claude (the user's own hooks), and the
// session store directories given (a JSONL store's root). A model that could
// write in one could have a program run outside the sandbox in the next
// session (an MCP server, an unsandboxed hook), trust a workspace, or
// rewrite what the model is shown of a session.
//
// This list is the one place they are named: the CLI keeps every write root
// of a sandboxed session (the workspace, the temporary directory,
// writable_roots) from holding one or lying in one, and gives the roots it
// keeps to the file tools and the OS sandbox alike.
func ProtectedDirs(getenv func(string) string, storeDirs ...string) []string {
	var out []string
	if d := UserDir(getenv); d != "" {
		out = append(out, d)
	}
	if h := getenv("HOME"); h != "" {
		out = append(out, filepath.Join(h, ".claude"))
	}
	for _, d := range storeDirs {
		if d != "" {
			out = append(out, filepath.Clean(d))
		}
	}
	return out
}
