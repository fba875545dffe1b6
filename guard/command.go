package guard

import (
	"net/url"
	"slices"
	"strings"
)

// match is how sure a rule is to match.
type match int

const (
	matchNo    match = iota
	matchMaybe       // it would match for some value of a part computed at run time
	matchYes
)

// dynMark stands for text computed at run time; only * matches it.
const dynMark = "\x00"

// matchShell matches a command pattern against one command of a script.
// For an allow rule (forAllow) matchYes means the pattern matches whatever
// the computed parts turn out to be; for deny and ask, matchMaybe means it
// could match some value of them.
func matchShell(pattern string, c shellCmd, forAllow bool) match {
	pat, first := canonPattern(pattern)
	if c.opaque != "" && (len(c.dyn) == 0 || c.dyn[0]) {
		// The command name itself is unknown.
		if matchCommand(pat, dynMark) && !forAllow {
			return matchYes
		}
		return matchMaybe
	}
	m := matchArgs(pat, c.words[0], c.words[1:], c.dyn[1:], first, nil)
	if m == matchNo && optionAliases[c.words[0]] != nil && slices.Contains(c.dyn, true) {
		// rm -r $F: a computed word could hold the rule's other options.
		if matchArgs(pat, c.words[0], c.words[1:], c.dyn[1:], first, []byte(first)) != matchNo {
			m = matchMaybe
		}
	}
	if m == matchNo && c.opaque != "" {
		// bash -c "$x", eval "$x": what it runs is unknown.
		m = matchMaybe
	}
	if m == matchNo && !forAllow && namedRun(c, pat) != "" {
		// parallel rm ::: x, ts rm, a wrapper rein does not know.
		m = matchMaybe
	}
	return m
}

// noRun are commands known not to run a command named in their
// arguments (rm in "man rm", "grep rm", "which rm" is data). Wrappers,
// shells and the commands of special are analysed instead.
var noRun = map[string]bool{
	"cat": true, "tac": true, "nl": true, "head": true, "tail": true, "less": true, "more": true, "wc": true,
	"sort": true, "uniq": true, "cut": true, "paste": true, "join": true, "tr": true, "fold": true, "fmt": true,
	"column": true, "comm": true, "diff": true, "cmp": true, "grep": true, "egrep": true, "fgrep": true,
	"rg": true, "ag": true, "ack": true, "ls": true, "dir": true, "stat": true, "file": true, "du": true,
	"df": true, "touch": true, "mkdir": true, "rmdir": true, "rm": true, "cp": true, "mv": true, "ln": true,
	"install": true, "chmod": true, "chown": true, "chgrp": true, "basename": true, "dirname": true,
	"realpath": true, "readlink": true, "test": true, "[": true, "which": true, "whereis": true, "type": true,
	"hash": true, "man": true, "info": true, "apropos": true, "whatis": true, "pwd": true, "date": true,
	"sleep": true, "kill": true, "pkill": true, "pgrep": true, "killall": true, "jq": true, "tee": true,
	"od": true, "xxd": true, "hexdump": true, "base64": true, "sha1sum": true, "sha256sum": true,
	"sha512sum": true, "md5sum": true, "cksum": true, "gzip": true, "gunzip": true, "zcat": true,
	"curl": true, "wget": true, "printenv": true, "id": true, "whoami": true, "uname": true, "unset": true,
	"export": true, "declare": true, "local": true, "readonly": true, "typeset": true, "set": true,
	"read": true, "wait": true, "jobs": true, "unalias": true, "help": true, "compgen": true, "complete": true,
	"find": true, "alias": true, "eval": true, "trap": true, "source": true, ".": true,
}

// canonPatternOf is the canonical form of a command pattern.
func canonPatternOf(pattern string) string {
	pat, _ := canonPattern(pattern)
	return pat
}

// namedRun returns the name of the command the pattern (canonical) is
// about when c is a command rein knows nothing about and one of its
// literal arguments is that name: it may run it (parallel rm ::: x,
// ts rm -rf build, a wrapper rein does not know). "" otherwise.
func namedRun(c shellCmd, pattern string) string {
	if c.wrapper || len(c.words) == 0 || len(c.dyn) == 0 || c.dyn[0] {
		return ""
	}
	name := c.words[0]
	if noRun[name] || exempt[name] || transparent[name] || privileged[name] || shells[name] || specials[name] {
		return ""
	}
	want, _, _ := strings.Cut(strings.TrimSuffix(pattern, ":*"), " ")
	if want == "" || strings.Contains(want, "*") {
		return ""
	}
	for i := 1; i < len(c.words); i++ {
		if !c.dyn[i] && baseName(c.words[i]) == want {
			return want
		}
	}
	return ""
}

