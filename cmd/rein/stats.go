package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/reinhq/rein/llm/catalog"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
)

// sessionStats are a session's model requests and prompt caching, read
// from its log: the usage of every response (assistant/message) and the
// prefix breaks its request/headers record.
type sessionStats struct {
	ID string `json:"id"`
	// Requests counts the responses recorded (interrupted ones included;
	// an attempt that failed and was retried leaves none).
	Requests   int     `json:"requests"`
	Input      int     `json:"inputTokens"`
	CacheRead  int     `json:"cacheReadTokens"`
	CacheWrite int     `json:"cacheWriteTokens"`
	Output     int     `json:"outputTokens"`
	ReadShare  float64 `json:"cacheReadShare"`
	// CostUSD is the estimate at catalog list prices, when every model
	// the session used has one.
	CostUSD *float64      `json:"costUSD,omitempty"`
	Models  []*modelStats `json:"models"`
	Breaks  []*cacheBreak `json:"breaks"`
}

// modelStats is one model's share of the session.
type modelStats struct {
	Model      string   `json:"model"`
	Requests   int      `json:"requests"`
	Input      int      `json:"inputTokens"`
	CacheRead  int      `json:"cacheReadTokens"`
	CacheWrite int      `json:"cacheWriteTokens"`
	Output     int      `json:"outputTokens"`
	CostUSD    *float64 `json:"costUSD,omitempty"`
	price      catalog.Price
}

// cacheBreak is one point where the request did not repeat the previous
// one ahead of its new messages.
type cacheBreak struct {
	Seq      int64  `json:"seq"`
	Turn     int    `json:"turn"`
	Step     int    `json:"step"`
	Model    string `json:"model"`
	Cause    string `json:"cause"`
	Messages int    `json:"messagesKept"`
	Bytes    int64  `json:"bytesKept,omitempty"`
	// LostTokens estimates the prompt tokens the next response paid in
	// full that the cache would otherwise have served: those of the
	// previous prompt (at most the new one) that were not read from the
	// cache. Unknown without a previous and a next response.
	LostTokens *int     `json:"lostTokens,omitempty"`
	CostUSD    *float64 `json:"costUSD,omitempty"`
}

