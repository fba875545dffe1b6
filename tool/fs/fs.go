// Package fs holds rein's file tools: read, write, edit, glob, grep and ls.
//
// Every tool resolves a relative path against the call's Env.Dir and
// reports failures as error results with a Code (see the Code* constants);
// a Go error is returned only when no result could be produced at all.
// read, glob, grep and ls are Parallel; write and edit are Exclusive.
//
// Read-before-edit: read records each file it returns (path, modification
// time, size and a SHA-256 of the content) in the session's tool.State;
// write (of an existing file) and edit refuse a file that was not read in
// this session, or that changed on disk since it was read. After a
// successful write or edit the record is refreshed, so edits can follow
// each other without re-reading.
//
// Permission decisions (modes, rules) are not made here: the guard package
// decides before a tool body runs. Confinement is also enforced here, at
// the operation: with Options.Confine, write and edit resolve their path
// through an os.Root opened at the workspace root (or another writable
// root), so the kernel follows symlinks and ".." only while they stay
// inside it, and a path that leads out (even one swapped for a symlink
// after the guard looked at it) fails instead of being written. The roots
// are opened once, when the tools are made, and a root whose path no
// longer names the directory opened (renamed away and replaced by a
// symlink) is refused. A file with more than one hard link is refused.
// read, glob, grep and ls read wherever the policy lets them, except
// rein's own /proc entry (its environment holds the API keys) and, in
// walks, what Options.Hide names.
//
// Concurrency: tools are stateless values safe for concurrent use; the
// per-session record lives in tool.State and is guarded by its own mutex.
// This package imports tool, llm and third-party libraries only.
package fs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/reinhq/rein/tool"
)

// Result codes of the file tools, beyond those of package tool.
const (
	CodeNotFound     = "not-found"       // the path does not exist
	CodeIsDirectory  = "is-directory"    // a file was expected
	CodeNotDirectory = "not-directory"   // a directory was expected
	CodeBinary       = "binary"          // read or edit of a binary file
	CodeTooLarge     = "too-large"       // edit of a file over MaxEditBytes
	CodeNotRead      = "not-read"        // write/edit of a file not read in this session
	CodeStale        = "stale"           // the file changed on disk since it was read
	CodeNoMatch      = "no-match"        // edit: old_string not found
	CodeAmbiguous    = "ambiguous"       // edit: old_string found more than once
	CodeBadPattern   = "invalid-pattern" // glob/grep: the pattern does not compile
	CodeHardLink     = "hard-link"       // write/edit of a file with several hard links, when confined
	CodeNotRegular   = "not-regular"     // read or grep of a device, pipe or socket
	CodeIO           = "io"              // any other file-system failure
)

// Limits. They are stated in the tool descriptions.
const (
	// MaxReadLines is the most lines one read call returns.
	MaxReadLines = 2000
	// MaxReadBytes is the most bytes of text one read call returns.
	MaxReadBytes = 256 << 10
	// MaxLineChars is where read and grep cut a long line.
	MaxLineChars = 2000
	// MaxEditBytes is the largest file edit will load.
	MaxEditBytes = 16 << 20
	// MaxGlobResults is the most paths glob returns.
	MaxGlobResults = 100
	// MaxLsEntries is the most entries ls returns.
	MaxLsEntries = 1000
	// MaxGrepLines is the most output lines grep returns.
	MaxGrepLines = 500
	// MaxGrepBytes is the most output bytes grep returns.
	MaxGrepBytes = 32 << 10
	// maxDiffBytes caps the diff shown to the model (Meta keeps it whole).
	maxDiffBytes = 32 << 10
	// sniffBytes is how much of a file binary detection looks at.
	sniffBytes = 8 << 10
)

// Buffers is another source of file contents for read, write and edit: an
// editor's open buffers (ACP's fs/read_text_file and fs/write_text_file),
// so that the model reads what the person sees, saved or not, and its
// changes land in the editor. Paths are still opened on the file system
// first — confinement, existence, directories and sizes are decided there,
// and a write is handed to the editor at the path the opened file really
// has, while that path still names the opened file through no symlink
// (see put); the read-before-edit record then holds the hash of the
// buffer's content. ReadFile reports a file the editor does not have with
// an error wrapping io/fs.ErrNotExist; WriteFile returns one wrapping
// errors.ErrUnsupported when the editor does not write files (the tool
// then writes through its own handle).
type Buffers interface {
	ReadFile(ctx context.Context, path string) ([]byte, error)
	WriteFile(ctx context.Context, path string, data []byte) error
}

