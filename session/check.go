package session

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/session/internal/wire"
)

// Violation is one broken rule of the session invariant.
type Violation struct {
	Seq  int64
	Rule string // short stable name, e.g. "turn-open", "tool-adjacency"
	Msg  string
}

func (v Violation) String() string {
	return "seq " + strconv.FormatInt(v.Seq, 10) + ": " + v.Rule + ": " + v.Msg
}

// Rule names of Violation.Rule.
const (
	RuleSeq           = "seq"             // seq not contiguous from 0
	RuleTime          = "time"            // time decreased
	RuleDecode        = "decode"          // payload does not decode or has the wrong type
	RuleUnknownType   = "unknown-type"    // unknown type without ignorable
	RuleTurnOpen      = "turn-open"       // turn/start in a turn, turn/end outside one
	RuleTurnNumber    = "turn-number"     // turn numbers not consecutive, or a turn field not the open turn
	RuleStepNesting   = "step-nesting"    // step/start in a step, step/end outside one, turn/end in a step
	RuleStepNumber    = "step-number"     // step numbers not 1, 2, … within the turn, or a step field not the open step
	RuleOutsideTurn   = "outside-turn"    // a turn-only event between turns
	RuleOutsideStep   = "outside-step"    // a step-only event outside a step
	RuleAssistantOnce = "assistant-once"  // a second assistant/message in one step
	RuleChunkSeqs     = "chunk-seqs"      // chunkSeqs not ascending chunks of the step
	RuleMaxTokens     = "max-tokens"      // a max-tokens assistant/message with tool calls
	RuleToolID        = "tool-id"         // empty or duplicate tool call id in one message
	RuleToolAdjacency = "tool-adjacency"  // a user-role event inside a tool batch
	RuleUnknownCall   = "unknown-call"    // tool event for an id the step's assistant message did not call
	RuleToolOrder     = "tool-order"      // tool/call or tool/approval after the result, tool/call twice, result twice
	RuleUnanswered    = "unanswered-call" // step/end or turn/end with a call unanswered
	RuleCompaction    = "compaction"      // unbalanced, nested, mismatched or turn-crossing compaction pair
	RuleReplace       = "replace"         // a summary's replaces breaks the surface-replace rules
)

// Surface-table flags, one byte per seq.
const (
	kSurface  uint8 = 1 << iota // message-producing event
	kShadowed                   // shadowed by a summary
	kChunk                      // assistant/chunk
)

// Per-call flags in a step's tool batch.
const (
	callStarted uint8 = 1 << iota
	callApproved
	callAnswered
)

// Checker is the incremental session-invariant checker (docs/format.md, "Where events may appear"). The zero
// value is the state of an empty log. It is not safe for concurrent use.
//
// Add costs O(size of the event), except a compaction summary, which costs
// O(its replaced range). The state keeps one byte per event, two map
// entries per tool result, and one span per turn and per between-turn
// compaction (for ForkPoint).
type Checker struct {
	turn     int  // last turn opened
	turnOpen bool // turn is open
	step     int  // last step opened in the turn
	stepOpen bool // step is open

	next int64     // next seq
	last time.Time // time of the last event

	// The open step's tool batch.
	asstSeen   bool             // the step has its assistant/message
	asstSeq    int64            // its seq
	calls      map[string]uint8 // its tool call ids → call flags
	pending    int              // calls without a result
	stepChunks []int64          // seqs of the step's chunks, ascending

	// Compaction pair.
	compOpen   bool
	compID     string
	compInTurn bool
	compStart  int64

	// Surface table: kinds[seq] flags; tool pairs for the no-split rule.
	kinds       []uint8
	resultOwner map[int64]int64   // tool/result seq → its assistant/message seq
	ownResults  map[int64][]int64 // assistant/message seq → its tool/result seqs

	// Spans for ForkPoint: every turn and every between-turn compaction
	// (Events unset: the log knows it).
	spans Spans
}

type vlist struct {
	seq int64
	vs  []Violation
}

func (l *vlist) add(rule, format string, args ...any) {
	l.vs = append(l.vs, Violation{Seq: l.seq, Rule: rule, Msg: fmt.Sprintf(format, args...)})
}

