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
// Syntax: "tool" (every call) or "tool(pattern)". The tool name is matched
// case-insensitively and may be a glob ("*" is every tool), so Claude Code
// rules such as "Bash(git status:*)" read the same. The pattern depends on
// the tool's kind:
//
//   - shell (bash): a command pattern where * matches any text, including
//     spaces; a trailing ":*" means "this command, with any arguments"
//     ("git status:*" matches "git status" and "git status -s", not
//     "git statusx"). It is matched against each simple command of the
//     script, words separated by single spaces, quotes removed.
//   - file tools (read, write, edit, glob, grep, ls): a doublestar glob
//     ("docs/**", "**/*.go"), relative to the workspace root, or absolute
//     ("/etc/**", "~/.ssh/**").
//   - other tools: only "tool" and "tool(*)" mean anything.
//
// "tool()" and "tool(*)" are the same as "tool".
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
	if ti, ok := builtin[strings.ToLower(r.Tool)]; ok && r.Pattern != "" && (ti.kind == KindRead || ti.kind == KindWrite) {
		if !doublestar.ValidatePattern(filepath.ToSlash(r.Pattern)) {
			return Rule{}, fmt.Errorf("%w %q: bad path pattern", ErrBadRule, s)
		}
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

func (r Rule) matchesTool(name string) bool {
	if strings.EqualFold(r.Tool, name) {
		return true
	}
	ok, _ := path.Match(strings.ToLower(r.Tool), strings.ToLower(name))
	return ok
}

// call is a tool call as the policy sees it.
type call struct {
	tool   string
	kind   Kind
	path   pathSubject
	script *script
}

// exempt commands need no allow rule for a script to be covered: they only
// move around or do nothing. Deny and ask rules still see them.
var exempt = map[string]bool{"cd": true, "pushd": true, "popd": true, "true": true, "false": true, ":": true}

// ruleVerdict applies the rules to c; nil when none decides.
func (p *Policy) ruleVerdict(c *call) *Decision {
	var deny, ask, allow *Decision
	var allowCmd []*Rule // per command of a script, the first allow rule matching it
	if c.script != nil {
		allowCmd = make([]*Rule, len(c.script.cmds))
	}
	for i := range p.Rules {
		r := &p.Rules[i]
		if !r.matchesTool(c.tool) {
			continue
		}
		hit, what := false, ""
		switch {
		case r.Pattern == "":
			hit = true
		case c.script != nil && r.Action == Allow:
			for j, cmd := range c.script.cmds {
				if allowCmd[j] == nil && matchCommand(r.Pattern, cmd.String()) {
					allowCmd[j] = r
				}
			}
		case c.script != nil:
			text := strings.TrimSpace(c.script.text)
			if matchCommand(r.Pattern, text) {
				hit, what = true, text
			}
			for _, cmd := range c.script.cmds {
				if hit {
					break
				}
				full := cmd.String()
				if matchCommand(r.Pattern, full) || matchCommand(r.Pattern, strings.Join(unwrap(cmd.words), " ")) {
					hit, what = true, full
				}
			}
		case c.kind == KindRead || c.kind == KindWrite:
			hit = p.matchPath(r.Pattern, c.path, r.Action == Allow)
			what = c.path.given
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
	case allow != nil:
		return allow
	case c.script != nil:
		return scriptAllowed(c.script, allowCmd)
	}
	return nil
}

// scriptAllowed returns an allow decision when every simple command of s
// (but the exempt ones) is matched by an allow rule.
func scriptAllowed(s *script, allowCmd []*Rule) *Decision {
	if s.err != nil {
		return nil
	}
	var used []string
	for j, r := range allowCmd {
		if r == nil {
			if exempt[s.cmds[j].words[0]] {
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

// matchCommand matches a command pattern (see Rule) against text.
func matchCommand(pattern, text string) bool {
	if prefix, ok := strings.CutSuffix(pattern, ":*"); ok {
		return wildcard(prefix, text) || wildcard(prefix+" *", text)
	}
	return wildcard(pattern, text)
}

// wildcard matches pattern against s where * matches any run of bytes and
// every other byte matches itself.
func wildcard(pattern, s string) bool {
	px, sx := 0, 0
	starP, starS := -1, 0
	for sx < len(s) {
		switch {
		case px < len(pattern) && pattern[px] == '*':
			starP, starS = px, sx
			px++
		case px < len(pattern) && pattern[px] == s[sx]:
			px++
			sx++
		case starP >= 0:
			starS++
			px, sx = starP+1, starS
		default:
			return false
		}
	}
	for px < len(pattern) && pattern[px] == '*' {
		px++
	}
	return px == len(pattern)
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
