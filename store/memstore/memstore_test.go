package memstore_test

import (
	"testing"

	"github.com/reinhq/rein/store"
	"github.com/reinhq/rein/store/memstore"
	"github.com/reinhq/rein/store/storetest"
)

// The in-memory store passes the same conformance suite as the durable
// backends, crafted files included (it holds a file's bytes).
func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) store.Store { return memstore.New(memstore.Options{}) },
		Crash: func(t *testing.T, w store.Writer) {
			memstore.Crash(w)
		},
		PutFile: func(t *testing.T, s store.Store, id string, file []byte) { s.(*memstore.Store).PutFile(id, file) },
	})
}

func FuzzStore(f *testing.F) {
	storetest.Fuzz(f, storetest.Harness{
		New:     func(t *testing.T) store.Store { return memstore.New(memstore.Options{}) },
		PutFile: func(t *testing.T, s store.Store, id string, file []byte) { s.(*memstore.Store).PutFile(id, file) },
	})
}