// collectStats reads session id's stats, streaming its log. priceOf gives a
// "provider:model" spec's price (zero when unknown).
func collectStats(ctx context.Context, st store.Store, id string, priceOf func(spec string) catalog.Price) (*sessionStats, error) {
	s := &sessionStats{ID: id, Models: []*modelStats{}, Breaks: []*cacheBreak{}}
	byModel := map[string]*modelStats{}
	model := ""
	var pending *cacheBreak // waiting for the response that pays for it
	prevInput := 0
	_, err := store.Stream(ctx, st, id, store.StreamOptions{SkipChunks: true}, func(ev session.Event, decoded session.Payload) error {
		switch ev.Type {
		case session.TypeRequestHeader:
			p, err := ev.Decode()
			if err != nil {
				return err
			}
			h := p.(*session.RequestHeader)
			model = h.Model
			if h.Prefix != nil {
				pending = &cacheBreak{Seq: ev.Seq, Turn: h.Turn, Step: h.Step, Model: h.Model, Cause: h.Prefix.Break, Messages: h.Prefix.Messages, Bytes: h.Prefix.Bytes}
				s.Breaks = append(s.Breaks, pending)
			}
		case session.TypeAssistantMessage:
			p := decoded
			if p == nil {
				var err error
				if p, err = ev.Decode(); err != nil {
					return err
				}
			}
			u := p.(*session.AssistantMessage).Usage
			m := byModel[model]
			if m == nil {
				m = &modelStats{Model: model, price: priceOf(model)}
				byModel[model] = m
				s.Models = append(s.Models, m)
			}
			m.Requests++
			m.Input += u.Input
			m.CacheRead += u.CacheRead
			m.CacheWrite += u.CacheWrite
			m.Output += u.Output
			if m.price.Known() {
				c := m.price.Cost(u)
				if m.CostUSD == nil {
					m.CostUSD = new(float64)
				}
				*m.CostUSD += c
			}
			if u.Input == 0 {
				break // no usage reported (an interrupted response)
			}
			if pending != nil && prevInput > 0 {
				lost := max(min(u.Input, prevInput)-u.CacheRead, 0)
				pending.LostTokens = &lost
				if m.price.Known() {
					full := m.price.Input
					if u.CacheWrite > 0 && m.price.CacheWrite > 0 {
						full = m.price.CacheWrite
					}
					c := float64(lost) * (full - m.price.CacheRead) / 1e6
					pending.CostUSD = &c
				}
			}
			pending, prevInput = nil, u.Input
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	priced := true
	for _, m := range s.Models {
		s.Requests += m.Requests
		s.Input += m.Input
		s.CacheRead += m.CacheRead
		s.CacheWrite += m.CacheWrite
		s.Output += m.Output
		if m.CostUSD == nil {
			priced = false
			continue
		}
		if s.CostUSD == nil {
			s.CostUSD = new(float64)
		}
		*s.CostUSD += *m.CostUSD
	}
	if !priced {
		s.CostUSD = nil
	}
	if s.Input > 0 {
		s.ReadShare = float64(s.CacheRead) / float64(s.Input)
	}
	return s, nil
}

// price is a "provider:model" spec's price: the configuration's
// [prices] entry, else the catalog's (zero when unknown).
func (a *app) price(spec string) catalog.Price {
	p, m, ok := strings.Cut(spec, ":")
	if !ok {
		return catalog.Price{}
	}
	return catalog.Lookup(p, m, catalog.Config{Models: a.configuredPrices()}).Price
}

func (a *app) showStats(ctx context.Context, st store.Store, id string, asJSON bool) error {
	s, err := collectStats(ctx, st, id, a.price)
	if err != nil {
		return fmt.Errorf("session %s: %w", id, err)
	}
	if asJSON {
		return printJSON(a.stdout, s)
	}
	return s.render(a.stdout)
}

// render prints the stats for a person.
func (s *sessionStats) render(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "session\t%s\n", s.ID)
	fmt.Fprintf(tw, "requests\t%d\n", s.Requests)
	fmt.Fprintf(tw, "input tokens\t%s, %.1f%% read from the prompt cache", thousands(s.Input), 100*s.ReadShare)
	if s.CacheWrite > 0 {
		fmt.Fprintf(tw, ", %s written to it", thousands(s.CacheWrite))
	}
	fmt.Fprintf(tw, "\noutput tokens\t%s\n", thousands(s.Output))
	if s.CostUSD != nil {
		fmt.Fprintf(tw, "cost\t%s at list prices\n", usd(*s.CostUSD))
	}
	if len(s.Models) > 1 {
		for _, m := range s.Models {
			fmt.Fprintf(tw, "  %s\t%d requests, %s input tokens (%s cached)", m.Model, m.Requests, thousands(m.Input), thousands(m.CacheRead))
			if m.CostUSD != nil {
				fmt.Fprintf(tw, ", %s", usd(*m.CostUSD))
			}
			fmt.Fprintln(tw)
		}
	}
	fmt.Fprintf(tw, "prefix breaks\t%d\n", len(s.Breaks))
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(s.Breaks) == 0 {
		return nil
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  SEQ\tTURN.STEP\tCAUSE\tKEPT\tLOST TOKENS\tCOST")
	for _, b := range s.Breaks {
		lost, cost := "?", "?"
		if b.LostTokens != nil {
			lost = thousands(*b.LostTokens)
		}
		if b.CostUSD != nil {
			cost = usd(*b.CostUSD)
		}
		kept := fmt.Sprintf("%d messages", b.Messages)
		if b.Bytes > 0 {
			kept += fmt.Sprintf(" (%s bytes)", thousands(int(b.Bytes)))
		}
		fmt.Fprintf(tw, "  #%d\t%d.%d\t%s\t%s\t%s\t%s\n", b.Seq, b.Turn, b.Step, b.Cause, kept, lost, cost)
	}
	return tw.Flush()
}

// thousands formats n with thin separators: 1,234,567.
func thousands(n int) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func usd(v float64) string {
	if v < 0.01 && v > 0 {
		return fmt.Sprintf("$%.4f", v)
	}
	return fmt.Sprintf("$%.2f", v)
}
