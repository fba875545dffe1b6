package postgres

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
	"github.com/reinhq/rein/store/postgres/pgtest"
)

// The chaos drill: two processes (this test binary, re-executed as
// workers) contend for one session through OpenWait and append turns to it
// as fast as they can, printing every acknowledged batch. The test kills
// (SIGKILL) or pauses (SIGSTOP) whichever holds the lease at a random
// moment, waits for the other to take over after the lease expires and
// make progress, then resumes the paused one, which must find its lease
// lost. At the end the stored log must hold every acknowledged batch byte
// for byte, show no write of an older lease after a newer one, and pass
// session.Check.
const (
	chaosWorkerEnv = "REIN_PG_CHAOS_WORKER" // the worker's name
	chaosDSNEnv    = "REIN_PG_CHAOS_DSN"
	chaosFenceEnv  = "REIN_PG_CHAOS_SERVER_FENCE_ONLY"
	chaosID        = "chaos"
	chaosTTL       = 300 * time.Millisecond
	chaosRenew     = 60 * time.Millisecond
	chaosTrials    = 50
)

func TestChaosTwoProcesses(t *testing.T) {
	dsn := pgtest.Fresh(t)
	s := openAt(t, dsn, Options{})
	w, err := s.Create(ctx, hdr(chaosID))
	if err != nil {
		t.Fatal(err)
	}
	w.Close()

	d := &drill{t: t, dsn: dsn, msgs: make(chan chaosMsg, 1024), procs: map[string]*exec.Cmd{}, holding: map[string]int64{}}
	defer d.killAll()
	a, b := d.spawn(false), d.spawn(true)
	slots := [2]string{a, b}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	var stops, kills int
	var takeovers []time.Duration
	for trial := 0; trial < chaosTrials; trial++ {
		// A holder that has written something.
		var holder string
		var token int64
		d.waitFor(fmt.Sprintf("trial %d: a holder that acknowledged a batch", trial), func() bool {
			holder, token = d.current()
			return holder != "" && d.acked[token] > 0
		})
		time.Sleep(time.Duration(rng.IntN(40)) * time.Millisecond)
		holder, token = d.current() // it may have changed hands by itself
		other := slots[0]
		if other == holder {
			other = slots[1]
		}
		stop := rng.IntN(2) == 0
		sig := syscall.SIGKILL
		if stop {
			sig = syscall.SIGSTOP
			stops++
		} else {
			kills++
		}
		t0 := time.Now()
		if err := d.procs[holder].Process.Signal(sig); err != nil {
			t.Fatalf("trial %d: signal %s: %v", trial, holder, err)
		}
		// The other takes over (a newer token) and makes progress.
		var newToken int64
		d.waitFor(fmt.Sprintf("trial %d: %s takes over from %s (%v)", trial, other, holder, sig), func() bool {
			if tk, ok := d.holding[other]; ok && tk > token {
				if newToken == 0 {
					newToken = tk
					takeovers = append(takeovers, time.Since(t0))
				}
				return d.acked[tk] > 0
			}
			return false
		})
		if stop {
			if err := d.procs[holder].Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			// Resumed, it must learn that its lease is gone.
			d.waitFor(fmt.Sprintf("trial %d: paused %s finds its lease lost", trial, holder), func() bool {
				_, still := d.holding[holder]
				return !still
			})
		} else {
			d.reap(holder)
			slots[slotOf(slots, holder)] = d.spawn(rng.IntN(2) == 0)
		}
	}
	d.killAll()
	d.drain()

	// Verify the stored log.
	ld, err := s.Load(ctx, chaosID, store.LoadOptions{})
	if err != nil {
		t.Fatalf("Load after the drill: %v", err)
	}
	evs := ld.Log.Events(0)
	if vs := session.Check(evs); len(vs) > 0 {
		t.Fatalf("the log breaks the invariant: %v", vs)
	}
	stored := ld.Log.Len() - int64(len(ld.Repair))
	for _, a := range d.acks {
		if a.last >= stored {
			t.Errorf("acknowledged batch %d..%d (token %d) lost: %d events stored", a.first, a.last, a.token, stored)
			continue
		}
		var lines []byte
		for _, ev := range evs[a.first : a.last+1] {
			lines = ev.AppendLine(lines)
		}
		if sum := sha256.Sum256(lines); hex.EncodeToString(sum[:]) != a.sum {
			t.Errorf("acknowledged batch %d..%d (token %d) differs from what is stored", a.first, a.last, a.token)
		}
	}
	// No interleaving: the lease tokens written into the events never go
	// back.
	var prev int64
	var prevSeq int64
	tokenRe := regexp.MustCompile(`tok=(\d+)`)
	for _, ev := range evs[:stored] {
		for _, m := range tokenRe.FindAllSubmatch(ev.Data, -1) {
			tk, _ := strconv.ParseInt(string(m[1]), 10, 64)
			if tk < prev {
				t.Fatalf("seq %d was written under token %d after seq %d under token %d: interleaved writers", ev.Seq, tk, prevSeq, prev)
			}
			prev, prevSeq = tk, ev.Seq
		}
	}
	var max time.Duration
	for _, d := range takeovers {
		max = maxDur(max, d)
	}
	t.Logf("%d trials (%d SIGKILL, %d SIGSTOP), %d events stored, %d batches acknowledged, %d stale writers fenced; takeover after the signal: max %v (lease %v + renewal %v)",
		chaosTrials, kills, stops, stored, len(d.acks), d.lost, max, chaosTTL, chaosRenew)
	if d.lost < stops {
		t.Errorf("%d paused writers resumed but only %d found their lease lost", stops, d.lost)
	}
}

