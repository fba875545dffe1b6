package hook

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/agnivade/levenshtein"
)

// Errors of Load and Parse. They are wrapped with the file name.
var (
	// ErrConfig: a settings file's hooks section is malformed (bad JSON,
	// wrong shape, unknown hook type, invalid matcher).
	ErrConfig = errors.New("hook: invalid hook config")
)

// Events supported by the bridge, in Claude Code's spelling.
const (
	SessionStart     = "SessionStart"
	UserPromptSubmit = "UserPromptSubmit"
	PreToolUse       = "PreToolUse"
	PostToolUse      = "PostToolUse"
	Stop             = "Stop"
	PreCompact       = "PreCompact"
	SessionEnd       = "SessionEnd"
	Notification     = "Notification"
)

// Events lists the supported events.
var Events = []string{SessionStart, UserPromptSubmit, PreToolUse, PostToolUse, Stop, PreCompact, SessionEnd, Notification}

// eventsWithMatcher are the events whose matcher is used; the others ignore
// it (as Claude Code does).
var eventsWithMatcher = map[string]bool{SessionStart: true, PreToolUse: true, PostToolUse: true, PreCompact: true,
	SessionEnd: true, Notification: true}

// otherEvents are Claude Code's hook events that rein does not fire: their
// hooks are skipped with a warning. Any other name is most likely a typo,
// and its warning suggests the name meant.
var otherEvents = []string{"PostToolUseFailure", "PermissionRequest", "PermissionDenied", "SubagentStart", "SubagentStop",
	"Setup", "TeammateIdle", "TaskCompleted", "ConfigChange", "CwdChanged", "FileChanged", "WorktreeCreate",
	"WorktreeRemove", "MessageDisplay", "InstructionsLoaded"}

// otherHookTypes are Claude Code handler types rein does not run: skipped
// with a warning rather than refused, so a .claude/settings.json that uses
// them still loads.
var otherHookTypes = map[string]bool{"prompt": true, "agent": true, "http": true, "mcp_tool": true}

// LoadOptions says where Load looks.
type LoadOptions struct {
	// ProjectDir holds .rein/settings.json, .claude/settings.json and
	// .claude/settings.local.json. Default: the process's working
	// directory.
	ProjectDir string
	// UserConfigDir holds the user's rein/settings.json. Default:
	// $XDG_CONFIG_HOME, else ~/.config. Set it to "-" to skip the user file.
	UserConfigDir string
	// Home holds the user's Claude Code settings, .claude/settings.json.
	// Default: the user's home directory. Set it to "-" to skip them.
	Home string
}

// Config is the loaded, validated set of command hooks. It is immutable.
type Config struct {
	// Files lists the settings files that were read, in load order.
	Files []string
	// Warnings lists what was skipped (unsupported events or hook types).
	Warnings []string
	// DisabledBy names the settings file whose "disableAllHooks": true
	// turned every hook off ("" when none did): then no hook runs.
	DisabledBy string

	events    map[string][]*Command
	projects  []string // the workspace's files among Files
	disablers []string // files that said disableAllHooks, in load order
}

// Command is one configured command hook.
type Command struct {
	// ID is "claude-code:<Event>#<n>", n counting the event's command hooks
	// from 1 in config order. It names the hook in hook/result events and in
	// the sources of its contexts.
	ID      string
	Event   string
	Matcher string
	Command string
	// Timeout is the hook's own timeout (0: the runtime default).
	Timeout time.Duration
	// File is the settings file that declared it.
	File string
	// Unsandboxed: the hook runs outside the OS sandbox even when the
	// session's mode is sandboxed. Only the user's own settings file can
	// ask for it ("sandbox": false on the hook); a project file that does
	// is warned about and its hook stays sandboxed, so a cloned repository
	// cannot take its hooks out of the sandbox.
	Unsandboxed bool
	// Project is true for a hook of the workspace's own settings
	// (.rein/settings.json, .claude/settings*.json): it runs only in a
	// trusted workspace (see WithoutProject).
	Project bool

	match func(string) bool
}

