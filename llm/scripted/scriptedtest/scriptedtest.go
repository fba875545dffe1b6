// Package scriptedtest ties a scripted model to a test: the model is
// verified when the test ends, so a scripted call never made, an unexpected
// call or a mismatched request fails the test.
//
// It owns nothing but the cleanup registration; it may import testing and
// llm/scripted, and nothing else of rein's.
package scriptedtest

import (
	"testing"

	"github.com/reinhq/rein/llm/scripted"
)

// New returns scripted.New(calls...) verified at the end of t.
func New(t testing.TB, calls ...scripted.Call) *scripted.Model {
	t.Helper()
	return Check(t, scripted.New(calls...))
}

// Load returns the script at path verified at the end of t; a script that
// does not load fails t at once.
func Load(t testing.TB, path string) *scripted.Model {
	t.Helper()
	m, err := scripted.Load(path)
	if err != nil {
		t.Fatalf("scripted model: %v", err)
	}
	return Check(t, m)
}

// Check registers a cleanup that reports m.Verify's problems as test errors,
// and returns m.
func Check(t testing.TB, m *scripted.Model) *scripted.Model {
	t.Helper()
	t.Cleanup(func() {
		if err := m.Verify(); err != nil {
			t.Errorf("scripted model: %v", err)
		}
	})
	return m
}
