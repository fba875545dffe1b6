package guard

import (
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Commands that run a command or a shell script given in their arguments
// in ways beyond the plain wrappers of script.go: each returns what it runs
// as runs, a list of commands (argv) and shell scripts, or why that cannot
// be known.
type runs struct {
	cmds    []cmdWords // argv lists
	scripts []string   // shell scripts (run with sh -c)
	// canon, when set, is the command itself as rules see it (git with
	// its global options and command-line aliases resolved). With
	// canonOnly false the options change where or how it runs (git -C
	// DIR, -c, an alias): an allow rule must then cover the command as
	// written, and canon only meets deny and ask rules.
	canon     *cmdWords
	canonOnly bool
	opaque    string // why what it runs cannot be known
	// privileged: what it runs, runs as someone else (or elsewhere).
	privileged bool
	// own: the command does its own work besides what it runs (tar,
	// sed, git rebase): an allow rule must cover it too.
	own bool
}

type cmdWords struct {
	words []string
	dyn   []bool
}

// optionScan walks a command's options getopt-style: short options may be
// clustered ("-qc CMD"), a value-taking short option takes the rest of its
// cluster or the next word, long options take "=value" or, when listed,
// the next word. It stops at "--" or the first operand.
type optionScan struct {
	shortValue string   // letters of short options that take a value
	longValue  []string // long options that take the next word when not written with "="
}

// option is one option read by scan: its name ("-c", "--command") and
// value, and whether the value is computed at run time.
type option struct {
	name, value string
	hasValue    bool
	dyn         bool
}

// scan returns the options and the index of the first operand (len(args)
// when there is none; after "--" when that ended the options).
func (o optionScan) scan(args []string, dyn []bool) ([]option, int) {
	var opts []option
	i := 0
	for i < len(args) {
		a := args[i]
		switch {
		case dyn[i]:
			return opts, i
		case a == "--":
			return opts, i + 1
		case strings.HasPrefix(a, "--"):
			name, v, eq := strings.Cut(a, "=")
			op := option{name: name, value: v, hasValue: eq}
			if !eq && slices.Contains(o.longValue, name) && i+1 < len(args) {
				i++
				op.value, op.hasValue, op.dyn = args[i], true, dyn[i]
			}
			opts = append(opts, op)
		case strings.HasPrefix(a, "-") && len(a) > 1:
			for j := 1; j < len(a); j++ {
				op := option{name: "-" + a[j:j+1]}
				if strings.IndexByte(o.shortValue, a[j]) >= 0 {
					switch {
					case j+1 < len(a):
						op.value, op.hasValue = a[j+1:], true
					case i+1 < len(args):
						i++
						op.value, op.hasValue, op.dyn = args[i], true, dyn[i]
					}
					opts = append(opts, op)
					break
				}
				opts = append(opts, op)
			}
		default:
			return opts, i
		}
		i++
	}
	return opts, i
}

// scanAll is scan for commands whose options may follow their operands
// (GNU getopt permutes): it reads options up to "--" or the end and
// returns them with the operands.
func (o optionScan) scanAll(args []string, dyn []bool) (opts []option, operands []int) {
	i := 0
	for i < len(args) {
		got, j := o.scan(args[i:], dyn[i:])
		opts = append(opts, got...)
		i += j
		if j > 0 && args[i-1] == "--" && !dyn[i-1] {
			for ; i < len(args); i++ {
				operands = append(operands, i)
			}
			break
		}
		if i < len(args) {
			operands = append(operands, i)
			i++
		}
	}
	return opts, operands
}

// scriptOption adds the value of the first of names among opts as a
// script to r (or makes r opaque when it is computed), and reports whether
// there was one.
func (r *runs) scriptOption(opts []option, who string, names ...string) bool {
	for _, op := range opts {
		if slices.Contains(names, op.name) && op.hasValue {
			if op.dyn {
				r.opaque = who + " runs a command computed at run time"
			} else {
				r.scripts = append(r.scripts, op.value)
			}
			return true
		}
	}
	return false
}

// rest adds args (the command a wrapper runs) to r.
func (r *runs) rest(args []string, dyn []bool) {
	if len(args) > 0 {
		r.cmds = append(r.cmds, cmdWords{args, dyn})
	}
}

// restScript adds args joined as one shell script (ssh, tmux, sg run
// their operands with a shell).
func (r *runs) restScript(who string, args []string, dyn []bool) {
	switch {
	case len(args) == 0:
	case slices.Contains(dyn, true):
		r.opaque = who + " runs a script computed at run time"
	default:
		r.scripts = append(r.scripts, strings.Join(args, " "))
	}
}

// special returns what the commands handled here run; ok is false for
// other commands.
func special(name string, args []string, dyn []bool) (r runs, ok bool) {
	switch name {
	case "git":
		// What git runs does not make it a mere wrapper: git rebase -x
		// make needs an allow for git rebase too.
		r = gitRuns(args, dyn)
		r.own = len(r.scripts) > 0 || len(r.cmds) > 0
	case "flock":
		o := optionScan{shortValue: "wEc", longValue: []string{"--timeout", "--conflict-exit-code", "--command"}}
		opts, i := o.scan(args, dyn)
		if i < len(args) {
			i++ // the lock file; options may follow it
		}
		more, j := o.scan(args[i:], dyn[i:])
		if !r.scriptOption(append(opts, more...), "flock", "-c", "--command") {
			r.rest(args[i+j:], dyn[i+j:])
		}
	case "su", "runuser":
		r.privileged = true
		o := optionScan{shortValue: "cugGsw", longValue: []string{"--command", "--session-command", "--user", "--group", "--supp-group", "--shell", "--whitelist-environment"}}
		opts, i := o.scan(args, dyn)
		for _, op := range opts {
			if op.name == "-u" || op.name == "--user" { // runuser -u USER [--] COMMAND
				r.rest(args[i:], dyn[i:])
				return r, true
			}
		}
		// su [options] [-] [USER [ARGS]]: options may come anywhere.
		all, _ := o.scanAll(args, dyn)
		r.scriptOption(all, name, "-c", "--command", "--session-command")
		// su [-] [USER]: an interactive shell, nothing more on the line.
	case "sg":
		r.privileged = true
		i := 0
		if i < len(args) && args[i] == "-" {
			i++
		}
		if i < len(args) {
			i++ // the group
		}
		if i < len(args) && args[i] == "-c" {
			i++
		}
		r.restScript("sg", args[i:], dyn[i:])
	case "script":
		opts, _ := optionScan{shortValue: "cTIOBEmo", longValue: []string{"--command", "--log-timing", "--log-in", "--log-out", "--log-io", "--echo", "--logging-format", "--output-limit"}}.scan(args, dyn)
		r.scriptOption(opts, "script", "-c", "--command")
	case "ssh":
		r.privileged = true // on another machine, as another user
		opts, i := optionScan{shortValue: "bBcDEeFIiJLlmOopQRSWw"}.scan(args, dyn)
		for _, op := range opts {
			if op.name != "-o" {
				continue
			}
			if op.dyn {
				r.opaque = "ssh gets an option computed at run time"
				continue
			}
			k, v, ok := strings.Cut(op.value, "=")
			if !ok {
				k, v, _ = strings.Cut(op.value, " ")
			}
			switch strings.ToLower(strings.TrimSpace(k)) {
			case "proxycommand", "localcommand", "knownhostscommand":
				r.scripts = append(r.scripts, strings.TrimSpace(v)) // run here, by ssh
			}
		}
		if i < len(args) {
			i++ // the destination
		}
		r.restScript("ssh", args[i:], dyn[i:])
	case "tmux":
		r = tmuxRuns(args, dyn)
	case "tar":
		r = tarRuns(args, dyn)
		r.own = true
	case "zip":
		r.own = true
		for i := 0; i < len(args); i++ {
			a := args[i]
			switch v, ok := strings.CutPrefix(a, "--unzip-command="); {
			case dyn[i]:
			case ok:
				r.scripts = append(r.scripts, v)
			case (a == "--unzip-command" || strings.HasPrefix(a, "-") && strings.HasSuffix(a, "TT")) && i+1 < len(args):
				i++
				r.restScript("zip -TT", args[i:i+1], dyn[i:i+1])
			case strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.Contains(a, "TT"):
				_, v, _ := strings.Cut(a, "TT")
				r.scripts = append(r.scripts, v)
			}
		}
	case "sed":
		r = sedRuns(args, dyn)
		r.own = true
	case "fc":
		// fc -l lists the history; anything else runs from it.
		if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "-") && strings.Contains(a, "l") }) {
			r.opaque = "fc runs commands from the shell's history"
		}
	case "gdb", "lldb":
		r.opaque = name + " runs the commands it is given (-ex, -x, its input), which may run programs"
		if len(args) == 1 && (args[0] == "--version" || args[0] == "--help" || args[0] == "-v") {
			r.opaque = ""
		}
	default: // vim and the other editors of specials
		r.opaque = name + " runs editor commands (-c, +cmd, its input, its startup files), which may run shell commands"
		if len(args) == 1 && (args[0] == "--version" || args[0] == "--help") {
			r.opaque = ""
		}
	}
	return r, true
}

