// Package shell holds rein's bash tool: one `bash -c` per call in the
// session's working directory, in its own process group, with a timeout,
// a sanitized environment and capped output.
//
// Cancellation and timeout signal the whole process group (SIGTERM, then
// SIGKILL after a grace period), so children the command started die with
// it. Output (stdout and stderr interleaved through one pipe) beyond the cap
// is shown as head and tail, and the full output is spilled to a file the
// model can read. Exit code, signal and timeout are separate Meta fields.
//
// The environment comes from Options.Environ (default os.Environ())
// filtered by Options.Env (a tool.EnvPolicy, for tool.ForModel), so rein's
// keys and, by default, credential-looking variables are not visible to the
// command.
//
// With Options.Sandbox the command runs under the OS sandbox (package
// sandbox): on Linux with Landlock, writes only below the sandbox's roots,
// no network unless allowed, no access to rein's own process. Where the
// sandbox is unavailable the command runs unconfined (the host says so
// once). A failed sandboxed command gets a note saying what the sandbox
// denies, so the model can tell a denial from a bug.
//
// Concurrency: the tool value is safe for concurrent use; each call owns its
// process. The tool is Exclusive. This package imports tool, llm, sandbox
// and stdlib only.
package shell

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/sandbox"
	"github.com/reinhq/rein/tool"
	"github.com/reinhq/rein/tool/internal/args"
)

// Result codes of the bash tool. A timeout is tool.CodeTimeout and a
// cancellation tool.CodeAborted; a command that could not start is
// tool.CodeFailed.
const (
	// CodeExit: the command exited with a non-zero status.
	CodeExit = "exit"
	// CodeSignal: the command was killed by a signal rein did not send.
	CodeSignal = "signal"
)

// Defaults and limits; they are stated in the tool description.
const (
	DefaultTimeout = 2 * time.Minute
	MaxTimeout     = 10 * time.Minute
	// DefaultMaxOutput is the bytes of output shown to the model.
	DefaultMaxOutput = 30000
	// MaxSpill caps the spill file.
	MaxSpill = 64 << 20
	// drainWait is how long output may still arrive after the shell exits
	// before background processes holding the pipe are killed.
	drainWait = 500 * time.Millisecond
)

// Options configure the bash tool.
type Options struct {
	// Environ is the environment commands start from; nil means
	// os.Environ(). Env is always applied to it.
	Environ []string
	// Env filters Environ (as tool.ForModel); the zero policy removes
	// tool.DefaultDrop.
	Env tool.EnvPolicy
	// TempDir is where output spill files go, in a rein-<session>
	// subdirectory, when the session has no scratch directory
	// (tool.Env.ScratchDir, which is used when set and removed with the
	// session). Empty means os.TempDir().
	TempDir string
	// MaxOutput is the bytes of output shown to the model (head and tail);
	// 0 means DefaultMaxOutput.
	MaxOutput int
	// KillGrace is the wait between SIGTERM and SIGKILL when a command is
	// cancelled or times out; 0 means 2 s.
	KillGrace time.Duration
	// Bash is the shell binary; empty means "bash" on PATH.
	Bash string
	// Sandbox, when set, confines every command (see the package doc).
	Sandbox *sandbox.Sandbox
}

type bashArgs struct {
	Command     string `json:"command" jsonschema:"The bash script to run."`
	TimeoutMs   int    `json:"timeout_ms,omitempty" jsonschema:"Timeout in milliseconds. Default 120000 (2 minutes), at most 600000 (10 minutes)."`
	Description string `json:"description,omitempty" jsonschema:"What the command does, in 5-10 words, shown to the user."`
}

var bashSchema = args.New[bashArgs](func(s *jsonschema.Schema) {
	one, most, minLen := 1.0, float64(MaxTimeout/time.Millisecond), 1
	s.Properties["command"].MinLength = &minLen
	s.Properties["timeout_ms"].Minimum = &one
	s.Properties["timeout_ms"].Maximum = &most
})

var bashSpec = llm.ToolSpec{
	Name: "bash",
	Description: `Run a bash script with bash -c in the working directory. Each call is a fresh shell: cd and variables do not persist. Stdin is empty; do not run interactive programs.
Default timeout 2 minutes, at most 10 (timeout_ms); on timeout the command and all its child processes are killed.
stdout and stderr are returned together; beyond 30000 bytes only the start and end are shown and the full output is saved to a file named in the result, which read or grep can open.
A non-zero exit status is an error result; the exit code, or the signal, is stated at the end.`,
	Parameters: bashSchema.Parameters(),
}

type bashTool struct{ opts Options }

// Bash returns the bash tool.
func Bash(opts Options) tool.Tool {
	if opts.MaxOutput <= 0 {
		opts.MaxOutput = DefaultMaxOutput
	}
	if opts.KillGrace <= 0 {
		opts.KillGrace = 2 * time.Second
	}
	if opts.Bash == "" {
		opts.Bash = "bash"
	}
	if opts.TempDir == "" {
		opts.TempDir = os.TempDir()
	}
	return &bashTool{opts: opts}
}

