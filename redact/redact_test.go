package redact

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

const key = "sk-live-0123456789abcdefWXYZ"

func TestMask(t *testing.T) {
	if got := Mask(key); got != "sk-…WXYZ" {
		t.Fatalf("Mask = %q", got)
	}
	if got := Mask("short-secret"); got != "[redacted]" {
		t.Fatalf("Mask(short) = %q", got)
	}
}

func TestString(t *testing.T) {
	r := New(key, "tiny", "   ", "")
	in := "401: Incorrect API key provided: " + key + " (twice: " + key + ")"
	got := r.String(in)
	if strings.Contains(got, key) || strings.Count(got, "sk-…WXYZ") != 2 {
		t.Fatalf("String = %q", got)
	}
	if r.String("tiny stays") != "tiny stays" {
		t.Fatal("a value shorter than MinLen was taken as a secret")
	}
	var nilR *Redactor
	if nilR.String(in) != in || nilR.Active() {
		t.Fatal("nil redactor changed text")
	}
}

func TestLongestFirst(t *testing.T) {
	inner := "abcdefgh12345678"
	outer := "PREFIX" + inner + "SUFFIX"
	r := New(inner, outer)
	got := r.String("x " + outer + " y " + inner)
	if strings.Contains(got, inner) || strings.Contains(got, "PREFIX") {
		t.Fatalf("String = %q", got)
	}
}

func TestBytesKeepsInput(t *testing.T) {
	r := New(key)
	in := []byte(`{"message":"bad key ` + key + `"}`)
	orig := bytes.Clone(in)
	out := r.Bytes(in)
	if bytes.Contains(out, []byte(key)) || !bytes.Equal(in, orig) {
		t.Fatalf("Bytes = %s, input now %s", out, in)
	}
	clean := []byte("nothing here")
	if got := r.Bytes(clean); &got[0] != &clean[0] {
		t.Fatal("clean input was copied")
	}
}

func TestError(t *testing.T) {
	r := New(key)
	base := fmt.Errorf("open %s: %w", key, fs.ErrNotExist)
	err := r.Error(base)
	if strings.Contains(err.Error(), key) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Error = %v", err)
	}
	plain := errors.New("plain")
	if r.Error(plain) != plain || r.Error(nil) != nil {
		t.Fatal("an error without a secret was wrapped")
	}
}

func TestWriter(t *testing.T) {
	r := New()
	var buf bytes.Buffer
	w := r.Writer(&buf)
	r.Add(key) // added after the writer was made: still used
	line := "echoed: " + key + "\n"
	n, err := w.Write([]byte(line))
	if err != nil || n != len(line) {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if strings.Contains(buf.String(), key) || !strings.Contains(buf.String(), "sk-…WXYZ") {
		t.Fatalf("wrote %q", buf.String())
	}
}

func TestHandler(t *testing.T) {
	r := New(key)
	var buf bytes.Buffer
	log := slog.New(r.Handler(slog.NewTextHandler(&buf, nil))).With("k", key)
	log.Warn("request failed: "+key, "err", errors.New("echo "+key), "body", []byte(key),
		slog.Group("g", "v", key), "n", 3)
	out := buf.String()
	if strings.Contains(out, key) {
		t.Fatalf("log line holds the key: %s", out)
	}
	if strings.Count(out, "sk-…WXYZ") != 5 || !strings.Contains(out, "n=3") {
		t.Fatalf("log line: %s", out)
	}
}

func TestConcurrentAdd(t *testing.T) {
	r := New()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			v := fmt.Sprintf("secret-value-%02d-xxxxxxxx", i)
			r.Add(v)
			_ = r.String(v)
		})
	}
	wg.Wait()
	for i := range 8 {
		v := fmt.Sprintf("secret-value-%02d-xxxxxxxx", i)
		if r.String(v) == v {
			t.Fatalf("%s lost by a concurrent Add", v)
		}
	}
}
