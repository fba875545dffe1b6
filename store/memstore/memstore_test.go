package memstore_test

import (
	"testing"

	"github.com/reinhq/rein/store"
	"github.com/reinhq/rein/store/memstore"
	"github.com/reinhq/rein/store/storetest"
)

// The in-memory store passes the same conformance suite as the durable
// backends; it has no bytes to tamper with, so the tamper cases skip.
func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) store.Store { return memstore.New(memstore.Options{}) },
		Crash: func(t *testing.T, w store.Writer) {
			memstore.Crash(w)
		},
	})
}
