package guard

import (
	"path/filepath"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// script is a shell command as the policy sees it.
type script struct {
	text   string
	cmds   []shellCmd
	writes []shellWrite
	err    error // the script does not parse
}

// shellCmd is one simple command: its words, literal where possible and
// source text where not (an expansion, a substitution).
type shellCmd struct {
	words []string
	lits  []bool // which words are literal
	cwd   string // the directory it runs in, as far as known
	// cwdUnknown says why cwd is not known (a cd to a computed place).
	cwdUnknown string
}

func (c shellCmd) String() string { return strings.Join(c.words, " ") }

// shellWrite is a redirection that writes a file.
type shellWrite struct {
	text    string // the redirection as written
	target  string // literal target, when known
	cwd     string // directory the target is relative to
	unknown string // why the target or directory is not known
}

// maxNesting bounds eval / bash -c recursion.
const maxNesting = 3

// parseScript reads src as bash, starting in directory dir.
func parseScript(src, dir string) *script {
	s := &script{text: src}
	s.err = s.add(src, dir, "", 0)
	return s
}

// add parses src and appends its commands and writes. cwdUnknown, when
// set, says why the starting directory is not known.
func (s *script) add(src, dir, cwdUnknown string, depth int) error {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), "")
	if err != nil {
		return err
	}
	cwd := dir
	syntax.Walk(f, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.CallExpr:
			if len(n.Args) == 0 {
				return true // assignments only
			}
			words := make([]string, len(n.Args))
			lits := make([]bool, len(n.Args))
			for i, w := range n.Args {
				words[i], lits[i] = wordText(w)
			}
			s.cmds = append(s.cmds, shellCmd{words: words, lits: lits, cwd: cwd, cwdUnknown: cwdUnknown})
			switch words[0] {
			case "cd", "pushd":
				switch {
				case len(words) < 2 || !lits[1] || words[1] == "-":
					cwdUnknown = "the command changes directory to " + strings.Join(words[1:], " ")
				case filepath.IsAbs(expandHome(words[1])):
					cwd, cwdUnknown = expandHome(words[1]), ""
				default:
					cwd = cwd + "/" + words[1]
				}
			case "eval":
				if depth < maxNesting && allLit(lits[1:]) {
					_ = s.add(strings.Join(words[1:], " "), cwd, cwdUnknown, depth+1)
				}
			case "bash", "sh", "zsh", "dash":
				// bash -c 'script' ...
				if len(words) >= 3 && words[1] == "-c" && lits[2] && depth < maxNesting {
					_ = s.add(words[2], cwd, cwdUnknown, depth+1)
				}
			}
		case *syntax.Redirect:
			if !writesFile(n) {
				return true
			}
			w := shellWrite{text: n.Op.String() + " " + printWord(n.Word), cwd: cwd}
			target, lit := wordText(n.Word)
			target = expandHome(target)
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

func allLit(l []bool) bool {
	for _, b := range l {
		if !b {
			return false
		}
	}
	return true
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
		return t != "-" && strings.Trim(t, "0123456789-") != ""
	}
	return false
}

// wordText returns a word's value when it is literal (quotes removed), and
// otherwise its source text; lit says which.
func wordText(w *syntax.Word) (string, bool) {
	if w == nil {
		return "", true
	}
	var b strings.Builder
	lit := true
	var parts func(ps []syntax.WordPart, quoted bool)
	parts = func(ps []syntax.WordPart, quoted bool) {
		for _, p := range ps {
			switch p := p.(type) {
			case *syntax.Lit:
				if quoted {
					b.WriteString(p.Value)
				} else {
					b.WriteString(unescape(p.Value))
				}
			case *syntax.SglQuoted:
				if p.Dollar {
					lit = false
					b.WriteString(printNode(p))
				} else {
					b.WriteString(p.Value)
				}
			case *syntax.DblQuoted:
				parts(p.Parts, true)
			default:
				lit = false
				b.WriteString(printNode(p))
			}
		}
	}
	parts(w.Parts, false)
	return b.String(), lit
}

