package tui

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/session"
)

// The live-session socket lets other processes of the same user add
// context to a session the UI holds (its lock keeps them from opening the
// session themselves): `rein inject --session ID` connects to it when the
// session is locked. One connection carries one request line and one
// answer line, both JSON:
//
//	→ {"text": "CI is red on main", "source": {"kind": "plugin", "name": "ci"}}
//	← {"ok": true, "placement": "written", "seq": 42}
//
// placement is "written" (the session was idle: the context is in the log,
// durably, at seq) or "staged" (a turn runs: it reaches the model at the
// turn's next step). An error answers {"ok": false, "error": "…"}.

// InjectRequest is a request on the live-session socket.
type InjectRequest struct {
	Text   string         `json:"text"`
	Source session.Source `json:"source"`
}

// InjectReply is the socket's answer.
type InjectReply struct {
	OK        bool   `json:"ok"`
	Placement string `json:"placement,omitempty"`
	Seq       int64  `json:"seq,omitempty"`
	Error     string `json:"error,omitempty"`
}

// Placements of an injected context.
const (
	Written = "written"
	Staged  = "staged"
)

// maxInject bounds a request line (1 MiB of context).
const maxInject = 1 << 20

// Socket is a live-session socket being served.
type Socket struct {
	ln   net.Listener
	path string
	wg   sync.WaitGroup
	once sync.Once
}

// ErrSocketInUse: another live process serves the socket path.
var ErrSocketInUse = errors.New("tui: a live session already serves this socket")

// ServeInject serves the live-session socket of ag at path (mode 0600, in
// a directory of this user that no one else may write; a stale socket
// left by a process that died is replaced). Only processes of the same
// user that are not sandboxed commands may use it (checked on each
// connection where the system says who connected). Close stops it and
// removes the file.
func ServeInject(path string, ag *agent.Agent) (*Socket, error) {
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("%w: %s", ErrSocketInUse, path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	if err := privateDir(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("no live-session socket: %w", err)
	}
	_ = os.Remove(path) // stale: nobody answers
	// The socket file is created with the process's umask: listen under
	// a restrictive one, then make sure of the mode.
	ln, err := listenPrivate(path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	s := &Socket{ln: ln, path: path}
	s.wg.Add(1)
	go s.serve(ag)
	return s, nil
}

// Path is the socket's file.
func (s *Socket) Path() string { return s.path }

// Close stops serving, waits for the connections being answered and
// removes the socket file.
func (s *Socket) Close() error {
	var err error
	s.once.Do(func() {
		err = s.ln.Close()
		s.wg.Wait()
		_ = os.Remove(s.path)
	})
	return err
}

func (s *Socket) serve(ag *agent.Agent) {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer c.Close()
			handleInject(c, ag)
		}()
	}
}

func handleInject(c net.Conn, ag *agent.Agent) {
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	reply := func(r InjectReply) {
		b, _ := json.Marshal(r)
		_, _ = c.Write(append(b, '\n'))
	}
	if err := samePeer(c); err != nil {
		reply(InjectReply{Error: err.Error()})
		return
	}
	line, err := bufio.NewReaderSize(io.LimitReader(c, maxInject+1), 64<<10).ReadBytes('\n')
	if err != nil && len(line) == 0 {
		reply(InjectReply{Error: "no request: " + err.Error()})
		return
	}
	if len(line) > maxInject {
		reply(InjectReply{Error: fmt.Sprintf("request over %d bytes", maxInject)})
		return
	}
	var req InjectRequest
	if err := json.Unmarshal(line, &req); err != nil {
		reply(InjectReply{Error: "bad request: " + err.Error()})
		return
	}
	if req.Source.Kind == "" || req.Source.IsUser() {
		reply(InjectReply{Error: fmt.Sprintf("source kind %q: context needs a source other than user (what a person types is a prompt)", req.Source.Kind)})
		return
	}
	idle := ag.Status() == agent.Idle
	before := ag.Len()
	if err := ag.Inject(agent.AdditionalContext{Content: llm.Text(req.Text), Source: req.Source}); err != nil {
		reply(InjectReply{Error: err.Error()})
		return
	}
	if !idle {
		reply(InjectReply{OK: true, Placement: Staged})
		return
	}
	// Written out of turn: wait for its flush, so "written" means durable.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ag.WhenIdle(ctx); err != nil {
		reply(InjectReply{OK: true, Placement: Written, Seq: before, Error: "not yet durable: " + err.Error()})
		return
	}
	reply(InjectReply{OK: true, Placement: Written, Seq: before})
}

// ErrNoLiveSession: no process serves the session's socket.
var ErrNoLiveSession = errors.New("no live session serves this socket")

// SendInject adds text as context to the live session served at path. It
// returns ErrNoLiveSession when nothing listens there.
func SendInject(ctx context.Context, path string, req InjectRequest) (InjectReply, error) {
	if err := privateDir(filepath.Dir(path)); err != nil {
		return InjectReply{}, fmt.Errorf("the live-session socket is not in a private directory, nothing was sent: %w", err)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return InjectReply{}, fmt.Errorf("%w: %v", ErrNoLiveSession, err)
	}
	defer c.Close()
	if err := serverIsSelf(c); err != nil {
		return InjectReply{}, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	b, err := json.Marshal(req)
	if err != nil {
		return InjectReply{}, err
	}
	// A server that refuses the connection answers and closes before it
	// reads: its answer is still there to read when the write failed.
	_, werr := c.Write(append(b, '\n'))
	line, err := bufio.NewReader(c).ReadBytes('\n')
	if err != nil && len(line) == 0 {
		if werr != nil {
			return InjectReply{}, werr
		}
		return InjectReply{}, fmt.Errorf("the live session did not answer: %w", err)
	}
	var r InjectReply
	if err := json.Unmarshal(line, &r); err != nil {
		return InjectReply{}, fmt.Errorf("the live session's answer: %w", err)
	}
	if !r.OK {
		return r, errors.New(r.Error)
	}
	return r, nil
}
