package hook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/reinhq/rein/sandbox"
)

// OutputCap is how much of a hook's stdout and of its stderr is kept
// (1 MiB each). The rest is read and discarded, so a hook that prints
// megabytes neither blocks nor fills memory; the outcome says it was cut.
const OutputCap = 1 << 20

// Decisions recorded in hook/result.
const (
	DecPass      = "pass"      // exit 0, no decision, no context
	DecContext   = "context"   // exit 0 with context and no decision
	DecAllow     = "allow"     // permissionDecision allow, or decision approve
	DecAsk       = "ask"       // permissionDecision ask
	DecDeny      = "deny"      // permissionDecision deny
	DecBlock     = "block"     // exit 2, or decision block
	DecStop      = "stop"      // continue: false
	DecError     = "error"     // other exit code, malformed output, could not start
	DecTimeout   = "timeout"   // killed after its timeout
	DecCancelled = "cancelled" // killed because the turn or agent was cancelled
)

// result is one hook run, decoded.
type result struct {
	Hook     *Command
	ExitCode *int
	Duration time.Duration
	// Finished is when the process ended (or was given up on).
	Finished time.Time
	Stdout   string
	Stderr   string
	// StdoutCut and StderrCut report output beyond OutputCap.
	StdoutCut, StderrCut bool

	// Decision is one of the Dec* constants.
	Decision string
	// Reason is the blocking reason (exit 2 stderr, reason,
	// permissionDecisionReason) or, for DecError/DecTimeout, what went
	// wrong.
	Reason string
	// Stop is continue:false, with StopReason.
	Stop       bool
	StopReason string
	// SystemMessage is shown to the user.
	SystemMessage string
	// Contexts are additionalContext or, for UserPromptSubmit and
	// SessionStart, plain stdout.
	Contexts []string
	// UpdatedInput is PreToolUse's hookSpecificOutput.updatedInput (Claude
	// Code shape).
	UpdatedInput json.RawMessage
	// Warnings are non-fatal problems with the output (a mismatched
	// hookEventName, an unknown decision value).
	Warnings []string
}

// capped keeps the first OutputCap bytes written and counts the rest.
type capped struct {
	mu  sync.Mutex
	buf bytes.Buffer
	cut bool
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := OutputCap - c.buf.Len(); room < len(p) {
		c.cut = true
		if room > 0 {
			c.buf.Write(p[:room])
		}
		return len(p), nil
	}
	c.buf.Write(p)
	return len(p), nil
}

func (c *capped) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.ToValidUTF8(c.buf.String(), "\uFFFD")
}

// execHook runs one hook process: sh -c command in dir with env, payload on
// stdin, killed with its whole process group on timeout or when ctx ends.
func execHook(ctx context.Context, h *Command, payload []byte, dir string, env []string, timeout time.Duration, sb *sandbox.Sandbox) *result {
	if h.Timeout > 0 {
		timeout = h.Timeout
	}
	r := &result{Hook: h}
	tctx, cancel := context.WithTimeoutCause(ctx, timeout, errTimeout)
	defer cancel()
	cmd := exec.CommandContext(tctx, "/bin/sh", "-c", h.Command)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdin = bytes.NewReader(payload)
	var stdout, stderr capped
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		// The whole group: a hook's children die with it.
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	// A grandchild that escaped the group and holds the pipes open must
	// not hold the hook forever.
	cmd.WaitDelay = 2 * time.Second
	start := time.Now()
	var err error
	if sb != nil {
		err = sb.Start(cmd)
		if errors.Is(err, sandbox.ErrUnavailable) {
			err = nil // started unconfined; the host has said so
		}
	} else {
		err = cmd.Start()
	}
	if err == nil {
		err = cmd.Wait()
	}
	r.Finished = time.Now()
	r.Duration = r.Finished.Sub(start)
	r.Stdout, r.Stderr = stdout.String(), stderr.String()
	r.StdoutCut, r.StderrCut = stdout.cut, stderr.cut
	switch ps := cmd.ProcessState; {
	case ps != nil && ps.Exited():
		// It exited by itself (even if the deadline passed meanwhile).
		code := ps.ExitCode()
		r.ExitCode = &code
	case tctx.Err() != nil && ctx.Err() != nil:
		r.Decision = DecCancelled
		r.Reason = "cancelled"
	case tctx.Err() != nil:
		r.Decision = DecTimeout
		r.Reason = fmt.Sprintf("timed out after %s", timeout)
	case ps == nil:
		r.Decision = DecError
		r.Reason = fmt.Sprintf("could not start: %v", err)
	default:
		r.Decision = DecError
		r.Reason = fmt.Sprintf("killed by a signal: %v", err)
	}
	if r.Decision == "" && err != nil && !errors.As(err, new(*exec.ExitError)) {
		// exec.ErrWaitDelay and the like: the exit code stands, note it.
		r.Warnings = append(r.Warnings, err.Error())
	}
	return r
}

var errTimeout = errors.New("hook timed out")

