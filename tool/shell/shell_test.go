package shell

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/tool"
)

func env(t *testing.T) tool.Env {
	return tool.Env{SessionID: "sess/1", Dir: t.TempDir(), State: &tool.State{}}
}

func runBash(t *testing.T, ctx context.Context, b tool.Tool, e tool.Env, args map[string]any) (tool.Result, Meta) {
	t.Helper()
	raw, _ := json.Marshal(args)
	res, err := b.Run(ctx, tool.Call{ID: "call-1", Arguments: raw, Env: e})
	if err != nil {
		t.Fatalf("Go error: %v", err)
	}
	var m Meta
	if res.Meta != nil {
		if err := json.Unmarshal(res.Meta, &m); err != nil {
			t.Fatalf("meta %s: %v", res.Meta, err)
		}
	}
	return res, m
}

func TestSpec(t *testing.T) {
	b := Bash(Options{})
	if b.Mode() != tool.Exclusive || b.Spec().Name != "bash" {
		t.Fatal("spec/mode")
	}
}

func TestOutputAndExit(t *testing.T) {
	b := Bash(Options{})
	e := env(t)
	res, m := runBash(t, context.Background(), b, e, map[string]any{"command": "echo out; echo err >&2; pwd", "description": "print things"})
	want := "out\nerr\n" + e.Dir + "\n"
	if res.IsError || llm.PlainText(res.Content) != want {
		t.Fatalf("got %+v %q", res, llm.PlainText(res.Content))
	}
	if m.ExitCode == nil || *m.ExitCode != 0 || m.Signal != "" || m.TimedOut || m.Description != "print things" {
		t.Fatalf("meta %+v", m)
	}

	res, m = runBash(t, context.Background(), b, e, map[string]any{"command": "echo partial; exit 3"})
	if !res.IsError || res.Code != CodeExit || llm.PlainText(res.Content) != "partial\n[exit code: 3]\n" {
		t.Fatalf("exit: %+v %q", res, llm.PlainText(res.Content))
	}
	if m.ExitCode == nil || *m.ExitCode != 3 || m.Signal != "" {
		t.Fatalf("meta %+v", m)
	}

	res, m = runBash(t, context.Background(), b, e, map[string]any{"command": "kill -SEGV $$"})
	if !res.IsError || res.Code != CodeSignal || m.ExitCode != nil || m.Signal != "SIGSEGV" ||
		!strings.Contains(llm.PlainText(res.Content), "[killed by signal: SIGSEGV]") {
		t.Fatalf("signal: %+v %+v %q", res, m, llm.PlainText(res.Content))
	}

	res, _ = runBash(t, context.Background(), b, e, map[string]any{"command": "true"})
	if res.IsError || llm.PlainText(res.Content) != "(no output)\n" {
		t.Fatalf("no output: %q", llm.PlainText(res.Content))
	}
}

func TestInvalidArguments(t *testing.T) {
	b := Bash(Options{})
	for _, args := range []map[string]any{{}, {"command": ""}, {"command": "ls", "timeout_ms": 600001}, {"command": "ls", "timeout_ms": 0}, {"command": "ls", "cwd": "/"}} {
		res, _ := runBash(t, context.Background(), b, env(t), args)
		if !res.IsError || res.Code != tool.CodeInvalidArguments {
			t.Errorf("%v: %+v", args, res)
		}
	}
}

func TestSecretsRemoved(t *testing.T) {
	parent := []string{
		"PATH=" + os.Getenv("PATH"),
		"OPENAI_API_KEY=sk-openai", "DEEPSEEK_API_KEY=sk-ds", "ANTHROPIC_API_KEY=sk-ant",
		"GITHUB_TOKEN=ghp", "MY_CUSTOM=custom-secret", "PLAIN=visible",
	}
	b := Bash(Options{Environ: parent, Env: tool.EnvPolicy{Drop: []string{"MY_CUSTOM"}}})
	res, _ := runBash(t, context.Background(), b, env(t), map[string]any{
		"command": `echo "o=$OPENAI_API_KEY d=$DEEPSEEK_API_KEY a=$ANTHROPIC_API_KEY g=$GITHUB_TOKEN c=$MY_CUSTOM p=$PLAIN"; env | grep -c sk- || true`,
	})
	if got := llm.PlainText(res.Content); got != "o= d= a= g= c= p=visible\n0\n" {
		t.Fatalf("got %q", got)
	}
	// Without the filter, the same command would print them: the test can fail.
	t.Setenv("OPENAI_API_KEY", "sk-from-process")
	res, _ = runBash(t, context.Background(), Bash(Options{}), env(t), map[string]any{"command": `echo "o=$OPENAI_API_KEY"`})
	if got := llm.PlainText(res.Content); got != "o=\n" {
		t.Fatalf("process env leaked: %q", got)
	}
}

