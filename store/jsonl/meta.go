package jsonl

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	"github.com/reinhq/rein/session"
)

// meta is the sidecar <id>.meta: a summary of the session file's first
// Size bytes. It is a cache and never the truth: List trusts it only when
// Size is within the file and scans the lines after Size itself.
type meta struct {
	Size    int64     `json:"size"`
	Events  int64     `json:"events"`
	Turns   int       `json:"turns"`
	Title   string    `json:"title,omitempty"`
	Updated time.Time `json:"updated"`
}

// add folds appended events into m (Size is the caller's).
func (m *meta) add(evs []session.Event) {
	for i := range evs {
		m.addOne(evs[i])
	}
}

func (m *meta) addOne(ev session.Event) {
	m.Events = ev.Seq + 1
	if ev.Time.After(m.Updated) {
		m.Updated = ev.Time
	}
	switch ev.Type {
	case session.TypeTurnStart:
		m.Turns++
	case session.TypeSessionTitle:
		var t session.SessionTitle
		if json.Unmarshal(ev.Data, &t) == nil {
			m.Title = t.Title
		}
	}
}

// scan folds the whole lines of r into m, stopping at a torn or bad line.
func (m *meta) scan(r *bufio.Reader) {
	for {
		line, err := r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A long line: collect it whole.
			long := append([]byte(nil), line...)
			for err == bufio.ErrBufferFull {
				line, err = r.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if err != nil {
			return
		}
		ev, perr := session.ParseLine(line[:len(line)-1])
		if perr != nil {
			return
		}
		m.Size += int64(len(line))
		m.addOne(ev)
	}
}

// write replaces the sidecar at path (no fsync: a lost or stale sidecar
// only costs List a scan).
func (m *meta) write(path string) {
	if b, err := json.Marshal(m); err == nil {
		writeFileAtomic(path, b)
	}
}

// writeFileAtomic replaces the sidecar at path with b through a temporary
// file and a rename, without fsync: sidecars are caches, trusted only up
// to the file size they name. It reports whether b was written.
func writeFileAtomic(path string, b []byte) bool {
	dir, name := filepath.Split(path)
	tmp := filepath.Join(dir, "."+name+".tmp")
	if os.WriteFile(tmp, b, 0o600) != nil {
		return false
	}
	if os.Rename(tmp, path) != nil {
		os.Remove(tmp)
		return false
	}
	return true
}

func readMeta(path string) (meta, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return meta{}, false
	}
	var m meta
	if json.Unmarshal(b, &m) != nil {
		return meta{}, false
	}
	return m, true
}
