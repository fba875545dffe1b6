package fs

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/tool"
	"github.com/reinhq/rein/tool/internal/args"
)

type readArgs struct {
	FilePath string `json:"file_path" jsonschema:"Path of the file, absolute or relative to the working directory."`
	Offset   int    `json:"offset,omitempty" jsonschema:"First line to return, 1-based. Default 1."`
	Limit    int    `json:"limit,omitempty" jsonschema:"Number of lines to return. Default and maximum 2000."`
}

var readSchema = args.New[readArgs](func(s *jsonschema.Schema) {
	one := 1.0
	s.Properties["offset"].Minimum = &one
	s.Properties["limit"].Minimum = &one
})

var readSpec = llm.ToolSpec{
	Name: "read",
	Description: `Read a text file. Returns lines prefixed with their 1-based line number and a tab.
At most 2000 lines and 256 KiB per call; lines longer than 2000 characters are cut. When more remains, the output ends with the offset to continue from.
Binary files are refused. Reading a file is required before write may replace it or edit may change it.`,
	Parameters: readSchema.Parameters(),
}

type readTool struct{ buf Buffers }

// Read returns the read tool.
func Read() tool.Tool { return readTool{} }

func (readTool) Spec() llm.ToolSpec { return readSpec }
func (readTool) Mode() tool.Mode    { return tool.Parallel }

// readMeta is the read tool's Meta.
type readMeta struct {
	Path       string `json:"path"`
	StartLine  int    `json:"startLine"`
	EndLine    int    `json:"endLine"`
	TotalLines int    `json:"totalLines"`
	Truncated  bool   `json:"truncated"`
}

func (t readTool) Run(ctx context.Context, call tool.Call) (tool.Result, error) {
	a, bad := readSchema.Decode(call.Arguments)
	if bad != nil {
		return *bad, nil
	}
	env := call.Env
	p := abs(env, a.FilePath)
	// Open the path as given: ".." is resolved by the kernel after the
	// symlinks before it, as write and edit do; then name the file by
	// where it really is.
	if inProcEntry(joined(env, a.FilePath)) {
		return procEntryErr(env, p), nil
	}
	f, err := os.Open(joined(env, a.FilePath))
	if err != nil {
		return openErr(env, p, err), nil
	}
	defer f.Close()
	p = realPath(f, p)
	if procEntry(p) {
		return procEntryErr(env, p), nil
	}
	fi, err := f.Stat()
	if err != nil {
		return openErr(env, p, err), nil
	}
	if fi.IsDir() {
		return tool.Errorf(CodeIsDirectory, "%s is a directory; use ls to list it", display(env, p)), nil
	}
	if !fi.Mode().IsRegular() {
		// A device, pipe or socket: endless (/dev/zero), blocking (a
		// FIFO) or another process's stream (/dev/stdin is rein's own).
		return tool.Errorf(CodeNotRegular, "%s is not a regular file (%v); read shows files", display(env, p), fi.Mode().Type()), nil
	}
	var src io.Reader = f
	size := fi.Size()
	if t.buf != nil {
		data, err := bufRead(ctx, t.buf, p, fi)
		if err != nil {
			return openErr(env, p, err), nil
		}
		src, size = bytes.NewReader(data), int64(len(data))
	}
	h := sha256.New()
	br := bufio.NewReaderSize(io.TeeReader(src, h), 64<<10)
	head, _ := br.Peek(sniffBytes)
	if isBinary(head) {
		return tool.Errorf(CodeBinary, "%s looks like a binary file (%d bytes); read shows text files only", display(env, p), size), nil
	}

	offset := max(a.Offset, 1)
	limit := a.Limit
	if limit <= 0 || limit > MaxReadLines {
		limit = MaxReadLines
	}
	var out strings.Builder
	total, first, last := 0, 0, 0
	full := false // output cap reached before limit
	for {
		line, err := readLine(br)
		if err == io.EOF {
			break
		}
		if err != nil {
			return openErr(env, p, err), nil
		}
		total++
		if total%4096 == 0 && ctx.Err() != nil {
			return tool.Errorf(tool.CodeAborted, "read of %s cancelled", display(env, p)), nil
		}
		if total < offset || full || (last > 0 && last-first+1 >= limit) {
			continue
		}
		text := strings.ToValidUTF8(strings.TrimSuffix(strings.TrimSuffix(line.text, "\n"), "\r"), "\uFFFD")
		if line.cut > 0 {
			text += fmt.Sprintf(" … [line cut: %d more bytes]", line.cut)
		}
		entry := fmt.Sprintf("%6d\t%s\n", total, text)
		if last > 0 && out.Len()+len(entry) > MaxReadBytes {
			full = true
			continue
		}
		out.WriteString(entry)
		if first == 0 {
			first = total
		}
		last = total
	}
	if ctx.Err() != nil {
		return tool.Errorf(tool.CodeAborted, "read of %s cancelled", display(env, p)), nil
	}
	var sum [sha256.Size]byte
	copy(sum[:], h.Sum(nil))
	reads(env.State).put(p, stamp{fi.ModTime(), fi.Size(), sum})

	meta := readMeta{Path: p, StartLine: first, EndLine: last, TotalLines: total}
	switch {
	case total == 0:
		out.WriteString("[empty file]\n")
	case first == 0:
		fmt.Fprintf(&out, "[the file has %d lines; offset %d is past the end]\n", total, offset)
	case last < total:
		meta.Truncated = true
		why := "line limit"
		if full {
			why = "256 KiB output limit"
		}
		fmt.Fprintf(&out, "[showing lines %d-%d of %d (%s); call read with offset=%d to continue]\n", first, last, total, why, last+1)
	}
	return tool.Result{Content: llm.Text(out.String()), Meta: jsonMeta(meta)}, nil
}

type line struct {
	text string // at most MaxLineChars bytes, plus the newline if any
	cut  int    // bytes dropped from a long line
}

// readLine returns the next line, cutting it at MaxLineChars bytes (on a
// rune boundary) and skipping the rest.
func readLine(br *bufio.Reader) (line, error) {
	var b []byte
	cut := 0
	for {
		chunk, err := br.ReadSlice('\n')
		if room := MaxLineChars - len(b); room > 0 {
			take := min(room, len(chunk))
			b = append(b, chunk[:take]...)
			cut += len(chunk) - take
		} else {
			cut += len(chunk)
		}
		switch err {
		case bufio.ErrBufferFull:
			continue
		case nil:
			if cut > 0 {
				cut-- // the newline is not content
			}
			return line{trimRune(string(b), cut), cut}, nil
		case io.EOF:
			if len(b) == 0 && cut == 0 {
				return line{}, io.EOF
			}
			return line{trimRune(string(b), cut), cut}, nil
		default:
			return line{}, err
		}
	}
}

// trimRune drops a partial UTF-8 sequence left at the end of a line cut at
// MaxLineChars.
func trimRune(s string, cut int) string {
	if cut == 0 {
		return s
	}
	for i := 1; i <= utf8.UTFMax-1 && i <= len(s); i++ {
		if utf8.RuneStart(s[len(s)-i]) {
			if !utf8.FullRuneInString(s[len(s)-i:]) {
				return s[:len(s)-i]
			}
			break
		}
	}
	return s
}