// matchArgs matches a canonical pattern against a command in canonical
// form, with extra option letters assumed.
func matchArgs(pat, name string, args []string, argDyn []bool, first string, assume []byte) match {
	if len(assume) > 0 {
		args = append([]string{"-" + string(assume)}, args...)
		argDyn = append([]bool{false}, argDyn...)
	}
	words, dyn := canonArgs(name, args, argDyn, first)
	words = append([]string{name}, words...)
	dyn = append([]bool{false}, dyn...)
	m := matchNo
	if cut := slices.Index(dyn, true); cut < 0 {
		if matchCommand(pat, strings.Join(words, " ")) {
			m = matchYes
		}
	} else {
		known := strings.Join(words[:cut], " ")
		// A computed word may expand to any number of words, or none.
		switch {
		case matchCommand(pat, known) && matchCommand(pat, known+" "+dynMark):
			m = matchYes
		case matchCommandPrefix(pat, known):
			m = matchMaybe
		}
	}
	return m
}

// matchCommand matches a command pattern (see Rule) against text.
func matchCommand(pattern, text string) bool {
	if prefix, ok := strings.CutSuffix(pattern, ":*"); ok {
		return wildcard(prefix, text) || wildcard(prefix+" *", text)
	}
	return wildcard(pattern, text)
}

