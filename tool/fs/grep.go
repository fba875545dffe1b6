package fs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/google/jsonschema-go/jsonschema"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/tool"
	"github.com/reinhq/rein/tool/internal/args"
)

type grepArgs struct {
	Pattern         string `json:"pattern" jsonschema:"Regular expression (RE2/ripgrep syntax) matched against each line."`
	Path            string `json:"path,omitempty" jsonschema:"File or directory to search. Default: the working directory."`
	Glob            string `json:"glob,omitempty" jsonschema:"Only search files matching this glob, e.g. *.go or src/**/*.{ts,tsx}. Without a / it matches the file name."`
	CaseInsensitive bool   `json:"case_insensitive,omitempty" jsonschema:"Ignore case. Default false."`
	OutputMode      string `json:"output_mode,omitempty" jsonschema:"content (default): matching lines as path:line:text; files: paths of matching files; count: path:number of matching lines."`
	Context         int    `json:"context,omitempty" jsonschema:"Lines of context before and after each match (content mode only). Default 0, at most 20."`
}

var grepSchema = args.New[grepArgs](func(s *jsonschema.Schema) {
	s.Properties["output_mode"].Enum = []any{"content", "files", "count"}
	zero, twenty := 0.0, 20.0
	s.Properties["context"].Minimum = &zero
	s.Properties["context"].Maximum = &twenty
})

var grepSpec = llm.ToolSpec{
	Name: "grep",
	Description: `Search file contents with a regular expression. Respects .gitignore; skips .git and binary files; includes hidden files.
Output (sorted by path, paths relative to the working directory): content mode prints path:line:text for matches and path-line-text for context lines, with -- between separate groups; files mode prints paths; count mode prints path:count.
At most 500 lines and 32 KiB of output; lines are cut at 2000 characters. Narrow the pattern, path or glob when output is cut.`,
	Parameters: grepSchema.Parameters(),
}

type grepTool struct {
	rg      string
	rgStart func(*exec.Cmd) error
	hide    func(paths ...string) bool
}

// Grep returns the grep tool. It uses ripgrep when opts.Rg names it or it is
// on PATH (unless opts.Rg is "-"), and a Go implementation otherwise; both
// give the same output. opts.RgStart and opts.Hide apply.
func Grep(opts Options) tool.Tool {
	rg := opts.Rg
	switch rg {
	case "-":
		rg = ""
	case "":
		rg, _ = exec.LookPath("rg")
	}
	return grepTool{rg: rg, rgStart: opts.RgStart, hide: opts.Hide}
}

func (grepTool) Spec() llm.ToolSpec { return grepSpec }
func (grepTool) Mode() tool.Mode    { return tool.Parallel }

// grepQuery is a validated search.
type grepQuery struct {
	re      *regexp.Regexp
	pattern string // as given, for ripgrep
	root    string // absolute file or directory
	glob    string
	ci      bool
	mode    string // content, files or count
	context int
	walk    walkFilter // what the search leaves out
}

// grepLine is one output line of a file.
type grepLine struct {
	n     int
	text  string
	match bool
}

// grepFile is one file's findings.
type grepFile struct {
	path  string // absolute
	lines []grepLine
	count int
}

type grepMeta struct {
	Engine    string `json:"engine"` // "rg" or "go"
	Files     int    `json:"files"`
	Truncated bool   `json:"truncated"`
}

// errGrepCap stops a search whose output is already over the cap.
var errGrepCap = errors.New("grep: output cap reached")