// Len reports how many command hooks are configured for event.
func (c *Config) Len(event string) int { return len(c.active(event)) }

// active returns the hooks of event that may run: none when DisabledBy is
// set.
func (c *Config) active(event string) []*Command {
	if c == nil || c.DisabledBy != "" {
		return nil
	}
	return c.events[event]
}

// Commands returns the command hooks of event in config order.
func (c *Config) Commands(event string) []*Command { return slices.Clone(c.active(event)) }

// Load reads the hooks of the user's files (rein's settings.json, then
// Claude Code's ~/.claude/settings.json) and the workspace's
// (.rein/settings.json, .claude/settings.json, .claude/settings.local.json),
// in that order, which is the config order of hooks on the same event.
// The workspace's are marked Project (see WithoutProject). A missing file
// is skipped; a malformed one is an error naming the file. Only the
// "hooks" and "disableAllHooks" keys are read; Claude Code's other
// settings (permissions, env, ...) are not rein's and are ignored.
func Load(opts LoadOptions) (*Config, error) {
	proj := opts.ProjectDir
	if proj == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("hook: project dir: %w", err)
		}
		proj = wd
	}
	user := opts.UserConfigDir
	if user == "" {
		if x := os.Getenv("XDG_CONFIG_HOME"); x != "" {
			user = x
		} else if home, err := os.UserHomeDir(); err == nil {
			user = filepath.Join(home, ".config")
		}
	}
	home := opts.Home
	if home == "" {
		if h, err := os.UserHomeDir(); err == nil {
			home = h
		}
	}
	type file struct {
		path  string
		scope scope
	}
	// The user's files first, so that their hooks keep their ids whether
	// the workspace's run or not; then the workspace's, Claude Code's in
	// its own order (shared, then local).
	var files []file
	if user != "" && user != "-" {
		files = append(files, file{filepath.Join(user, "rein", "settings.json"), scopeUser})
	}
	if home != "" && home != "-" {
		files = append(files, file{filepath.Join(home, ".claude", "settings.json"), scopeUser})
	}
	files = append(files,
		file{filepath.Join(proj, ".rein", "settings.json"), scopeProject},
		file{filepath.Join(proj, ".claude", "settings.json"), scopeProject},
		file{filepath.Join(proj, ".claude", "settings.local.json"), scopeProject})
	c := &Config{events: map[string][]*Command{}}
	for _, f := range files {
		if slices.Contains(c.Files, f.path) {
			continue // a project at $HOME: ~/.claude is the user's own
		}
		if err := c.loadFile(f.path, f.scope); err != nil {
			return nil, err
		}
	}
	c.applyDisable()
	return c, nil
}

// applyDisable sets DisabledBy when a file said "disableAllHooks": true,
// as Claude Code does: then no hook runs. (A workspace file's say counts
// only while its hooks do: WithoutProject drops it.)
func (c *Config) applyDisable() {
	c.DisabledBy = ""
	if len(c.disablers) > 0 {
		c.DisabledBy = c.disablers[0]
	}
}

// ProjectCommands returns the hooks declared by the workspace's own
// settings files, by event (in Events order) and config order.
func (c *Config) ProjectCommands() []*Command {
	if c == nil {
		return nil
	}
	var out []*Command
	for _, ev := range Events {
		for _, h := range c.events[ev] {
			if h.Project {
				out = append(out, h)
			}
		}
	}
	return out
}

// ProjectDisablers returns the workspace's own settings files that say
// "disableAllHooks": true. Such a file turns off the user's hooks too, so
// it needs trust like a hook command (WithoutProject drops its say).
func (c *Config) ProjectDisablers() []string {
	if c == nil {
		return nil
	}
	var out []string
	for _, f := range c.disablers {
		if slices.Contains(c.projects, f) {
			out = append(out, f)
		}
	}
	return out
}

