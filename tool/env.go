package tool

import (
	"path"
	"slices"
	"strings"
)

// Who says which kind of process an environment is for.
type Who int

const (
	// ForModel: a process whose command the model chose (the bash tool).
	// Credential-looking variables are removed by default.
	ForModel Who = iota
	// ForConfigured: a command the user configured (a hook, an MCP
	// server): it gets the user's environment except rein's keys and
	// EnvPolicy.Drop, so a hook that calls gh keeps GITHUB_TOKEN.
	ForConfigured
)

// DefaultDrop are the patterns of variables that by convention hold
// credentials, or reach them: an SSH agent's socket signs with the
// user's keys, the D-Bus session bus starts programs outside any sandbox
// (systemd-run --user). ForModel environments lose them unless
// EnvPolicy.Keep names them.
var DefaultDrop = []string{
	"*_API_KEY", "*_APIKEY", "*_TOKEN", "*_SECRET", "*_SECRET_KEY", "*_ACCESS_KEY", "*PASSWORD", "*PASSWD", "*_PWD",
	"*_CREDENTIALS", "*_PRIVATE_KEY", "*DATABASE_URL", "*_DSN", "*CONNECTION_STRING", "SSH_AUTH_SOCK",
	"DBUS_SESSION_BUS_ADDRESS",
}

// EnvPolicy decides which of rein's environment variables a child process
// gets. It is the one filter for the bash tool, hooks and MCP servers.
// Patterns are path.Match globs over variable names, matched without
// regard to case ("aws_*" matches AWS_REGION).
//
// A variable is removed when, first match wins:
//
//  1. its name is in Secrets, or its value contains one of SecretValues:
//     rein's own keys, removed always, whatever Keep says;
//  2. (kept when its name matches Keep;)
//  3. its name matches Drop;
//  4. for ForModel, its name matches DefaultDrop.
//
// Everything else is passed. The zero EnvPolicy removes DefaultDrop from
// ForModel environments and nothing else.
type EnvPolicy struct {
	// Secrets are names of variables holding keys rein uses (the provider
	// variables and every api_key_env of the configuration).
	Secrets []string
	// SecretValues are the key values rein uses; a variable holding one,
	// under any name, is removed. Values shorter than 8 bytes are
	// ignored.
	SecretValues []string
	// Keep are patterns of variables kept although Drop or DefaultDrop
	// matches them (config [env] keep).
	Keep []string
	// Drop are patterns of further variables to remove (config [env]
	// drop).
	Drop []string
}

// Environ returns environ ("NAME=value" entries, as os.Environ gives)
// filtered for who. Order is preserved; environ is not modified.
func (p EnvPolicy) Environ(environ []string, who Who) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if !p.removes(name, value, who) {
			out = append(out, kv)
		}
	}
	return out
}

func (p EnvPolicy) removes(name, value string, who Who) bool {
	if slices.Contains(p.Secrets, name) {
		return true
	}
	for _, v := range p.SecretValues {
		if len(v) >= 8 && strings.Contains(value, v) {
			return true
		}
	}
	if matchAny(p.Keep, name) {
		return false
	}
	if matchAny(p.Drop, name) {
		return true
	}
	return who == ForModel && matchAny(DefaultDrop, name)
}

func matchAny(patterns []string, name string) bool {
	upper := strings.ToUpper(name)
	for _, pat := range patterns {
		if ok, _ := path.Match(strings.ToUpper(pat), upper); ok {
			return true
		}
	}
	return false
}
