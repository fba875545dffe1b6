// Package guard is rein's permission policy for tool calls: a mode
// (read-only, workspace-write, full-access), allow/ask/deny rules by tool
// and pattern, workspace confinement with symlinks and ".." resolved, the
// Approver that answers "ask". (The environment filter that keeps secrets
// away from shell commands is tool.EnvPolicy.)
//
// Decide is a pure function of the policy, the call and the file system; it
// never asks anyone. Authorize combines it with an Approver. The agent
// records the outcome as a tool/approval event; this package writes
// nothing.
//
// The policy reads commands, it does not confine them: a shell script's
// writes are checked by reading it (redirections such as > /etc/x, and the
// arguments of commands known to change the files they name: rm, mv, cp,
// tee, ...), and rules match each command the script runs after parsing
// (see Rule); Edit and Write deny and ask rules bind those writes too. What programs do beyond their arguments is not seen here; in
// read-only and workspace-write modes rein runs bash and hooks under the OS
// sandbox (package sandbox), which enforces the write boundary whatever
// the script says. Where the sandbox is unavailable this analysis is all
// there is. docs/security.md has the threat model and the guarantees.
//
// Concurrency: a Policy must not be changed while Decide runs; Decide may
// run concurrently. This package imports only tool-independent libraries
// (stdlib, doublestar, mvdan.cc/sh); it must not import agent, hook or any
// face.
package guard

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors.
var (
	// ErrBadRule: a rule does not parse.
	ErrBadRule = errors.New("guard: bad rule")
	// ErrBadMode: an unknown mode name.
	ErrBadMode = errors.New("guard: bad mode")
)

// Mode is the baseline of what tools may do.
type Mode string

const (
	// ReadOnly allows reading tools, asks before shell commands and other
	// tools (allow rules can lift that), and denies every write: write and
	// edit, and shell commands known to write files (git status > f). No
	// rule and no approval lifts the denial.
	ReadOnly Mode = "read-only"
	// WorkspaceWrite (the default) allows reads anywhere and writes inside
	// the workspace root (and Policy.Writable); writes outside are denied,
	// and no rule allows them.
	WorkspaceWrite Mode = "workspace-write"
	// FullAccess allows everything the rules do not restrict.
	FullAccess Mode = "full-access"
)

// ParseMode returns the mode called s; "" is WorkspaceWrite.
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case "":
		return WorkspaceWrite, nil
	case ReadOnly, WorkspaceWrite, FullAccess:
		return Mode(s), nil
	}
	return "", fmt.Errorf("%w %q (want read-only, workspace-write or full-access)", ErrBadMode, s)
}

// Action is a decision's verdict; a larger value is more restrictive.
type Action int

const (
	Allow Action = iota
	Ask
	Deny
)

func (a Action) String() string {
	switch a {
	case Allow:
		return "allow"
	case Ask:
		return "ask"
	case Deny:
		return "deny"
	}
	return fmt.Sprintf("action(%d)", int(a))
}

// MarshalText writes the action's name.
func (a Action) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// Decision is the policy's answer for one call.
type Decision struct {
	Action Action
	// By names what decided: "rule:<rule>" or "mode:<mode>".
	By string
	// Reason says why, for the model (on deny) and the human (on ask).
	Reason string
}

// Kind is what a tool does, as far as the policy is concerned.
type Kind int

const (
	// KindOther is a tool the policy knows nothing about: asked in
	// read-only mode, allowed otherwise; patterns never match it.
	KindOther Kind = iota
	// KindRead reads files; its path is the rule subject.
	KindRead
	// KindWrite changes files; its path is the rule subject and must lie in
	// the workspace in workspace-write mode.
	KindWrite
	// KindShell runs a shell script; its command is the rule subject.
	KindShell
	// KindSafe has no effect outside the session (todo), or is declared
	// not to change anything (an MCP tool its server annotates
	// readOnlyHint): allowed in every mode unless a rule says otherwise.
	KindSafe
	// KindExternal acts beyond the workspace in ways the policy cannot
	// read or confine (an MCP tool its server does not annotate as
	// read-only): asked in read-only and workspace-write modes (an allow
	// rule lifts the question), allowed in full-access. Tools named
	// "mcp__…" that Kinds and Classify do not know are of this kind.
	KindExternal
)

// toolInfo says how to read a built-in tool's arguments.
type toolInfo struct {
	kind  Kind
	field string // the JSON field holding the subject
}

var builtin = map[string]toolInfo{
	"read":  {KindRead, "file_path"},
	"glob":  {KindRead, "path"},
	"grep":  {KindRead, "path"},
	"ls":    {KindRead, "path"},
	"write": {KindWrite, "file_path"},
	"edit":  {KindWrite, "file_path"},
	"bash":  {KindShell, "command"},
	"todo":  {KindSafe, ""},
}

// Policy decides tool calls. The zero value is workspace-write with no
// root, which denies every write: set Root.
type Policy struct {
	Mode  Mode
	Rules []Rule
	// Root is the workspace root (usually the session's working directory).
	Root string
	// Dir resolves relative paths; empty means Root.
	Dir string
	// Writable are further directories writes may go to in
	// workspace-write mode (e.g. a temporary directory).
	Writable []string
	// Kinds classifies tools beyond the built-ins, by name; for KindRead
	// and KindWrite tools the subject is the "path" or "file_path"
	// argument, for KindShell the "command" argument.
	Kinds map[string]Kind
	// Classify, when set, classifies tools that Kinds does not name and
	// that come and go while the policy is in use (MCP tools appear as
	// their servers start). It must be safe for concurrent use and return
	// at once.
	Classify func(name string) (Kind, bool)
}

