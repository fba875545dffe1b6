package guard

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"mvdan.cc/sh/v3/syntax"
)

// script is a shell command as the policy sees it.
type script struct {
	text   string
	cmds   []shellCmd
	writes []shellWrite
	err    error // the script does not parse
	// shellEnv, when set, says which variable the script sets that makes
	// a shell it starts afterwards run commands (see shellEnvVars).
	shellEnv string
}

// shellCmd is one command the script runs: a simple command as written,
// or one run through a wrapper (sudo rm, xargs rm, find -exec rm, bash -c
// 'rm', echo 'rm' | sh), normalised: the command name without its
// directory (/bin/rm is rm), quotes and escapes removed, $'...' decoded.
type shellCmd struct {
	words []string
	dyn   []bool // the word is computed at run time ($x, $(...), a glob in the name)
	cwd   string // the directory it runs in, as far as known
	// cwdUnknown says why cwd is not known (a cd to a computed place).
	cwdUnknown string
	// opaque says why what this command runs cannot be known (a computed
	// command name, eval or bash -c of computed text, a script piped in
	// from a program); "" when it can.
	opaque string
	// wrapper marks a command that only runs others (env, timeout,
	// xargs, bash -c, eval, ...): an allow rule need not cover it, the
	// commands it runs must be covered instead. Deny and ask rules see it.
	wrapper bool
	// derived marks a command run by a privileged wrapper (sudo, doas):
	// the wrapper's own form needs the allow rule, so an allow for rm
	// does not allow sudo rm. Deny and ask rules see it.
	derived bool
}

func (c shellCmd) String() string { return strings.Join(c.words, " ") }

// shellWrite is a redirection that writes a file.
type shellWrite struct {
	text    string // the redirection as written
	target  string // literal target, when known
	cwd     string // directory the target is relative to
	unknown string // why the target or directory is not known
	// loose marks a computed argument of a command whose computed
	// arguments the workspace check passes over (cp x "$D": the sandbox
	// confines it); Edit and Write rules still ask about it.
	loose bool
}

// maxNesting bounds eval / bash -c / piped-script recursion.
const maxNesting = 4

// parseScript reads src as bash, starting in directory dir.
func parseScript(src, dir string) *script {
	s := &script{text: src}
	s.err = s.add(src, dir, "", 0)
	return s
}

// stdinScript is what a shell reading its script from stdin would read.
type stdinScript struct {
	text  string
	known bool
}

// add parses src and appends its commands and writes. cwdUnknown, when
// set, says why the starting directory is not known.
func (s *script) add(src, dir, cwdUnknown string, depth int) error {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), "")
	if err != nil {
		return err
	}
	cwd := dir
	stdin := map[*syntax.CallExpr]stdinScript{}
	syntax.Walk(f, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.Stmt:
			if call, ok := n.Cmd.(*syntax.CallExpr); ok {
				var piped *stdinScript
				if in, ok := stdin[call]; ok {
					piped = &in
				}
				if in := redirStdin(n.Redirs, piped); in != nil {
					stdin[call] = *in
				}
			}
		case *syntax.DeclClause:
			// export BASH_ENV=..., declare -x PS4=...
			for _, a := range n.Args {
				s.noteAssign(a)
			}
		case *syntax.BinaryCmd:
			if n.Op != syntax.Pipe && n.Op != syntax.PipeAll {
				break
			}
			if call, ok := n.Y.Cmd.(*syntax.CallExpr); ok {
				if _, own := stdin[call]; !own {
					stdin[call] = producedText(n.X)
				}
			}
		case *syntax.CallExpr:
			for _, a := range n.Assigns {
				s.noteAssign(a)
			}
			if len(n.Args) == 0 {
				return true // assignments only
			}
			words := make([]string, len(n.Args))
			dyn := make([]bool, len(n.Args))
			for i, w := range n.Args {
				t, lit := wordText(w)
				words[i], dyn[i] = t.s, !lit
				if i == 0 && lit && t.glob {
					dyn[0] = true
				}
			}
			ctx := cmdCtx{cwd: cwd, cwdUnknown: cwdUnknown, depth: depth}
			if in, ok := stdin[n]; ok {
				ctx.stdin = &in
			}
			if !dyn[0] && (words[0] == "source" || words[0] == ".") && len(n.Args) > 1 {
				if src, file := sourcedScript(n.Args[1], ctx.stdin); !file {
					ctx.sourced = &src
				}
			}
			s.command(words, dyn, ctx, false)
			if !dyn[0] {
				switch baseName(words[0]) {
				case "cd", "pushd":
					cwd, cwdUnknown = changeDir(cwd, cwdUnknown, words[1:], dyn[1:])
				}
			}
		case *syntax.Redirect:
			if !writesFile(n) {
				return true
			}
			w := shellWrite{text: n.Op.String() + " " + printWord(n.Word), cwd: cwd}
			t, lit := wordText(n.Word)
			target := expandHome(t.s)
			switch {
			case !lit:
				w.unknown = "the target is computed at run time"
			case !filepath.IsAbs(target) && cwdUnknown != "":
				w.unknown = cwdUnknown
			default:
				w.target = target
			}
			s.writes = append(s.writes, w)
		}
		return true
	})
	return nil
}