// tarRuns finds the commands GNU tar runs: --checkpoint-action=exec=CMD,
// --to-command, -I/--use-compress-program, -F/--info-script,
// --new-volume-script and --rsh-command, also abbreviated and in the old
// style "tar cfI a.tar CMD".
func tarRuns(args []string, dyn []bool) runs {
	var r runs
	const shortValue = "bCfFgHIKLNTVX"
	runners := []string{"--checkpoint-action", "--to-command", "--use-compress-program", "--info-script", "--new-volume-script", "--rsh-command"}
	if len(args) > 0 && !dyn[0] && !strings.HasPrefix(args[0], "-") {
		// Old style: the first word is letters, their values follow.
		var w []string
		var d []bool
		next := 1
		for _, l := range args[0] {
			w, d = append(w, "-"+string(l)), append(d, false)
			if strings.ContainsRune(shortValue, l) && next < len(args) {
				w, d = append(w, args[next]), append(d, dyn[next])
				next++
			}
		}
		args, dyn = append(w, args[next:]...), append(d, dyn[next:]...)
	}
	args = unabbreviate(args, dyn, runners...)
	opts, _ := optionScan{shortValue: shortValue, longValue: runners}.scanAll(args, dyn)
	for _, op := range opts {
		if !op.hasValue || !slices.Contains(runners, op.name) && op.name != "-I" && op.name != "-F" {
			continue
		}
		v := op.value
		if op.name == "--checkpoint-action" {
			var ok bool
			if v, ok = strings.CutPrefix(v, "exec="); !ok && !op.dyn {
				continue
			}
		}
		if op.dyn {
			r.opaque = "tar runs a command computed at run time (" + op.name + ")"
			continue
		}
		r.scripts = append(r.scripts, v)
	}
	return r
}