// infoOf says where the subject of a tool of kind k is.
func (p *Policy) infoOf(k Kind) toolInfo {
	switch k {
	case KindShell:
		return toolInfo{k, "command"}
	case KindRead, KindWrite:
		return toolInfo{k, "path|file_path"}
	}
	return toolInfo{k, ""}
}

func (p *Policy) info(name string) toolInfo {
	if k, ok := p.Kinds[name]; ok {
		return p.infoOf(k)
	}
	if p.Classify != nil {
		if k, ok := p.Classify(name); ok {
			if k == KindRead || k == KindWrite || k == KindShell {
				return p.infoOf(k)
			}
			return toolInfo{k, ""}
		}
	}
	if ti, ok := builtin[name]; ok {
		return ti
	}
	if strings.HasPrefix(strings.ToLower(name), "mcp__") {
		return toolInfo{KindExternal, ""}
	}
	return toolInfo{KindOther, ""}
}

// subject extracts the rule subject from a call's arguments; "" when the
// arguments do not say (a path then means the working directory).
func subject(field string, args json.RawMessage) string {
	if field == "" {
		return ""
	}
	var m map[string]any
	if json.Unmarshal(args, &m) != nil {
		return ""
	}
	for _, f := range strings.Split(field, "|") {
		if s, ok := m[f].(string); ok {
			return s
		}
	}
	return ""
}

// Decide returns the decision for calling toolName with args, in this
// order:
//
//  1. a matching deny rule denies;
//  2. a write outside the workspace (read-only and workspace-write modes:
//     a write tool's path, or a shell redirection, resolved through
//     symlinks and "..") is denied, whatever the allow rules say; so is
//     any write in read-only mode;
//  3. a matching ask rule asks; so does a deny or ask rule that could
//     match a command that cannot be fully analysed (a computed command
//     name, eval or bash -c of computed text, a script piped in from a
//     program);
//  4. an allow rule that covers the call allows: it lifts the mode's
//     default, such as read-only's denial of writes or its question before
//     shell commands;
//  5. otherwise the mode's default decides.
//
// For a shell command, a deny or ask rule matches if it matches the script
// or any command it runs (see Rule); an allow rule covers the script only
// if every command is matched by some allow rule (cd, pushd, popd, true,
// false, :, echo and printf need none; a transparent wrapper such as
// timeout or env needs none, the command it runs does; sudo and doas need
// the rule themselves) and no command is beyond analysis.
func (p *Policy) Decide(toolName string, args json.RawMessage) Decision {
	ti := p.info(toolName)
	subj := subject(ti.field, args)
	c := &call{tool: toolName, kind: ti.kind}
	switch ti.kind {
	case KindShell:
		c.script = parseScript(subj, p.dir())
	case KindRead, KindWrite:
		c.path = p.pathOf(subj)
	default:
		c.url = subject("url", args)
	}
	rule := p.ruleVerdict(c)
	mode, hard := p.modeVerdict(c)
	switch {
	case rule != nil && rule.Action == Deny:
		return *rule
	case hard:
		return mode
	case rule != nil:
		return *rule
	}
	return mode
}

func (p *Policy) mode() Mode {
	if p.Mode == "" {
		return WorkspaceWrite
	}
	return p.Mode
}

func (p *Policy) dir() string {
	if p.Dir != "" {
		return p.Dir
	}
	return p.Root
}

// modeVerdict is what the mode alone says about c; hard marks a denial no
// allow rule lifts (a write leaving the workspace).
func (p *Policy) modeVerdict(c *call) (d Decision, hard bool) {
	m := p.mode()
	by := "mode:" + string(m)
	if m == FullAccess {
		return Decision{Action: Allow, By: by}, false
	}
	// Confinement, for read-only and workspace-write alike.
	unknown, writes := "", ""
	switch c.kind {
	case KindWrite:
		if ok, why := p.confined(c.path); !ok {
			return Decision{Deny, by, why}, true
		}
		writes = c.path.given
	case KindShell:
		s := c.script
		if s.err != nil {
			unknown = fmt.Sprintf("the command does not parse (%v), so its writes cannot be checked", s.err)
			break
		}
		for _, w := range s.targets() {
			if writes == "" {
				writes = w.text
			}
			if w.loose {
				continue
			}
			if w.unknown != "" {
				if unknown == "" {
					unknown = fmt.Sprintf("cannot tell where %s writes (%s)", w.text, w.unknown)
				}
				continue
			}
			if ok, why := p.confined(p.pathAt(w.cwd, w.target)); !ok {
				return Decision{Deny, by, "the command writes outside the workspace: " + why}, true
			}
		}
	}
	if m == ReadOnly && writes != "" {
		// No rule and no approval lifts this: the session is read-only.
		if c.kind == KindShell {
			return Decision{Deny, by, fmt.Sprintf("the session is read-only and the command writes files (%s)", writes)}, true
		}
		return Decision{Deny, by, fmt.Sprintf("%s changes files, and the session is read-only", c.tool)}, true
	}
	if m == ReadOnly {
		switch c.kind {
		case KindRead, KindSafe:
			return Decision{Action: Allow, By: by}, false
		case KindShell:
			return Decision{Ask, by, "shell commands need approval in read-only mode"}, false
		}
		return Decision{Ask, by, fmt.Sprintf("%s is not known to be read-only, and the session is read-only", c.tool)}, false
	}
	if c.kind == KindExternal {
		return Decision{Ask, by, fmt.Sprintf("%s is not annotated read-only by its MCP server: its effects are outside what rein can check", c.tool)}, false
	}
	if unknown != "" {
		return Decision{Ask, by, unknown}, false
	}
	return Decision{Action: Allow, By: by}, false
}