func (*bashTool) Spec() llm.ToolSpec { return bashSpec }
func (*bashTool) Mode() tool.Mode    { return tool.Exclusive }

// Meta is the bash tool's Meta.
type Meta struct {
	Description string `json:"description,omitempty"`
	// ExitCode is nil when the shell was killed by a signal.
	ExitCode  *int   `json:"exitCode"`
	Signal    string `json:"signal,omitempty"`
	TimedOut  bool   `json:"timedOut"`
	Cancelled bool   `json:"cancelled"`
	// Background is set when processes the command left running held the
	// output open after the shell exited, and were killed.
	Background  bool   `json:"background,omitempty"`
	DurationMs  int64  `json:"durationMs"`
	OutputBytes int64  `json:"outputBytes"`
	Truncated   bool   `json:"truncated"`
	SpillPath   string `json:"spillPath,omitempty"`
	// Sandboxed says the command ran under the OS sandbox.
	Sandboxed bool `json:"sandboxed,omitempty"`
}

func (b *bashTool) Run(ctx context.Context, call tool.Call) (tool.Result, error) {
	a, bad := bashSchema.Decode(call.Arguments)
	if bad != nil {
		return *bad, nil
	}
	timeout := DefaultTimeout
	if a.TimeoutMs > 0 {
		timeout = time.Duration(a.TimeoutMs) * time.Millisecond
	}
	if ctx.Err() != nil {
		return tool.Errorf(tool.CodeAborted, "cancelled before the command started"), nil
	}
	environ := b.opts.Environ
	if environ == nil {
		environ = os.Environ()
	}
	env := append(b.opts.Env.Environ(environ, tool.ForModel), "PAGER=cat", "GIT_PAGER=cat", "GIT_TERMINAL_PROMPT=0")

	spillDir := call.Env.ScratchDir
	if spillDir == "" {
		spillDir = filepath.Join(b.opts.TempDir, "rein-"+tool.SafeName(call.Env.SessionID))
	}
	col := &collector{max: b.opts.MaxOutput, spillDir: spillDir, callID: tool.SafeName(call.ID)}
	defer col.close()
	pr, pw, err := os.Pipe()
	if err != nil {
		return tool.Errorf(tool.CodeFailed, "cannot start bash: %v", err), nil
	}
	cmd := exec.Command(b.opts.Bash, "-c", a.Command)
	cmd.Dir = call.Env.Dir
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	sandboxed := false
	if b.opts.Sandbox != nil {
		err = b.opts.Sandbox.Start(cmd)
		sandboxed = err == nil
		if errors.Is(err, sandbox.ErrUnavailable) {
			err = nil // started unconfined; the host has said so
		}
	} else {
		err = cmd.Start()
	}
	pw.Close()
	if err != nil {
		pr.Close()
		return tool.Errorf(tool.CodeFailed, "cannot start bash: %v", err), nil
	}
	pgid := cmd.Process.Pid
	readDone := make(chan struct{})
	go func() {
		_, _ = io.Copy(col, pr)
		close(readDone)
	}()
	waitDone := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(waitDone)
	}()

	meta := Meta{Description: a.Description, Sandboxed: sandboxed}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-waitDone:
	case <-timer.C:
		meta.TimedOut = true
	case <-ctx.Done():
		meta.Cancelled = true
	}
	if meta.TimedOut || meta.Cancelled {
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-waitDone:
		case <-time.After(b.opts.KillGrace):
		}
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-waitDone
	}
	// The shell is gone; output may still come from processes it left
	// behind. Wait briefly, then kill the group and stop reading.
	select {
	case <-readDone:
	case <-time.After(drainWait):
		meta.Background = true
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		select {
		case <-readDone:
		case <-time.After(time.Second):
			pr.Close()
			<-readDone
		}
	}
	pr.Close()
	meta.DurationMs = time.Since(start).Milliseconds()

	ps := cmd.ProcessState
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		meta.Signal = signalName(ws.Signal())
	} else {
		code := ps.ExitCode()
		meta.ExitCode = &code
	}
	out := col.finish(&meta)

	var sb strings.Builder
	sb.WriteString(out)
	if out != "" && !strings.HasSuffix(out, "\n") {
		sb.WriteByte('\n')
	}
	res := tool.Result{}
	switch {
	case meta.TimedOut:
		fmt.Fprintf(&sb, "[timed out after %s; the command and its child processes were killed]\n", timeout)
		res.IsError, res.Code = true, tool.CodeTimeout
	case meta.Cancelled:
		sb.WriteString("[cancelled; the command and its child processes were killed]\n")
		res.IsError, res.Code = true, tool.CodeAborted
	case meta.Signal != "":
		res.IsError, res.Code = true, CodeSignal
	case *meta.ExitCode != 0:
		res.IsError, res.Code = true, CodeExit
	}
	if meta.Sandboxed && res.IsError && sandboxDenial(out) {
		net := "and network access are"
		if b.opts.Sandbox.Policy.Network {
			net = "are"
		}
		fmt.Fprintf(&sb, "[sandbox: writes outside %s %s denied to this command; it cannot be lifted from inside the command]\n", strings.Join(b.opts.Sandbox.Policy.Write, ", "), net)
	}
	if meta.Background {
		sb.WriteString("[processes left running in the background held the output open and were killed; redirect their output to a file to keep them]\n")
	}
	switch {
	case meta.Signal != "":
		fmt.Fprintf(&sb, "[killed by signal: %s]\n", meta.Signal)
	case *meta.ExitCode != 0:
		fmt.Fprintf(&sb, "[exit code: %d]\n", *meta.ExitCode)
	}
	if sb.Len() == 0 {
		sb.WriteString("(no output)\n")
	}
	res.Content = llm.Text(sb.String())
	res.Meta, _ = json.Marshal(meta)
	return res, nil
}

