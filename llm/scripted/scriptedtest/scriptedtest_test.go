package scriptedtest_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/llm/scripted"
	"github.com/reinhq/rein/llm/scripted/scriptedtest"
)

// recorder is a testing.TB that records errors and runs cleanups on demand.
type recorder struct {
	testing.TB
	errs     []string
	fatal    bool
	cleanups []func()
}

func (r *recorder) Helper()          {}
func (r *recorder) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
	r.fatal = true
}

func (r *recorder) finish() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

func drain(m *scripted.Model, t testing.TB) {
	for range m.Stream(t.Context(), &llm.Request{}) {
	}
}

func TestCleanupVerifies(t *testing.T) {
	r := &recorder{TB: t}
	m := scriptedtest.New(r, scripted.Answer("a"), scripted.Answer("b"))
	drain(m, t)
	r.finish()
	if len(r.errs) != 1 || !strings.Contains(r.errs[0], "call 2 of 2") {
		t.Fatalf("missing call reported as %q", r.errs)
	}

	r = &recorder{TB: t}
	m = scriptedtest.New(r, scripted.Answer("a"))
	drain(m, t)
	drain(m, t)
	r.finish()
	if len(r.errs) != 1 || !strings.Contains(r.errs[0], "unexpected model call") {
		t.Fatalf("unexpected call reported as %q", r.errs)
	}

	r = &recorder{TB: t}
	m = scriptedtest.New(r, scripted.Answer("a"))
	drain(m, t)
	r.finish()
	if len(r.errs) != 0 {
		t.Fatalf("complete script reported %q", r.errs)
	}
}

func TestLoad(t *testing.T) {
	r := &recorder{TB: t}
	m := scriptedtest.Load(r, "../testdata/demo.json")
	if m == nil || len(r.errs) != 0 {
		t.Fatalf("Load: %q", r.errs)
	}
	r.finish()
	if len(r.errs) != 1 || !strings.Contains(r.errs[0], "calls 1-4 of 4") {
		t.Fatalf("unplayed demo reported as %q", r.errs)
	}

	r = &recorder{TB: t}
	scriptedtest.Load(r, "../testdata/nope.json")
	if !r.fatal || !strings.Contains(r.errs[0], "nope.json") {
		t.Fatalf("missing file reported as %q (fatal %v)", r.errs, r.fatal)
	}
}
