package fs

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"

	udiff "github.com/aymanbagabas/go-udiff"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/tool"
	"github.com/reinhq/rein/tool/internal/args"
)

type writeArgs struct {
	FilePath string `json:"file_path" jsonschema:"Path of the file, absolute or relative to the working directory."`
	Content  string `json:"content" jsonschema:"The complete new content of the file."`
}

var writeSchema = args.New[writeArgs](nil)

var writeSpec = llm.ToolSpec{
	Name: "write",
	Description: `Create a file, or replace an existing file's whole content. Missing parent directories are created.
An existing file must have been read in this session first, and not changed on disk since. To change part of a file, prefer edit.`,
	Parameters: writeSchema.Parameters(),
}

type writeTool struct {
	confine *confine
	buf     Buffers
}

// Write returns the write tool, unconfined (see Options.Confine).
func Write() tool.Tool { return writeTool{} }

func (writeTool) Spec() llm.ToolSpec { return writeSpec }
func (writeTool) Mode() tool.Mode    { return tool.Exclusive }

// writeMeta is the write tool's Meta.
type writeMeta struct {
	Path    string `json:"path"`
	Created bool   `json:"created"`
	Bytes   int    `json:"bytes"`
	Diff    string `json:"diff,omitempty"`
}

func (w writeTool) Run(ctx context.Context, call tool.Call) (tool.Result, error) {
	a, bad := writeSchema.Decode(call.Arguments)
	if bad != nil {
		return *bad, nil
	}
	env := call.Env
	p := abs(env, a.FilePath)
	sys, name, done, err := w.confine.open(joined(env, a.FilePath))
	if err != nil {
		return confineErr(env, p, err), nil
	}
	defer done()
	perm := os.FileMode(0o644)
	var old []byte
	created := true
	switch rf, err := sys.OpenFile(name, os.O_RDONLY, 0); {
	case err == nil:
		p = realPath(rf, p)
		fi, err := rf.Stat()
		if err == nil && !fi.IsDir() {
			if r := checkFresh(ctx, env, w.buf, p, fi); r != nil {
				rf.Close()
				return *r, nil
			}
			old, err = content(ctx, w.buf, rf, p)
		}
		rf.Close()
		switch {
		case err != nil:
			return openErr(env, p, err), nil
		case fi.IsDir():
			return tool.Errorf(CodeIsDirectory, "%s is a directory", display(env, p)), nil
		}
		perm, created = fi.Mode().Perm(), false
	case !errors.Is(err, iofs.ErrNotExist):
		return confineErr(env, p, err), nil
	}
	if ctx.Err() != nil {
		return tool.Errorf(tool.CodeAborted, "write of %s cancelled before it started", display(env, p)), nil
	}
	var f *os.File
	if created {
		if err := sys.MkdirAll(parentName(name), 0o755); err != nil {
			return confineErr(env, filepath.Dir(p), err), nil
		}
		flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
		if w.confine == nil {
			flags = os.O_WRONLY | os.O_CREATE // through a dangling symlink, as before
		}
		f, err = sys.OpenFile(name, flags, perm)
	} else {
		f, err = openExisting(sys, name)
	}
	if err != nil {
		return writeErr(env, p, err), nil
	}
	p = realPath(f, p)
	if err := put(ctx, w.buf, f, p, []byte(a.Content)); err != nil {
		return openErr(env, p, err), nil
	}
	recordWritten(env, p, []byte(a.Content))

	meta := writeMeta{Path: p, Created: created, Bytes: len(a.Content)}
	lines := strings.Count(a.Content, "\n")
	if a.Content != "" && !strings.HasSuffix(a.Content, "\n") {
		lines++
	}
	verb := "created"
	if !created {
		verb = "overwrote"
		meta.Diff = udiff.Unified("a/"+display(env, p), "b/"+display(env, p), string(old), a.Content)
	}
	text := fmt.Sprintf("%s %s (%d lines, %d bytes)", verb, display(env, p), lines, len(a.Content))
	return tool.Result{Content: llm.Text(text), Meta: jsonMeta(meta)}, nil
}