// Add checks ev (payload p, already decoded, or nil to have Add decode
// it; nil for unknown ignorable types) against the state. With no
// violation it applies ev and returns nil. With violations it returns them
// all and leaves the state unchanged.
func (c *Checker) Add(ev Event, p Payload) []Violation {
	if p == nil {
		var err error
		if p, err = decodeAny(ev); err != nil {
			return []Violation{{Seq: ev.Seq, Rule: RuleDecode, Msg: err.Error()}}
		}
	}
	if vs := c.check(ev, p); len(vs) > 0 {
		return vs
	}
	c.apply(ev, p)
	return nil
}

// Check runs the rules over a whole log, decoding every payload (chunks
// included), and returns every violation. It applies each event even when
// it violates, so one bad event does not hide later ones. A log may end
// inside a turn or a compaction (a crash tail, see Repair): that is not a
// violation.
func Check(events []Event) []Violation {
	var c Checker
	var out []Violation
	for _, ev := range events {
		p, err := decodeAny(ev)
		if err != nil {
			out = append(out, Violation{Seq: ev.Seq, Rule: RuleDecode, Msg: err.Error()})
		}
		out = append(out, c.check(ev, p)...)
		c.apply(ev, p)
	}
	return out
}

// decodeAny decodes a known type's payload, and validates an unknown
// type's data (nil payload).
func decodeAny(ev Event) (Payload, error) {
	if ev.Type.Known() {
		return ev.Decode()
	}
	if !wire.Valid(ev.Data) {
		return nil, fmt.Errorf("%w: seq %d %s: data is not valid JSON in UTF-8", ErrCorrupt, ev.Seq, ev.Type)
	}
	return nil, nil
}