// WithoutProject returns c without the workspace's hooks (an untrusted
// workspace): only the user's own hooks run. Their IDs do not change (the
// user's file is read first). Warnings are kept.
func (c *Config) WithoutProject() *Config {
	if c == nil {
		return nil
	}
	out := &Config{Warnings: c.Warnings, events: map[string][]*Command{}}
	for _, f := range c.disablers {
		if !slices.Contains(c.projects, f) {
			out.disablers = append(out.disablers, f)
		}
	}
	out.applyDisable()
	for ev, hs := range c.events {
		for _, h := range hs {
			if !h.Project {
				out.events[ev] = append(out.events[ev], h)
			}
		}
	}
	for _, f := range c.Files {
		if !slices.Contains(c.projects, f) {
			out.Files = append(out.Files, f)
		}
	}
	return out
}

// scope says whose settings file a document is.
type scope int

const (
	scopeOther   scope = iota // Parse: neither
	scopeUser                 // the user's own: may mark hooks unsandboxed
	scopeProject              // the workspace's: runs only when trusted
)

func (c *Config) loadFile(path string, sc scope) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("hook: %s: %w", path, err)
	}
	if err := c.add(path, b, sc); err != nil {
		return err
	}
	c.Files = append(c.Files, path)
	if sc == scopeProject {
		c.projects = append(c.projects, path)
	}
	return nil
}

// Parse reads one settings document (a JSON object with a "hooks" key, as
// in a settings file) as if it were a file called name. It is Load for one
// file, for tests and embedders.
func Parse(name string, data []byte) (*Config, error) {
	c := &Config{events: map[string][]*Command{}}
	if err := c.add(name, data, scopeOther); err != nil {
		return nil, err
	}
	c.Files = []string{name}
	c.applyDisable()
	return c, nil
}

type settingsFile struct {
	Hooks           map[string]json.RawMessage `json:"hooks"`
	DisableAllHooks bool                       `json:"disableAllHooks"`
}

type matcherGroup struct {
	Matcher *string           `json:"matcher"`
	Hooks   []json.RawMessage `json:"hooks"`
}

type handler struct {
	Type    *string  `json:"type"`
	Command *string  `json:"command"`
	Timeout *float64 `json:"timeout"`
	Sandbox *bool    `json:"sandbox"`
}