// matchCommandPrefix reports whether some text starting with prefix
// matches the pattern.
func matchCommandPrefix(pattern, prefix string) bool {
	if p, ok := strings.CutSuffix(pattern, ":*"); ok {
		return wildcardPrefix(p, prefix) || wildcardPrefix(p+" *", prefix)
	}
	return wildcardPrefix(pattern, prefix)
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

// wildcardPrefix reports whether prefix can be extended to a text the
// pattern matches: whether the pattern can consume all of prefix.
func wildcardPrefix(pattern, prefix string) bool {
	// The set of pattern positions reachable after each byte.
	cur := map[int]bool{}
	var add func(set map[int]bool, px int)
	add = func(set map[int]bool, px int) {
		if set[px] {
			return
		}
		set[px] = true
		if px < len(pattern) && pattern[px] == '*' {
			add(set, px+1)
		}
	}
	add(cur, 0)
	for i := 0; i < len(prefix); i++ {
		next := map[int]bool{}
		for px := range cur {
			switch {
			case px >= len(pattern):
			case pattern[px] == '*':
				add(next, px)
			case pattern[px] == prefix[i]:
				add(next, px+1)
			}
		}
		if len(next) == 0 {
			return false
		}
		cur = next
	}
	return true
}

// optionAliases are, for commands that take their options anywhere (GNU
// style) and whose rules are usually about options, the long options and
// letters that mean the same as a letter.
var optionAliases = map[string]map[string]byte{
	"rm":    {"--recursive": 'r', "R": 'r', "--force": 'f', "--interactive": 'i', "--dir": 'd', "--verbose": 'v'},
	"cp":    {"--recursive": 'r', "R": 'r', "--force": 'f', "--archive": 'a', "--verbose": 'v'},
	"mv":    {"--force": 'f', "--verbose": 'v', "--no-clobber": 'n'},
	"chmod": {"--recursive": 'R', "--verbose": 'v'},
	"chown": {"--recursive": 'R', "--verbose": 'v'},
	"chgrp": {"--recursive": 'R', "--verbose": 'v'},
	"rmdir": {"--parents": 'p', "--verbose": 'v'},
	"mkdir": {"--parents": 'p', "--verbose": 'v'},
	"ln":    {"--symbolic": 's', "--force": 'f', "--verbose": 'v'},
	"shred": {"--remove": 'u', "--zero": 'z', "--force": 'f'},
}

// isOptionRun reports a word of single-letter options, as "-rf".
func isOptionRun(w string) bool {
	if len(w) < 2 || w[0] != '-' || w[1] == '-' {
		return false
	}
	for i := 1; i < len(w); i++ {
		if c := w[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// orderLetters returns letters without repeats: those in first (sorted),
// then the others (sorted).
func orderLetters(letters []byte, first string) string {
	slices.Sort(letters)
	letters = slices.Compact(letters)
	var a, b []byte
	for _, l := range letters {
		if strings.IndexByte(first, l) >= 0 {
			a = append(a, l)
		} else {
			b = append(b, l)
		}
	}
	return string(append(a, b...))
}

func aliasLetters(name, run string) []byte {
	al := optionAliases[name]
	var out []byte
	for i := 1; i < len(run); i++ {
		l := run[i]
		if m, ok := al[string(l)]; ok {
			l = m
		}
		out = append(out, l)
	}
	return out
}

// canonArgs puts a command's arguments in the form rules are matched
// against. Single-letter options written together or apart are one run
// with each letter once, the letters of the rule being matched (first)
// leading and the rest sorted: rm -r -f, rm -fr and rm -rf all read
// "rm -fr", and rm -fir reads "rm -fri" for a rule about -rf. For the
// commands of optionAliases, options anywhere before "--" (GNU commands
// accept rm x -rf) and their long forms join the run; for other commands
// only consecutive option words are merged, in place, since an option may
// take the next word as its value. Computed words are never merged.
func canonArgs(name string, args []string, dyn []bool, first string) ([]string, []bool) {
	if al, ok := optionAliases[name]; ok {
		var letters []byte
		var longs, ops []string
		var opsDyn []bool
		end := false
		for i, a := range args {
			switch {
			case !end && !dyn[i] && a == "--":
				end = true
			case !end && !dyn[i] && isOptionRun(a):
				letters = append(letters, aliasLetters(name, a)...)
			case !end && !dyn[i] && strings.HasPrefix(a, "--"):
				if l, ok := al[a]; ok {
					letters = append(letters, l)
				} else {
					longs = append(longs, a)
				}
			default:
				ops = append(ops, a)
				opsDyn = append(opsDyn, dyn[i])
			}
		}
		var out []string
		if len(letters) > 0 {
			out = append(out, "-"+orderLetters(letters, first))
		}
		slices.Sort(longs)
		out = append(out, longs...)
		outDyn := make([]bool, len(out))
		if slices.Contains(opsDyn, true) && !end {
			// A computed word could be an option too (rm -r $F): the
			// options end where the computed word starts.
			out = append(out, dynMark)
			outDyn = append(outDyn, true)
		}
		return append(out, ops...), append(outDyn, opsDyn...)
	}
	var out []string
	var outDyn []bool
	for i := 0; i < len(args); i++ {
		if dyn[i] || !isOptionRun(args[i]) {
			out = append(out, args[i])
			outDyn = append(outDyn, dyn[i])
			continue
		}
		var letters []byte
		for ; i < len(args) && !dyn[i] && isOptionRun(args[i]); i++ {
			letters = append(letters, args[i][1:]...)
		}
		i--
		out = append(out, "-"+orderLetters(letters, first))
		outDyn = append(outDyn, false)
	}
	return out, outDyn
}

// canonPattern puts a command pattern in the same form (see canonArgs):
// the name without its directory, and the option words right after it
// (the last may end in *) merged into one sorted run. It returns the
// pattern and the run's letters.
func canonPattern(pattern string) (string, string) {
	p, colon := strings.CutSuffix(pattern, ":*")
	toks := strings.Split(p, " ")
	if len(toks) == 0 || toks[0] == "" || strings.Contains(toks[0], "*") {
		return pattern, ""
	}
	name := baseName(toks[0])
	var letters []byte
	star := false
	i := 1
	for ; i < len(toks) && !star; i++ {
		t := toks[i]
		t, star = strings.CutSuffix(t, "*")
		if !isOptionRun(t) {
			star = false
			break
		}
		letters = append(letters, aliasLetters(name, t)...)
	}
	first := orderLetters(slices.Clone(letters), "")
	out := []string{name}
	if len(letters) > 0 {
		run := "-" + first
		if star {
			run += "*"
		}
		out = append(out, run)
	}
	out = append(out, toks[i:]...)
	res := strings.Join(out, " ")
	if colon {
		res += ":*"
	}
	return res, first
}

// matchDomain matches a WebFetch rule "domain:HOST" against a URL.
func matchDomain(pattern, raw string) bool {
	host, ok := strings.CutPrefix(pattern, "domain:")
	if !ok {
		return false
	}
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return false
	}
	h := strings.ToLower(u.Hostname())
	host = strings.ToLower(host)
	if sub, ok := strings.CutPrefix(host, "*."); ok {
		return h == sub || strings.HasSuffix(h, "."+sub)
	}
	return h == host
}
