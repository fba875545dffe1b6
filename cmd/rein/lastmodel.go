package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"

	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
	"github.com/reinhq/rein/store/jsonl"
)

// lastModelScan bounds how much of a session file's end lastRequestModel
// reads.
const lastModelScan = 8 << 20

// lastRequestModel is the model of session id's last request, read from
// the end of its JSONL file without loading the session: the faces that
// open many sessions (the terminal UI, rein acp) resume a session on it,
// as 'rein run --session' does from the loaded log. "" when the store is
// another kind, or no request/header line is found in the file's last
// lastModelScan bytes.
func lastRequestModel(st store.Store, id string) string {
	js, ok := st.(*jsonl.Store)
	if !ok {
		return ""
	}
	f, err := os.Open(js.Path(id))
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	size := fi.Size()
	key := []byte(`"type":"request/header"`)
	for n := min(int64(256<<10), size); n > 0; n = min(n*4, size) {
		buf := make([]byte, n)
		if _, err := f.ReadAt(buf, size-n); err != nil && err != io.EOF {
			return ""
		}
		// From the end: the last complete line that is a request/header.
		// A match whose line starts before buf is read again with more.
		whole := n == size
		for i := bytes.LastIndex(buf, key); i >= 0; i = bytes.LastIndex(buf[:i], key) {
			start := bytes.LastIndexByte(buf[:i], '\n') + 1
			if start == 0 && !whole {
				break
			}
			end := bytes.IndexByte(buf[i:], '\n')
			if end < 0 {
				continue // a torn last line
			}
			e, err := session.ParseLine(buf[start : i+end])
			if err != nil || e.Type != session.TypeRequestHeader {
				continue
			}
			var h struct {
				Model string `json:"model"`
			}
			if json.Unmarshal(e.Data, &h) != nil {
				return ""
			}
			return h.Model
		}
		if whole || n >= lastModelScan {
			return ""
		}
	}
	return ""
}
