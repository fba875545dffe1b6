package wire

import (
	"bytes"
	"io"
	"testing"
	"testing/iotest"

	"github.com/reinhq/rein/llm"
)

func TestBodyReader(t *testing.T) {
	b := Body{[]byte("ab"), nil, []byte("c"), []byte(""), []byte("defgh")}
	if b.Len() != 8 || string(b.Bytes()) != "abcdefgh" {
		t.Fatalf("len %d bytes %q", b.Len(), b.Bytes())
	}
	if err := iotest.TestReader(b.Reader(), []byte("abcdefgh")); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	n, err := io.Copy(&out, b.Reader()) // through WriteTo
	if err != nil || n != 8 || out.String() != "abcdefgh" {
		t.Fatalf("WriteTo: %d %v %q", n, err, out.String())
	}
	if err := iotest.TestReader(Body(nil).Reader(), nil); err != nil {
		t.Fatal(err)
	}
}

func enc(s string) func([]byte) ([]byte, int, error) {
	return func(b []byte) ([]byte, int, error) { return append(b, s...), len(s), nil }
}

// TestKeepNeverRewritesSentBytes: bytes handed out before Keep cuts the
// encodings back stay as they were while new encodings are added, and a
// message is kept only if it is the very message encoded.
func TestKeepNeverRewritesSentBytes(t *testing.T) {
	msgs := []llm.Message{
		{Role: llm.RoleUser, Content: llm.Text("one")},
		{Role: llm.RoleAssistant, Content: llm.Text("two")},
		{Role: llm.RoleUser, Content: llm.Text("three")},
	}
	var m Messages[int]
	if k := m.Keep(msgs); k != 0 {
		t.Fatalf("kept %d of an empty cache", k)
	}
	for i, s := range []string{",one", ",two", ",three"} {
		if err := m.Add(msgs[i], enc(s)); err != nil {
			t.Fatal(err)
		}
	}
	sent := m.Bytes()
	if string(sent) != ",one,two,three" || m.End(2) != 8 || m.Meta(2) != 6 {
		t.Fatalf("bytes %q end %d meta %d", sent, m.End(2), m.Meta(2))
	}
	// Equal content in a new array is not the same message.
	edited := append([]llm.Message(nil), msgs...)
	edited[1].Content = llm.Text("two")
	if k := m.Keep(edited); k != 1 {
		t.Fatalf("kept %d, want 1", k)
	}
	if err := m.Add(edited[1], enc(",TWO")); err != nil {
		t.Fatal(err)
	}
	if string(sent) != ",one,two,three" {
		t.Fatalf("bytes sent earlier changed to %q", sent)
	}
	if string(m.Bytes()) != ",one,TWO" {
		t.Fatalf("bytes %q", m.Bytes())
	}
	// Appending more of the same history keeps everything.
	if k := m.Keep(append(edited[:2:2], msgs[2])); k != 2 {
		t.Fatalf("kept %d, want 2", k)
	}
}
