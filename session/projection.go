package session

import (
	"slices"
	"sort"

	"github.com/reinhq/rein/llm"
)

// Projection is the incremental derivation of model messages from the log
// (docs/semantics.md, "The model's view of the log"): user/message and steering/message become user messages,
// assistant/message an assistant message (skipped when it has neither
// content nor tool calls), tool/result a tool message. A compaction summary
// (a user/message with Replaces) removes the messages of the events it
// shadows and takes the place of the first of them.
//
// Add costs O(size of the event); only a summary costs O(shadowed messages)
// plus a memory move.
type Projection struct {
	msgs []llm.Message
	// seqs[i] is the seq of the event msgs[i] came from.
	seqs []int64
	// keys[i] orders msgs[i] in surface order: the seq for ordinary
	// messages, the key of the first shadowed message for a summary. keys
	// is sorted.
	keys []int64
	// summaryKey maps a summary's seq to its key, so a later compaction
	// can find it.
	summaryKey map[int64]int64
}

// Messages returns the current projection. The slice is clipped, so an
// append by the caller cannot write into the projection; callers must not
// modify its elements.
func (p *Projection) Messages() []llm.Message { return slices.Clip(p.msgs) }

// Seqs returns the seq each message of Messages came from.
func (p *Projection) Seqs() []int64 { return slices.Clip(p.seqs) }

// Len returns the number of messages.
func (p *Projection) Len() int { return len(p.msgs) }

// Add projects the event seq with payload pl (nil for types that project
// nothing).
func (p *Projection) Add(seq int64, pl Payload) {
	switch d := pl.(type) {
	case *UserMessage:
		m := llm.Message{Role: llm.RoleUser, Content: d.Content}
		if d.Replaces != nil {
			p.replace(seq, d.Replaces, m)
			return
		}
		p.push(seq, seq, m)
	case *SteeringMessage:
		p.push(seq, seq, llm.Message{Role: llm.RoleUser, Content: d.Content})
	case *AssistantMessage:
		if len(d.Content) == 0 && len(d.ToolCalls) == 0 {
			return
		}
		p.push(seq, seq, llm.Message{Role: llm.RoleAssistant, Content: d.Content, ToolCalls: d.ToolCalls})
	case *ToolResult:
		p.push(seq, seq, llm.Message{Role: llm.RoleTool, ToolCallID: d.CallID, Content: d.Content, IsError: d.IsError})
	}
}

func (p *Projection) push(seq, key int64, m llm.Message) {
	p.msgs = append(p.msgs, m)
	p.seqs = append(p.seqs, seq)
	p.keys = append(p.keys, key)
}

func (p *Projection) keyOf(seq int64) int64 {
	if k, ok := p.summaryKey[seq]; ok {
		return k
	}
	return seq
}

func (p *Projection) replace(seq int64, r *Replaces, m llm.Message) {
	if len(r.Seqs) == 0 {
		p.push(seq, seq, m)
		return
	}
	shadow := make(map[int64]bool, len(r.Seqs))
	lo, hi := p.keyOf(r.Seqs[0]), p.keyOf(r.Seqs[0])
	for _, s := range r.Seqs {
		shadow[s] = true
		k := p.keyOf(s)
		lo, hi = min(lo, k), max(hi, k)
	}
	first := sort.Search(len(p.keys), func(i int) bool { return p.keys[i] >= lo })
	end := first
	for end < len(p.keys) && p.keys[end] <= hi {
		end++
	}
	// Build fresh arrays: slices handed out by Messages must never change.
	n := len(p.msgs) + 1
	msgs := make([]llm.Message, 0, n)
	seqs := make([]int64, 0, n)
	keys := make([]int64, 0, n)
	msgs, seqs, keys = append(msgs, p.msgs[:first]...), append(seqs, p.seqs[:first]...), append(keys, p.keys[:first]...)
	placed := false
	place := func(k int64) {
		if len(keys) > 0 {
			k = max(k, keys[len(keys)-1])
		}
		msgs, seqs, keys = append(msgs, m), append(seqs, seq), append(keys, k)
		if p.summaryKey == nil {
			p.summaryKey = map[int64]int64{}
		}
		p.summaryKey[seq] = k
		placed = true
	}
	for i := first; i < end; i++ {
		if shadow[p.seqs[i]] {
			delete(p.summaryKey, p.seqs[i])
			if !placed {
				place(p.keys[i])
			}
			continue
		}
		msgs, seqs, keys = append(msgs, p.msgs[i]), append(seqs, p.seqs[i]), append(keys, p.keys[i])
	}
	if !placed {
		place(lo)
	}
	p.msgs = append(msgs, p.msgs[end:]...)
	p.seqs = append(seqs, p.seqs[end:]...)
	p.keys = append(keys, p.keys[end:]...)
}
