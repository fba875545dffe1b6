package acp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/tool"
)

// Files reads and writes file contents through the client: what the model
// reads is the editor's buffer, saved or not, and what it writes lands in
// the editor. A read error for a file the client does not have wraps
// io/fs.ErrNotExist. (The file tools take it as their Buffers.)
type Files interface {
	ReadFile(ctx context.Context, path string) ([]byte, error)
	WriteFile(ctx context.Context, path string, data []byte) error
}

// clientFiles is Files over fs/read_text_file and fs/write_text_file; a
// direction the client does not offer uses the file system.
type clientFiles struct {
	s           *sess
	read, write bool
}

func (f *clientFiles) ReadFile(ctx context.Context, path string) ([]byte, error) {
	if !f.read {
		return os.ReadFile(path)
	}
	f.s.caughtUp() // the client knows the call before it reads for it
	resp, err := f.s.srv.conn.ReadTextFile(ctx, sdk.ReadTextFileRequest{SessionId: sdk.SessionId(f.s.id), Path: path})
	if err != nil {
		return nil, clientFileError(path, err)
	}
	return []byte(resp.Content), nil
}

// WriteFile writes through the client; a client that does not write
// files leaves the write to the file tool, which writes through the
// handle it checked (not by path).
func (f *clientFiles) WriteFile(ctx context.Context, path string, data []byte) error {
	if !f.write {
		return fmt.Errorf("acp: the client does not write files: %w", errors.ErrUnsupported)
	}
	f.s.caughtUp()
	_, err := f.s.srv.conn.WriteTextFile(ctx, sdk.WriteTextFileRequest{SessionId: sdk.SessionId(f.s.id), Path: path, Content: string(data)})
	if err != nil {
		return clientFileError(path, err)
	}
	return nil
}

// clientFileError maps the client's "resource not found" to ErrNotExist.
func clientFileError(path string, err error) error {
	var re *sdk.RequestError
	if errors.As(err, &re) {
		if re.Code == -32002 {
			return fmt.Errorf("%s: %w (the editor has no such file)", path, iofs.ErrNotExist)
		}
		return fmt.Errorf("%s: the editor answered: %s", path, re.Message)
	}
	return fmt.Errorf("%s: %w", path, err)
}

// Terminal runs commands in the client's terminals (terminal/*), so a
// person watches them in the editor.
type Terminal struct{ s *sess }

// terminalOutputLimit is the output the client keeps per command (it drops
// the beginning beyond it), as much as the bash tool shows the model.
const terminalOutputLimit = 30000

// Bash returns a bash tool described by spec (the built-in bash tool's, so
// the model sees one tool) whose commands run in a client terminal: bash -c
// in the session's directory, with the variables env would withhold from
// the model unset first (by name: secret values are not sent to the
// editor), a timeout, and a kill on cancel. The terminal is shown in the
// call's card while it runs.
func (t *Terminal) Bash(spec llm.ToolSpec, env tool.EnvPolicy) tool.Tool {
	lists := scrubArgs(env)
	return &tool.Func{ToolSpec: spec, ToolMode: tool.Exclusive, Body: func(ctx context.Context, call tool.Call) (tool.Result, error) {
		return t.run(ctx, call, lists)
	}}
}

// scrubScript is what a client terminal runs: bash -c scrubScript rein-bash
// COMMAND, then scrubArgs. It unsets what the environment policy removes
// for the model, in its order: secret names, then keep patterns, then drop
// patterns (the configured ones and tool.DefaultDrop); then it runs
// COMMAND. Names and patterns are data, never code: they arrive as
// arguments and are compared with [[ ]], a pattern only where a glob is
// meant.
const scrubScript = `__rein_cmd=$1; shift
__rein_secret=("${@:2:$1}"); shift $(($1 + 1))
__rein_keep=("${@:2:$1}"); shift $(($1 + 1))
__rein_drop=("${@:2:$1}"); shift $#
shopt -s nocasematch
for __rein_v in $(compgen -e); do
  for __rein_p in "${__rein_secret[@]}"; do [[ $__rein_v == "$__rein_p" ]] && { unset "$__rein_v"; continue 2; }; done
  for __rein_p in "${__rein_keep[@]}"; do [[ $__rein_v == $__rein_p ]] && continue 2; done
  for __rein_p in "${__rein_drop[@]}"; do [[ $__rein_v == $__rein_p ]] && { unset "$__rein_v"; continue 2; }; done
done
shopt -u nocasematch
export PAGER=cat GIT_PAGER=cat GIT_TERMINAL_PROMPT=0
exec bash -c "$__rein_cmd"`

// scrubArgs are scrubScript's arguments after the command: each list
// (secret names, keep patterns, drop patterns) as its length, then its
// entries.
func scrubArgs(env tool.EnvPolicy) []string {
	var out []string
	for _, l := range [][]string{env.Secrets, env.Keep, append(slices.Clone(env.Drop), tool.DefaultDrop...)} {
		out = append(out, strconv.Itoa(len(l)))
		out = append(out, l...)
	}
	return out
}