// redirStdin applies a command's redirections, in order, to what its
// standard input reads: piped is what a pipe feeds it, nil when it
// inherits the script's stdin. It returns nil when stdin is still
// inherited. A here-document or here-string is known text; a file is a
// script file (a program like any other); a descriptor opened earlier
// (exec 4<<<...; sh <&4) is unknown.
func redirStdin(redirs []*syntax.Redirect, piped *stdinScript) *stdinScript {
	fds := map[string]*stdinScript{}
	get := func(fd string) *stdinScript {
		if in, ok := fds[fd]; ok {
			return in
		}
		if fd == "0" {
			return piped
		}
		return &stdinScript{}
	}
	for _, r := range redirs {
		fd := "0"
		if r.N != nil {
			fd = r.N.Value
		}
		t, lit := wordText(r.Word)
		var in *stdinScript
		switch r.Op {
		case syntax.Hdoc, syntax.DashHdoc:
			t, lit = hdocText(r)
			in = &stdinScript{t.s, lit}
		case syntax.WordHdoc:
			in = &stdinScript{t.s, lit}
		case syntax.RdrIn, syntax.RdrInOut:
			switch n, isFd := fdPath(t.s); {
			case !lit:
				in = &stdinScript{} // a computed file, or <(...)
			case isFd:
				in = get(n)
			default:
				in = &stdinScript{known: true}
			}
		case syntax.DplIn:
			switch {
			case lit && t.s == "-":
				in = &stdinScript{known: true} // closed
			case lit && strings.Trim(t.s, "0123456789") == "":
				in = get(t.s)
			default:
				in = &stdinScript{}
			}
		default:
			continue
		}
		fds[fd] = in
	}
	return get("0")
}

// fdPath returns the descriptor a path names (/dev/stdin is 0, /dev/fd/3
// is 3).
func fdPath(p string) (string, bool) {
	if isStdin(p) && p != "-" {
		return "0", true
	}
	for _, dir := range []string{"/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/"} {
		if n, ok := strings.CutPrefix(p, dir); ok && n != "" && strings.Trim(n, "0123456789") == "" {
			return n, true
		}
	}
	return "", false
}

// shellEnvVars are variables whose value a shell started later runs as
// commands or reads a script from: BASH_ENV and ENV (startup files),
// PROMPT_COMMAND and the prompts (an interactive shell expands them, and
// PS4 with xtrace), SHELLOPTS and BASHOPTS (turn on xtrace), ZDOTDIR (zsh's
// startup files).
var shellEnvVars = map[string]bool{"BASH_ENV": true, "ENV": true, "PROMPT_COMMAND": true, "PS0": true, "PS1": true,
	"PS2": true, "PS3": true, "PS4": true, "SHELLOPTS": true, "BASHOPTS": true, "ZDOTDIR": true}

// noteAssign remembers an assignment to one of shellEnvVars (or to
// a name computed at run time, or an exported function): every shell the
// script starts afterwards may run what it holds.
func (s *script) noteAssign(a *syntax.Assign) {
	name := ""
	switch {
	case a.Name != nil:
		name = a.Name.Value
	case a.Value != nil:
		t, lit := wordText(a.Value) // declare "NAME=value"
		if !lit {
			s.shellEnv = "a variable named at run time is set"
			return
		}
		name, _, _ = strings.Cut(t.s, "=")
	}
	s.noteEnv(name)
}

// noteEnv is noteAssign for the NAME of NAME=value.
func (s *script) noteEnv(name string) {
	if s.shellEnv == "" && (shellEnvVars[name] || strings.HasPrefix(name, "BASH_FUNC_")) {
		s.shellEnv = name + " is set"
	}
}

// producedText is what the left side of a pipe writes, when that is
// known: the literal arguments of echo or printf (a script piped into a
// shell is then read); anything else is unknown.
func producedText(st *syntax.Stmt) stdinScript {
	call, ok := st.Cmd.(*syntax.CallExpr)
	if !ok || len(call.Args) == 0 {
		return stdinScript{}
	}
	var words []string
	for _, w := range call.Args {
		t, lit := wordText(w)
		if !lit {
			return stdinScript{}
		}
		words = append(words, t.s)
	}
	switch words[0] {
	case "echo":
		args := words[1:]
		for len(args) > 0 && (args[0] == "-n" || args[0] == "-e" || args[0] == "-E") {
			args = args[1:]
		}
		return stdinScript{strings.Join(args, " "), true}
	case "printf":
		if len(words) > 1 && !strings.Contains(words[1], "%") {
			return stdinScript{decodeEscapes(words[1]), true}
		}
	}
	return stdinScript{}
}

// changeDir follows a literal cd/pushd; anything else makes the directory
// unknown.
func changeDir(cwd, unknown string, args []string, dyn []bool) (string, string) {
	i := 0
	for i < len(args) && !dyn[i] && strings.HasPrefix(args[i], "-") && args[i] != "-" {
		if args[i] == "--" {
			i++
			break
		}
		i++ // -P, -L, -e, -@
	}
	switch {
	case i >= len(args):
		if home, err := homeDir(); err == nil {
			return home, ""
		}
		return cwd, "the command changes directory to the home directory"
	case dyn[i] || args[i] == "-":
		return cwd, "the command changes directory to " + strings.Join(args, " ")
	}
	d := expandHome(args[i])
	if filepath.IsAbs(d) {
		return d, ""
	}
	return cwd + "/" + d, unknown
}

