package mcp

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/tool"
)

// Result codes of MCP tool calls, besides tool.CodeTimeout,
// tool.CodeAborted and tool.CodeInvalidArguments.
const (
	// CodeToolError: the server ran the tool and it reported an error.
	CodeToolError = "tool-error"
	// CodeServerError: the server could not take the call (not running,
	// stopped during it, answered with a protocol error).
	CodeServerError = "server-error"
)

// maxImage is the largest image passed to the model (the providers' own
// per-image limit is about 5 MB).
const maxImage = 5 << 20

// imageTypes are the image types the providers accept.
var imageTypes = []string{"image/png", "image/jpeg", "image/gif", "image/webp"}

// Meta is the Meta of an MCP tool result: for people and UIs, never shown
// to the model.
type Meta struct {
	// Server and Tool name the server and its own name for the tool.
	Server     string `json:"server"`
	Tool       string `json:"tool"`
	DurationMs int64  `json:"durationMs"`
	// Truncated says the text was cut; OutputBytes is its full size and
	// SpillPath the file holding it.
	Truncated   bool   `json:"truncated,omitempty"`
	OutputBytes int    `json:"outputBytes,omitempty"`
	SpillPath   string `json:"spillPath,omitempty"`
	// Progress is the last progress message the server sent.
	Progress string `json:"progress,omitempty"`
	// Omitted lists content not passed to the model (audio, images the
	// model does not take, binary resources).
	Omitted []string `json:"omitted,omitempty"`
}

// mcpTool is one tool of a server, as a rein tool.
type mcpTool struct {
	s        *server
	spec     llm.ToolSpec
	remote   string
	readOnly bool
	note     string
}

func (t *mcpTool) Spec() llm.ToolSpec { return t.spec }

// Mode is parallel for tools the server annotates readOnlyHint, else
// exclusive.
func (t *mcpTool) Mode() tool.Mode {
	if t.readOnly {
		return tool.Parallel
	}
	return tool.Exclusive
}

// Run calls the tool on its server. Every failure is a result the model
// reads; Run never returns a Go error.
func (t *mcpTool) Run(ctx context.Context, call tool.Call) (tool.Result, error) {
	start := time.Now()
	meta := &Meta{Server: t.s.cfg.Name, Tool: t.remote}
	done := func(r tool.Result) (tool.Result, error) {
		meta.DurationMs = time.Since(start).Milliseconds()
		r.Meta, _ = json.Marshal(meta)
		return r, nil
	}
	args := bytes.TrimSpace(call.Arguments)
	if len(args) == 0 || string(args) == "null" {
		args = []byte("{}")
	}
	if args[0] != '{' || !json.Valid(args) {
		return done(tool.Errorf(tool.CodeInvalidArguments, "The arguments of %s must be a JSON object.", t.spec.Name))
	}
	c, err := t.s.session(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return done(tool.Errorf(tool.CodeAborted, "Cancelled before the call reached MCP server %s.", t.s.cfg.Name))
		}
		return done(tool.Errorf(CodeServerError, "%v. The call did not run.", err))
	}
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stopDown := context.AfterFunc(c.ctx, func() { cancel(errServerDown) })
	defer stopDown()
	timeout := t.s.cfg.toolTimeout()
	timer := time.AfterFunc(timeout, func() { cancel(errCallTimeout) })
	defer timer.Stop()
	// Progress restarts the timeout, but never beyond this.
	hardStop := start.Add(max(10*time.Minute, timeout))
	token := fmt.Sprintf("rein-%d", t.s.m.token.Add(1))
	var mu sync.Mutex
	t.s.m.progress.Store(token, func(p *sdk.ProgressNotificationParams) {
		if time.Now().Add(timeout).Before(hardStop) {
			timer.Reset(timeout)
		}
		if p.Message != "" {
			mu.Lock()
			meta.Progress = p.Message
			mu.Unlock()
		}
	})
	defer t.s.m.progress.Delete(token)
	params := &sdk.CallToolParams{Name: t.remote, Arguments: json.RawMessage(args)}
	params.SetProgressToken(token)
	res, err := c.cs.CallTool(cctx, params)
	t.s.m.progress.Delete(token)
	mu.Lock()
	defer mu.Unlock()
	if err != nil {
		return done(t.callError(ctx, cctx, c, err, timeout))
	}
	if res == nil {
		return done(tool.Errorf(CodeServerError, "MCP server %s answered %s with no result.", t.s.cfg.Name, t.remote))
	}
	return done(t.result(res, meta, call))
}

// callError turns a failed call into the result the model reads.
func (t *mcpTool) callError(ctx, cctx context.Context, c *conn, err error, timeout time.Duration) tool.Result {
	name := t.s.cfg.Name
	var we *jsonrpc.Error
	switch cause := context.Cause(cctx); {
	case errors.Is(cause, errCallTimeout):
		return tool.Errorf(tool.CodeTimeout, "MCP server %s did not answer %s within %s (tool_timeout); the call was cancelled. It may have taken effect anyway.", name, t.remote, timeout)
	case ctx.Err() != nil:
		return tool.Errorf(tool.CodeAborted, "Cancelled while MCP server %s ran %s; it may have taken effect.", name, t.remote)
	case t.s.m.ctx.Err() != nil:
		return tool.Errorf(tool.CodeAborted, "MCP server %s was stopped while it ran %s; it may have taken effect.", name, t.remote)
	case errors.As(err, &we):
		if we.Code == -32602 {
			return tool.Errorf(tool.CodeInvalidArguments, "MCP server %s rejected the arguments of %s: %s", name, t.remote, we.Message)
		}
		return tool.Errorf(CodeServerError, "MCP server %s answered %s with an error: %s (JSON-RPC code %d).", name, t.remote, we.Message, we.Code)
	}
	// Not an answer: the connection broke. Give the run loop a moment to
	// see the server stop, so the message can say how.
	why := err.Error()
	select {
	case <-c.ctx.Done():
	case <-time.After(time.Second):
	}
	if c.proc != nil {
		c.proc.settle(time.Second)
		if ex := c.proc.exited(); ex != "" {
			why = ex
		}
	}
	return tool.Errorf(CodeServerError, "MCP server %s stopped while it ran %s (%s). Whether the call took effect is unknown; rein restarts the server.", name, t.remote, why)
}