// check returns the violations of ev without changing c.
func (c *Checker) check(ev Event, p Payload) []Violation {
	l := vlist{seq: ev.Seq}
	if ev.Seq != c.next {
		l.add(RuleSeq, "seq %d, want %d", ev.Seq, c.next)
	}
	if ev.Time.Before(c.last) {
		l.add(RuleTime, "time %s before %s", ev.Time.Format(TimeLayout), c.last.Format(TimeLayout))
	}
	if !ev.Type.Known() {
		if !ev.Ignorable {
			l.add(RuleUnknownType, "unknown type %q not marked ignorable", ev.Type)
		}
		return l.vs
	}
	if p != nil && p.EventType() != ev.Type {
		l.add(RuleDecode, "payload %s for event type %s", p.EventType(), ev.Type)
		return l.vs
	}
	switch ev.Type {
	case TypeTurnStart:
		if c.turnOpen {
			l.add(RuleTurnOpen, "turn/start while turn %d is open", c.turn)
		}
		if d, ok := p.(*TurnStart); ok && d.Turn != c.turn+1 {
			l.add(RuleTurnNumber, "turn/start %d, want %d", d.Turn, c.turn+1)
		}
		if c.compOpen && !c.compInTurn {
			l.add(RuleCompaction, "turn/start inside between-turn compaction %q", c.compID)
		}
	case TypeTurnEnd:
		if !c.turnOpen {
			l.add(RuleTurnOpen, "turn/end with no open turn")
		} else {
			if d, ok := p.(*TurnEnd); ok && d.Turn != c.turn {
				l.add(RuleTurnNumber, "turn/end %d, open turn is %d", d.Turn, c.turn)
			}
			if c.stepOpen {
				l.add(RuleStepNesting, "turn/end while step %d is open", c.step)
			}
			if c.pending > 0 {
				l.add(RuleUnanswered, "turn/end with %d unanswered call(s): %v", c.pending, c.unanswered())
			}
			if c.compOpen {
				l.add(RuleCompaction, "turn/end inside compaction %q", c.compID)
			}
		}
	case TypeStepStart:
		if c.inTurn(&l) {
			if c.stepOpen {
				l.add(RuleStepNesting, "step/start while step %d is open", c.step)
			}
			if d, ok := p.(*StepStart); ok {
				c.turnField(&l, d.Turn)
				if d.Step != c.step+1 {
					l.add(RuleStepNumber, "step/start %d, want %d", d.Step, c.step+1)
				}
			}
		}
	case TypeStepEnd:
		if c.inTurn(&l) {
			if !c.stepOpen {
				l.add(RuleStepNesting, "step/end with no open step")
			} else {
				if d, ok := p.(*StepEnd); ok {
					c.turnField(&l, d.Turn)
					c.stepField(&l, d.Step)
				}
				if c.pending > 0 {
					l.add(RuleUnanswered, "step/end with %d unanswered call(s): %v", c.pending, c.unanswered())
				}
			}
		}
	case TypeUserMessage:
		c.adjacency(&l, "user/message")
		if d, ok := p.(*UserMessage); ok && d.Replaces != nil {
			c.checkReplace(&l, ev.Seq, d.Replaces)
		}
	case TypeSteeringMessage:
		if c.inTurn(&l) {
			if d, ok := p.(*SteeringMessage); ok {
				c.turnField(&l, d.Turn)
			}
		}
		c.adjacency(&l, "steering/message")
	case TypeRequestHeader:
		if c.inStep(&l) {
			if d, ok := p.(*RequestHeader); ok {
				c.turnField(&l, d.Turn)
				c.stepField(&l, d.Step)
			}
		}
	case TypeAssistantChunk:
		if c.inStep(&l) {
			if d, ok := p.(*AssistantChunk); ok {
				c.turnField(&l, d.Turn)
				c.stepField(&l, d.Step)
			}
			if c.asstSeen {
				l.add(RuleAssistantOnce, "assistant/chunk after the step's assistant/message")
			}
		}
	case TypeAssistantMessage:
		if c.inStep(&l) {
			if c.asstSeen {
				l.add(RuleAssistantOnce, "second assistant/message in step %d (first at seq %d)", c.step, c.asstSeq)
			}
			if d, ok := p.(*AssistantMessage); ok {
				c.turnField(&l, d.Turn)
				c.stepField(&l, d.Step)
				c.checkAssistant(&l, d)
			}
		}
	case TypeToolCall, TypeToolApproval, TypeToolResult:
		if c.inStep(&l) {
			turn, step, id := toolCoords(p)
			if p != nil {
				c.turnField(&l, turn)
				c.stepField(&l, step)
				c.checkTool(&l, ev.Type, id)
			}
		}
	case TypeHookResult, TypeSessionTitle:
		// Anywhere.
	case TypeCompactionStart:
		if c.compOpen {
			l.add(RuleCompaction, "compaction/start inside compaction %q", c.compID)
		}
		if d, ok := p.(*CompactionStart); ok {
			c.compTurn(&l, "compaction/start", d.Turn)
		}
	case TypeCompactionEnd:
		if !c.compOpen {
			l.add(RuleCompaction, "compaction/end with no open compaction")
		} else if d, ok := p.(*CompactionEnd); ok {
			if d.ID != c.compID {
				l.add(RuleCompaction, "compaction/end %q, open compaction is %q", d.ID, c.compID)
			}
			c.compTurn(&l, "compaction/end", d.Turn)
		}
	}
	return l.vs
}

func (c *Checker) inTurn(l *vlist) bool {
	if !c.turnOpen {
		l.add(RuleOutsideTurn, "not allowed between turns")
		return false
	}
	return true
}

func (c *Checker) inStep(l *vlist) bool {
	if !c.inTurn(l) {
		return false
	}
	if !c.stepOpen {
		l.add(RuleOutsideStep, "not allowed outside a step")
		return false
	}
	return true
}

func (c *Checker) turnField(l *vlist, turn int) {
	if turn != c.turn {
		l.add(RuleTurnNumber, "turn %d, open turn is %d", turn, c.turn)
	}
}

func (c *Checker) stepField(l *vlist, step int) {
	if step != c.step {
		l.add(RuleStepNumber, "step %d, open step is %d", step, c.step)
	}
}

func (c *Checker) compTurn(l *vlist, what string, turn *int) {
	switch {
	case c.turnOpen && turn == nil:
		l.add(RuleCompaction, "%s with null turn inside turn %d", what, c.turn)
	case c.turnOpen && *turn != c.turn:
		l.add(RuleCompaction, "%s turn %d, open turn is %d", what, *turn, c.turn)
	case !c.turnOpen && turn != nil:
		l.add(RuleCompaction, "%s with turn %d between turns", what, *turn)
	}
}