func TestOutputCapAndSpill(t *testing.T) {
	tmp := t.TempDir()
	b := Bash(Options{TempDir: tmp, MaxOutput: 1000})
	res, m := runBash(t, context.Background(), b, env(t), map[string]any{"command": "for i in $(seq 1 2000); do echo line $i; done"})
	out := llm.PlainText(res.Content)
	if res.IsError || !m.Truncated || m.SpillPath == "" || m.OutputBytes < 15000 {
		t.Fatalf("meta %+v", m)
	}
	if !strings.HasPrefix(out, "line 1\nline 2\n") || !strings.HasSuffix(out, "line 1999\nline 2000\n") {
		t.Fatalf("head/tail: %q ... %q", out[:30], out[len(out)-30:])
	}
	if len(out) > 1400 || !strings.Contains(out, "the full output is in "+m.SpillPath) {
		t.Fatalf("len %d: %q", len(out), out)
	}
	if !strings.HasPrefix(m.SpillPath, filepath.Join(tmp, "rein-sess_1")+string(filepath.Separator)) {
		t.Fatalf("spill path %s", m.SpillPath)
	}
	full, err := os.ReadFile(m.SpillPath)
	if err != nil || int64(len(full)) != m.OutputBytes || !strings.HasPrefix(string(full), "line 1\n") || !strings.HasSuffix(string(full), "line 2000\n") {
		t.Fatalf("spill file: %d bytes, %v", len(full), err)
	}
	for i := 1; i <= 2000; i += 250 {
		if !strings.Contains(string(full), fmt.Sprintf("line %d\n", i)) {
			t.Fatalf("spill misses line %d", i)
		}
	}
}

// A sandboxed command can write the temp directory and learn the session
// id; it plants a symlink at rein-SESSION so that rein (unsandboxed)
// writes the next spill, output the model chose, into a directory of its
// choice (a ~/.bashrc.d, say). rein refuses.
func TestSpillRefusesPlantedLink(t *testing.T) {
	for _, scratch := range []bool{false, true} {
		tmp, target := t.TempDir(), t.TempDir()
		b := Bash(Options{TempDir: tmp, MaxOutput: 1000})
		e := env(t)
		dir := filepath.Join(tmp, "rein-sess_1")
		if scratch { // the session's scratch directory under the store
			e.ScratchDir = filepath.Join(t.TempDir(), "s1.scratch")
			dir = e.ScratchDir
		}
		plant := "ln -s " + target + " " + dir
		if res, _ := runBash(t, context.Background(), b, e, map[string]any{"command": plant}); res.IsError {
			t.Fatalf("plant: %s", llm.PlainText(res.Content))
		}
		res, m := runBash(t, context.Background(), b, e, map[string]any{"command": "echo 'touch ~/pwned #'; head -c 4000 /dev/zero | tr '\\0' A"})
		if !m.Truncated || m.SpillPath != "" || !strings.Contains(llm.PlainText(res.Content), "could not be saved") {
			t.Errorf("scratch %v: meta %+v: %s", scratch, m, llm.PlainText(res.Content))
		}
		if ents, _ := os.ReadDir(target); len(ents) != 0 {
			t.Fatalf("scratch %v: rein wrote %d files through the planted link", scratch, len(ents))
		}
	}
}

func TestOutputCapOneBigWrite(t *testing.T) {
	b := Bash(Options{TempDir: t.TempDir(), MaxOutput: 1000})
	res, m := runBash(t, context.Background(), b, env(t), map[string]any{"command": "printf 'a%04998dz' 0"})
	out := llm.PlainText(res.Content)
	if !m.Truncated || m.OutputBytes != 5000 || !strings.HasPrefix(out, "a000") || !strings.HasSuffix(out, "000z\n") {
		t.Fatalf("meta %+v out %q", m, out)
	}
	if !strings.Contains(out, "[... 4000 bytes of 5000 omitted;") {
		t.Fatalf("out %q", out)
	}
	if full, err := os.ReadFile(m.SpillPath); err != nil || len(full) != 5000 {
		t.Fatalf("spill %d %v", len(full), err)
	}
}

