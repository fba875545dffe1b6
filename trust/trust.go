// Package trust decides which workspaces the user trusts, and so which of a
// project's own settings rein applies. A workspace is untrusted until the
// user trusts it. In an untrusted workspace the project's settings that can
// run code, redirect credentials or widen permissions (hook commands, a
// switch that turns off the user's hooks, provider base URLs, key variables and headers, a more permissive mode,
// allow rules, a wider sandbox, kept environment variables, MCP servers)
// are not applied;
// harmless ones (model name, instructions, context window) are.
//
// The package knows no config format: callers describe what a project asks
// for as Items, and Check and Resolve decide. Trust is stored per workspace
// root (its real path) together with the Items trusted and their Digest; a
// later change to them (a new hook command, another base URL) needs trust
// again, and the Decision says what changed. Removing settings does not.
//
// Everything the package shows of a project's settings (Question.Text,
// Describe, Notice) goes through display.Quote: the values are the
// repository's, and a control character must not make one look like
// another.
//
// Concurrency: a Store serialises its writers across processes with a lock
// file; Decisions are plain values. This package imports only the standard
// library and package display, and must stay on the bottom floor.
package trust

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Kinds of trust-relevant settings, in the order they are shown.
const (
	// KindHook is a command a project hook would run.
	KindHook = "hook"
	// KindHooksOff is a project's "disableAllHooks": true, which would
	// turn off the user's own hooks too (a hook that blocks pasted
	// secrets, say).
	KindHooksOff = "hooks-off"
	// KindProvider is where a provider's requests, and so the user's API
	// key, would go: a base URL, the variable the key is read from, or a
	// header.
	KindProvider = "provider"
	// KindMode is a permission mode more permissive than the user's.
	KindMode = "permission-mode"
	// KindAllow is a permission rule that allows tool calls.
	KindAllow = "allow-rule"
	// KindSandbox widens the OS sandbox: a writable root, network access.
	KindSandbox = "sandbox"
	// KindEnvKeep is a variable kept in the tools' environment although
	// rein would remove it.
	KindEnvKeep = "env-keep"
	// KindMCP is an MCP server the project would start.
	KindMCP = "mcp-server"
	// KindMCPCwd is an MCP server of the user's own whose working
	// directory is inside the workspace, which would then choose the
	// server's code.
	KindMCPCwd = "mcp-cwd"
	// KindPrompt replaces or extends rein's own system prompt.
	KindPrompt = "system-prompt"
	// KindLimit is a limit looser than the user's: more steps, output
	// tokens, thinking, instructions, context or time per request.
	KindLimit = "limit"
	// KindPrices sets the prices rein reports costs with.
	KindPrices = "prices"
)

var kindOrder = []string{KindHook, KindHooksOff, KindProvider, KindMode, KindAllow, KindSandbox, KindEnvKeep, KindMCP, KindMCPCwd, KindPrompt, KindLimit, KindPrices}

// Item is one trust-relevant setting of a project.
type Item struct {
	// Kind is one of the Kind constants (others are shown last, by name).
	Kind string `json:"kind"`
	// Key names the setting: "providers.deepseek.base_url",
	// "hooks.PreToolUse[Bash]", "permission_mode".
	Key string `json:"key"`
	// Value is what it would do: the URL, the hook command, the mode.
	Value string `json:"value"`
	// Origin is where it is set ("FILE:LINE" or "FILE"). It is shown but
	// is not part of the digest: moving a line asks nothing.
	Origin string `json:"origin,omitempty"`
}

func (it Item) same(o Item) bool { return it.Kind == o.Kind && it.Key == o.Key && it.Value == o.Value }