// cmdCtx is where a command runs.
type cmdCtx struct {
	cwd, cwdUnknown string
	depth           int
	stdin           *stdinScript // set when stdin comes from a pipe or here-document
	// sourced is the script "source X" or ". X" reads when X is stdin, a
	// /dev/fd file or a process substitution (not an ordinary file).
	sourced *stdinScript
}

// nested is the context of what a command at ctx runs.
func (ctx cmdCtx) nested() cmdCtx {
	return cmdCtx{cwd: ctx.cwd, cwdUnknown: ctx.cwdUnknown, depth: ctx.depth + 1}
}

// Wrapper commands: they run their operands as a command.
var (
	// transparent wrappers change how a command runs, not who runs it.
	transparent = map[string]bool{
		"command": true, "builtin": true, "exec": true, "env": true, "nice": true, "nohup": true,
		"time": true, "timeout": true, "stdbuf": true, "ionice": true, "setsid": true, "xargs": true,
		"chrt": true, "taskset": true, "unbuffer": true, "watch": true, "strace": true,
		"eatmydata": true, "fakeroot": true, "firejail": true, "torsocks": true, "proxychains": true,
		"proxychains4": true, "chronic": true, "prlimit": true, "nocache": true,
	}
	// privileged wrappers run the command as someone else, or with other
	// namespaces, limits or a service manager.
	privileged = map[string]bool{"sudo": true, "doas": true, "pkexec": true, "run0": true,
		"unshare": true, "setpriv": true, "chroot": true, "systemd-run": true, "nsenter": true}
	// shells run a script given with -c, as a file, or on stdin.
	shells = map[string]bool{"bash": true, "sh": true, "zsh": true, "dash": true, "ksh": true, "mksh": true, "busybox": true,
		"ash": true, "rbash": true, "yash": true, "posh": true, "fish": true, "csh": true, "tcsh": true}
	// specials run commands given in their options or as shell text (see
	// special): git, flock -c, su -c, runuser, sg, script -c, ssh, tmux,
	// tar's --checkpoint-action=exec= and -I, zip -TT, sed's e, fc, and
	// editors and debuggers that run their own commands.
	specials = map[string]bool{"git": true, "flock": true, "su": true, "runuser": true, "sg": true, "script": true, "ssh": true, "tmux": true,
		"tar": true, "zip": true, "sed": true, "fc": true, "gdb": true, "lldb": true,
		"vim": true, "vi": true, "nvim": true, "view": true, "vimdiff": true, "gvim": true, "ex": true, "evim": true, "nvi": true}
)

// wrapperValueFlags are the options of wrappers that take a value as the
// next word.
var wrapperValueFlags = map[string]string{
	"sudo":        "-u -g -C -D -h -p -r -t -U -T",
	"doas":        "-u -C",
	"nice":        "-n --adjustment",
	"timeout":     "-s -k --signal --kill-after",
	"xargs":       "-n -I -L -P -d -s -E -a -i --max-args --replace --max-lines --max-procs --delimiter --arg-file",
	"stdbuf":      "-i -o -e",
	"ionice":      "-c -n -p -t",
	"chrt":        "-p",
	"taskset":     "-p -c",
	"flock":       "-w -E --timeout --conflict-exit-code",
	"watch":       "-n -d --interval",
	"strace":      "-o -e -p -s -u -E",
	"unshare":     "-S --setuid -G --setgid -R --root -w --wd --map-user --map-group --propagation --setgroups",
	"setpriv":     "--reuid --regid --ruid --euid --rgid --egid --groups --inh-caps --ambient-caps --bounding-set --securebits --pdeathsig --selinux-label --apparmor-profile --landlock-access --landlock-rule --seccomp-filter",
	"chroot":      "--userspec --groups",
	"nsenter":     "-t --target -S --setuid -G --setgid",
	"prlimit":     "-p --pid -o --output",
	"fakeroot":    "-l --lib --faked -i -s -b",
	"torsocks":    "-u --user -p --pass -a --address -P --port",
	"proxychains": "-f", "proxychains4": "-f",
	"systemd-run": "-u --unit -p --property -E --setenv --uid --gid --nice -M --machine -H --host --working-directory --description --slice --service-type --on-active --on-boot --on-startup --on-unit-active --on-unit-inactive --on-calendar --path-property --socket-property --timer-property -C --capsule",
	"exec":        "-a",
	"pkexec":      "--user",
	"run0":        "--user -u --property --setenv",
}