// result converts a tool result for the model: text as it is, images
// when the model takes them, embedded text resources with their URI,
// everything else as a note saying what was left out. Text beyond
// MaxOutput is cut to its head and tail and saved in full to a file.
func (t *mcpTool) result(res *sdk.CallToolResult, meta *Meta, call tool.Call) tool.Result {
	m := t.s.m
	var texts []string
	var images []llm.Part
	omit := func(what string) {
		meta.Omitted = append(meta.Omitted, what)
		texts = append(texts, "["+what+"]")
	}
	image := func(mime string, data []byte, from string) {
		switch {
		case !m.opts.Images:
			omit(fmt.Sprintf("%simage (%s, %d bytes) not shown: this model does not take images", from, mime, len(data)))
		case !slices.Contains(imageTypes, mime):
			omit(fmt.Sprintf("%simage (%s, %d bytes) not shown: the model takes only PNG, JPEG, GIF and WebP", from, mime, len(data)))
		case len(data) > maxImage:
			omit(fmt.Sprintf("%simage (%s, %d bytes) not shown: larger than %d MiB", from, mime, len(data), maxImage>>20))
		default:
			images = append(images, llm.Part{Type: llm.PartImage, MediaType: mime, Data: base64.StdEncoding.EncodeToString(data)})
		}
	}
	for _, c := range res.Content {
		switch v := c.(type) {
		case *sdk.TextContent:
			texts = append(texts, v.Text)
		case *sdk.ImageContent:
			image(v.MIMEType, v.Data, "")
		case *sdk.AudioContent:
			omit(fmt.Sprintf("audio (%s, %d bytes) not shown: rein does not pass audio to models", v.MIMEType, len(v.Data)))
		case *sdk.ResourceLink:
			s := fmt.Sprintf("[resource link: %s <%s>", v.Name, v.URI)
			if v.MIMEType != "" {
				s += " (" + v.MIMEType + ")"
			}
			if v.Description != "" {
				s += ": " + v.Description
			}
			texts = append(texts, s+"]")
		case *sdk.EmbeddedResource:
			r := v.Resource
			if r == nil {
				continue
			}
			switch {
			case r.Blob == nil:
				head := "[resource <" + r.URI + ">"
				if r.MIMEType != "" {
					head += " (" + r.MIMEType + ")"
				}
				texts = append(texts, head+"]\n"+r.Text)
			case strings.HasPrefix(r.MIMEType, "image/"):
				image(r.MIMEType, r.Blob, "resource <"+r.URI+">: ")
			default:
				omit(fmt.Sprintf("resource <%s> (%s, %d bytes of binary data) not shown", r.URI, r.MIMEType, len(r.Blob)))
			}
		default:
			b, _ := json.Marshal(c)
			omit(fmt.Sprintf("content rein does not know (%s) not shown", truncateText(string(b), 80)))
		}
	}
	if len(texts) == 0 && len(images) == 0 && res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err == nil {
			texts = append(texts, string(b))
		}
	}
	text := strings.Join(texts, "\n")
	if text == "" && len(images) == 0 {
		text = "(no content)"
	}
	if len(text) > m.opts.MaxOutput {
		text = t.cut(text, meta, call)
	}
	var parts []llm.Part
	if text != "" {
		parts = llm.Text(text)
	}
	parts = append(parts, images...)
	r := tool.Result{Content: parts}
	if res.IsError {
		r.IsError, r.Code = true, CodeToolError
	}
	return r
}

// cut keeps the head and tail of text within MaxOutput and saves the
// whole to a file, with a note like the bash tool's.
func (t *mcpTool) cut(text string, meta *Meta, call tool.Call) string {
	max := t.s.m.opts.MaxOutput
	meta.Truncated, meta.OutputBytes = true, len(text)
	head := cutUTF8(text, max/2)
	tailStart := len(text) - (max - max/2)
	for tailStart < len(text) && text[tailStart]&0xC0 == 0x80 {
		tailStart++
	}
	where := "the full result could not be saved"
	dir := call.Env.ScratchDir
	if dir == "" {
		dir = filepath.Join(t.s.m.opts.SpillDir, "rein-"+tool.SafeName(call.Env.SessionID))
	}
	if f, err := tool.CreateSpill(dir, "mcp-"+tool.SafeName(call.ID)+"-*.txt"); err == nil {
		_, werr := f.WriteString(text)
		if cerr := f.Close(); werr == nil && cerr == nil {
			meta.SpillPath = f.Name()
			where = "the full result is in " + f.Name() + " (read it with offset and limit, or grep it)"
		}
	} else {
		where = fmt.Sprintf("the full result could not be saved: %v", err)
	}
	omitted := tailStart - head
	return fmt.Sprintf("%s\n[... %d bytes of %d omitted; %s ...]\n%s", text[:head], omitted, len(text), where, text[tailStart:])
}

func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:cutUTF8(s, n)] + "…"
}