// Options configure the file tools.
type Options struct {
	// Buffers, when set, is where read, write and edit get and put file
	// contents.
	Buffers Buffers
	// Rg is the ripgrep binary grep uses. Empty means look up "rg" on PATH
	// when the tool is built; "-" means never use ripgrep (the Go
	// implementation runs). ripgrep runs with an empty environment.
	Rg string
	// RgStart, when set, starts ripgrep in place of cmd.Start: the host
	// runs it under the OS sandbox, so a search cannot read what
	// sandboxed commands cannot.
	RgStart func(cmd *exec.Cmd) error
	// Hide, when set, reports the paths grep, glob and ls leave out of
	// what they walk and list: those the permission rules deny (or ask
	// about) reading, so a search of a parent directory does not get
	// round a rule on a file below it. It is given a path as walked and,
	// when different, its real path; it must not touch the file system.
	Hide func(paths ...string) bool
	// Confine makes write and edit change files only below WriteRoots
	// (absolute, or starting with ~/), resolving each path inside the
	// root with the kernel; see the package doc. Without it they write
	// wherever the path leads (full-access mode).
	Confine    bool
	WriteRoots []string
}

// All returns read, write, edit, glob, grep and ls.
func All(opts Options) []tool.Tool {
	var c *confine
	if opts.Confine {
		c = newConfine(opts.WriteRoots)
	}
	return []tool.Tool{readTool{opts.Buffers}, writeTool{c, opts.Buffers}, editTool{c, opts.Buffers}, globTool{opts.Hide}, Grep(opts), lsTool{opts.Hide}}
}

// expandHome expands "~" and a leading "~/" to the home directory, as the
// guard does.
func expandHome(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return home + p[1:]
		}
	}
	return p
}

// abs resolves p against the call's working directory, cleaned: for
// reading and for display. (write and edit use joined instead.)
func abs(env tool.Env, p string) string {
	return filepath.Clean(joined(env, p))
}

// joined is p made absolute against the working directory, not cleaned:
// ".." must be resolved by the kernel, after the symlinks before it.
func joined(env tool.Env, p string) string {
	if p == "" {
		p = "."
	}
	p = expandHome(p)
	if !filepath.IsAbs(p) {
		p = env.Dir + string(filepath.Separator) + p
	}
	return p
}

// display returns p relative to the working directory when it lies inside
// it, else p itself.
func display(env tool.Env, p string) string {
	if env.Dir == "" {
		return p
	}
	rel, err := filepath.Rel(env.Dir, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return p
	}
	return filepath.ToSlash(rel)
}

// openErr turns an open/stat error into a result.
func openErr(env tool.Env, p string, err error) tool.Result {
	switch {
	case errors.Is(err, iofs.ErrNotExist):
		return tool.Errorf(CodeNotFound, "%s does not exist", display(env, p))
	case errors.Is(err, iofs.ErrPermission):
		return tool.Errorf(CodeIO, "%s: permission denied", display(env, p))
	case errors.Is(err, errPathChanged):
		return tool.Errorf(tool.CodeDenied, "%s: %v", display(env, p), err)
	}
	return tool.Errorf(CodeIO, "%s: %v", display(env, p), err)
}

// isBinary reports whether a file's leading bytes look binary: a NUL byte,
// or more than 10% of the bytes in invalid UTF-8 sequences.
func isBinary(head []byte) bool {
	if bytes.IndexByte(head, 0) >= 0 {
		return true
	}
	bad := 0
	for i := 0; i < len(head); {
		r, n := utf8.DecodeRune(head[i:])
		if r == utf8.RuneError && n <= 1 {
			if !utf8.FullRune(head[i:]) && len(head)-i < utf8.UTFMax {
				break // a rune cut by the sample's end
			}
			bad++
			n = 1
		}
		i += n
	}
	return len(head) > 0 && bad*10 > len(head)
}

