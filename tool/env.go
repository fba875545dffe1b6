package tool

import (
	"path"
	"strings"
)

// ProviderKeys are the environment variables holding rein's model provider
// keys. SafeEnv always removes them.
var ProviderKeys = []string{"DEEPSEEK_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"}

// secretSuffixes mark variables that by convention hold credentials.
var secretSuffixes = []string{"_API_KEY", "_APIKEY", "_TOKEN", "_SECRET", "_SECRET_KEY", "_ACCESS_KEY", "_PASSWORD"}

// SafeEnv returns environ ("NAME=value" entries, as os.Environ gives) without
// the variables a tool process must not see:
//
//   - ProviderKeys, always;
//   - any name ending (case-insensitively) in _API_KEY, _APIKEY, _TOKEN,
//     _SECRET, _SECRET_KEY, _ACCESS_KEY or _PASSWORD (GITHUB_TOKEN,
//     AWS_SECRET_ACCESS_KEY, ...);
//   - any name in extra, exactly or as a path.Match pattern ("AWS_*").
//
// An extra entry "!NAME" keeps NAME even if a suffix rule would remove it
// (a project whose tests need, say, GITHUB_TOKEN); it cannot keep a
// provider key. Order is preserved; environ is not modified.
func SafeEnv(environ []string, extra []string) []string {
	var drop, keep []string
	for _, e := range extra {
		if k, ok := strings.CutPrefix(e, "!"); ok {
			keep = append(keep, k)
		} else if e != "" {
			drop = append(drop, e)
		}
	}
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !secret(name, drop, keep) {
			out = append(out, kv)
		}
	}
	return out
}

func secret(name string, drop, keep []string) bool {
	for _, k := range ProviderKeys {
		if name == k {
			return true
		}
	}
	for _, d := range drop {
		if d == name {
			return true
		}
		if ok, _ := path.Match(d, name); ok {
			return true
		}
	}
	for _, k := range keep {
		if k == name {
			return false
		}
	}
	upper := strings.ToUpper(name)
	for _, s := range secretSuffixes {
		if strings.HasSuffix(upper, s) {
			return true
		}
	}
	return false
}
