package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestStreamJSONGolden runs one turn with a tool call and a stream that
// breaks and is retried, in stream-json, and compares the output with
// testdata/streamjson.golden: the schema documented in docs/cli.md.
//
// Durable lines, live agent events, and deltas with retry markers come
// from three goroutines, so their interleaving varies; each group keeps
// its own order, and the golden file lists them group by group between the
// init line (first) and the result line (last). Ids, times, durations, the
// version and the directory are replaced by placeholders; a request/header
// shows its tool names and not their schemas.
func TestStreamJSONGolden(t *testing.T) {
	path, err := filepath.Abs(filepath.Join("testdata", "streamjson.golden"))
	if err != nil {
		t.Fatal(err)
	}
	// The user's home beside the workspace, not at it (a home directory is
	// no writable workspace).
	dir, home := t.TempDir(), t.TempDir()
	t.Setenv("REIN_HOME", filepath.Join(home, ".rein-home"))
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	t.Setenv("HOME", home)
	t.Chdir(dir)
	for name, text := range map[string]string{
		"notes.txt": "buy milk\n",
		filepath.Join(home, ".config/rein/config.toml"): "[prices.\"scripted:s.json\"]\ninput = 2\noutput = 10\n",
		"s.json": `{"calls": [
  {"expect": {"lastUser": "what do my notes say?"},
   "reply": {"text": ["Reading."], "toolCalls": [{"id": "c1", "name": "read", "arguments": {"file_path": "notes.txt"}}], "usage": {"input": 100, "output": 10}}},
  {"reply": {"text": ["They s"]}, "error": {"code": "network", "message": "connection reset"}},
  {"expect": {"contains": ["buy milk"]}, "reply": {"text": ["They say: ", "buy milk."], "usage": {"input": 120, "output": 6}}}
]}`,
	} {
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var stdout, stderr bytes.Buffer
	// No --context: where the title goes (header or session/title event)
	// would then depend on whether the context's flush finished before
	// admission.
	code := Main([]string{"run", "--model", "scripted:s.json", "--output", "stream-json", "what do my notes say?"},
		strings.NewReader(""), &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	if !regexp.MustCompile(`(?m)^session [0-9A-Z]{26} · 220 in · 16 out · \$0\.0006$`).MatchString(stderr.String()) {
		t.Errorf("stderr does not end with the session line and its cost:\n%s", stderr.String())
	}
	got := normalizeStream(t, stdout.String(), dir)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("stream-json differs from %s:\n--- want\n%s--- got\n%s", path, want, got)
	}
}

var (
	ulidRe     = regexp.MustCompile(`\b[0-9A-HJKMNP-TV-Z]{26}\b`)
	timeRe     = regexp.MustCompile(`"time":"[^"]+"`)
	durationRe = regexp.MustCompile(`"(durationMs|waitMs)":\d+`)
	versionRe  = regexp.MustCompile(`"version":"[^"]+"`)
)

// normalizeStream checks the order of the stream's groups and prints them
// one after the other with placeholders for what varies between runs.
func normalizeStream(t *testing.T, out, dir string) string {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	ids := map[string]string{}
	norm := func(s string) string {
		s = strings.ReplaceAll(s, dir, "$WORK")
		s = timeRe.ReplaceAllString(s, `"time":"T"`)
		s = durationRe.ReplaceAllString(s, `"$1":0`)
		s = versionRe.ReplaceAllString(s, `"version":"V"`)
		return ulidRe.ReplaceAllStringFunc(s, func(id string) string {
			if ids[id] == "" {
				ids[id] = fmt.Sprintf("ID%d", len(ids)+1)
			}
			return ids[id]
		})
	}
	var durable, deltas, live []string
	for i, l := range lines {
		var head struct {
			Type string `json:"type"`
			Live bool   `json:"live"`
			Seq  *int64 `json:"seq"`
		}
		if err := json.Unmarshal([]byte(l), &head); err != nil {
			t.Fatalf("line %d is not JSON: %v\n%s", i+1, err, l)
		}
		switch {
		case i == 0 && head.Type != "init":
			t.Fatalf("first line is %q, want init", head.Type)
		case i == len(lines)-1 && head.Type != "result":
			t.Fatalf("last line is %q, want result", head.Type)
		case head.Type == "init" || head.Type == "result":
			if i != 0 && i != len(lines)-1 {
				t.Fatalf("line %d is %s, in the middle", i+1, head.Type)
			}
		case !head.Live:
			if head.Seq == nil || !strings.Contains(head.Type, "/") {
				t.Fatalf("line %d is neither live nor a log line: %s", i+1, l)
			}
			durable = append(durable, shortHeader(t, l))
		case head.Type == "agent/delta" || head.Type == "agent/retry":
			deltas = append(deltas, l)
		default:
			live = append(live, l)
		}
	}
	var b strings.Builder
	section := func(title string, ls []string) {
		fmt.Fprintf(&b, "# %s\n", title)
		for _, l := range ls {
			b.WriteString(norm(l))
			b.WriteByte('\n')
		}
	}
	section("init", lines[:1])
	section("durable events, as their log lines, once durable", durable)
	section("live: deltas and retry markers, in order", deltas)
	section("live: agent events, in order", live)
	section("result", lines[len(lines)-1:])
	return b.String()
}

// shortHeader replaces a request/header's system prompt and tool schemas
// by a placeholder and the tool names (they change with every tool
// description), keeping the field order.
func shortHeader(t *testing.T, l string) string {
	if !strings.Contains(l, `"type":"request/header"`) {
		return l
	}
	var ev struct{ Data json.RawMessage }
	var h struct {
		Turn   int             `json:"turn"`
		Step   int             `json:"step"`
		Reason string          `json:"reason"`
		Model  string          `json:"model"`
		System string          `json:"system"`
		Tools  []any           `json:"tools"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal([]byte(l), &ev) != nil || json.Unmarshal(ev.Data, &h) != nil {
		t.Fatalf("bad request/header line: %s", l)
	}
	for i, tool := range h.Tools {
		h.Tools[i] = tool.(map[string]any)["name"]
	}
	h.System = "SYSTEM"
	d, _ := json.Marshal(h)
	return strings.Replace(l, string(ev.Data), string(d), 1)
}