// command records a simple command (words, with dyn marking computed
// words) and every command it runs through wrappers.
func (s *script) command(words []string, dyn []bool, ctx cmdCtx, derived bool) {
	if len(words) == 0 {
		return
	}
	c := shellCmd{words: slices.Clone(words), dyn: slices.Clone(dyn), cwd: ctx.cwd, cwdUnknown: ctx.cwdUnknown, derived: derived}
	if dyn[0] {
		c.opaque = "the command name is computed at run time (" + words[0] + ")"
		s.cmds = append(s.cmds, c)
		return
	}
	name := baseName(words[0])
	c.words[0] = name
	idx := len(s.cmds)
	s.cmds = append(s.cmds, c)
	mark := func(opaque string) {
		s.cmds[idx].wrapper = true
		if opaque != "" && s.cmds[idx].opaque == "" {
			s.cmds[idx].opaque = opaque
		}
	}
	args, adyn := words[1:], dyn[1:]
	switch {
	case name == "command" && len(args) > 0 && (args[0] == "-v" || args[0] == "-V"):
		// a lookup, not a run
	case specials[name]:
		r, _ := special(name, args, adyn)
		s.ran(idx, r, ctx, derived)
	case name == "trap":
		i := 0
		for i < len(args) && !adyn[i] && strings.HasPrefix(args[i], "-") && args[i] != "-" {
			i++ // -l, -p, --
		}
		switch {
		case len(args)-i < 2: // listing, or resetting a signal
		case adyn[i]:
			mark("trap runs text computed at run time")
		case args[i] != "-" && args[i] != "":
			s.ran(idx, runs{scripts: []string{args[i]}}, ctx, derived)
		}
	case (name == "source" || name == ".") && ctx.sourced != nil:
		switch {
		case !ctx.sourced.known:
			mark(name + " reads a script produced at run time")
		case ctx.depth >= maxNesting:
			mark(name + " is nested too deeply to analyse")
		default:
			mark("")
			if err := s.add(ctx.sourced.text, ctx.cwd, ctx.cwdUnknown, ctx.depth+1); err != nil {
				s.cmds[idx].opaque = "the sourced script does not parse: " + err.Error()
			}
		}
	case name == "env":
		cmd, cdyn, why := envCommand(args, adyn, s.noteEnv)
		if len(cmd) > 0 || why != "" {
			mark(why)
			s.command(cmd, cdyn, ctx, derived)
		}
	case name == "read" || name == "mapfile" || name == "readarray" || name == "printf":
		for i, a := range args {
			if !adyn[i] {
				s.noteEnv(a) // read PS4, printf -v PS4 ...
			}
		}
	case transparent[name] || privileged[name]:
		rest, rdyn := stripOptions(name, args, adyn)
		if len(rest) == 0 {
			if name == "xargs" {
				mark("")
				s.command([]string{"echo"}, []bool{false}, ctx, derived)
			}
			return
		}
		if name == "xargs" && !rdyn[0] && strings.Contains(rest[0], "{}") {
			mark("xargs runs a command named by its input")
			return
		}
		if name == "watch" { // runs its arguments with sh -c
			switch {
			case slices.Contains(rdyn, true):
				mark("watch runs text computed at run time")
			case ctx.depth < maxNesting:
				mark("")
				if err := s.add(strings.Join(rest, " "), ctx.cwd, ctx.cwdUnknown, ctx.depth+1); err != nil {
					s.cmds[idx].opaque = "watch's command does not parse: " + err.Error()
				}
			}
			return
		}
		if transparent[name] {
			mark("")
			s.command(rest, rdyn, ctx, derived)
		} else {
			s.command(rest, rdyn, ctx, true)
		}
	case shells[name]:
		if name == "busybox" {
			if len(args) > 0 && !shells[args[0]] {
				mark("")
				s.command(args, adyn, ctx, derived)
				return
			}
			if len(args) > 0 {
				args, adyn = args[1:], adyn[1:]
			}
		}
		script, why, isScript := shellScript(name, args, adyn, ctx.stdin)
		switch {
		case s.shellEnv != "":
			mark("the shell may run what its environment holds (" + s.shellEnv + ")")
		case !isScript:
			return // runs a script file: a program like any other
		default:
			mark(why)
		}
		switch {
		case script == "":
		case ctx.depth >= maxNesting:
			mark("the shell script is nested too deeply to analyse")
		default:
			if err := s.add(script, ctx.cwd, ctx.cwdUnknown, ctx.depth+1); err != nil && s.cmds[idx].opaque == "" {
				s.cmds[idx].opaque = "the shell script does not parse: " + err.Error()
			}
		}
	case name == "eval":
		switch {
		case slices.Contains(adyn, true):
			mark("eval runs text computed at run time")
		case ctx.depth >= maxNesting:
			mark("eval is nested too deeply to analyse")
		default:
			mark("")
			if err := s.add(strings.Join(args, " "), ctx.cwd, ctx.cwdUnknown, ctx.depth+1); err != nil {
				s.cmds[idx].opaque = "eval's text does not parse: " + err.Error()
			}
		}
	case name == "alias":
		for i, a := range args {
			if _, v, ok := strings.Cut(a, "="); ok && !adyn[i] && ctx.depth < maxNesting {
				_ = s.add(v, ctx.cwd, ctx.cwdUnknown, ctx.depth+1)
			}
		}
	case name == "find":
		for i := 0; i < len(args); i++ {
			switch args[i] {
			case "-exec", "-execdir", "-ok", "-okdir":
				j := i + 1
				for j < len(args) && args[j] != ";" && args[j] != "+" {
					j++
				}
				if j > i+1 {
					s.command(args[i+1:j], adyn[i+1:j], ctx, derived)
				}
				i = j
			}
		}
	}
}

