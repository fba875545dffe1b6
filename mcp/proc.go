package mcp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// proc is a stdio server's process. Its pipes are rein's own (not
// exec's), so that waiting for the process never waits for a grandchild
// that kept a pipe open; the process leads a process group of its own, so
// that stopping it stops what it started, and Ctrl-C in the terminal does
// not reach it.
type proc struct {
	cmd    *exec.Cmd
	stdin  *os.File // rein's write end
	stdout *os.File // rein's read end
	done   chan struct{}
	err    error // the process's exit, set before done closes
	tail   *tail
	logged chan struct{} // closed when stderr has been read to its end
}

// startProc starts cfg's command with environ plus cfg.Env, in its Cwd
// (relative to dir) or else in serverDir. The server's stderr goes line by
// line to log (each line prefixed with the server's name) and into a short
// tail kept for error messages.
func startProc(cfg ServerConfig, dir, serverDir string, environ []string, log *serverLog) (*proc, error) {
	cmd := exec.Command(cfg.Command, cfg.Args...)
	cmd.Dir = procDir(cfg, dir, serverDir)
	cmd.Env = mergeEnv(environ, cfg.Env)
	setGroup(cmd)
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	err = cmd.Start()
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		return nil, err
	}
	p := &proc{cmd: cmd, stdin: inW, stdout: outR, done: make(chan struct{}), tail: &tail{}, logged: make(chan struct{})}
	go func() {
		defer close(p.logged)
		defer errR.Close()
		sc := bufio.NewScanner(errR)
		sc.Buffer(make([]byte, 0, 4096), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.tail.add(line)
			log.line(line)
		}
	}()
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// procDir is the working directory of cfg's process: its Cwd (relative
// to dir), or else serverDir.
func procDir(cfg ServerConfig, dir, serverDir string) string {
	if wd := cfg.WorkDir(dir); wd != "" {
		return wd
	}
	return serverDir
}

// exited returns how the process ended ("exit status 1", "signal:
// killed") once it has, else "".
func (p *proc) exited() string {
	select {
	case <-p.done:
		if p.err == nil {
			return "exit status 0"
		}
		var ee *exec.ExitError
		if errors.As(p.err, &ee) {
			return ee.String()
		}
		return p.err.Error()
	default:
		return ""
	}
}

// stop ends the process and everything in its process group: stdin is
// closed (a well-behaved server exits on that), then after grace the
// group gets SIGTERM, and after another grace SIGKILL. It returns when
// the process has been reaped, the rest of its group has exited (or a
// grace has passed), and its stderr has been read to the end (or a
// grandchild holding stderr was killed with the group).
func (p *proc) stop(grace time.Duration) {
	p.stdin.Close()
	wait := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-p.done:
			return true
		case <-t.C:
			return false
		}
	}
	if !wait(grace) {
		signalGroup(p.cmd, false)
		if !wait(grace) {
			signalGroup(p.cmd, true)
			<-p.done
		}
	}
	// Whatever the process left behind in its group goes too, and is
	// gone before stop returns.
	signalGroup(p.cmd, true)
	awaitGroup(p.cmd, grace)
	p.stdout.Close()
	<-p.logged
}

// settle waits (at most d) for the process to exit and its stderr to be
// read, so that a message about it can say how it ended and what it said.
func (p *proc) settle(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	for _, ch := range []chan struct{}{p.done, p.logged} {
		select {
		case <-ch:
		case <-t.C:
			return
		}
	}
}

// mergeEnv returns environ with the entries of extra set (replacing the
// same names).
func mergeEnv(environ []string, extra map[string]string) []string {
	out := make([]string, 0, len(environ)+len(extra))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if _, ok := extra[name]; !ok {
			out = append(out, kv)
		}
	}
	for k, v := range extra {
		out = append(out, k+"="+v)
	}
	return out
}

// tail keeps the last lines of a server's stderr for error messages.
type tail struct {
	mu    sync.Mutex
	lines []string
}

const tailLines, tailLine = 8, 300

func (t *tail) add(line string) {
	if strings.TrimSpace(line) == "" {
		return
	}
	if len(line) > tailLine {
		line = line[:tailLine] + "…"
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	if len(t.lines) > tailLines {
		t.lines = t.lines[len(t.lines)-tailLines:]
	}
}

func (t *tail) String() string {
	if t == nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}

// logSink is the per-session log that servers' stderr goes to. It caps
// what it writes, so a server that floods stderr cannot fill the disk.
type logSink struct {
	mu      sync.Mutex
	w       io.Writer
	written int64
	max     int64
	full    bool
}

// maxLog caps the bytes of server stderr kept in one session's log.
const maxLog = 16 << 20

func (s *logSink) write(server, line string) {
	if s == nil || s.w == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.full {
		return
	}
	msg := fmt.Sprintf("%s [%s] %s\n", time.Now().UTC().Format("2006-01-02T15:04:05.000Z"), server, line)
	if s.written+int64(len(msg)) > s.max {
		s.full = true
		msg = fmt.Sprintf("[rein] the MCP server log reached %d MiB; further server output is dropped\n", s.max>>20)
	}
	n, _ := io.WriteString(s.w, msg)
	s.written += int64(n)
}

// serverLog is one server's view of the sink.
type serverLog struct {
	sink *logSink
	name string
}

func (l *serverLog) line(s string) { l.sink.write(l.name, s) }

// note writes a line of rein's own about the server to the log.
func (l *serverLog) note(format string, args ...any) {
	l.sink.write(l.name, "[rein] "+fmt.Sprintf(format, args...))
}

// waitCtx waits d or until ctx is done; it reports whether d passed.
func waitCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
