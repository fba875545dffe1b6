package guard

import (
	"fmt"
	"path"
	"path/filepath"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// Rule allows, asks for or denies calls of a tool, optionally only those
// whose subject matches a pattern.
//
// Syntax: Claude Code's. "Tool" (every call) or "Tool(pattern)". The tool
// name is matched case-insensitively and may be a glob ("*" is every
// tool); "bash(...)" and "Bash(...)" are the same rule. Two names stand
// for a kind of tool, as in Claude Code: Read covers every tool that
// reads files (read, glob, grep, ls), Edit every tool that changes them
// (edit, write). "mcp__server" and "mcp__server__*" cover every tool of an
// MCP server, "mcp__server__tool" one. The pattern depends on the kind:
//
//   - shell (Bash): a command pattern where * matches any text, including
//     spaces; a trailing ":*" means "this command, with any arguments"
//     ("git status:*" matches "git status" and "git status -s", not
//     "git statusx"). It is matched against each command the script runs,
//     parsed, not against its text: words separated by single spaces,
//     quotes and escapes removed, $'...' decoded, the name without its
//     directory (/bin/rm is rm), and also every command run through a
//     wrapper (sudo, env, timeout, nice, nohup, xargs, command, exec,
//     unshare, chroot, systemd-run, ...), bash -c / sh -c, eval, trap, a
//     script piped, here-documented or sourced into a shell, find -exec,
//     flock/su/runuser/script -c, ssh's remote command, tmux's shell
//     commands, and git with its global options (-C, -c, --no-pager, ...)
//     and command-line aliases resolved ("git -C . push" is git push).
//     Options written as one run of single letters are compared as a set:
//     "rm -rf*" matches rm -fr, rm -r -f, rm -Rf, rm --recursive --force
//     and rm -rfv (see canonArgs). A deny or ask rule also asks about a
//     command rein does not know whose arguments name the rule's command
//     (parallel rm ::: x): it may run it.
//   - file tools (Read, Edit, ...): a doublestar glob ("docs/**",
//     "**/*.go"), relative to the workspace root, or absolute ("/etc/**",
//     "~/.ssh/**"). Edit and Write deny and ask rules also bind the files
//     a shell command is known to write (see script.targets), and ask
//     when such a file is computed at run time; Read rules do not bind
//     shell commands.
//   - WebFetch: "domain:HOST" (HOST may start with "*."), matched against
//     the host of the call's "url" argument.
//   - other tools: only "Tool" and "Tool(*)" mean anything.
//
// "Tool()" and "Tool(*)" are the same as "Tool".
type Rule struct {
	Tool    string
	Pattern string // "" for every call
	Action  Action
}

// ParseRule parses s (see Rule) as a rule with the given action.
func ParseRule(s string, action Action) (Rule, error) {
	s = strings.TrimSpace(s)
	r := Rule{Tool: s, Action: action}
	if i := strings.IndexByte(s, '('); i >= 0 {
		if !strings.HasSuffix(s, ")") {
			return Rule{}, fmt.Errorf("%w %q: missing closing parenthesis", ErrBadRule, s)
		}
		r.Tool, r.Pattern = strings.TrimSpace(s[:i]), strings.TrimSpace(s[i+1:len(s)-1])
	}
	if r.Pattern == "*" {
		r.Pattern = ""
	}
	if r.Tool == "" {
		return Rule{}, fmt.Errorf("%w %q: no tool name", ErrBadRule, s)
	}
	for _, ch := range r.Tool {
		if !(ch == '_' || ch == '-' || ch == '.' || ch == '*' || ch == '?' ||
			ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9') {
			return Rule{}, fmt.Errorf("%w %q: bad character %q in tool name", ErrBadRule, s, ch)
		}
	}
	if strings.ContainsRune(r.Pattern, 0) {
		return Rule{}, fmt.Errorf("%w %q: NUL byte in pattern", ErrBadRule, s)
	}
	if ti, ok := builtin[strings.ToLower(r.Tool)]; ok && r.Pattern != "" && (ti.kind == KindRead || ti.kind == KindWrite) {
		if !doublestar.ValidatePattern(filepath.ToSlash(r.Pattern)) {
			return Rule{}, fmt.Errorf("%w %q: bad path pattern", ErrBadRule, s)
		}
	}
	if strings.EqualFold(r.Tool, "WebFetch") && r.Pattern != "" {
		host, ok := strings.CutPrefix(r.Pattern, "domain:")
		if !ok || host == "" || strings.ContainsAny(host, "/: ") || strings.Contains(strings.TrimPrefix(host, "*."), "*") {
			return Rule{}, fmt.Errorf("%w %q: want WebFetch(domain:HOST), e.g. WebFetch(domain:example.com) or WebFetch(domain:*.example.com)", ErrBadRule, s)
		}
	}
	if strings.HasPrefix(strings.ToLower(r.Tool), "mcp__") && r.Pattern != "" {
		return Rule{}, fmt.Errorf("%w %q: MCP tool rules take no pattern (write mcp__server__tool)", ErrBadRule, s)
	}
	if action < Allow || action > Deny {
		return Rule{}, fmt.Errorf("%w %q: bad action %d", ErrBadRule, s, action)
	}
	return r, nil
}

// String returns the rule in its parseable form, without the action.
func (r Rule) String() string {
	if r.Pattern == "" {
		return r.Tool
	}
	return r.Tool + "(" + r.Pattern + ")"
}

// matchesTool reports whether the rule is about a call of the tool name
// of kind k.
func (r Rule) matchesTool(name string, k Kind) bool {
	t := strings.ToLower(r.Tool)
	switch {
	case strings.EqualFold(r.Tool, name):
		return true
	case t == "read" && k == KindRead, t == "edit" && k == KindWrite:
		return true
	case strings.HasPrefix(t, "mcp__") && strings.Count(t, "__") == 1 && !strings.ContainsAny(t, "*?["):
		// mcp__server: every tool of the server.
		return strings.HasPrefix(strings.ToLower(name), t+"__")
	}
	ok, _ := path.Match(t, strings.ToLower(name))
	return ok
}

// bindsShellWrites reports whether r is a deny or ask rule about tools
// that change files (Edit, Write, or a glob naming them): such a rule also
// binds the files a shell command is known to write. Allow rules do not:
// a command needs a Bash rule to be allowed.
func (r Rule) bindsShellWrites() bool {
	return r.Action != Allow && (r.matchesTool("edit", KindWrite) || r.matchesTool("write", KindWrite))
}

// call is a tool call as the policy sees it.
type call struct {
	tool   string
	kind   Kind
	path   pathSubject
	script *script
	url    string // a "url" argument (WebFetch)
}

// exempt commands need no allow rule for a script to be covered: they only
// move around or do nothing. Deny and ask rules still see them.
var exempt = map[string]bool{"cd": true, "pushd": true, "popd": true, "true": true, "false": true, ":": true, "echo": true, "printf": true}

// ruleVerdict applies the rules to c; nil when none decides.
func (p *Policy) ruleVerdict(c *call) *Decision {
	var deny, ask, maybeDeny, maybeAsk, allow *Decision
	var allowCmd []*Rule // per command of a script, the first allow rule matching it
	if c.script != nil {
		allowCmd = make([]*Rule, len(c.script.cmds))
	}
	var targets []shellWrite
	if c.script != nil {
		targets = c.script.targets()
	}
	maybe := func(r *Rule, why string) {
		m := &maybeAsk
		if r.Action == Deny {
			m = &maybeDeny
		}
		if *m == nil {
			*m = &Decision{Action: Ask, By: "rule:" + r.String(),
				Reason: fmt.Sprintf("cannot tell whether %s rule %s applies: %s", r.Action, r.String(), why)}
		}
	}
	for i := range p.Rules {
		r := &p.Rules[i]
		hit, what := false, ""
		switch {
		case !r.matchesTool(c.tool, c.kind):
			if c.script == nil || !r.bindsShellWrites() {
				continue
			}
			// Edit(secrets/**) binds > secrets/x, tee, cp and mv into
			// secrets/ as it binds the write tool.
			if c.script.err != nil {
				maybe(r, "the command does not parse, so its writes cannot be checked")
			}
			for _, w := range targets {
				switch {
				case hit:
				case w.unknown != "":
					maybe(r, fmt.Sprintf("cannot tell where %s writes (%s)", w.text, w.unknown))
				case r.Pattern == "" || p.matchPath(r.Pattern, p.pathAt(w.cwd, w.target), false):
					hit, what = true, w.text
				}
			}
		case r.Pattern == "":
			hit = true
		case c.script != nil && r.Action == Allow:
			for j, cmd := range c.script.cmds {
				if allowCmd[j] == nil && matchShell(r.Pattern, cmd, true) == matchYes {
					allowCmd[j] = r
				}
			}
		case c.script != nil:
			text := strings.TrimSpace(c.script.text)
			if matchCommand(r.Pattern, text) {
				hit, what = true, text
			}
			if c.script.err != nil && !hit {
				maybe(r, fmt.Sprintf("the command does not parse (%v), and bash may run part of it", c.script.err))
			}
			for _, cmd := range c.script.cmds {
				if hit {
					break
				}
				switch matchShell(r.Pattern, cmd, false) {
				case matchYes:
					hit, what = true, cmd.String()
				case matchMaybe:
					why := cmd.opaque
					if n := namedRun(cmd, canonPatternOf(r.Pattern)); why == "" && n != "" {
						why = fmt.Sprintf("%s may run %s, named in its arguments", cmd.words[0], n)
					}
					if why == "" {
						why = "part of " + cmd.String() + " is computed at run time"
					}
					maybe(r, why)
				}
			}
		case c.kind == KindRead || c.kind == KindWrite:
			hit = p.matchPath(r.Pattern, c.path, r.Action == Allow)
			what = c.path.given
		case c.url != "":
			hit = matchDomain(r.Pattern, c.url)
			what = c.url
		}
		if !hit {
			continue
		}
		d := &Decision{Action: r.Action, By: "rule:" + r.String()}
		switch {
		case r.Action == Deny && deny == nil:
			d.Reason = ruleReason("denied by rule", r, what)
			deny = d
		case r.Action == Ask && ask == nil:
			d.Reason = ruleReason("rule", r, what) + " asks for approval"
			ask = d
		case r.Action == Allow && allow == nil:
			allow = d
		}
	}
	switch {
	case deny != nil:
		return deny
	case ask != nil:
		return ask
	case maybeDeny != nil:
		return maybeDeny
	case maybeAsk != nil:
		return maybeAsk
	case allow != nil:
		return allow
	case c.script != nil:
		return scriptAllowed(c.script, allowCmd)
	}
	return nil
}

// scriptAllowed returns an allow decision when every command of s is
// matched by an allow rule (but exempt commands, wrappers, whose commands
// are checked instead, and commands run by a privileged wrapper, whose
// own form is). A command that cannot be analysed is never allowed by
// rules.
func scriptAllowed(s *script, allowCmd []*Rule) *Decision {
	if s.err != nil {
		return nil
	}
	var used []string
	for j, r := range allowCmd {
		cmd := s.cmds[j]
		if cmd.opaque != "" {
			return nil
		}
		if r == nil {
			if cmd.wrapper || cmd.derived || exempt[cmd.words[0]] {
				continue
			}
			return nil // a command no rule allows
		}
		if str := r.String(); !contains(used, str) {
			used = append(used, str)
		}
	}
	if len(used) == 0 {
		return nil
	}
	return &Decision{Action: Allow, By: "rule:" + strings.Join(used, ",")}
}

func ruleReason(prefix string, r *Rule, what string) string {
	if what == "" {
		return prefix + " " + r.String()
	}
	return fmt.Sprintf("%s %s (%s)", prefix, r.String(), what)
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// matchPath matches a path pattern against ps. The lexical path and the
// resolved one are both tried: a deny or ask rule matches if either does,
// an allow rule only if both do, so a symlink can neither dodge a deny nor
// borrow an allow.
func (p *Policy) matchPath(pattern string, ps pathSubject, forAllow bool) bool {
	pattern = filepath.ToSlash(expandHome(pattern))
	var cands []string
	if strings.HasPrefix(pattern, "/") {
		cands = append(cands, filepath.ToSlash(ps.lexical))
		if ps.err == nil {
			cands = append(cands, filepath.ToSlash(ps.resolved))
		}
	} else {
		base := p.Root
		if base == "" {
			base = p.dir()
		}
		if base == "" {
			return false
		}
		if rel, err := filepath.Rel(filepath.Clean(base), ps.lexical); err == nil {
			cands = append(cands, filepath.ToSlash(rel))
		}
		if rootRes, err := resolvePath(base); err == nil && ps.err == nil {
			if rel, err := filepath.Rel(rootRes, ps.resolved); err == nil {
				cands = append(cands, filepath.ToSlash(rel))
			}
		}
	}
	if len(cands) == 0 {
		return false
	}
	some, all := false, true
	for _, c := range cands {
		ok, _ := doublestar.Match(pattern, c)
		some = some || ok
		all = all && ok
	}
	if forAllow {
		return all
	}
	return some
}
