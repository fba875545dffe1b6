package fs

import (
	"context"
	"fmt"
	"os"
	"strings"

	udiff "github.com/aymanbagabas/go-udiff"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/tool"
	"github.com/reinhq/rein/tool/internal/args"
)

type editArgs struct {
	FilePath   string `json:"file_path" jsonschema:"Path of the file, absolute or relative to the working directory."`
	OldString  string `json:"old_string" jsonschema:"Exact text to replace, including whitespace and indentation. Must occur exactly once unless replace_all is true."`
	NewString  string `json:"new_string" jsonschema:"Text to put in its place. Must differ from old_string."`
	ReplaceAll bool   `json:"replace_all,omitempty" jsonschema:"Replace every occurrence of old_string. Default false."`
}

var editSchema = args.New[editArgs](nil)

var editSpec = llm.ToolSpec{
	Name: "edit",
	Description: `Replace exact text in a file. old_string must match the file byte for byte (whitespace, indentation, line endings) and occur exactly once; include enough surrounding lines to make it unique, or set replace_all.
The file must have been read in this session and not changed on disk since. Returns a unified diff of the change. Files over 16 MiB and binary files are refused.`,
	Parameters: editSchema.Parameters(),
}

type editTool struct {
	confine *confine
	buf     Buffers
}

// Edit returns the edit tool, unconfined (see Options.Confine).
func Edit() tool.Tool { return editTool{} }

func (editTool) Spec() llm.ToolSpec { return editSpec }
func (editTool) Mode() tool.Mode    { return tool.Exclusive }

// editMeta is the edit tool's Meta.
type editMeta struct {
	Path         string `json:"path"`
	Replacements int    `json:"replacements"`
	Diff         string `json:"diff"`
}

func (e editTool) Run(ctx context.Context, call tool.Call) (tool.Result, error) {
	a, bad := editSchema.Decode(call.Arguments)
	if bad != nil {
		return *bad, nil
	}
	if a.OldString == "" {
		return tool.Errorf(tool.CodeInvalidArguments, "old_string is empty; to create a file or replace all of it, use write"), nil
	}
	if a.OldString == a.NewString {
		return tool.Errorf(tool.CodeInvalidArguments, "old_string and new_string are identical; nothing to change"), nil
	}
	env := call.Env
	p := abs(env, a.FilePath)
	sys, name, done, err := e.confine.open(joined(env, a.FilePath))
	if err != nil {
		return confineErr(env, p, err), nil
	}
	defer done()
	rf, err := sys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		r := confineErr(env, p, err)
		if r.Code == CodeNotFound {
			r = tool.Errorf(CodeNotFound, "%s does not exist; use write to create it", display(env, p))
		}
		return r, nil
	}
	p = realPath(rf, p)
	fi, err := rf.Stat()
	if err != nil {
		rf.Close()
		return openErr(env, p, err), nil
	}
	if fi.IsDir() {
		rf.Close()
		return tool.Errorf(CodeIsDirectory, "%s is a directory", display(env, p)), nil
	}
	if fi.Size() > MaxEditBytes {
		rf.Close()
		return tool.Errorf(CodeTooLarge, "%s is %d bytes; edit handles files up to %d bytes", display(env, p), fi.Size(), MaxEditBytes), nil
	}
	if r := checkFresh(ctx, env, e.buf, p, fi); r != nil {
		rf.Close()
		return *r, nil
	}
	raw, err := content(ctx, e.buf, rf, p)
	rf.Close()
	if err != nil {
		return openErr(env, p, err), nil
	}
	if isBinary(raw[:min(len(raw), sniffBytes)]) {
		return tool.Errorf(CodeBinary, "%s looks like a binary file; edit changes text files only", display(env, p)), nil
	}
	old := string(raw)
	n := strings.Count(old, a.OldString)
	switch {
	case n == 0:
		msg := fmt.Sprintf("old_string was not found in %s; it must match the file exactly, including whitespace and indentation. Read the file again to copy the text.", display(env, p))
		if strings.Contains(old, "\r\n") && !strings.Contains(a.OldString, "\r\n") && strings.Contains(a.OldString, "\n") {
			msg += " (The file uses CRLF line endings.)"
		}
		return tool.Errorf(CodeNoMatch, "%s", msg), nil
	case n > 1 && !a.ReplaceAll:
		return tool.Errorf(CodeAmbiguous, "old_string occurs %d times in %s; include more surrounding lines to make it unique, or set replace_all to replace every occurrence", n, display(env, p)), nil
	}
	if ctx.Err() != nil {
		return tool.Errorf(tool.CodeAborted, "edit of %s cancelled before it started", display(env, p)), nil
	}
	limit := 1
	if a.ReplaceAll {
		limit = -1
	}
	updated := strings.Replace(old, a.OldString, a.NewString, limit)
	f, err := openExisting(sys, name)
	if err != nil {
		return writeErr(env, p, err), nil
	}
	p = realPath(f, p)
	if err := put(ctx, e.buf, f, p, []byte(updated)); err != nil {
		return openErr(env, p, err), nil
	}
	recordWritten(env, p, []byte(updated))

	shownName := display(env, p)
	diff := udiff.Unified("a/"+shownName, "b/"+shownName, old, updated)
	replaced := 1
	if a.ReplaceAll {
		replaced = n
	}
	shown := diff
	if len(shown) > maxDiffBytes {
		shown = strings.ToValidUTF8(shown[:maxDiffBytes], "") + "\n[diff cut at 32 KiB]\n"
	}
	text := fmt.Sprintf("edited %s (%d replacement%s)\n%s", shownName, replaced, plural(replaced), shown)
	return tool.Result{Content: llm.Text(text), Meta: jsonMeta(editMeta{Path: p, Replacements: replaced, Diff: diff})}, nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