// terminalMeta is the Meta of a command run in a client terminal.
type terminalMeta struct {
	Description string `json:"description,omitempty"`
	ExitCode    *int   `json:"exitCode"`
	Signal      string `json:"signal,omitempty"`
	TimedOut    bool   `json:"timedOut"`
	Cancelled   bool   `json:"cancelled"`
	Truncated   bool   `json:"truncated"`
	DurationMs  int64  `json:"durationMs"`
	Terminal    bool   `json:"terminal"`
}

func (t *Terminal) run(ctx context.Context, call tool.Call, lists []string) (tool.Result, error) {
	var a struct {
		Command     string `json:"command"`
		TimeoutMs   int    `json:"timeout_ms"`
		Description string `json:"description"`
	}
	if err := json.Unmarshal(call.Arguments, &a); err != nil || strings.TrimSpace(a.Command) == "" {
		return tool.Errorf(tool.CodeInvalidArguments, "invalid arguments: command is required"), nil
	}
	timeout := 2 * time.Minute
	if a.TimeoutMs > 0 {
		timeout = min(time.Duration(a.TimeoutMs)*time.Millisecond, 10*time.Minute)
	}
	s := t.s
	conn := s.srv.conn
	sid := sdk.SessionId(s.id)
	s.caughtUp() // the call's card is on the client, in progress
	if ctx.Err() != nil {
		return tool.Errorf(tool.CodeAborted, "cancelled before the command started"), nil
	}
	dir := call.Env.Dir
	created, err := conn.CreateTerminal(ctx, sdk.CreateTerminalRequest{
		SessionId: sid, Command: "bash", Args: append([]string{"-c", scrubScript, "rein-bash", a.Command}, lists...),
		Cwd: &dir, OutputByteLimit: sdk.Ptr(terminalOutputLimit),
	})
	if err != nil {
		return tool.Errorf(tool.CodeFailed, "the editor could not start a terminal: %v", err), nil
	}
	id := created.TerminalId
	bg := context.WithoutCancel(ctx)
	defer func() {
		if _, err := conn.ReleaseTerminal(bg, sdk.ReleaseTerminalRequest{SessionId: sid, TerminalId: id}); err != nil {
			s.srv.log.Debug("acp: terminal release failed", "terminal", id, "err", err)
		}
	}()
	u := sdk.SessionUpdate{ToolCallUpdate: &sdk.SessionToolCallUpdate{ToolCallId: sdk.ToolCallId(call.ID),
		Content: []sdk.ToolCallContent{sdk.ToolTerminalRef(id)}, SessionUpdate: "tool_call_update"}}
	s.write(appendNotification(nil, s.id, &u))

	start := time.Now()
	meta := terminalMeta{Description: a.Description, Terminal: true}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	exit, werr := conn.WaitForTerminalExit(wctx, sdk.WaitForTerminalExitRequest{SessionId: sid, TerminalId: id})
	cancel()
	if werr != nil {
		meta.Cancelled, meta.TimedOut = ctx.Err() != nil, ctx.Err() == nil
		if _, err := conn.KillTerminal(bg, sdk.KillTerminalRequest{SessionId: sid, TerminalId: id}); err != nil {
			s.srv.log.Debug("acp: terminal kill failed", "terminal", id, "err", err)
		}
		kctx, kcancel := context.WithTimeout(bg, 5*time.Second)
		exit, _ = conn.WaitForTerminalExit(kctx, sdk.WaitForTerminalExitRequest{SessionId: sid, TerminalId: id})
		kcancel()
	}
	meta.DurationMs = time.Since(start).Milliseconds()
	out, err := conn.TerminalOutput(bg, sdk.TerminalOutputRequest{SessionId: sid, TerminalId: id})
	if err != nil {
		return tool.Errorf(tool.CodeFailed, "the editor did not return the command's output: %v", err), nil
	}
	meta.Truncated = out.Truncated
	meta.ExitCode = exit.ExitCode
	if exit.Signal != nil {
		meta.Signal = *exit.Signal
	}
	if out.ExitStatus != nil && meta.ExitCode == nil && meta.Signal == "" {
		meta.ExitCode = out.ExitStatus.ExitCode
		if out.ExitStatus.Signal != nil {
			meta.Signal = *out.ExitStatus.Signal
		}
	}
	var b strings.Builder
	if out.Truncated {
		fmt.Fprintf(&b, "[output cut: the editor's terminal kept only the last %d bytes]\n", terminalOutputLimit)
	}
	b.WriteString(out.Output)
	if out.Output != "" && !strings.HasSuffix(out.Output, "\n") {
		b.WriteByte('\n')
	}
	res := tool.Result{}
	switch {
	case meta.TimedOut:
		fmt.Fprintf(&b, "[timed out after %s; the command was killed]\n", timeout)
		res.IsError, res.Code = true, tool.CodeTimeout
	case meta.Cancelled:
		b.WriteString("[cancelled; the command was killed]\n")
		res.IsError, res.Code = true, tool.CodeAborted
	case meta.Signal != "":
		fmt.Fprintf(&b, "[killed by signal: %s]\n", meta.Signal)
		res.IsError, res.Code = true, "signal"
	case meta.ExitCode != nil && *meta.ExitCode != 0:
		fmt.Fprintf(&b, "[exit code: %d]\n", *meta.ExitCode)
		res.IsError, res.Code = true, "exit"
	}
	if b.Len() == 0 {
		b.WriteString("(no output)\n")
	}
	res.Content = llm.Text(b.String())
	res.Meta, _ = json.Marshal(meta)
	return res, nil
}

