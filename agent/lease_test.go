package agent_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/llm/scripted"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
	"github.com/reinhq/rein/store/memstore"
	"github.com/reinhq/rein/tool"
)

// leasedStore gives its writers a lease that the test takes away, as a
// store shared by several machines does when a writer stops renewing in
// time (store/postgres runs the real thing against a database).
type leasedStore struct {
	store.Store
	lost chan struct{}
	lose sync.Once
}

func (s *leasedStore) Create(ctx context.Context, h session.Header) (store.Writer, error) {
	w, err := s.Store.Create(ctx, h)
	if err != nil {
		return nil, err
	}
	return &leasedWriter{Writer: w, s: s}, nil
}

type leasedWriter struct {
	store.Writer
	s *leasedStore
}

func (w *leasedWriter) Lost() <-chan struct{} { return w.s.lost }

func (w *leasedWriter) gone() bool {
	select {
	case <-w.s.lost:
		return true
	default:
		return false
	}
}

func (w *leasedWriter) Append(ctx context.Context, b []session.Event) error {
	if w.gone() {
		return store.ErrLeaseLost
	}
	return w.Writer.Append(ctx, b)
}

func (w *leasedWriter) Flush(ctx context.Context) error {
	if w.gone() {
		return store.ErrLeaseLost
	}
	return w.Writer.Flush(ctx)
}

func (w *leasedWriter) Close() error {
	err := w.Writer.Close()
	if w.gone() {
		return store.ErrLeaseLost
	}
	return err
}

// An agent whose lease is lost mid-turn stops by itself: the running tool
// is cancelled, nothing more is written, no further request is made, and
// Close says why.
func TestLeaseLostStopsTheAgent(t *testing.T) {
	st := &leasedStore{Store: memstore.New(memstore.Options{}), lost: make(chan struct{})}
	started := make(chan struct{})
	cancelled := make(chan struct{})
	body := func(ctx context.Context, c tool.Call) (tool.Result, error) {
		close(started)
		<-ctx.Done()
		close(cancelled)
		return tool.TextResult("too late"), nil
	}
	h := newHarness(t, []scripted.Call{scripted.UseTools(scripted.ToolCall{ID: "k1", Name: "p"})},
		withStore(st), withTools(probe("p", tool.Exclusive, body)))
	h.send("P")
	<-started
	// What is stored (a load repairs in memory only a session no writer
	// holds, so the count of loaded events is no measure).
	stored := func() int64 {
		ld, err := st.Load(context.Background(), h.a.ID(), store.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return ld.Log.Len() - int64(len(ld.Repair))
	}
	before := stored()
	st.lose.Do(func() { close(st.lost) })
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the tool was not cancelled after the lease was lost")
	}
	closedCh := make(chan error, 1)
	go func() { closedCh <- h.a.Close(context.Background()) }()
	select {
	case err := <-closedCh:
		if !errors.Is(err, store.ErrLeaseLost) {
			t.Errorf("Close: %v, want ErrLeaseLost", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not settle")
	}
	lives := h.lives(agent.LiveClosed)
	if len(lives) != 1 || !errors.Is(lives[0].Err, store.ErrLeaseLost) {
		t.Errorf("agent/closed = %+v, want one carrying ErrLeaseLost", lives)
	}
	if _, err := h.a.Send(agent.Message{Content: llm.Text("more")}); !errors.Is(err, agent.ErrClosed) {
		t.Errorf("Send after the loss: %v, want ErrClosed", err)
	}
	if n := stored(); n != before {
		t.Errorf("%d events stored after the loss", n-before)
	}
}