// hookOutput is the JSON a hook may print on stdout with exit 0.
type hookOutput struct {
	Continue       *bool   `json:"continue"`
	StopReason     string  `json:"stopReason"`
	SuppressOutput bool    `json:"suppressOutput"`
	SystemMessage  string  `json:"systemMessage"`
	Decision       *string `json:"decision"`
	Reason         string  `json:"reason"`
	Specific       *struct {
		HookEventName            string          `json:"hookEventName"`
		AdditionalContext        *string         `json:"additionalContext"`
		PermissionDecision       string          `json:"permissionDecision"`
		PermissionDecisionReason string          `json:"permissionDecisionReason"`
		UpdatedInput             json.RawMessage `json:"updatedInput"`
	} `json:"hookSpecificOutput"`
}

// decode interprets the exit code and output of a finished run for event
// (Claude Code's contract): exit 2 blocks with stderr as the reason; exit 0
// parses stdout as JSON when it starts with "{", else plain stdout is
// context for UserPromptSubmit and SessionStart; any other exit is a
// non-blocking error.
func (r *result) decode(event string) {
	if r.Decision != "" {
		return
	}
	switch code := *r.ExitCode; code {
	case 2:
		r.Decision = DecBlock
		if event == PreToolUse {
			r.Decision = DecDeny
		}
		r.Reason = strings.TrimSpace(r.Stderr)
		if r.StderrCut {
			r.Reason += fmt.Sprintf("\n[hook stderr cut at %d bytes]", OutputCap)
		}
		return
	case 0:
	default:
		r.Decision = DecError
		r.Reason = fmt.Sprintf("exited with status %d", code)
		if s := strings.TrimSpace(r.Stderr); s != "" {
			r.Reason += ": " + clip(s, 500)
		}
		return
	}
	out := strings.TrimSpace(r.Stdout)
	if !strings.HasPrefix(out, "{") {
		if out != "" && (event == UserPromptSubmit || event == SessionStart) {
			if r.StdoutCut {
				out += fmt.Sprintf("\n[hook output cut at %d bytes]", OutputCap)
			}
			r.Contexts = append(r.Contexts, out)
			r.Decision = DecContext
		} else {
			r.Decision = DecPass
		}
		return
	}
	var o hookOutput
	if err := json.Unmarshal([]byte(out), &o); err != nil {
		r.Decision = DecError
		if r.StdoutCut {
			r.Reason = fmt.Sprintf("JSON output larger than %d bytes; ignored", OutputCap)
		} else {
			r.Reason = fmt.Sprintf("malformed JSON output: %v", err)
		}
		return
	}
	r.SystemMessage = o.SystemMessage
	if o.Continue != nil && !*o.Continue {
		r.Stop = true
		r.StopReason = o.StopReason
	}
	if o.Decision != nil {
		switch *o.Decision {
		case "block":
			r.Decision = DecBlock
			if event == PreToolUse {
				r.Decision = DecDeny
			}
			r.Reason = o.Reason
		case "approve":
			if event == PreToolUse {
				r.Decision = DecAllow
				r.Reason = o.Reason
			}
		case "":
		default:
			r.Warnings = append(r.Warnings, fmt.Sprintf("unknown decision %q ignored (want \"block\" or \"approve\")", *o.Decision))
		}
	}
	if s := o.Specific; s != nil {
		if s.HookEventName != event {
			r.Warnings = append(r.Warnings, fmt.Sprintf("hookSpecificOutput.hookEventName is %q, not %q; its fields are ignored", s.HookEventName, event))
		} else {
			if s.AdditionalContext != nil && strings.TrimSpace(*s.AdditionalContext) != "" {
				r.Contexts = append(r.Contexts, *s.AdditionalContext)
			}
			if event == PreToolUse {
				switch s.PermissionDecision {
				case "allow":
					r.Decision, r.Reason = DecAllow, s.PermissionDecisionReason
				case "deny":
					r.Decision, r.Reason = DecDeny, s.PermissionDecisionReason
				case "ask":
					r.Decision, r.Reason = DecAsk, s.PermissionDecisionReason
				case "":
				default:
					r.Warnings = append(r.Warnings, fmt.Sprintf("unknown permissionDecision %q ignored", s.PermissionDecision))
				}
				if len(s.UpdatedInput) > 0 && string(s.UpdatedInput) != "null" {
					if !strings.HasPrefix(strings.TrimSpace(string(s.UpdatedInput)), "{") {
						r.Warnings = append(r.Warnings, "updatedInput is not a JSON object; ignored")
					} else {
						r.UpdatedInput = s.UpdatedInput
					}
				}
			}
		}
	}
	if r.Decision == "" {
		switch {
		case r.Stop:
			r.Decision = DecStop
		case len(r.Contexts) > 0:
			r.Decision = DecContext
		default:
			r.Decision = DecPass
		}
	}
}

// clip shortens s to at most n bytes on a rune boundary, saying so.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("… [%d bytes]", len(s))
}