// unabbreviate returns args with long options abbreviated as getopt_long
// allows (--to-com=X for --to-command=X) written out: the first of names
// they begin.
func unabbreviate(args []string, dyn []bool, names ...string) []string {
	out := slices.Clone(args)
	for i, a := range args {
		name, v, eq := strings.Cut(a, "=")
		if dyn[i] || !strings.HasPrefix(name, "--") || len(name) < 3 {
			continue
		}
		for _, l := range names {
			if strings.HasPrefix(l, name) {
				out[i] = l
				if eq {
					out[i] += "=" + v
				}
				break
			}
		}
	}
	return out
}

// sedRuns finds the commands a sed script runs (GNU sed's e command); the
// e flag of s, e without a command (it runs the pattern space), a script
// file and a script rein cannot read make it opaque. --sandbox forbids e.
func sedRuns(args []string, dyn []bool) runs {
	var r runs
	args = unabbreviate(args, dyn, "--expression", "--file", "--sandbox", "--in-place")
	for i, a := range args {
		if !dyn[i] && strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.Contains(a, "i") {
			// -i takes its suffix in the same word.
			if j := strings.IndexByte(a, 'i'); !strings.ContainsAny(a[1:j], "efl") {
				args[i] = a[:j+1]
			}
		}
	}
	opts, operands := optionScan{shortValue: "efl", longValue: []string{"--expression", "--file", "--line-length"}}.scanAll(args, dyn)
	var scripts []string
	given := false
	for _, op := range opts {
		switch op.name {
		case "--sandbox":
			return r
		case "-e", "--expression":
			given = true
			if op.dyn {
				r.opaque = "sed runs a script computed at run time"
			}
			scripts = append(scripts, op.value)
		case "-f", "--file":
			r.opaque = "sed runs a script file, which may run commands (e)"
		}
	}
	if !given && len(operands) > 0 {
		if dyn[operands[0]] {
			r.opaque = "sed runs a script computed at run time"
		}
		scripts = append(scripts, args[operands[0]])
	}
	if r.opaque != "" {
		return r
	}
	cmds, why := sedExec(strings.Join(scripts, "\n"))
	r.scripts, r.opaque = cmds, why
	return r
}

