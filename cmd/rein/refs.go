package main

import (
	"context"
	"fmt"
	"io"
	"regexp"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
	"github.com/reinhq/rein/transcript"
)

var refPattern = regexp.MustCompile(`@session:([0-9A-Za-z_-]+)`)

// sessionRefs returns the session ids a prompt mentions as @session:ID, in
// order of first mention.
func sessionRefs(prompt string) []string {
	var out []string
	for _, m := range refPattern.FindAllStringSubmatch(prompt, -1) {
		out = append(out, m[1])
	}
	return out
}

// snapshotRefs loads each referenced session (once; self excluded) and
// returns its visible transcript as an additional context with source
// session-ref:<id>@<seq>, seq being the last event the snapshot holds. Later
// changes to the referenced session do not change the snapshot.
func (a *app) snapshotRefs(ctx context.Context, st store.Store, self string, ids []string) ([]agent.AdditionalContext, error) {
	seen := map[string]bool{self: true}
	var out []agent.AdditionalContext
	for _, ref := range ids {
		id, err := resolveID(ctx, st, ref)
		if err != nil {
			return nil, fmt.Errorf("reference @session:%s: %w", ref, err)
		}
		if seen[id] {
			continue
		}
		seen[id] = true
		loaded, err := st.Load(ctx, id, store.LoadOptions{})
		if err != nil {
			return nil, fmt.Errorf("reference @session:%s: %w", id, err)
		}
		evs := loaded.Log.Events(0)
		text, err := transcript.Text(evs)
		if err != nil {
			return nil, fmt.Errorf("reference @session:%s: %w", id, err)
		}
		last := loaded.Log.Len() - 1
		h := loaded.Log.Header()
		title := h.Title
		if t := loaded.Log.Title(); t != "" {
			title = t
		}
		head := fmt.Sprintf("Transcript of session %s", id)
		if title != "" {
			head += fmt.Sprintf(" (%q)", title)
		}
		head += fmt.Sprintf(", up to event %d:\n\n", last)
		out = append(out, agent.AdditionalContext{
			Content: llm.Text(head + text),
			Source:  session.Source{Kind: session.SourceSessionRef, Name: fmt.Sprintf("%s@%d", id, last)},
		})
	}
	return out, nil
}

func readAll(r io.Reader) ([]byte, error) { return io.ReadAll(r) }