// sandboxDenial reports output that looks like a sandbox refusal.
func sandboxDenial(out string) bool {
	for _, s := range []string{"Permission denied", "Operation not permitted", "Read-only file system", "Network is unreachable", "Could not resolve host", "Temporary failure in name resolution"} {
		if strings.Contains(out, s) {
			return true
		}
	}
	return false
}

// collector keeps the first max bytes of output; past that it spills
// everything to a file and keeps a head and a tail.
type collector struct {
	mu       sync.Mutex
	max      int
	spillDir string
	callID   string

	buf      []byte // everything, until max is passed; then the head
	tail     []byte
	total    int64
	spill    *os.File
	spillErr error
	spilled  int64
}

func (c *collector) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total += int64(len(p))
	if c.spill == nil && c.spillErr == nil && len(c.buf)+len(p) <= c.max {
		c.buf = append(c.buf, p...)
		return len(p), nil
	}
	if c.spill == nil && c.spillErr == nil {
		// First overflow: everything so far goes to the spill file, the
		// first half of the cap stays as the head, the rest starts the tail.
		c.openSpill()
		c.writeSpill(c.buf)
		c.writeSpill(p)
		all := append(c.buf, p...)
		half := min(c.max/2, len(all))
		c.tail = append([]byte(nil), all[half:]...)
		c.buf = all[:half:half]
	} else {
		c.writeSpill(p)
		c.tail = append(c.tail, p...)
	}
	if keep := c.max - c.max/2; len(c.tail) > 2*keep {
		c.tail = append(c.tail[:0], c.tail[len(c.tail)-keep:]...)
	}
	return len(p), nil
}

func (c *collector) openSpill() {
	c.spill, c.spillErr = tool.CreateSpill(c.spillDir, "bash-"+c.callID+"-*.log")
}

func (c *collector) writeSpill(p []byte) {
	if c.spill == nil {
		return
	}
	n := min(int64(len(p)), MaxSpill-c.spilled)
	if n <= 0 {
		return
	}
	if _, err := c.spill.Write(p[:n]); err != nil {
		c.spillErr = err
	}
	c.spilled += n
}

func (c *collector) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.spill != nil {
		c.spill.Close()
	}
}

// finish returns the text to show and fills the output fields of meta.
func (c *collector) finish(meta *Meta) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	meta.OutputBytes = c.total
	if c.spill == nil && c.spillErr == nil {
		return strings.ToValidUTF8(string(c.buf), "\uFFFD")
	}
	meta.Truncated = true
	keep := c.max - c.max/2
	tail := c.tail
	if len(tail) > keep {
		tail = tail[len(tail)-keep:]
	}
	omitted := c.total - int64(len(c.buf)) - int64(len(tail))
	var where string
	switch {
	case c.spill != nil:
		meta.SpillPath = c.spill.Name()
		where = "the full output is in " + c.spill.Name() + " (read it with offset and limit, or grep it)"
		if c.total > MaxSpill {
			where = fmt.Sprintf("the first %d MiB of the output are in %s", MaxSpill>>20, c.spill.Name())
		}
	default:
		where = fmt.Sprintf("the full output could not be saved: %v", c.spillErr)
	}
	return fmt.Sprintf("%s\n[... %d bytes of %d omitted; %s ...]\n%s",
		strings.ToValidUTF8(string(c.buf), "\uFFFD"), omitted, c.total, where, strings.ToValidUTF8(string(tail), "\uFFFD"))
}

var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT",
	syscall.SIGILL: "SIGILL", syscall.SIGTRAP: "SIGTRAP", syscall.SIGABRT: "SIGABRT",
	syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE", syscall.SIGKILL: "SIGKILL",
	syscall.SIGUSR1: "SIGUSR1", syscall.SIGSEGV: "SIGSEGV", syscall.SIGUSR2: "SIGUSR2",
	syscall.SIGPIPE: "SIGPIPE", syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM",
	syscall.SIGXCPU: "SIGXCPU", syscall.SIGXFSZ: "SIGXFSZ",
}

func signalName(s syscall.Signal) string {
	if n, ok := signalNames[s]; ok {
		return n
	}
	return fmt.Sprintf("signal %d", int(s))
}