func (c *Checker) adjacency(l *vlist, what string) {
	if c.pending > 0 {
		l.add(RuleToolAdjacency, "%s inside a tool batch with %d unanswered call(s): %v", what, c.pending, c.unanswered())
	}
}

// unanswered returns the ids of the open batch's unanswered calls, sorted.
func (c *Checker) unanswered() []string {
	var ids []string
	for id, f := range c.calls {
		if f&callAnswered == 0 {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

func (c *Checker) checkAssistant(l *vlist, d *AssistantMessage) {
	if d.Finish == llm.FinishMaxTokens && len(d.ToolCalls) > 0 {
		l.add(RuleMaxTokens, "max-tokens assistant/message carries %d tool call(s)", len(d.ToolCalls))
	}
	seen := make(map[string]bool, len(d.ToolCalls))
	for _, tc := range d.ToolCalls {
		switch {
		case tc.ID == "":
			l.add(RuleToolID, "tool call %q without id", tc.Name)
		case seen[tc.ID]:
			l.add(RuleToolID, "duplicate tool call id %q", tc.ID)
		}
		seen[tc.ID] = true
	}
	prev := int64(-1)
	j := 0 // both ascending: one merge pass, not a search per seq
	for _, s := range d.ChunkSeqs {
		if s <= prev {
			l.add(RuleChunkSeqs, "chunkSeqs not ascending at %d", s)
			return
		}
		prev = s
		for j < len(c.stepChunks) && c.stepChunks[j] < s {
			j++
		}
		if j == len(c.stepChunks) || c.stepChunks[j] != s {
			l.add(RuleChunkSeqs, "chunkSeqs cites %d, not a chunk of this step", s)
			return
		}
	}
}

func toolCoords(p Payload) (turn, step int, id string) {
	switch d := p.(type) {
	case *ToolCall:
		return d.Turn, d.Step, d.CallID
	case *ToolApproval:
		return d.Turn, d.Step, d.CallID
	case *ToolResult:
		return d.Turn, d.Step, d.CallID
	}
	return 0, 0, ""
}

func (c *Checker) checkTool(l *vlist, t Type, id string) {
	f, ok := c.calls[id]
	if !ok {
		l.add(RuleUnknownCall, "%s for call %q, not a call of the step's assistant/message", t, id)
		return
	}
	switch t {
	case TypeToolCall:
		if f&callAnswered != 0 {
			l.add(RuleToolOrder, "tool/call %q after its result", id)
		} else if f&callStarted != 0 {
			l.add(RuleToolOrder, "second tool/call %q", id)
		}
	case TypeToolApproval:
		if f&callAnswered != 0 {
			l.add(RuleToolOrder, "tool/approval %q after its result", id)
		}
	case TypeToolResult:
		if f&callAnswered != 0 {
			l.add(RuleToolOrder, "second tool/result %q", id)
		}
	}
}

func (c *Checker) checkReplace(l *vlist, seq int64, r *Replaces) {
	bad := func(format string, args ...any) { l.add(RuleReplace, format, args...) }
	if !c.compOpen {
		bad("summary outside a compaction pair")
	}
	if len(r.Seqs) == 0 {
		bad("empty seqs")
		return
	}
	if r.Start < 0 || r.Start > r.End || r.End >= seq || r.End >= int64(len(c.kinds)) {
		bad("range %d..%d invalid at seq %d", r.Start, r.End, seq)
		return
	}
	if r.Seqs[0] != r.Start || r.Seqs[len(r.Seqs)-1] != r.End {
		bad("seqs run %d..%d, range is %d..%d", r.Seqs[0], r.Seqs[len(r.Seqs)-1], r.Start, r.End)
		return
	}
	// Every seq listed is an unshadowed surface event, and every
	// unshadowed surface event of the range is listed (contiguous).
	j := 0
	for s := r.Start; s <= r.End; s++ {
		k := c.kinds[s]
		live := k&kSurface != 0 && k&kShadowed == 0
		listed := j < len(r.Seqs) && r.Seqs[j] == s
		if j < len(r.Seqs) && r.Seqs[j] < s {
			bad("seqs not strictly ascending at %d", r.Seqs[j])
			return
		}
		switch {
		case listed && k&kSurface == 0:
			bad("seq %d is not a surface event", s)
		case listed && k&kShadowed != 0:
			bad("seq %d is already shadowed", s)
		case !listed && live:
			bad("surface event %d inside the range is not listed", s)
		}
		if listed {
			j++
		}
	}
	if j != len(r.Seqs) {
		bad("seqs not strictly ascending")
		return
	}
	// Tool call/result pairs are never split.
	in := func(s int64) bool { _, ok := slices.BinarySearch(r.Seqs, s); return ok }
	for _, s := range r.Seqs {
		if res, ok := c.ownResults[s]; ok {
			for _, rs := range res {
				if !in(rs) {
					bad("splits assistant/message %d from its tool/result %d", s, rs)
				}
			}
		}
		if a, ok := c.resultOwner[s]; ok && !in(a) {
			bad("splits tool/result %d from its assistant/message %d", s, a)
		}
	}
}

// apply updates the state with ev. It never fails: for an event that broke
// a rule it does the most plausible thing, so Check can go on.
func (c *Checker) apply(ev Event, p Payload) {
	c.next = ev.Seq + 1
	if ev.Time.After(c.last) {
		c.last = ev.Time
	}
	var kind uint8
	switch d := p.(type) {
	case *TurnStart:
		c.turn, c.turnOpen = d.Turn, true
		c.closeStep()
		c.step = 0
		c.spans.Turns = append(c.spans.Turns, ev.Seq, -1)
	case *TurnEnd:
		c.closeStep()
		c.turnOpen = false
		if n := len(c.spans.Turns); n > 0 && c.spans.Turns[n-1] < 0 {
			c.spans.Turns[n-1] = ev.Seq
		}
		if c.compOpen && c.compInTurn {
			c.compOpen = false
		}
	case *StepStart:
		c.closeStep()
		c.step, c.stepOpen = d.Step, true
	case *StepEnd:
		c.closeStep()
	case *UserMessage:
		kind = kSurface
		if d.Replaces != nil {
			for _, s := range d.Replaces.Seqs {
				if s >= 0 && s < int64(len(c.kinds)) {
					c.kinds[s] |= kShadowed
				}
			}
		}
	case *SteeringMessage:
		kind = kSurface
	case *AssistantMessage:
		kind = kSurface
		if c.stepOpen {
			c.asstSeen, c.asstSeq = true, ev.Seq
			c.calls = make(map[string]uint8, len(d.ToolCalls))
			for _, tc := range d.ToolCalls {
				c.calls[tc.ID] = 0
			}
			c.pending = len(c.calls)
		}
	case *ToolCall:
		if f, ok := c.calls[d.CallID]; ok {
			c.calls[d.CallID] = f | callStarted
		}
	case *ToolApproval:
		if f, ok := c.calls[d.CallID]; ok {
			c.calls[d.CallID] = f | callApproved
		}
	case *ToolResult:
		kind = kSurface
		if f, ok := c.calls[d.CallID]; ok && f&callAnswered == 0 {
			c.calls[d.CallID] = f | callAnswered
			c.pending--
			if c.resultOwner == nil {
				c.resultOwner = map[int64]int64{}
				c.ownResults = map[int64][]int64{}
			}
			c.resultOwner[ev.Seq] = c.asstSeq
			c.ownResults[c.asstSeq] = append(c.ownResults[c.asstSeq], ev.Seq)
		}
	case *CompactionStart:
		c.compOpen, c.compID, c.compInTurn, c.compStart = true, d.ID, c.turnOpen, ev.Seq
		if !c.turnOpen {
			c.spans.Comps = append(c.spans.Comps, ev.Seq, -1)
		}
	case *CompactionEnd:
		if c.compOpen && !c.compInTurn {
			if n := len(c.spans.Comps); n > 0 && c.spans.Comps[n-1] < 0 {
				c.spans.Comps[n-1] = ev.Seq
			}
		}
		c.compOpen = false
	}
	if ev.Type == TypeAssistantChunk {
		kind = kChunk
		if c.stepOpen {
			c.stepChunks = append(c.stepChunks, ev.Seq)
		}
	}
	c.kinds = append(c.kinds, kind)
}

// closeStep forgets the open step's batch.
func (c *Checker) closeStep() {
	c.stepOpen = false
	c.asstSeen = false
	c.calls = nil
	c.pending = 0
	c.stepChunks = c.stepChunks[:0]
}