func jsonMeta(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

// stamp identifies a file's content as read in this session.
type stamp struct {
	modTime time.Time
	size    int64
	sum     [sha256.Size]byte
}

// readSet is the session's record of files read, keyed by canonical path.
type readSet struct {
	mu sync.Mutex
	m  map[string]stamp
}

const stateKey = "fs.read"

func reads(st *tool.State) *readSet {
	if st == nil {
		// No session state: nothing is remembered, so every
		// read-before-edit check fails. Tools always get a State from the
		// agent; this keeps a nil from panicking.
		return &readSet{m: map[string]stamp{}}
	}
	return st.Get(stateKey, func() any { return &readSet{m: map[string]stamp{}} }).(*readSet)
}

// canonical returns the symlink-free form of p when it exists, so a file
// read through a link and edited by its real path is the same file.
func canonical(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

func (s *readSet) put(p string, st stamp) {
	s.mu.Lock()
	s.m[canonical(p)] = st
	s.mu.Unlock()
}

func (s *readSet) get(p string) (stamp, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.m[canonical(p)]
	return st, ok
}

// RecordRead marks the file at path (absolute) as read in the session whose
// state is st, as the read tool does. A host uses it when it shows a file to
// the model by other means (an attached file, say).
func RecordRead(st *tool.State, path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	sum, err := hashFile(path)
	if err != nil {
		return err
	}
	reads(st).put(path, stamp{fi.ModTime(), fi.Size(), sum})
	return nil
}

func hashFile(p string) ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	f, err := os.Open(p)
	if err != nil {
		return sum, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return sum, err
	}
	copy(sum[:], h.Sum(nil))
	return sum, nil
}

// checkFresh refuses (with a result) a file that was not read in this
// session or changed since: on disk, or in buf when buffers are used. A
// changed modification time with the same content passes and refreshes
// the record.
func checkFresh(ctx context.Context, env tool.Env, buf Buffers, p string, fi os.FileInfo) *tool.Result {
	rs := reads(env.State)
	st, ok := rs.get(p)
	if !ok {
		r := tool.Errorf(CodeNotRead, "%s has not been read in this session; read it first, then retry", display(env, p))
		return &r
	}
	var sum [sha256.Size]byte
	var err error
	where := "on disk"
	if buf != nil {
		where = "in the editor"
		var data []byte
		if data, err = buf.ReadFile(ctx, p); err == nil {
			sum = sha256.Sum256(data)
		}
	} else {
		if st.modTime.Equal(fi.ModTime()) && st.size == fi.Size() {
			return nil
		}
		sum, err = hashFile(p)
	}
	if err != nil {
		r := openErr(env, p, err)
		return &r
	}
	if sum != st.sum {
		r := tool.Errorf(CodeStale, "%s changed %s since it was read; read it again, then retry", display(env, p), where)
		return &r
	}
	rs.put(p, stamp{fi.ModTime(), fi.Size(), sum})
	return nil
}

// content returns a file's content: from buf when set (bufRead), else
// all of f.
func content(ctx context.Context, buf Buffers, f *os.File, p string) ([]byte, error) {
	if buf != nil {
		fi, err := f.Stat()
		if err != nil {
			return nil, err
		}
		return bufRead(ctx, buf, p, fi)
	}
	return io.ReadAll(f)
}

// bufRead reads p, the real path of the file fi describes, from the
// editor's buffers. The editor reads by path, a second resolution after
// rein's: a component of p swapped for a symlink in between (by a command
// the model started) would make it read elsewhere, past the confinement
// and the read rules, into the editor's own /proc entry say. So p is
// handed over only while it still names that file through no symlink, and
// what comes back is refused unless it still does.
func bufRead(ctx context.Context, buf Buffers, p string, fi os.FileInfo) ([]byte, error) {
	if err := samePath(p, fi); err != nil {
		return nil, err
	}
	if testHookReadHandoff != nil {
		testHookReadHandoff()
	}
	data, err := buf.ReadFile(ctx, p)
	if perr := samePath(p, fi); perr != nil {
		return nil, fmt.Errorf("%w; what the editor read is not shown", perr)
	}
	return data, err
}

// testHookReadHandoff, when set (tests), runs just before a read is handed
// to the editor.
var testHookReadHandoff func()

// put replaces the content of the file opened as f, which it closes:
// through buf (at p, the path f really has) when set, else in f. An
// editor that does not write files (WriteFile returns an error wrapping
// errors.ErrUnsupported) leaves the write to f.
//
// The editor writes by path, a second resolution after rein's: a
// component of p swapped for a symlink in between would send the write
// elsewhere. So p is handed over only while it still names f through no
// symlink at all (p is f's real path, so any symlink in it is new), and
// checked again after; a swap in the narrow window between the check and
// the editor's own open is detected afterwards, not prevented.
func put(ctx context.Context, buf Buffers, f *os.File, p string, b []byte) error {
	if buf == nil {
		return replaceContent(f, b)
	}
	fi, err := f.Stat()
	if err == nil {
		if testHookHandoff != nil {
			testHookHandoff()
		}
		err = samePath(p, fi)
	}
	if err != nil {
		f.Close()
		return err
	}
	err = buf.WriteFile(ctx, p, b)
	if errors.Is(err, errors.ErrUnsupported) {
		return replaceContent(f, b)
	}
	f.Close()
	if err != nil {
		return err
	}
	if err := samePath(p, nil); err != nil {
		return fmt.Errorf("%w; the editor may have written elsewhere", err)
	}
	return nil
}

// testHookHandoff, when set (tests), runs just before a write is handed to
// the editor.
var testHookHandoff func()

// errPathChanged: a path that was checked now leads through a symlink or
// to another file.
var errPathChanged = errors.New("the path changed while the editor used it")

// samePath reports errPathChanged unless no component of p (absolute) is a
// symbolic link and, when fi is set, p names the file fi describes.
func samePath(p string, fi os.FileInfo) error {
	cur := "/"
	for _, c := range components(p) {
		cur = filepath.Join(cur, c)
		li, err := os.Lstat(cur)
		if err != nil {
			return fmt.Errorf("%w: %v", errPathChanged, err)
		}
		if li.Mode()&os.ModeSymlink != 0 {
			return fmt.Errorf("%w: %s is now a symbolic link", errPathChanged, cur)
		}
		if cur == filepath.Clean(p) && fi != nil && !os.SameFile(li, fi) {
			return fmt.Errorf("%w: %s is now another file", errPathChanged, cur)
		}
	}
	return nil
}

// recordWritten refreshes the record after write or edit put content at p.
func recordWritten(env tool.Env, p string, content []byte) {
	fi, err := os.Stat(p)
	if err != nil {
		return
	}
	reads(env.State).put(p, stamp{fi.ModTime(), fi.Size(), sha256.Sum256(content)})
}
