package session

import (
	"fmt"
	"strings"

	"github.com/reinhq/rein/llm"
)

// Result codes of synthetic tool results written by crash repair.
const (
	CodeOutcomeUnknown = "outcome-unknown"
	CodeNotRun         = "not-run"
)

// Repair closes what a crash left open (docs/semantics.md, "Persistence") by
// appending closers to l at l.LastTime(), and returns the added events
// (none for a log that needs no repair).
//
// When the final turn is open it appends, in order: an interrupted
// assistant/message with the text and reasoning received so far, when the
// open step has chunks but no assistant/message; for every unanswered call
// of the step's assistant/message, in its order, a tool/result with code
// outcome-unknown when a tool/call was recorded, or, for a call that never
// started, a tool/call (the model's arguments, as the agent writes for a
// call a cancel settles) and a tool/result with code not-run;
// compaction/end{error: interrupted} for an open
// compaction and step/end for an open step (innermost first); and
// turn/end{interrupted}. Events after the last turn/end are committed
// history and stay as they are; only a between-turn compaction left open
// is closed, since no later turn could start otherwise. Truncating a torn
// tail is the store's job.
func Repair(l *Log) ([]Event, error) {
	c := &l.checker
	var added []Event
	add := func(p Payload) error {
		ev, err := l.Append(l.LastTime(), p)
		if err != nil {
			return fmt.Errorf("session: repair: %w", err)
		}
		added = append(added, ev)
		return nil
	}
	if !c.turnOpen {
		if c.compOpen {
			if err := add(compactionEnd(l, nil)); err != nil {
				return added, err
			}
		}
		return added, nil
	}
	turn := c.turn
	stepStart := int64(-1)
	if c.stepOpen {
		stepStart = lastOfType(l, TypeStepStart)
		if !c.asstSeen {
			if msg := interruptedMessage(l, stepStart, turn, c.step); msg != nil {
				if err := add(msg); err != nil {
					return added, err
				}
			}
		}
		if c.pending > 0 {
			am, err := l.Event(c.asstSeq).Decode()
			if err != nil {
				return added, fmt.Errorf("session: repair: %w", err)
			}
			for _, tc := range am.(*AssistantMessage).ToolCalls {
				f, ok := c.calls[tc.ID]
				if !ok || f&callAnswered != 0 {
					continue
				}
				started := f&callStarted != 0
				if !started {
					if err := add(&ToolCall{Turn: turn, Step: c.step, CallID: tc.ID, Name: tc.Name, Arguments: tc.Arguments}); err != nil {
						return added, err
					}
				}
				if err := add(syntheticResult(turn, c.step, tc, started)); err != nil {
					return added, err
				}
			}
		}
	}
	// Close the innermost of (compaction, step) first.
	closeComp := func() error {
		if !c.compOpen {
			return nil
		}
		t := turn
		return add(compactionEnd(l, &t))
	}
	if c.compOpen && c.compStart > stepStart {
		if err := closeComp(); err != nil {
			return added, err
		}
	}
	if c.stepOpen {
		if err := add(&StepEnd{Turn: turn, Step: c.step}); err != nil {
			return added, err
		}
	}
	if err := closeComp(); err != nil {
		return added, err
	}
	if err := add(&TurnEnd{Turn: turn, Reason: Reason{Kind: ReasonInterrupted}}); err != nil {
		return added, err
	}
	return added, nil
}

// lastOfType returns the seq of the last event of type t, or -1.
func lastOfType(l *Log, t Type) int64 {
	for s := l.Len() - 1; s >= l.events.base; s-- {
		if l.Event(s).Type == t {
			return s
		}
	}
	return -1
}

// interruptedMessage builds the assistant/message of a stream cut by the
// crash from the step's last run of chunks (the last attempt: an earlier,
// failed attempt is separated from it by other events). It returns nil
// when no chunk arrived.
func interruptedMessage(l *Log, stepStart int64, turn, step int) *AssistantMessage {
	from := l.Len()
	for from > stepStart+1 && l.Event(from-1).Type == TypeAssistantChunk {
		from--
	}
	if from == l.Len() {
		return nil
	}
	var text, reasoning strings.Builder
	var sig string
	seqs := make([]int64, 0, l.Len()-from)
	for s := from; s < l.Len(); s++ {
		seqs = append(seqs, s)
		p, err := l.Event(s).Decode()
		if err != nil {
			continue // a chunk that does not decode adds nothing
		}
		d := p.(*AssistantChunk).Delta
		text.WriteString(d.Text)
		reasoning.WriteString(d.Reasoning)
		if d.Signature != "" {
			sig = d.Signature
		}
	}
	content := []llm.Part{}
	if reasoning.Len() > 0 || sig != "" {
		content = append(content, llm.Part{Type: llm.PartReasoning, Text: reasoning.String(), Signature: sig})
	}
	if text.Len() > 0 {
		content = append(content, llm.Part{Type: llm.PartText, Text: text.String()})
	}
	return &AssistantMessage{
		Turn: turn, Step: step, Content: content, ToolCalls: []llm.ToolCall{},
		Finish: llm.FinishError, ChunkSeqs: seqs, Interrupted: true,
	}
}

func syntheticResult(turn, step int, tc llm.ToolCall, started bool) *ToolResult {
	r := &ToolResult{Turn: turn, Step: step, CallID: tc.ID, IsError: true}
	if started {
		r.Code = CodeOutcomeUnknown
		r.Content = llm.Text(fmt.Sprintf("The session was interrupted while the %s tool call was running; its outcome is unknown. Check the current state before relying on it or running it again.", tc.Name))
	} else {
		r.Code = CodeNotRun
		r.Content = llm.Text(fmt.Sprintf("The %s tool call was not run: the session was interrupted before it started.", tc.Name))
	}
	return r
}

// compactionEnd closes the open compaction with error "interrupted".
func compactionEnd(l *Log, turn *int) *CompactionEnd {
	end := &CompactionEnd{Turn: turn, ID: l.checker.compID, Error: "interrupted"}
	if p, err := l.Event(l.checker.compStart).Decode(); err == nil {
		end.Reason = p.(*CompactionStart).Reason
	}
	return end
}