// envCommand reads env's command line as env does: its options (-i, -0,
// -v, -u NAME, -C DIR, -a ARG, -S STRING and their long forms, which may
// be abbreviated), its NAME=value operands (note is told each NAME) and
// the command it runs. The words of -S STRING are read in its place, as
// options, operands or the command. why says what cannot be known.
func envCommand(args []string, dyn []bool, note func(string)) (cmd []string, cdyn []bool, why string) {
	longs := []string{"split-string", "unset", "chdir", "argv0", "ignore-environment", "null", "debug",
		"block-signal", "default-signal", "ignore-signal", "list-signal-handling", "help", "version"}
	args, dyn = slices.Clone(args), slices.Clone(dyn)
	operands := false // options end at the first NAME=value
	for i := 0; i < len(args); i++ {
		a := args[i]
		if dyn[i] {
			return args[i:], dyn[i:], ""
		}
		opt, val, hasVal := "", "", false
		switch {
		case operands && strings.Contains(a, "="):
			name, _, _ := strings.Cut(a, "=")
			note(name)
			continue
		case operands:
			return args[i:], dyn[i:], ""
		case a == "--":
			return args[i+1:], dyn[i+1:], ""
		case strings.HasPrefix(a, "--"):
			name, v, eq := strings.Cut(a[2:], "=")
			for _, l := range longs {
				if name != "" && strings.HasPrefix(l, name) {
					opt, val, hasVal = l, v, eq
					break
				}
			}
			if opt != "split-string" && opt != "unset" && opt != "chdir" && opt != "argv0" {
				continue
			}
		case a == "-":
			continue
		case strings.HasPrefix(a, "-"):
			for j := 1; j < len(a); j++ {
				if strings.IndexByte("SuCa", a[j]) >= 0 {
					opt, val, hasVal = a[j:j+1], a[j+1:], j+1 < len(a)
					break
				}
			}
			if opt == "" {
				continue
			}
		case strings.Contains(a, "="):
			operands, i = true, i-1
			continue
		default:
			return args[i:], dyn[i:], ""
		}
		if !hasVal && i+1 < len(args) {
			i++
			val = args[i]
			if dyn[i] && (opt == "S" || opt == "split-string") {
				return nil, nil, "env -S splits a string computed at run time"
			}
		}
		if opt == "S" || opt == "split-string" {
			w, d := splitEnvString(val)
			args = append(w, args[i+1:]...)
			dyn = append(d, dyn[i+1:]...)
			i = -1 // env reads the words in place of -S STRING
		}
	}
	return nil, nil, ""
}

// splitEnvString splits env -S's STRING into words as env does: blanks
// separate words outside quotes, '...' keeps all but \\ and \', "..."
// and bare text decode \n \t \r \f \v \_ (a blank; outside quotes a
// separator) \c (ends the string) and quote anything else, # starts a
// comment at the start of a word. A word holding ${NAME} is computed.
func splitEnvString(s string) (words []string, dyn []bool) {
	var b strings.Builder
	in, d := false, false
	var q byte
	flush := func() {
		if in {
			words, dyn = append(words, b.String()), append(dyn, d)
		}
		b.Reset()
		in, d = false, false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case q != 0 && c == q:
			q = 0
		case q == 0 && (c == '\'' || c == '"'):
			q, in = c, true
		case q == 0 && strings.IndexByte(" \t\n\v\f\r", c) >= 0:
			flush()
		case q == 0 && c == '#' && !in:
			i = len(s)
		case c == '\\' && i+1 < len(s) && (q != '\'' || s[i+1] == '\\' || s[i+1] == '\''):
			i++
			in = true
			switch e := s[i]; e {
			case 'c':
				i = len(s)
			case '_':
				if q == 0 {
					flush()
				} else {
					b.WriteByte(' ')
				}
			case 'n', 't', 'r', 'f', 'v':
				b.WriteByte(map[byte]byte{'n': '\n', 't': '\t', 'r': '\r', 'f': '\f', 'v': '\v'}[e])
			default:
				b.WriteByte(e)
			}
		case c == '$' && q != '\'' && strings.HasPrefix(s[i:], "${"):
			d, in = true, true
			b.WriteByte(c)
		default:
			b.WriteByte(c)
			in = true
		}
	}
	flush()
	return words, dyn
}

// stripOptions drops a wrapper's options (and env's NAME=value, the
// duration of timeout and watch, the lock file of flock, ...) and returns
// the command it runs.
func stripOptions(w string, words []string, dyn []bool) ([]string, []bool) {
	valueFlags := strings.Fields(wrapperValueFlags[w])
	operand := map[string]bool{"timeout": true, "flock": true, "taskset": true, "chrt": true, "chroot": true}[w] // one operand before the command
	i := 0
	for i < len(words) {
		a := words[i]
		switch {
		case dyn[i]:
			return words[i:], dyn[i:]
		case a == "--":
			return words[i+1:], dyn[i+1:]
		case strings.HasPrefix(a, "-") && a != "-":
			if slices.Contains(valueFlags, a) && i+1 < len(words) {
				i++
			}
		case w == "env" && strings.Contains(a, "="):
		case operand:
			operand = false
		default:
			return words[i:], dyn[i:]
		}
		i++
	}
	return nil, nil
}

// interactiveShell is why the script of an interactive shell is not
// all there is.
const interactiveShell = "an interactive shell runs its startup files and prompt commands"