// sedExec returns the shell commands a sed script runs with GNU sed's e
// command, or why that cannot be told: e without a command runs the
// pattern space, s///e runs the result, and a script rein cannot read
// might do either.
func sedExec(s string) (cmds []string, why string) {
	i, n := 0, len(s)
	spaces := func() {
		for i < n && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
	}
	line := func() string { // the rest of the line
		j := strings.IndexByte(s[i:], '\n')
		if j < 0 {
			j = n - i
		}
		t := s[i : i+j]
		i += j
		return t
	}
	upTo := func(d byte) bool { // past the next unescaped d
		for ; i < n; i++ {
			switch s[i] {
			case '\\':
				i++
			case d:
				i++
				return true
			}
		}
		return false
	}
	digits := func() {
		for i < n && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	address := func() bool {
		switch {
		case i >= n:
			return false
		case s[i] >= '0' && s[i] <= '9':
			digits()
			if i < n && s[i] == '~' {
				i++
				digits()
			}
		case s[i] == '$':
			i++
		case s[i] == '/' || s[i] == '\\' && i+1 < n:
			if s[i] == '\\' {
				i++
			}
			d := s[i]
			i++
			if !upTo(d) {
				return false
			}
			for i < n && (s[i] == 'I' || s[i] == 'M') {
				i++
			}
		default:
			return false
		}
		return true
	}
	unreadable := func(what string) ([]string, string) {
		return nil, "rein cannot read the sed script (" + what + "), which may run commands (e)"
	}
	for i < n {
		for i < n && strings.IndexByte(" \t\n;", s[i]) >= 0 {
			i++
		}
		if i >= n {
			break
		}
		if s[i] == '#' {
			line()
			continue
		}
		if address() {
			spaces()
			if i < n && s[i] == ',' {
				i++
				spaces()
				if i < n && (s[i] == '+' || s[i] == '~') {
					i++
					digits()
				} else if !address() {
					return unreadable("an address")
				}
			}
		}
		spaces()
		for i < n && s[i] == '!' {
			i++
			spaces()
		}
		if i >= n {
			return unreadable("an address without a command")
		}
		c := s[i]
		i++
		switch c {
		case '{', '}', '=', 'd', 'D', 'g', 'G', 'h', 'H', 'n', 'N', 'p', 'P', 'x', 'z', 'F':
		case 'e':
			spaces()
			cmd := line()
			if strings.TrimSpace(cmd) == "" {
				return nil, "sed's e runs the pattern space as a command"
			}
			cmds = append(cmds, cmd)
		case 's', 'y':
			if i >= n || s[i] == '\n' || s[i] == '\\' {
				return unreadable(string(c) + " without a delimiter")
			}
			d := s[i]
			i++
			if !upTo(d) || !upTo(d) {
				return unreadable("an unterminated " + string(c))
			}
			for c == 's' && i < n && strings.IndexByte("gpiImMe0123456789", s[i]) >= 0 {
				if s[i] == 'e' {
					return nil, "sed's s///e runs the result as a command"
				}
				i++
			}
			if c == 's' && i < n && s[i] == 'w' {
				line()
			}
		case 'a', 'i', 'c':
			for t := line(); strings.HasSuffix(t, "\\") && i < n; t = line() {
				i++ // a continued line of text
			}
		case 'r', 'R', 'w', 'W':
			line()
		case 'b', 't', 'T', ':', 'v':
			for i < n && s[i] != '\n' && s[i] != ';' {
				i++
			}
		case 'q', 'Q', 'l', 'L':
			spaces()
			digits()
		default:
			return unreadable("command " + string(c))
		}
	}
	return cmds, ""
}

// tmuxRuns handles tmux's commands that start a shell command.
func tmuxRuns(args []string, dyn []bool) runs {
	var r runs
	opts, i := optionScan{shortValue: "cfLST"}.scan(args, dyn)
	if r.scriptOption(opts, "tmux", "-c") || i >= len(args) {
		return r
	}
	if dyn[i] {
		r.opaque = "tmux runs a command named at run time"
		return r
	}
	values := map[string]string{
		"new-session": "cefFnstxy", "new": "cefFnstxy", "new-window": "ceFnt", "neww": "ceFnt",
		"split-window": "celtFp", "splitw": "celtFp", "respawn-pane": "cet", "respawnp": "cet",
		"respawn-window": "cet", "respawnw": "cet", "run-shell": "dtc", "run": "dtc",
		"display-popup": "bcdehsStTwxy", "popup": "bcdehsStTwxy", "if-shell": "t", "if": "t",
	}
	sub := args[i]
	switch sub {
	case "send-keys", "send":
		r.opaque = "tmux send-keys types into a shell"
		return r
	}
	v, ok := values[sub]
	if !ok {
		return r
	}
	_, j := optionScan{shortValue: v}.scan(args[i+1:], dyn[i+1:])
	j += i + 1
	end := len(args)
	if sub == "if-shell" || sub == "if" {
		end = min(j+1, len(args)) // only the condition is a shell command
	}
	r.restScript("tmux "+sub, args[j:end], dyn[j:end])
	return r
}

// gitRuns reads git's global options (-C, -c, --git-dir, --no-pager, ...)
// and the aliases defined with -c, so that rules see "git SUBCOMMAND ..."
// however it is written; it also finds what git runs as commands: "!"
// aliases, configuration values that are commands (core.pager,
// core.sshCommand, ...), rebase --exec, bisect run, submodule foreach,
// difftool --extcmd and filter-branch's filters. Aliases from
// configuration files are not seen (a repository's .git/config may define
// any): running git there is running a program.
func gitRuns(args []string, dyn []bool) runs {
	var r runs
	aliases := map[string]string{}
	changed, contextual := false, false
	i := 0
	for i < len(args) {
		a := args[i]
		if dyn[i] {
			r.opaque = "git gets an option or subcommand computed at run time"
			return r
		}
		if !strings.HasPrefix(a, "-") {
			break
		}
		changed = true
		name, val, eq := strings.Cut(a, "=")
		switch name {
		case "-P", "--no-pager", "-p", "--paginate", "--no-optional-locks", "--no-advice", "--no-lazy-fetch",
			"--no-replace-objects", "--literal-pathspecs", "--glob-pathspecs", "--noglob-pathspecs", "--icase-pathspecs":
		default:
			contextual = true
		}
		takesNext := false
		switch name {
		case "-C", "-c", "--git-dir", "--work-tree", "--namespace", "--super-prefix", "--attr-source", "--config-env", "--list-cmds":
			takesNext = !eq
		case "--exec-path":
			if eq {
				r.opaque = "git runs its subcommands from the directory --exec-path names"
			}
		}
		if takesNext {
			if i+1 >= len(args) {
				break
			}
			i++
			val = args[i]
			if dyn[i] {
				r.opaque = "git gets an option value computed at run time (" + a + ")"
				return r
			}
		}
		switch name {
		case "-c":
			k, v, _ := strings.Cut(val, "=")
			k = strings.ToLower(k)
			if an, ok := strings.CutPrefix(k, "alias."); ok {
				aliases[an] = v
			} else if gitConfigRuns(k) {
				r.scripts = append(r.scripts, strings.TrimPrefix(v, "!"))
			} else if gitConfigOpaque(k) {
				r.opaque = "git -c " + k + " makes git run what it names"
			}
		case "--config-env":
			r.opaque = "git takes configuration from the environment (--config-env)"
		}
		i++
	}
	rest, rdyn := args[i:], dyn[i:]
	for hops := 0; len(rest) > 0 && !rdyn[0] && hops < maxNesting; hops++ {
		v, ok := aliases[strings.ToLower(rest[0])]
		if !ok {
			break
		}
		changed, contextual = true, true
		if sh, ok := strings.CutPrefix(v, "!"); ok {
			r.restScript("git alias "+rest[0], append([]string{sh}, rest[1:]...), append([]bool{false}, rdyn[1:]...))
			rest, rdyn = nil, nil
			break
		}
		exp := strings.Fields(v)
		rest = append(exp, rest[1:]...)
		rdyn = append(make([]bool, len(exp)), rdyn[1:]...)
	}
	if changed && len(rest) > 0 {
		r.canon = &cmdWords{append([]string{"git"}, rest...), append([]bool{false}, rdyn...)}
		r.canonOnly = !contextual
	}
	if len(rest) == 0 || rdyn[0] {
		return r
	}
	sub, sargs, sdyn := rest[0], rest[1:], rdyn[1:]
	switch sub {
	case "rebase":
		opts, _ := optionScan{shortValue: "xsXS", longValue: []string{"--exec", "--onto", "--strategy", "--strategy-option"}}.scan(sargs, sdyn)
		for _, op := range opts {
			if (op.name == "-x" || op.name == "--exec") && op.hasValue {
				if op.dyn {
					r.opaque = "git rebase --exec runs a command computed at run time"
				} else {
					r.scripts = append(r.scripts, op.value)
				}
			}
		}
	case "bisect":
		if len(sargs) > 0 && sargs[0] == "run" {
			r.rest(sargs[1:], sdyn[1:])
		}
	case "submodule":
		for j, a := range sargs {
			if a == "foreach" {
				k := j + 1
				for k < len(sargs) && strings.HasPrefix(sargs[k], "-") {
					k++
				}
				r.restScript("git submodule foreach", sargs[k:], sdyn[k:])
				break
			}
		}
	case "difftool", "mergetool":
		opts, _ := optionScan{shortValue: "xt", longValue: []string{"--extcmd", "--tool"}}.scan(sargs, sdyn)
		r.scriptOption(opts, "git "+sub, "-x", "--extcmd")
	case "filter-branch":
		for j := 0; j+1 < len(sargs); j++ {
			if strings.HasSuffix(sargs[j], "-filter") || sargs[j] == "--setup" {
				if sdyn[j+1] {
					r.opaque = "git filter-branch runs a filter computed at run time"
				} else {
					r.scripts = append(r.scripts, sargs[j+1])
				}
				j++
			}
		}
	}
	return r
}

// gitConfigRuns reports configuration keys (lower case) whose value git
// runs as a shell command.
func gitConfigRuns(k string) bool {
	switch k {
	case "core.pager", "core.editor", "sequence.editor", "core.sshcommand", "core.askpass",
		"core.fsmonitor", "core.gitproxy", "diff.external", "gpg.program", "credential.helper",
		"uploadpack.packobjectshook":
		return true
	}
	parts := strings.Split(k, ".")
	last := parts[len(parts)-1]
	switch {
	case parts[0] == "pager":
		return true
	case len(parts) >= 3 && parts[0] == "diff" && (last == "command" || last == "textconv"):
		return true
	case len(parts) >= 3 && parts[0] == "merge" && last == "driver":
		return true
	case len(parts) >= 3 && parts[0] == "filter" && (last == "clean" || last == "smudge" || last == "process"):
		return true
	case len(parts) >= 3 && (parts[0] == "gpg" && last == "program" || parts[0] == "credential" && last == "helper"):
		return true
	case len(parts) >= 3 && parts[0] == "remote" && (last == "uploadpack" || last == "receivepack"):
		return true
	}
	return false
}

// gitConfigOpaque reports keys that make git run what a file or a
// directory holds.
func gitConfigOpaque(k string) bool {
	return k == "include.path" || k == "core.hookspath" || strings.HasPrefix(k, "includeif.")
}

// sourcedScript is the script "source FILE" or ". FILE" runs when it can
// be told from the command line: a process substitution <(echo ...), or
// stdin (/dev/stdin, /dev/fd/0) fed by a here-document or a pipe from
// echo; known is false when it is text produced at run time (another
// /dev/fd/N, <(program)); file is true for an ordinary file (a program:
// not analysed).
func sourcedScript(w *syntax.Word, stdin *stdinScript) (s stdinScript, file bool) {
	if len(w.Parts) == 1 {
		if ps, ok := w.Parts[0].(*syntax.ProcSubst); ok {
			if ps.Op == syntax.CmdIn && len(ps.Stmts) == 1 {
				return producedText(ps.Stmts[0]), false
			}
			return stdinScript{}, false
		}
	}
	t, lit := wordText(w)
	if !lit {
		return stdinScript{}, true
	}
	switch {
	case isStdin(t.s):
		if stdin == nil {
			return stdinScript{}, false // inherited: rein cannot see it
		}
		return *stdin, false
	case strings.HasPrefix(t.s, "/dev/fd/") || strings.HasPrefix(t.s, "/proc/self/fd/") || strings.HasPrefix(t.s, "/proc/thread-self/fd/"):
		return stdinScript{}, false
	}
	return stdinScript{}, true
}

// isStdin reports paths that name the standard input.
func isStdin(p string) bool {
	switch p {
	case "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0", "/proc/thread-self/fd/0", "-":
		return true
	}
	return false
}

// ran records what the command at idx runs (r): it is a wrapper, its
// commands and scripts are analysed in turn; with r.privileged they run
// as someone else, so the command itself needs the allow rule (it is not
// a wrapper) and what it runs is derived.
func (s *script) ran(idx int, r runs, ctx cmdCtx, derived bool) {
	if r.opaque == "" && r.canon == nil && len(r.cmds) == 0 && len(r.scripts) == 0 {
		return // it runs nothing else: an ordinary command
	}
	c := &s.cmds[idx]
	c.wrapper = !r.privileged && !r.own && (r.canon == nil || r.canonOnly)
	if r.opaque != "" && c.opaque == "" {
		c.opaque = r.opaque
	}
	if ctx.depth >= maxNesting {
		if c.opaque == "" {
			c.opaque = c.words[0] + " is nested too deeply to analyse"
		}
		return
	}
	sub := derived || r.privileged
	if r.canon != nil {
		s.command(r.canon.words, r.canon.dyn, ctx.nested(), derived || !r.canonOnly)
	}
	for _, cw := range r.cmds {
		s.command(cw.words, cw.dyn, ctx.nested(), sub)
	}
	for _, text := range r.scripts {
		if err := s.add(text, ctx.cwd, ctx.cwdUnknown, ctx.depth+1); err != nil && s.cmds[idx].opaque == "" {
			s.cmds[idx].opaque = "the script " + s.cmds[idx].words[0] + " runs does not parse: " + err.Error()
		}
	}
}