// Digest is a stable hash of items' kinds, keys and values, independent of
// their order and origins: "sha256:<hex>".
func Digest(items []Item) string {
	lines := make([]string, len(items))
	for i, it := range items {
		lines[i] = it.Kind + "\x00" + it.Key + "\x00" + it.Value
	}
	slices.Sort(lines)
	lines = slices.Compact(lines)
	h := sha256.New()
	for _, l := range lines {
		h.Write([]byte(l))
		h.Write([]byte{'\n'})
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// Markers are the entries that make a directory a workspace root.
var Markers = []string{".rein", ".claude", ".git"}

// Root returns the workspace root of dir (an absolute path): the nearest
// directory upwards from dir, dir included, that holds .rein, .claude or
// .git; dir itself when none does. The search never reaches home or goes
// above it unless dir is home: a home directory holds the user's own
// ~/.claude and sometimes a dotfiles ~/.git, and must not turn every
// directory below it into one big workspace. An empty home stops nothing.
func Root(dir, home string) string {
	dir = filepath.Clean(dir)
	if home != "" {
		home = filepath.Clean(home)
	}
	for d := dir; ; {
		if d == home && d != dir {
			return dir
		}
		for _, m := range Markers {
			if _, err := os.Lstat(filepath.Join(d, m)); err == nil {
				return d
			}
		}
		if d == home {
			return dir
		}
		parent := filepath.Dir(d)
		if parent == d {
			return dir
		}
		d = parent
	}
}

// Key is the name trust is stored under for root: its real path (symlinks
// resolved), or the cleaned absolute path when it cannot be resolved (a
// directory that is gone can still be revoked).
func Key(root string) string {
	abs, err := filepath.Abs(root)
	if err != nil {
		abs = filepath.Clean(root)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real
	}
	return abs
}

// Status is what the store says about a workspace.
type Status string

// Statuses of a Decision.
const (
	// StatusNone: the workspace asks for nothing that needs trust.
	StatusNone Status = "none"
	// StatusTrusted: trusted, and its settings are those trusted (or
	// fewer).
	StatusTrusted Status = "trusted"
	// StatusUntrusted: never trusted (or trust was revoked).
	StatusUntrusted Status = "untrusted"
	// StatusChanged: trusted once, but its settings changed since.
	StatusChanged Status = "changed"
)

// Change is a trust-relevant setting that was not there when the user
// trusted the workspace.
type Change struct {
	Item Item
	// Was lists the values the same kind and key had when trusted; empty
	// when the setting is new.
	Was []string
}

// Decision says whether a workspace's trust-relevant settings apply.
type Decision struct {
	// Root is the workspace root's real path (the store key).
	Root string
	// Status is what the store says.
	Status Status
	// Items are the workspace's trust-relevant settings: applied when
	// Apply, ignored otherwise.
	Items []Item
	// Changes lists, for StatusChanged, what is new since the workspace
	// was trusted.
	Changes []Change
	// Apply reports whether Items apply in this run.
	Apply bool
	// By says why they apply: "store", "flag --trust", "answer once",
	// "answer always"; "" when they do not.
	By string
}

// Ignored returns the items that do not apply, of the given kinds (all
// kinds when none is given). Callers that gate a kind of setting (the MCP
// servers of a project, say) use it to list what they skip.
func (d Decision) Ignored(kinds ...string) []Item {
	if d.Apply {
		return nil
	}
	var out []Item
	for _, it := range d.Items {
		if len(kinds) == 0 || slices.Contains(kinds, it.Kind) {
			out = append(out, it)
		}
	}
	return out
}

// Check looks root up in s and decides without asking anyone: the items
// apply when there are none, or when the workspace is trusted and each item
// was trusted (a project that only dropped settings stays trusted). A store
// that cannot be read is an error; callers should then treat the workspace
// as untrusted (the Decision returned still lists the items).
func Check(s *Store, root string, items []Item) (Decision, error) {
	d := Decision{Root: Key(root), Items: slices.Clone(items)}
	sortItems(d.Items)
	if len(items) == 0 {
		d.Status, d.Apply, d.By = StatusNone, true, "store"
		return d, nil
	}
	e, ok, err := s.Get(d.Root)
	if err != nil || !ok {
		d.Status = StatusUntrusted
		return d, err
	}
	if e.Digest == Digest(items) {
		d.Status, d.Apply, d.By = StatusTrusted, true, "store"
		return d, nil
	}
	for _, it := range d.Items {
		if slices.ContainsFunc(e.Items, it.same) {
			continue
		}
		c := Change{Item: it}
		for _, old := range e.Items {
			if old.Kind == it.Kind && old.Key == it.Key {
				c.Was = append(c.Was, old.Value)
			}
		}
		d.Changes = append(d.Changes, c)
	}
	if len(d.Changes) == 0 {
		d.Status, d.Apply, d.By = StatusTrusted, true, "store"
		return d, nil
	}
	d.Status = StatusChanged
	return d, nil
}

func kindRank(k string) int {
	if i := slices.Index(kindOrder, k); i >= 0 {
		return i
	}
	return len(kindOrder)
}

// sortItems orders items by kind (as shown), then key, keeping the given
// order of items with the same kind and key (hooks run in config order).
func sortItems(items []Item) {
	slices.SortStableFunc(items, func(a, b Item) int {
		if r := kindRank(a.Kind) - kindRank(b.Kind); r != 0 {
			return r
		}
		if a.Kind != b.Kind {
			return strings.Compare(a.Kind, b.Kind)
		}
		return strings.Compare(a.Key, b.Key)
	})
}