func (g grepTool) Run(ctx context.Context, call tool.Call) (tool.Result, error) {
	a, bad := grepSchema.Decode(call.Arguments)
	if bad != nil {
		return *bad, nil
	}
	env := call.Env
	q := grepQuery{pattern: a.Pattern, root: abs(env, a.Path), glob: a.Glob, ci: a.CaseInsensitive, mode: a.OutputMode, context: a.Context}
	if q.mode == "" {
		q.mode = "content"
	}
	if q.mode != "content" {
		q.context = 0
	}
	expr := a.Pattern
	if q.ci {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return tool.Errorf(CodeBadPattern, "invalid regular expression: %v", err), nil
	}
	q.re = re
	if q.glob != "" && !doublestar.ValidatePattern(q.glob) {
		return tool.Errorf(CodeBadPattern, "invalid glob %q", q.glob), nil
	}
	if inProcEntry(q.root) {
		return procEntryErr(env, q.root), nil
	}
	fi, err := os.Stat(q.root)
	if err != nil {
		return openErr(env, q.root, err), nil
	}
	if !fi.IsDir() && !fi.Mode().IsRegular() {
		return tool.Errorf(CodeNotRegular, "%s is not a regular file or a directory (%v); grep searches files", display(env, q.root), fi.Mode().Type()), nil
	}
	q.walk = newWalkFilter(q.root, g.hide)
	q.walk.tree = true
	if fi.IsDir() && kernelDir(q.walk.real) {
		return walkRootErr(env, q.root), nil
	}
	var files []grepFile
	truncated := false
	engine := "go"
	if g.rg != "" {
		engine = "rg"
		files, truncated, err = grepRg(ctx, g.rg, g.rgStart, q)
		if err != nil && ctx.Err() == nil {
			engine = "go" // ripgrep could not run or refused: fall back
			files, truncated, err = grepGo(ctx, q)
		}
	} else {
		files, truncated, err = grepGo(ctx, q)
	}
	if ctx.Err() != nil {
		return tool.Errorf(tool.CodeAborted, "grep cancelled"), nil
	}
	if err != nil {
		return tool.Errorf(CodeIO, "grep: %v", err), nil
	}
	text, cut := formatGrep(env, q, files)
	return tool.Result{
		Content: llm.Text(text),
		Meta:    jsonMeta(grepMeta{Engine: engine, Files: len(files), Truncated: truncated || cut}),
	}, nil
}

// formatGrep renders the findings; both engines share it, so their output
// is the same. It reports whether the output was cut.
func formatGrep(env tool.Env, q grepQuery, files []grepFile) (string, bool) {
	var b strings.Builder
	lines := 0
	cut := false
	emit := func(s string) bool {
		if lines >= MaxGrepLines || b.Len()+len(s)+1 > MaxGrepBytes {
			cut = true
			return false
		}
		b.WriteString(s)
		b.WriteByte('\n')
		lines++
		return true
	}
	prevEnd := -1 // last line number printed in the previous group, for "--"
	for fi, f := range files {
		name := display(env, f.path)
		switch q.mode {
		case "files":
			emit(name)
		case "count":
			emit(fmt.Sprintf("%s:%d", name, f.count))
		default:
			for i, l := range f.lines {
				if q.context > 0 && (i == 0 && fi > 0 || i > 0 && l.n != prevEnd+1) {
					if !emit("--") {
						break
					}
				}
				sep := "-"
				if l.match {
					sep = ":"
				}
				text := strings.TrimSuffix(strings.TrimSuffix(l.text, "\n"), "\r")
				if len(text) > MaxLineChars {
					text = strings.ToValidUTF8(text[:MaxLineChars], "") + fmt.Sprintf(" … [line cut: %d more bytes]", len(text)-MaxLineChars)
				}
				if !emit(fmt.Sprintf("%s%s%d%s%s", name, sep, l.n, sep, strings.ToValidUTF8(text, "\uFFFD"))) {
					break
				}
				prevEnd = l.n
			}
		}
		if cut {
			break
		}
	}
	if len(files) == 0 {
		return "no matches\n", false
	}
	if cut {
		fmt.Fprintf(&b, "[output cut at %d lines / %d KiB; narrow the pattern, path or glob]\n", lines, MaxGrepBytes>>10)
	}
	return b.String(), cut
}