func maxDur(a, b time.Duration) time.Duration {
	if a > b {
		return a
	}
	return b
}

func slotOf(slots [2]string, name string) int {
	if slots[0] == name {
		return 0
	}
	return 1
}

// chaosMsg is one line a worker printed.
type chaosMsg struct {
	worker string
	kind   string // acquired, ack, lost, err, exit
	token  int64
	first  int64
	last   int64
	sum    string
	text   string
}

type drill struct {
	t     *testing.T
	dsn   string
	n     int
	msgs  chan chaosMsg
	procs map[string]*exec.Cmd
	// holding maps a worker to the token it holds (as far as its output
	// has told).
	holding map[string]int64
	acked   map[int64]int
	acks    []chaosMsg
	lost    int
	failed  int
	last    string // the most recent acquirer
}

func (d *drill) spawn(serverFenceOnly bool) string {
	d.n++
	name := fmt.Sprintf("w%d", d.n)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), chaosWorkerEnv+"="+name, chaosDSNEnv+"="+d.dsn)
	if serverFenceOnly {
		cmd.Env = append(cmd.Env, chaosFenceEnv+"=1")
	}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		d.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	d.procs[name] = cmd
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			d.msgs <- parseChaosMsg(name, sc.Text())
		}
		d.msgs <- chaosMsg{worker: name, kind: "exit"}
	}()
	return name
}

func parseChaosMsg(worker, line string) chaosMsg {
	m := chaosMsg{worker: worker, text: line}
	f := strings.Fields(line)
	if len(f) == 0 {
		return m
	}
	m.kind = f[0]
	num := func(i int) int64 {
		if i < len(f) {
			v, _ := strconv.ParseInt(f[i], 10, 64)
			return v
		}
		return 0
	}
	m.token, m.first, m.last = num(1), num(2), num(3)
	if len(f) > 4 {
		m.sum = f[4]
	}
	return m
}

func (d *drill) handle(m chaosMsg) {
	if d.acked == nil {
		d.acked = map[int64]int{}
	}
	switch m.kind {
	case "acquired":
		d.holding[m.worker] = m.token
		d.last = m.worker
	case "ack":
		d.acked[m.token]++
		d.acks = append(d.acks, m)
	case "lost":
		delete(d.holding, m.worker)
		d.lost++
	case "failed":
		delete(d.holding, m.worker)
		d.failed++
		d.t.Logf("worker %s: %s", m.worker, m.text)
	case "exit":
		delete(d.holding, m.worker)
	case "err":
		d.t.Errorf("worker %s: %s", m.worker, m.text)
	}
}

// current returns the worker that most recently took the lease, if it
// still holds it as far as we know.
func (d *drill) current() (string, int64) {
	if tk, ok := d.holding[d.last]; ok {
		return d.last, tk
	}
	return "", 0
}

// waitFor handles the workers' messages until cond holds.
func (d *drill) waitFor(what string, cond func() bool) {
	d.t.Helper()
	timeout := time.After(30 * time.Second)
	for !cond() {
		select {
		case m := <-d.msgs:
			d.handle(m)
		case <-timeout:
			d.t.Fatalf("timed out waiting: %s", what)
		}
	}
}

// reap waits for a killed worker and its last messages.
func (d *drill) reap(name string) {
	_ = d.procs[name].Wait()
	d.waitFor("the exit of "+name, func() bool {
		_, ok := d.holding[name]
		return !ok
	})
	delete(d.procs, name)
}