// pidsGone waits until none of the pids is a live process (zombies count
// as gone: nothing runs).
func pidsGone(t *testing.T, pids []int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for _, pid := range pids {
		for {
			stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			alive := syscall.Kill(pid, 0) == nil
			if err == nil {
				if f := strings.Fields(string(stat)); len(f) > 2 && f[2] == "Z" {
					alive = false
				}
			}
			if !alive {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("process %d still running", pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func readPids(t *testing.T, p string, n int) []int {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		b, _ := os.ReadFile(p)
		f := strings.Fields(string(b))
		if len(f) >= n {
			var pids []int
			for _, s := range f {
				pid, err := strconv.Atoi(s)
				if err != nil {
					t.Fatal(err)
				}
				pids = append(pids, pid)
			}
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid file %q", b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// spawn starts two sleeping children and a grandchild, writes their pids,
// then waits. One child ignores SIGTERM and does not hold the output pipe,
// so only the SIGKILL to the whole group ends it.
const spawn = `sleep 30 & echo $! >> pids
(trap '' TERM; exec sleep 31) >/dev/null 2>&1 & echo $! >> pids
bash -c 'sleep 32 & echo $! >> pids; wait' &
echo started; wait`

func TestTimeoutKillsProcessGroup(t *testing.T) {
	e := env(t)
	b := Bash(Options{KillGrace: 200 * time.Millisecond})
	start := time.Now()
	res, m := runBash(t, context.Background(), b, e, map[string]any{"command": spawn, "timeout_ms": 500})
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("took %v", d)
	}
	if !res.IsError || res.Code != tool.CodeTimeout || !m.TimedOut || m.Cancelled {
		t.Fatalf("result %+v meta %+v", res, m)
	}
	out := llm.PlainText(res.Content)
	if !strings.HasPrefix(out, "started\n") || !strings.Contains(out, "[timed out after 500ms; the command and its child processes were killed]") {
		t.Fatalf("out %q", out)
	}
	pidsGone(t, readPids(t, filepath.Join(e.Dir, "pids"), 3))
}

func TestCancelKillsProcessGroup(t *testing.T) {
	e := env(t)
	b := Bash(Options{KillGrace: 200 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		readPids(t, filepath.Join(e.Dir, "pids"), 3)
		cancel()
	}()
	res, m := runBash(t, ctx, b, e, map[string]any{"command": spawn})
	if !res.IsError || res.Code != tool.CodeAborted || !m.Cancelled || m.TimedOut {
		t.Fatalf("result %+v meta %+v", res, m)
	}
	pidsGone(t, readPids(t, filepath.Join(e.Dir, "pids"), 3))
}

func TestBackgroundHoldingOutputIsKilled(t *testing.T) {
	e := env(t)
	b := Bash(Options{})
	start := time.Now()
	res, m := runBash(t, context.Background(), b, e, map[string]any{"command": "sleep 30 & echo $! > pid; echo done"})
	if time.Since(start) > 3*time.Second {
		t.Fatal("waited for the background process")
	}
	if res.IsError || !m.Background || !strings.HasPrefix(llm.PlainText(res.Content), "done\n") {
		t.Fatalf("%+v %+v", res, m)
	}
	pidsGone(t, readPids(t, filepath.Join(e.Dir, "pid"), 1))

	// One whose output goes elsewhere survives the call.
	res, m = runBash(t, context.Background(), b, e, map[string]any{"command": "sleep 30 > /dev/null 2>&1 & echo $! > pid2"})
	if res.IsError || m.Background {
		t.Fatalf("%+v %+v", res, m)
	}
	pid := readPids(t, filepath.Join(e.Dir, "pid2"), 1)[0]
	if syscall.Kill(pid, 0) != nil {
		t.Fatal("detached background process was killed")
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

func TestStartFailure(t *testing.T) {
	e := env(t)
	e.Dir = filepath.Join(e.Dir, "missing")
	res, _ := runBash(t, context.Background(), Bash(Options{}), e, map[string]any{"command": "true"})
	if !res.IsError || res.Code != tool.CodeFailed {
		t.Fatalf("%+v", res)
	}
}

// With a session scratch directory (tool.Env.ScratchDir, removed with the
// session), the spill file goes there, not to TempDir.
func TestSpillToScratchDir(t *testing.T) {
	tmp, scratch := t.TempDir(), filepath.Join(t.TempDir(), "s.scratch")
	e := env(t)
	e.ScratchDir = scratch
	_, m := runBash(t, context.Background(), Bash(Options{TempDir: tmp, MaxOutput: 1000}), e, map[string]any{"command": "seq 1 2000"})
	if !m.Truncated || !strings.HasPrefix(m.SpillPath, scratch+string(filepath.Separator)) {
		t.Fatalf("spill path %q, want one in %s", m.SpillPath, scratch)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("TempDir used: %v", ents)
	}
}