func interactiveWhy(i bool) string {
	if i {
		return interactiveShell
	}
	return ""
}

// shellScript finds the script a shell runs: the argument of -c (also in
// a combined -lc, -ec, ...), or stdin when there is no operand. isScript
// is false when it runs a script file. why, when set, says why the text
// cannot be known: it is computed, in a descriptor, or the shell is
// interactive and runs its startup files (-i, --rcfile, --init-file,
// fish's --init-command).
func shellScript(name string, args []string, dyn []bool, stdin *stdinScript) (text, why string, isScript bool) {
	c, ci := false, false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case dyn[i]:
			// A computed script or script file, or <(...): it may be a
			// script produced at run time.
			return "", "the shell runs a script computed at run time", true
		case a == "--":
			if c && i+1 < len(args) {
				return args[i+1], interactiveWhy(ci), true
			}
			if c || i+1 >= len(args) {
				return stdinText(stdin, ci)
			}
			return "", "", false
		case strings.HasPrefix(a, "--"):
			switch a {
			case "--rcfile", "--init-file", "--interactive", "--init-command":
				return "", interactiveShell, true
			}
			if strings.HasPrefix(a, "--init-command=") {
				return "", interactiveShell, true
			}
		case strings.HasPrefix(a, "-") || strings.HasPrefix(a, "+"):
			if strings.Contains(a[1:], "c") {
				c = true
			}
			if a[0] == '-' && (strings.Contains(a[1:], "i") || name == "fish" && strings.Contains(a[1:], "C")) {
				ci = true // -i; fish's -C COMMAND
			}
			if strings.ContainsAny(a[1:], "oO") && i+1 < len(args) {
				i++ // -o option
			}
		case c:
			return a, interactiveWhy(ci), true
		case ci:
			return "", interactiveShell, true
		case isStdin(a) && a != "-":
			return stdinText(stdin, false)
		case strings.HasPrefix(a, "/dev/fd/") || strings.HasPrefix(a, "/proc/self/fd/") || strings.HasPrefix(a, "/proc/thread-self/fd/"):
			return "", "the shell runs a script from a descriptor", true
		default:
			return "", "", false // a script file
		}
	}
	if c {
		return "", "the shell's -c has no script", true
	}
	return stdinText(stdin, ci)
}

// stdinText is the script a shell reads from stdin: unknown when stdin is
// inherited (nil) or produced at run time, or the shell is interactive.
func stdinText(stdin *stdinScript, interactive bool) (text, why string, isScript bool) {
	switch {
	case interactive:
		return "", interactiveShell, true
	case stdin == nil:
		return "", "the shell reads its script from stdin, which rein cannot see", true
	case !stdin.known:
		return "", "the shell reads a script produced at run time", true
	}
	return stdin.text, "", true
}

// baseName is the name a command word runs: /usr/bin/rm runs rm.
func baseName(w string) string {
	if i := strings.LastIndexByte(w, '/'); i >= 0 && i < len(w)-1 {
		return w[i+1:]
	}
	return w
}

// writesFile reports whether r opens a file for writing.
func writesFile(r *syntax.Redirect) bool {
	switch r.Op {
	case syntax.RdrOut, syntax.AppOut, syntax.RdrInOut, syntax.RdrClob, syntax.AppClob,
		syntax.RdrAll, syntax.RdrAllClob, syntax.AppAll, syntax.AppAllClob:
		return true
	case syntax.DplOut: // >&2 duplicates; >&file writes file
		t, lit := wordText(r.Word)
		if !lit {
			return true
		}
		return t.s != "-" && strings.Trim(t.s, "0123456789-") != ""
	}
	return false
}

// word is a shell word's value.
type word struct {
	s    string
	glob bool // an unquoted *, ? or [, or a brace expansion: the shell may turn it into other words
}

// quoting is where a literal stands, which decides what its backslashes
// mean.
type quoting int

const (
	unquoted quoting = iota // every backslash quotes the next character
	dquoted                 // inside "...": only \$ \` \" \\ and \newline are escapes
	hdoc                    // a here-document body with an unquoted delimiter: \$ \` \\ \newline
)

// wordText returns a word's value when it is literal (quotes and escapes
// removed, $'...' decoded), and otherwise its source text; lit says which.
func wordText(w *syntax.Word) (word, bool) { return wordTextIn(w, unquoted) }

// wordTextIn is wordText for a word whose literals stand in q.
func wordTextIn(w *syntax.Word, q quoting) (word, bool) {
	if w == nil {
		return word{}, true
	}
	var b strings.Builder
	var out word
	lit := true
	var parts func(ps []syntax.WordPart, q quoting)
	parts = func(ps []syntax.WordPart, q quoting) {
		for _, p := range ps {
			switch p := p.(type) {
			case *syntax.Lit:
				if q == unquoted && hasGlob(p.Value) {
					out.glob = true
				}
				b.WriteString(unescape(p.Value, q))
			case *syntax.SglQuoted:
				if p.Dollar {
					b.WriteString(decodeEscapes(p.Value))
				} else {
					b.WriteString(p.Value)
				}
			case *syntax.DblQuoted:
				if p.Dollar {
					lit = false // $"..." is translated at run time
				}
				parts(p.Parts, dquoted)
			default:
				lit = false
				b.WriteString(printNode(p))
			}
		}
	}
	parts(w.Parts, q)
	out.s = b.String()
	return out, lit
}