// unescape removes the backslashes of an unquoted literal.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
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

// wrappers are commands that run their arguments as a command; deny and
// ask rules also look at the command they wrap.
var wrappers = map[string]bool{
	"sudo": true, "doas": true, "env": true, "nohup": true, "nice": true, "time": true,
	"command": true, "builtin": true, "exec": true, "timeout": true, "xargs": true,
	"stdbuf": true, "ionice": true, "setsid": true,
}

// wrapperValueFlags are the options of wrappers that take a value as the
// next word.
var wrapperValueFlags = map[string]string{
	"sudo":    "-u -g -C -D -h -p -r -t -U",
	"doas":    "-u -C",
	"env":     "-u -C -S",
	"nice":    "-n",
	"timeout": "-s -k",
	"xargs":   "-n -I -L -P -d -s -E -a",
	"stdbuf":  "-i -o -e",
	"ionice":  "-c -n -p",
}

// unwrap strips leading wrapper commands with their options (and env's
// NAME=value, timeout's duration): "sudo -u x env A=1 rm -rf b" gives
// "rm -rf b". It is a best effort for deny and ask rules.
func unwrap(words []string) []string {
	for len(words) > 0 && wrappers[words[0]] {
		w := words[0]
		words = words[1:]
		valueFlags := strings.Fields(wrapperValueFlags[w])
		for len(words) > 0 {
			a := words[0]
			switch {
			case strings.HasPrefix(a, "-"):
				if slices.Contains(valueFlags, a) && len(words) > 1 {
					words = words[1:]
				}
			case w == "env" && strings.Contains(a, "="):
			case w == "timeout" && isNumberish(a):
			default:
				goto next
			}
			words = words[1:]
		}
	next:
	}
	return words
}

func isNumberish(s string) bool {
	return s != "" && strings.Trim(s, "0123456789.smhd") == ""
}

// fileWriters are commands that change the files named by their arguments:
// "all" non-option arguments, the "last" one, or dd's "of=". Those marked
// with dynamic are asked about when an argument is computed at run time.
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

// writeTargets returns the files a simple command is known to change, as
// shellWrites, for the workspace check. It is a best effort that catches
// the plain cases ("rm -rf ~", "cp x /etc/", "mv a ../b"); what programs
// do beyond their arguments is not seen.
func writeTargets(c shellCmd) []shellWrite {
	words, lits := c.words, c.lits
	// Strip wrappers, keeping lits aligned.
	if u := unwrap(words); len(u) < len(words) {
		lits = lits[len(words)-len(u):]
		words = u
	}
	if len(words) == 0 {
		return nil
	}
	fw, ok := fileWriters[words[0]]
	if !ok {
		return nil
	}
	type arg struct {
		text string
		lit  bool
	}
	var args []arg
	opts := true
	for i := 1; i < len(words); i++ {
		w := words[i]
		switch {
		case opts && w == "--":
			opts = false
		case fw.which == "of":
			if v, ok := strings.CutPrefix(w, "of="); ok {
				args = append(args, arg{v, lits[i]})
			}
		case opts && strings.HasPrefix(w, "-") && w != "-":
		default:
			args = append(args, arg{w, lits[i]})
		}
	}
	if fw.which == "last" && len(args) > 1 {
		args = args[len(args)-1:]
	} else if fw.which == "last" {
		args = nil
	}
	var out []shellWrite
	for _, a := range args {
		w := shellWrite{text: c.String(), cwd: c.cwd}
		target := expandHome(a.text)
		switch {
		case !a.lit:
			if !fw.dynamic {
				continue
			}
			w.unknown = "an argument is computed at run time"
		case !filepath.IsAbs(target) && c.cwdUnknown != "":
			w.unknown = c.cwdUnknown
		default:
			w.target = target
		}
		out = append(out, w)
	}
	return out
}