// add parses one settings document and appends its hooks. sc says whose
// file it is: only the user's own may run hooks unsandboxed, and the
// workspace's run only when trusted.
func (c *Config) add(path string, data []byte, sc scope) error {
	user, project := sc == scopeUser, sc == scopeProject
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrConfig, path, fmt.Sprintf(format, args...))
	}
	var sf settingsFile
	if err := json.Unmarshal(data, &sf); err != nil {
		return bad("%v", err)
	}
	// Events in a stable order: supported ones in their canonical order,
	// then warn about the others.
	var others []string
	for ev := range sf.Hooks {
		if !slices.Contains(Events, ev) {
			others = append(others, ev)
		}
	}
	slices.Sort(others)
	for _, ev := range others {
		if slices.Contains(otherEvents, ev) {
			c.Warnings = append(c.Warnings, fmt.Sprintf("%s: hook event %q is not supported by rein; its hooks are ignored", path, ev))
			continue
		}
		w := fmt.Sprintf("%s: unknown hook event %q", path, ev)
		if s := suggestEvent(ev); s != "" {
			w += fmt.Sprintf(" (did you mean %q?)", s)
		}
		c.Warnings = append(c.Warnings, w+"; its hooks are ignored")
	}
	if sf.DisableAllHooks {
		c.disablers = append(c.disablers, path)
	}
	for _, ev := range Events {
		raw, ok := sf.Hooks[ev]
		if !ok {
			continue
		}
		var groups []matcherGroup
		if err := json.Unmarshal(raw, &groups); err != nil {
			return bad("hooks.%s: want a list of {matcher, hooks}: %v", ev, err)
		}
		for gi, g := range groups {
			m := ""
			if g.Matcher != nil {
				m = *g.Matcher
			}
			match, err := compileMatcher(m)
			if err != nil {
				return bad("hooks.%s[%d].matcher %q: %v", ev, gi, m, err)
			}
			if !eventsWithMatcher[ev] {
				match = func(string) bool { return true }
			}
			for hi, rawH := range g.Hooks {
				var h handler
				if err := json.Unmarshal(rawH, &h); err != nil {
					return bad("hooks.%s[%d].hooks[%d]: %v", ev, gi, hi, err)
				}
				where := fmt.Sprintf("hooks.%s[%d].hooks[%d]", ev, gi, hi)
				switch {
				case h.Type == nil:
					return bad("%s: missing \"type\" (rein runs \"command\" hooks)", where)
				case *h.Type == "command":
				case otherHookTypes[*h.Type]:
					c.Warnings = append(c.Warnings, fmt.Sprintf("%s: %s: hook type %q is not supported by rein; skipped", path, where, *h.Type))
					continue
				default:
					return bad("%s: unknown hook type %q (rein runs \"command\" hooks)", where, *h.Type)
				}
				if h.Command == nil || strings.TrimSpace(*h.Command) == "" {
					return bad("%s: a command hook needs a non-empty \"command\"", where)
				}
				var timeout time.Duration
				if h.Timeout != nil {
					if *h.Timeout <= 0 {
						return bad("%s: timeout must be a positive number of seconds", where)
					}
					timeout = time.Duration(*h.Timeout * float64(time.Second))
				}
				unsandboxed := h.Sandbox != nil && !*h.Sandbox
				if unsandboxed && !user {
					c.Warnings = append(c.Warnings, fmt.Sprintf("%s: %s: \"sandbox\": false is ignored: only your own settings file may run a hook outside the sandbox", path, where))
					unsandboxed = false
				}
				n := len(c.events[ev]) + 1
				c.events[ev] = append(c.events[ev], &Command{
					ID: fmt.Sprintf("claude-code:%s#%d", ev, n), Event: ev, Matcher: m,
					Command: *h.Command, Timeout: timeout, File: path, Unsandboxed: unsandboxed, Project: project, match: match,
				})
			}
		}
	}
	return nil
}

// literalMatcher is a matcher Claude Code treats as exact names separated
// by "|".
var literalMatcher = regexp.MustCompile(`^[A-Za-z0-9_|]+$`)

// compileMatcher implements Claude Code's matcher rules: "" and "*" match
// everything; a pattern of letters, digits, "_" and "|" is a set of exact,
// case-sensitive names; anything else is a regular expression that must
// match somewhere in the subject (unanchored, like JavaScript's test).
func compileMatcher(m string) (func(string) bool, error) {
	switch {
	case m == "" || m == "*":
		return func(string) bool { return true }, nil
	case literalMatcher.MatchString(m):
		names := strings.Split(m, "|")
		return func(s string) bool { return slices.Contains(names, s) }, nil
	}
	re, err := regexp.Compile(m)
	if err != nil {
		return nil, err
	}
	return re.MatchString, nil
}

// Matches reports whether the hook applies to subject (a tool name, a
// session-start source, a compaction trigger); events without a matcher
// match everything.
func (h *Command) Matches(subject string) bool { return h.match(subject) }

// suggestEvent returns the event name (supported or not) closest to name,
// when it differs only in case or by at most two edits; else "".
func suggestEvent(name string) string {
	best, bestD := "", 3
	for _, ev := range slices.Concat(Events, otherEvents) {
		if strings.EqualFold(ev, name) {
			return ev
		}
		if d := levenshtein.ComputeDistance(strings.ToLower(name), strings.ToLower(ev)); d < bestD {
			best, bestD = ev, d
		}
	}
	return best
}