// filterInput passes the client's lines to the SDK and answers, itself,
// the lines that are not JSON-RPC at all: invalid JSON gets a parse error,
// JSON that is not a request, notification or response an invalid-request
// error (the SDK would only log them, leaving the client waiting).
func filterInput(in io.Reader, out io.Writer, log *slog.Logger) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		br := bufio.NewReaderSize(in, 64<<10)
		for {
			line, err := br.ReadBytes('\n')
			if len(strings.TrimSpace(string(line))) > 0 {
				if reply := badMessage(line); reply != nil {
					log.Warn("acp: bad message from the client", "error", string(reply))
					_, _ = out.Write(reply)
				} else if _, werr := pw.Write(line); werr != nil {
					return
				}
			}
			if err != nil {
				pw.CloseWithError(err)
				return
			}
		}
	}()
	return pr
}

// badMessage returns the error response for a line that is not a JSON-RPC
// message, or nil.
func badMessage(line []byte) []byte {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method *string         `json:"method"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if !json.Valid(line) {
		return rpcError(nil, -32700, "Parse error", "the line is not valid JSON")
	}
	if err := json.Unmarshal(line, &m); err != nil {
		return rpcError(nil, -32600, "Invalid request", "a JSON-RPC message is an object")
	}
	if m.Method == nil && m.Result == nil && m.Error == nil {
		return rpcError(m.ID, -32600, "Invalid request", "the message has no method, result or error")
	}
	return nil
}

func rpcError(id json.RawMessage, code int, msg, detail string) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct {
		JSONRPC string           `json:"jsonrpc"`
		ID      json.RawMessage  `json:"id"`
		Error   sdk.RequestError `json:"error"`
	}{"2.0", id, sdk.RequestError{Code: code, Message: msg, Data: map[string]any{"error": detail}}})
	return append(b, '\n')
}

// TrustAnswer is a person's answer to the trust question.
type TrustAnswer int

// Trust answers.
const (
	// TrustNo: the workspace's own settings do not apply.
	TrustNo TrustAnswer = iota
	// TrustOnce: they apply in this run only.
	TrustOnce
	// TrustAlways: trust the workspace from now on.
	TrustAlways
)

// Asker asks the person at the client about the session's workspace.
type Asker struct{ s *sess }

// AskTrust asks whether to trust the workspace, through the session: a
// notice card titled title holding question (what the project's settings
// would do), then session/request_permission with "Trust this workspace",
// "Only this time" and "Don't trust". A cancelled or failed request is an
// error (it counts as no).
func (a *Asker) AskTrust(ctx context.Context, title, question string) (TrustAnswer, error) {
	s := a.s
	id := "rein-trust-" + s.id
	meta := map[string]any{"rein": map[string]any{"entry": "trust"}}
	card := notice(id, title, sdk.ToolCallStatusPending, textContent(question), meta)
	s.write(appendNotification(nil, s.id, &card))
	resp, err := s.srv.conn.RequestPermission(ctx, sdk.RequestPermissionRequest{
		SessionId: sdk.SessionId(s.id),
		ToolCall:  sdk.ToolCallUpdate{ToolCallId: sdk.ToolCallId(id), Title: &title, Kind: sdk.Ptr(sdk.ToolKindOther), Status: sdk.Ptr(sdk.ToolCallStatusPending), Content: textContent(question)},
		Options: []sdk.PermissionOption{
			{OptionId: "trust", Name: "Trust this workspace", Kind: sdk.PermissionOptionKindAllowAlways},
			{OptionId: "once", Name: "Only this time", Kind: sdk.PermissionOptionKindAllowOnce},
			{OptionId: "no", Name: "Don't trust", Kind: sdk.PermissionOptionKindRejectOnce},
		},
	})
	ans, status, what := TrustNo, sdk.ToolCallStatusFailed, "Not trusted: the workspace's own settings are ignored"
	switch {
	case err != nil:
		err = fmt.Errorf("acp: trust question: %w", err)
	case resp.Outcome.Selected == nil:
		err = errors.New("acp: the trust question was cancelled")
	case resp.Outcome.Selected.OptionId == "trust":
		ans, status, what = TrustAlways, sdk.ToolCallStatusCompleted, "Trusted: the workspace's settings apply from now on"
	case resp.Outcome.Selected.OptionId == "once":
		ans, status, what = TrustOnce, sdk.ToolCallStatusCompleted, "Trusted for this run: the workspace's settings apply until rein exits"
	}
	u := sdk.SessionUpdate{ToolCallUpdate: &sdk.SessionToolCallUpdate{ToolCallId: sdk.ToolCallId(id), Status: &status, Title: &what, SessionUpdate: "tool_call_update"}}
	s.write(appendNotification(nil, s.id, &u))
	return ans, err
}