// grepGo is the Go search engine.
func grepGo(ctx context.Context, q grepQuery) ([]grepFile, bool, error) {
	var files []grepFile
	budget := MaxGrepLines + 1 // stop collecting once the output must be cut
	search := func(p string) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		f, err := grepFileGo(p, q)
		if err != nil || f == nil {
			return nil // unreadable and binary files are skipped
		}
		files = append(files, *f)
		budget -= max(len(f.lines), 1)
		if budget <= 0 {
			return errGrepCap
		}
		return nil
	}
	fi, err := os.Stat(q.root)
	if err != nil {
		return nil, false, err
	}
	switch {
	case q.walk.skip(q.root):
	case !fi.IsDir():
		err = search(q.root)
	default:
		err = walkGrep(ctx, q, q.root, parentIgnores(q.root), search)
	}
	if errors.Is(err, errGrepCap) {
		return files, true, nil
	}
	return files, false, err
}

// walkGrep visits the files under dir in path order, skipping .git,
// symbolic links, ignored paths, what q.walk leaves out and files the glob
// rejects.
func walkGrep(ctx context.Context, q grepQuery, dir string, ign ignoreStack, visit func(string) error) error {
	if ig := loadIgnore(dir); ig != nil {
		ign = append(ign[:len(ign):len(ign)], ig)
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	for _, d := range des {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		p := filepath.Join(dir, d.Name())
		switch {
		case d.Name() == ".git" || d.Type()&os.ModeSymlink != 0 || q.walk.skip(p):
			continue
		case d.IsDir():
			if ign.ignored(p, true) {
				continue
			}
			if err := walkGrep(ctx, q, p, ign, visit); err != nil {
				return err
			}
		case d.Type().IsRegular():
			if ign.ignored(p, false) || !globMatch(q.glob, q.root, p) {
				continue
			}
			if err := visit(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// globMatch applies grep's glob as ripgrep does: without a slash it matches
// the file name, with one the path relative to the search root.
func globMatch(glob, root, p string) bool {
	if glob == "" {
		return true
	}
	if !strings.Contains(glob, "/") {
		ok, _ := doublestar.Match(glob, path.Base(filepath.ToSlash(p)))
		return ok
	}
	rel, err := filepath.Rel(root, p)
	if err != nil {
		return false
	}
	ok, _ := doublestar.Match(strings.TrimPrefix(glob, "/"), filepath.ToSlash(rel))
	return ok
}

// grepFileGo searches one file; nil when it has no match or is binary.
func grepFileGo(p string, q grepQuery) (*grepFile, error) {
	fh, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	br := bufio.NewReaderSize(fh, 64<<10)
	if head, _ := br.Peek(sniffBytes); isBinaryForGrep(head) {
		return nil, nil
	}
	out := grepFile{path: p}
	var before []grepLine // ring of context lines
	after := 0            // context lines still owed after a match
	n := 0
	for {
		s, err := br.ReadString('\n')
		if s == "" && err != nil {
			break
		}
		n++
		body := strings.TrimSuffix(s, "\n")
		if q.re.MatchString(body) {
			out.count++
			if q.mode == "files" {
				break
			}
			if q.mode == "content" {
				out.lines = append(out.lines, before...)
				before = before[:0]
				out.lines = append(out.lines, grepLine{n, s, true})
				after = q.context
			}
		} else if q.mode == "content" && q.context > 0 {
			if after > 0 {
				out.lines = append(out.lines, grepLine{n, s, false})
				after--
			} else {
				before = append(before, grepLine{n, s, false})
				if len(before) > q.context {
					before = before[1:]
				}
			}
		}
		if err != nil {
			break
		}
	}
	if out.count == 0 {
		return nil, nil
	}
	return &out, nil
}

// isBinaryForGrep is ripgrep's rule: a NUL byte means binary.
func isBinaryForGrep(head []byte) bool {
	for _, c := range head {
		if c == 0 {
			return true
		}
	}
	return false
}