// hdocText is the text a here-document feeds: its body verbatim when the
// delimiter is quoted (<<'EOF', <<"EOF", <<\EOF), else expanded as bash
// does, where a backslash quotes only $, `, \ and newline.
func hdocText(r *syntax.Redirect) (word, bool) {
	if r.Hdoc == nil {
		return word{}, true
	}
	quoted := false
	for _, p := range r.Word.Parts {
		switch p := p.(type) {
		case *syntax.SglQuoted, *syntax.DblQuoted:
			quoted = true
		case *syntax.Lit:
			quoted = quoted || strings.Contains(p.Value, `\`)
		}
	}
	if quoted {
		var b strings.Builder
		for _, p := range r.Hdoc.Parts {
			if l, ok := p.(*syntax.Lit); ok {
				b.WriteString(l.Value)
			} else {
				b.WriteString(printNode(p))
			}
		}
		return word{s: b.String()}, true
	}
	return wordTextIn(r.Hdoc, hdoc)
}

// hasGlob reports unescaped pattern characters or brace expansion in an
// unquoted literal.
func hasGlob(s string) bool {
	brace := false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '*', '?', '[':
			return true
		case '{':
			brace = true
		case ',':
			if brace {
				return true
			}
		case '.':
			if brace && i+1 < len(s) && s[i+1] == '.' {
				return true
			}
		}
	}
	return false
}

// unescape removes the backslashes that quote in a literal standing in q,
// as bash does: unquoted, a backslash quotes any character; inside double
// quotes only $, `, ", \ and newline (a here-document: the same but "); a
// backslash-newline is a line continuation and disappears. Any other
// backslash stays.
func unescape(s string, q quoting) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			switch c := s[i+1]; {
			case c == '\n':
				i++
				continue
			case q == unquoted, c == '$', c == '`', c == '\\', c == '"' && q == dquoted:
				i++
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// decodeEscapes decodes bash's $'...' escapes (also printf's): \n \t \\
// \' \" \a \b \e \f \r \v \? \NNN \xHH \uHHHH \UHHHHHHHH \cX.
func decodeEscapes(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch c := s[i]; c {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case 'a':
			b.WriteByte(7)
		case 'b':
			b.WriteByte(8)
		case 'e', 'E':
			b.WriteByte(27)
		case 'f':
			b.WriteByte(12)
		case 'v':
			b.WriteByte(11)
		case 'c':
			if i+1 < len(s) {
				i++
				b.WriteByte(s[i] & 0x1f)
			}
		case 'x', 'u', 'U', '0', '1', '2', '3', '4', '5', '6', '7':
			base, maxDigits, start := 16, map[byte]int{'x': 2, 'u': 4, 'U': 8}[c], i+1
			if c >= '0' && c <= '7' {
				base, maxDigits, start = 8, 3, i
			}
			j := start
			for j < len(s) && j-start < maxDigits && isDigit(s[j], base) {
				j++
			}
			if j == start {
				b.WriteByte('\\')
				b.WriteByte(c)
				continue
			}
			v, _ := strconv.ParseUint(s[start:j], base, 32)
			if c == 'u' || c == 'U' {
				b.WriteString(string(rune(v)))
			} else {
				b.WriteByte(byte(v))
			}
			i = j - 1
		default: // \\ \' \" \? and unknown escapes
			if c != '\\' && c != '\'' && c != '"' && c != '?' {
				b.WriteByte('\\')
			}
			b.WriteByte(c)
		}
	}
	if !utf8.ValidString(b.String()) {
		return strings.ToValidUTF8(b.String(), "\uFFFD")
	}
	return b.String()
}

func isDigit(c byte, base int) bool {
	if base == 8 {
		return c >= '0' && c <= '7'
	}
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func printWord(w *syntax.Word) string {
	if w == nil {
		return ""
	}
	return printNode(w)
}

func printNode(n syntax.Node) string {
	var b strings.Builder
	if err := syntax.NewPrinter().Print(&b, n); err != nil {
		return "?"
	}
	return b.String()
}

// fileWriters are commands that change the files named by their arguments:
// "all" non-option arguments, the "last" one (or the -t directory), or
// dd's "of=". Those marked with dynamic are asked about when an argument
// is computed at run time.
var fileWriters = map[string]struct {
	which   string
	dynamic bool
}{
	"rm": {"all", true}, "rmdir": {"all", true}, "unlink": {"all", true}, "shred": {"all", true},
	"mv": {"all", true}, "touch": {"all", false}, "mkdir": {"all", false}, "truncate": {"all", false},
	"tee": {"all", false}, "chmod": {"all", false}, "chown": {"all", false}, "chgrp": {"all", false},
	"cp": {"last", false}, "ln": {"last", false}, "install": {"last", false}, "rsync": {"last", false},
	"dd": {"of", false},
}

// targets are the files the script is known to write: its redirections
// and the files named by commands that change them (see writeTargets),
// devices left out.
func (s *script) targets() []shellWrite {
	all := slices.Clone(s.writes)
	for _, cmd := range s.cmds {
		all = append(all, writeTargets(cmd)...)
	}
	return slices.DeleteFunc(all, func(w shellWrite) bool { return isDevice(w.target) })
}

// writeTargets returns the files a command is known to change, as
// shellWrites: a best effort that catches the plain cases ("rm -rf ~",
// "cp x /etc/", "mv a ../b", "cp -t /etc x", "find -fprint f", "sed -i
// s/a/b/ f", and find -delete as a write to places unknown); what
// programs do beyond their arguments is not seen (the OS sandbox is what
// confines them).
func writeTargets(c shellCmd) []shellWrite {
	if len(c.words) == 0 || c.dyn[0] {
		return nil
	}
	fw, ok := fileWriters[c.words[0]]
	var args []argWord
	var out []shellWrite
	switch {
	case c.words[0] == "find":
		fw, args = fileWriters["touch"], findOutputs(c.words, c.dyn)
		if slices.Contains(c.words[1:], "-delete") {
			// What it removes is found at run time: confined by the
			// sandbox, asked about under Edit and Write rules.
			out = append(out, shellWrite{text: c.String(), cwd: c.cwd, unknown: "find -delete removes the files it finds, known only when it runs", loose: true})
		}
	case c.words[0] == "sed":
		fw, args = fileWriters["touch"], sedInPlace(c.words, c.dyn)
	case ok:
		args = writerArgs(fw.which, c.words, c.dyn)
	default:
		return nil
	}
	for _, a := range args {
		w := shellWrite{text: c.String(), cwd: c.cwd}
		target := expandHome(a.text)
		switch {
		case !a.lit:
			w.unknown = "an argument is computed at run time"
			w.loose = !fw.dynamic
		case !filepath.IsAbs(target) && c.cwdUnknown != "":
			w.unknown = c.cwdUnknown
		default:
			w.target = target
		}
		out = append(out, w)
	}
	return out
}

// argWord is a command's argument and whether it is literal.
type argWord struct {
	text string
	lit  bool
}

// writerArgs returns the arguments of a file writer (see fileWriters)
// naming the files it changes.
func writerArgs(which string, words []string, dyn []bool) []argWord {
	var args []argWord
	var target *argWord
	opts := true
	for i := 1; i < len(words); i++ {
		w := words[i]
		switch {
		case opts && w == "--":
			opts = false
		case which == "of":
			if v, ok := strings.CutPrefix(w, "of="); ok {
				args = append(args, argWord{v, !dyn[i]})
			}
		case opts && which == "last" && (w == "-t" || w == "--target-directory") && i+1 < len(words):
			target = &argWord{words[i+1], !dyn[i+1]}
			i++
		case opts && which == "last" && strings.HasPrefix(w, "--target-directory="):
			target = &argWord{strings.TrimPrefix(w, "--target-directory="), !dyn[i]}
		case opts && which == "last" && strings.HasPrefix(w, "-t") && len(w) > 2 && !strings.HasPrefix(w, "--"):
			target = &argWord{w[2:], !dyn[i]}
		case opts && strings.HasPrefix(w, "-") && w != "-":
		default:
			args = append(args, argWord{w, !dyn[i]})
		}
	}
	switch {
	case target != nil:
		return []argWord{*target}
	case which == "last" && len(args) > 1:
		return args[len(args)-1:]
	case which == "last":
		return nil
	}
	return args
}

// sedInPlace returns the files sed -i (--in-place) edits: its operands,
// the first of them being the script unless -e, -f or their long forms
// gave one. Without -i sed writes no file (its w command is not seen).
func sedInPlace(words []string, dyn []bool) []argWord {
	inPlace, script := false, false
	var operands []argWord
	opts := true
	for i := 1; i < len(words); i++ {
		w := words[i]
		switch {
		case !opts || w == "-" || !strings.HasPrefix(w, "-"):
			operands = append(operands, argWord{w, !dyn[i]})
		case w == "--":
			opts = false
		case w == "--in-place" || strings.HasPrefix(w, "--in-place="):
			inPlace = true
		case w == "--expression" || w == "--file":
			script = true
			i++
		case strings.HasPrefix(w, "--expression=") || strings.HasPrefix(w, "--file="):
			script = true
		case w == "--line-length":
			i++
		case strings.HasPrefix(w, "--"):
		default: // a cluster of short options
		cluster:
			for j := 1; j < len(w); j++ {
				switch w[j] {
				case 'i': // the rest is a backup suffix
					inPlace = true
					break cluster
				case 'e', 'f', 'l': // the rest, or the next word, is the argument
					script = script || w[j] != 'l'
					if j == len(w)-1 {
						i++
					}
					break cluster
				}
			}
		}
	}
	if !inPlace {
		return nil
	}
	if !script && len(operands) > 0 {
		operands = operands[1:]
	}
	return operands
}

// findOutputs returns the files find writes with -fprint FILE, -fprint0,
// -fprintf FILE FORMAT and -fls FILE.
func findOutputs(words []string, dyn []bool) []argWord {
	var out []argWord
	for i := 1; i+1 < len(words); i++ {
		switch words[i] {
		case "-fprint", "-fprint0", "-fprintf", "-fls":
			out = append(out, argWord{words[i+1], !dyn[i+1]})
		}
	}
	return out
}