func (d *drill) killAll() {
	for name, p := range d.procs {
		_ = p.Process.Signal(syscall.SIGCONT)
		_ = p.Process.Kill()
		_ = p.Wait()
		delete(d.procs, name)
	}
}

// drain handles what the dead workers printed last.
func (d *drill) drain() {
	for {
		select {
		case m := <-d.msgs:
			d.handle(m)
		case <-time.After(200 * time.Millisecond):
			return
		}
	}
}

// chaosWorker is the worker process: take the session, append turns until
// the lease is lost, take it again.
func chaosWorker() int {
	name := os.Getenv(chaosWorkerEnv)
	ignoreDeadline = os.Getenv(chaosFenceEnv) != ""
	say := func(format string, args ...any) { os.Stdout.WriteString(fmt.Sprintf(format, args...) + "\n") }
	s, err := Open(ctx, os.Getenv(chaosDSNEnv), Options{Holder: name, LeaseTTL: chaosTTL, RenewEvery: chaosRenew})
	if err != nil {
		say("err open: %v", err)
		return 1
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(os.Getpid())))
	for {
		w, ld, err := s.OpenWait(ctx, chaosID)
		if err != nil {
			say("err openwait: %v", err)
			return 1
		}
		token := w.(*writer).Token()
		say("acquired %d %d", token, ld.Log.Len())
		b := newBuilder(nopTB{}, ld.Log)
		for err == nil {
			for _, batch := range chaosTurn(b, token, rng) {
				if err = w.Append(ctx, batch); err != nil {
					break
				}
				var lines []byte
				for _, ev := range batch {
					lines = ev.AppendLine(lines)
				}
				sum := sha256.Sum256(lines)
				say("ack %d %d %d %s", token, batch[0].Seq, batch[len(batch)-1].Seq, hex.EncodeToString(sum[:]))
				time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
			}
		}
		if !errors.Is(err, store.ErrLeaseLost) {
			// Nothing of the batch is stored; start over from the log.
			say("failed %d %v", token, err)
			w.Close()
			continue
		}
		say("lost %d", token)
		w.Close()
	}
}

// chaosTurn returns one turn as batches: the prompt, streamed chunks, a
// tool call and its result, the answer. Every batch carries the token.
func chaosTurn(b *builder, token int64, rng *rand.Rand) [][]session.Event {
	n, _ := b.log.Turn()
	n++
	tok := fmt.Sprintf("tok=%d", token)
	id := fmt.Sprintf("m%d", b.log.Len())
	out := [][]session.Event{{
		b.add(&session.TurnStart{Turn: n, Trigger: session.Trigger{Kind: session.TriggerSend, MessageID: id}}),
		b.add(&session.UserMessage{ID: id, Content: llm.Text(tok + " prompt"), Source: session.Source{Kind: session.SourceUser}}),
		b.add(&session.StepStart{Turn: n, Step: 1}),
		b.add(&session.RequestHeader{Turn: n, Step: 1, Reason: session.HeaderInitial, Model: "scripted:x", Tools: []llm.ToolSpec{}}),
	}}
	var chunk []session.Event
	var seqs []int64
	for range 1 + rng.IntN(6) {
		ev := b.add(&session.AssistantChunk{Turn: n, Step: 1, Delta: llm.Delta{Text: tok + " "}})
		chunk, seqs = append(chunk, ev), append(seqs, ev.Seq)
	}
	call := llm.ToolCall{ID: "k" + id, Name: "read", Arguments: `{"file_path":"x"}`}
	out = append(out, chunk, []session.Event{
		b.add(&session.AssistantMessage{Turn: n, Step: 1, Content: llm.Text(strings.Repeat(tok+" ", len(seqs))), ToolCalls: []llm.ToolCall{call}, Finish: llm.FinishToolCalls, ChunkSeqs: seqs}),
		b.add(&session.ToolCall{Turn: n, Step: 1, CallID: call.ID, Name: call.Name, Arguments: call.Arguments}),
	}, []session.Event{
		b.add(&session.ToolResult{Turn: n, Step: 1, CallID: call.ID, Content: llm.Text(tok + " contents")}),
		b.add(&session.StepEnd{Turn: n, Step: 1}),
		b.add(&session.TurnEnd{Turn: n, Reason: session.Reason{Kind: session.ReasonCompleted}}),
	})
	return out
}

// nopTB lets a worker use the builder outside a test.
type nopTB struct{ testing.TB }

func (nopTB) Helper() {}
func (nopTB) Fatalf(format string, args ...any) {
	os.Stdout.WriteString("err " + fmt.Sprintf(format, args...) + "\n")
	os.Exit(1)
}
