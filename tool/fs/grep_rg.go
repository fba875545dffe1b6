package fs

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
)

// grepRg runs ripgrep with flags that make it follow the Go engine's rules:
// only .gitignore files count (not .ignore, .rgignore, the global excludes
// file or .git/info/exclude), inside a repository or not; hidden files are
// searched; .git is skipped; results are sorted by path. It returns an
// error when ripgrep could not run or produced nothing but an error, so the
// caller can fall back to the Go engine. ripgrep gets an empty environment
// (its own /proc/self/environ is readable to it) and is started by start
// when set (under the OS sandbox); what q.walk leaves out is dropped from
// its results.
func grepRg(ctx context.Context, rg string, start func(*exec.Cmd) error, q grepQuery) ([]grepFile, bool, error) {
	fi, err := os.Stat(q.root)
	if err != nil {
		return nil, false, err
	}
	// Run inside the search root with "." as the path, so --glob patterns
	// with a slash are relative to the root, as in the Go engine.
	dir, target := q.root, "."
	if !fi.IsDir() {
		dir, target = filepath.Dir(q.root), filepath.Base(q.root)
	}
	argv := []string{"--no-config", "--hidden", "--no-require-git", "--no-ignore-dot",
		"--no-ignore-global", "--no-ignore-exclude", "--no-messages", "--with-filename",
		"--sort", "path", "--glob", "!.git"}
	// A search of / leaves the kernel's file systems out, as the Go
	// engine's walk does: ripgrep would read /proc/kcore for ever.
	for _, rel := range kernelExcludes(q.walk.real) {
		argv = append(argv, "--glob", "!/"+rel)
	}
	// The glob is applied to ripgrep's output, not passed as --glob: a
	// --glob whitelist overrides .gitignore in ripgrep, and grep's rule is
	// that ignored files stay ignored.
	if q.ci {
		argv = append(argv, "--ignore-case")
	}
	switch q.mode {
	case "files":
		argv = append(argv, "--files-with-matches", "--null")
	case "count":
		argv = append(argv, "--count", "--null")
	default:
		argv = append(argv, "--json")
		if q.context > 0 {
			argv = append(argv, "--context", strconv.Itoa(q.context))
		}
	}
	argv = append(argv, "--regexp", q.pattern, "--", target)

	rctx, stop := context.WithCancel(ctx)
	defer stop()
	cmd := exec.CommandContext(rctx, rg, argv...)
	cmd.Dir = dir
	cmd.Env = []string{}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, false, err
	}
	if start == nil {
		start = (*exec.Cmd).Start
	}
	if err := start(cmd); err != nil {
		out.Close()
		return nil, false, err
	}
	abs := func(p string) string { return filepath.Join(dir, p) }
	keep := func(p string) bool { return globMatch(q.glob, q.root, p) && !q.walk.skip(p) }
	files, truncated, perr := parseRg(bufio.NewReaderSize(out, 64<<10), q.mode, abs, keep)
	if truncated {
		stop() // enough output: stop ripgrep
	}
	_, _ = io.Copy(io.Discard, out)
	werr := cmd.Wait()
	if perr != nil {
		return nil, false, perr
	}
	if truncated || werr == nil {
		return files, truncated, nil
	}
	var ee *exec.ExitError
	if errors.As(werr, &ee) {
		switch {
		case ee.ExitCode() == 1: // no match
			return files, false, nil
		case ee.ExitCode() == 2 && len(files) > 0: // some files unreadable
			return files, false, nil
		}
	}
	return nil, false, fmt.Errorf("rg: %v: %s", werr, bytes.TrimSpace(stderr.Bytes()))
}

type rgText struct {
	Text  *string `json:"text"`
	Bytes string  `json:"bytes"`
}

func (t rgText) String() string {
	if t.Text != nil {
		return *t.Text
	}
	b, _ := base64.StdEncoding.DecodeString(t.Bytes)
	return string(b)
}

type rgMsg struct {
	Type string `json:"type"`
	Data struct {
		Path       rgText `json:"path"`
		Lines      rgText `json:"lines"`
		LineNumber int    `json:"line_number"`
	} `json:"data"`
}

// parseRg reads ripgrep's output in the given mode until EOF or until the
// output is over the cap (truncated).
func parseRg(r *bufio.Reader, mode string, abs func(string) string, keep func(string) bool) ([]grepFile, bool, error) {
	var files []grepFile
	budget := MaxGrepLines + 1
	for budget > 0 {
		rec, err := r.ReadBytes(recordEnd(mode))
		if len(rec) == 0 && err != nil {
			if err == io.EOF {
				return files, false, nil
			}
			return nil, false, err
		}
		rec = bytes.TrimSuffix(rec, []byte{recordEnd(mode)})
		switch mode {
		case "files":
			if p := abs(string(rec)); keep(p) {
				files = append(files, grepFile{path: p, count: 1})
				budget--
			}
		case "count":
			name, num, ok := bytes.Cut(rec, []byte{0})
			if !ok {
				continue
			}
			if p := abs(string(name)); keep(p) {
				n, _ := strconv.Atoi(string(num))
				files = append(files, grepFile{path: p, count: n})
				budget--
			}
		default:
			var m rgMsg
			if err := json.Unmarshal(rec, &m); err != nil {
				return nil, false, fmt.Errorf("rg: bad json output: %w", err)
			}
			switch m.Type {
			case "begin":
				files = append(files, grepFile{path: abs(m.Data.Path.String())})
			case "match", "context":
				if len(files) == 0 {
					continue
				}
				f := &files[len(files)-1]
				f.lines = append(f.lines, grepLine{n: m.Data.LineNumber, text: m.Data.Lines.String(), match: m.Type == "match"})
				if m.Type == "match" {
					f.count++
				}
			case "end":
				if len(files) > 0 {
					f := files[len(files)-1]
					if f.count == 0 || !keep(f.path) { // a binary file's begin/end, or the glob rejects it
						files = files[:len(files)-1]
					} else {
						budget -= max(len(f.lines), 1)
					}
				}
			}
		}
		if err == io.EOF {
			return files, false, nil
		}
	}
	return files, true, nil
}

func recordEnd(mode string) byte {
	if mode == "files" {
		return 0
	}
	return '\n'
}
