package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
	"github.com/reinhq/rein/store/jsonl"
	"github.com/reinhq/rein/transcript"
)

func (a *app) sessionsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "sessions",
		Aliases: []string{"session"},
		Short:   "List, show, fork, search, compact, repair, export, import and remove sessions",
		Long: `Sessions are stored as JSONL files under $REIN_HOME (else
$XDG_DATA_HOME/rein, else ~/.local/share/rein), one file per session, or in
the store that config.toml's store, REIN_STORE or --store names (a directory,
or a postgres:// URL). 'export' and 'import' move sessions between stores.`,
	}
	cmd.AddCommand(a.sessionsLs(), a.sessionsShow(), a.sessionsFork(), a.sessionsRm(),
		a.sessionsSearch(), a.sessionsCompact(), a.sessionsRepair(), a.sessionsExport(), a.sessionsImport())
	return cmd
}

func (a *app) sessionsLs() *cobra.Command {
	var asJSON bool
	var page pageFlags
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List sessions, most recently updated first",
		Long: `Ls prints a table of sessions: id, title, directory, turns and last update,
most recently updated first. --json prints a JSON array of the same
summaries (id, title, cwd, parent, createdAt, updatedAt, events, turns).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := a.openStore()
			if err != nil {
				return err
			}
			infos, next, err := a.listSessions(cmd.Context(), st, page)
			if err != nil {
				return err
			}
			defer a.nextPage(next)
			if asJSON {
				type row struct {
					ID        string    `json:"id"`
					Title     string    `json:"title,omitempty"`
					Cwd       string    `json:"cwd"`
					Parent    string    `json:"parent,omitempty"`
					CreatedAt time.Time `json:"createdAt"`
					UpdatedAt time.Time `json:"updatedAt"`
					Events    int64     `json:"events"`
					Turns     int       `json:"turns"`
				}
				rows := []row{}
				for _, in := range infos {
					rows = append(rows, row{in.ID, in.Title, in.Cwd, in.Parent, in.CreatedAt, in.UpdatedAt, in.Events, in.Turns})
				}
				return printJSON(a.stdout, rows)
			}
			if len(infos) == 0 {
				fmt.Fprintf(a.stdout, "no sessions in %s\n", a.storeName)
				return nil
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tTITLE\tDIRECTORY\tTURNS\tUPDATED")
			for _, in := range infos {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", in.ID, cutRunes(oneLine(in.Title), 40), a.shortDir(in.Cwd), in.Turns, ago(in.UpdatedAt))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	page.add(cmd, "sessions")
	return cmd
}

func (a *app) shortDir(d string) string {
	if h := a.getenv("HOME"); h != "" && h != "/" && (d == h || strings.HasPrefix(d, h+string(filepath.Separator))) {
		return "~" + d[len(h):]
	}
	return d
}

func ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04")
}

func oneLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func cutRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// load reads a session (repaired in memory unless another process runs
// it) and turns a load error into advice: 'rein sessions repair' for a
// damaged line it can salvage around, nothing it cannot help with (a
// damaged header, a newer format). A final line a crash left as zeros is
// dropped with a notice; a line cut short by a crash is dropped silently.
func (a *app) load(ctx context.Context, st store.Store, id string) (*store.Loaded, error) {
	loaded, err := st.Load(ctx, id, store.LoadOptions{})
	if err != nil {
		return nil, loadError(id, err)
	}
	if loaded.TornZeros {
		fmt.Fprintf(a.stderr, "rein: session %s: the last %d bytes are a write a crash lost (zeros); they are left out\n", id, loaded.TornBytes)
	}
	return loaded, nil
}

// loadError explains why session id does not load.
func loadError(id string, err error) error {
	var le *store.LineError
	switch {
	case errors.Is(err, session.ErrVersion):
		return fmt.Errorf("session %s: %w: it was written by a newer rein; upgrade rein to read it", id, err)
	case errors.As(err, &le) && le.Line == 1:
		return fmt.Errorf("session %s: its header line is damaged: %w (repair cannot rebuild a header: fix the first line by hand, as docs/format.md describes it)", id, err)
	case errors.Is(err, session.ErrUnknownType):
		return fmt.Errorf("session %s: %w (a newer rein may read it; 'rein sessions repair %s' keeps what this one can, in a new session)", id, err, id)
	case errors.As(err, &le):
		return fmt.Errorf("session %s: %w (the file is damaged there; 'rein sessions repair %s' keeps what can be kept, in a new session)", id, err, id)
	}
	return fmt.Errorf("session %s: %w", id, err)
}

func (a *app) sessionsShow() *cobra.Command {
	var asJSON, verbose, seqs, follow, stats bool
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Print a session's transcript",
		Long: `Show prints the session's transcript: your messages, context injected by other
sources (labelled with the source), steering, the assistant's text, tool calls
and results in summary, and turn boundaries with their outcome. A session
that a crash left open is shown repaired (its last turn "interrupted"),
without changing the file; one that another process is running is shown as
far as it is written, and said so.

--json prints the raw events instead, one JSON line each, as repaired. It
streams: a JSONL session is read line by line, never held whole, so showing a
large session needs little memory (a crash-left session is read a second time
to compute its repair).
--seqs prefixes each entry with its event seq (for 'sessions fork --at').
--follow keeps printing events as they are appended, by any process on any
machine, until interrupted (stores that support it: postgres://); a turn
running elsewhere is shown as it is, not repaired.

--stats prints the session's model requests and prompt caching instead: the
requests, the input tokens and the share of them read from the provider's
prompt cache, and every point where the cached prefix broke (a new model,
tool set or system prompt, a compaction, an edited history), with the input
tokens it cost and, for models with known prices, the money. With --json it
prints the same as one JSON object.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := a.openStore()
			if err != nil {
				return err
			}
			if follow && !stats {
				// Before anything is printed.
				if _, err := a.follower(st); err != nil {
					return err
				}
			}
			id, err := resolveID(cmd.Context(), st, args[0])
			if err != nil {
				return err
			}
			if stats {
				return a.showStats(cmd.Context(), st, id, asJSON)
			}
			if asJSON && !follow {
				return a.streamJSON(cmd.Context(), st, id)
			}
			loaded, err := a.load(cmd.Context(), st, id)
			if err != nil {
				return err
			}
			if follow && asJSON {
				return a.follow(cmd.Context(), st, id, 0, true, transcript.Options{})
			}
			evs := loaded.Log.Events(0)
			h := loaded.Log.Header()
			title := loaded.Log.Title()
			if title == "" {
				title = h.Title
			}
			fmt.Fprintf(a.stdout, "session %s", h.ID)
			if title != "" {
				fmt.Fprintf(a.stdout, " %q", title)
			}
			fmt.Fprintf(a.stdout, "\ndirectory %s\n", h.Cwd)
			if h.Parent != "" {
				fmt.Fprintf(a.stdout, "forked from %s at #%d\n", h.Parent, h.ForkSeq)
			}
			var from string
			if json.Unmarshal(h.Extra["repairedFrom"], &from) == nil && from != "" {
				fmt.Fprintf(a.stdout, "repaired from %s\n", from)
			}
			if loaded.Locked != nil {
				fmt.Fprintf(a.stdout, "%s: shown as far as it is written\n", runningWhere(loaded.Locked))
			}
			opts := transcript.Options{Verbose: verbose, Seqs: seqs}
			if follow {
				fmt.Fprintln(a.stdout)
				return a.follow(cmd.Context(), st, id, 0, false, opts)
			}
			if n := len(loaded.Repair); n > 0 || loaded.TornBytes > 0 {
				fmt.Fprintf(a.stdout, "repaired on load: %d closing events added, %d torn bytes dropped\n", n, loaded.TornBytes)
			}
			fmt.Fprintln(a.stdout)
			entries, err := transcript.Build(evs)
			if err != nil {
				return err
			}
			return transcript.Render(a.stdout, entries, opts)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the raw (repaired) events as JSON lines")
	cmd.Flags().BoolVar(&verbose, "all", false, "also show reasoning, usage, models and every hook run")
	cmd.Flags().BoolVar(&seqs, "seqs", false, "prefix entries with their event seq")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new events as they are appended, until interrupted")
	cmd.Flags().BoolVar(&stats, "stats", false, "print request and prompt-cache statistics")
	return cmd
}

// streamJSON prints session id's events, then its repair, as JSON lines,
// streaming them (store.Stream: a JSONL session a piece at a time).
func (a *app) streamJSON(ctx context.Context, st store.Store, id string) error {
	w := bufio.NewWriterSize(a.stdout, 256<<10)
	var b []byte
	var werr error
	res, err := store.Stream(ctx, st, id, store.StreamOptions{}, func(ev session.Event, _ session.Payload) error {
		b = ev.AppendLine(b[:0])
		_, werr = w.Write(b)
		return werr
	})
	if err == nil {
		for _, ev := range res.Repair {
			if _, err = w.Write(ev.AppendLine(b[:0])); err != nil {
				break
			}
		}
	}
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	switch {
	case err == nil || werr != nil && errors.Is(err, werr):
		return err
	case errors.Is(err, session.ErrCorrupt) || errors.Is(err, store.ErrSeq):
		return fmt.Errorf("session %s: %w (try 'rein sessions repair %s')", id, err, id)
	}
	return fmt.Errorf("session %s: %w", id, err)
}

func (a *app) sessionsFork() *cobra.Command {
	var at int64
	cmd := &cobra.Command{
		Use:   "fork ID",
		Short: "Copy a session up to an event into a new session",
		Long: `Fork creates a new session holding the events of ID up to and including seq
--at. The fork point must be stable: a turn/end, or an event between turns
such as an injected context, but not inside a turn nor inside a compaction
that has not ended there (a refusal names the nearest stable points).
Without --at (or with --at -1) it forks at the last stable point: the last
event, or, when ID is inside a turn because it is running or a crash
interrupted it, the last event before that turn, and says so; a session
still inside its first turn has none and is refused. Every line the child gets is validated;
a JSONL parent is copied, not loaded, so forking costs about a copy of its
file and a check of its lines. The child records its parent and fork seq,
keeps the parent's directory (unless --cwd) and inherits nothing pending. It
prints the new session's id.

'rein sessions show --seqs ID' shows the seqs.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if at < -1 {
				return usagef("--at %d: want the seq of an event (0 or more; 'rein sessions show --seqs ID' shows them)", at)
			}
			st, err := a.openStore()
			if err != nil {
				return err
			}
			id, err := resolveID(ctx, st, args[0])
			if err != nil {
				return err
			}
			fp, err := a.lastForkPoint(ctx, st, id)
			if err != nil {
				return err
			}
			if at == -1 {
				why := "interrupted by a crash"
				if fp.Locked != nil {
					why = runningWhere(fp.Locked)
				}
				switch at = fp.At; {
				case fp.At < 0 && fp.Last >= 0:
					// A child without events would be a new session
					// that only looks related.
					return fmt.Errorf("session %s has no stable point to fork at: its first turn has not ended (%s)", id, why)
				case fp.At < fp.Last:
					fmt.Fprintf(a.stderr, "rein: session %s is inside a turn after #%d (%s); forking at #%d, the last stable point\n", id, fp.At, why, fp.At)
				}
			}
			cwd := fp.Header.Cwd
			if cwd == "" || a.cwd != "" {
				cwd = a.dir
			}
			h, err := st.Fork(ctx, id, at, session.Header{ID: agent.NewULID(""), Cwd: cwd, CreatedAt: time.Now().UTC()})
			if err != nil {
				// The store's error names the session and the seq.
				return err
			}
			fmt.Fprintln(a.stdout, h.ID)
			return nil
		},
	}
	cmd.Flags().Int64Var(&at, "at", -1, "last `SEQ` the fork holds (default, or -1: the last stable point)")
	return cmd
}

// lastForkPoint is where session id can be forked latest. A JSONL store
// answers from its fork index without loading the parent
// (jsonl.Store.LastForkPoint); another store's session is loaded, and the
// point found walking back from its last stored event.
func (a *app) lastForkPoint(ctx context.Context, st store.Store, id string) (jsonl.ForkPoint, error) {
	if js, ok := st.(*jsonl.Store); ok {
		fp, err := js.LastForkPoint(ctx, id)
		if err != nil {
			return fp, fmt.Errorf("fork %s: %w", id, err)
		}
		return fp, nil
	}
	loaded, err := a.load(ctx, st, id)
	if err != nil {
		return jsonl.ForkPoint{}, err
	}
	// The repair closes an open turn in memory only, after the stored
	// events: they end inside it, where ForkPoint refuses.
	l := loaded.Log
	fp := jsonl.ForkPoint{Last: l.Len() - 1 - int64(len(loaded.Repair)), Header: l.Header(), Locked: loaded.Locked}
	fp.At = session.StablePoint(l, fp.Last)
	return fp, nil
}

func (a *app) sessionsRm() *cobra.Command {
	return &cobra.Command{
		Use:   "rm ID...",
		Short: "Delete sessions",
		Long: `Rm deletes each session: its file, its scratch files and its MCP server log.
A session another process is running is refused (exit 4). When an ID cannot
be removed (unknown, ambiguous, running), rm says why on stderr and goes on
with the others; it then exits with the code of the last failure.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := a.openStore()
			if err != nil {
				return err
			}
			var failed error
			for _, ref := range args {
				if err := a.rmSession(cmd.Context(), st, ref); err != nil {
					if len(args) == 1 {
						return err
					}
					fmt.Fprintf(a.stderr, "rein: %v\n", err)
					failed = err
				}
			}
			if failed != nil {
				// Each failure is said; the exit code is the last one's.
				code := ExitError
				var ee *exitError
				if errors.As(failed, &ee) {
					code = ee.code
				}
				return exitWith(code, nil)
			}
			return nil
		},
	}
}

// rmSession deletes the session ref names, and its MCP server log.
func (a *app) rmSession(ctx context.Context, st store.Store, ref string) error {
	id, err := resolveID(ctx, st, ref)
	if err != nil {
		return err
	}
	if err := st.Delete(ctx, id); err != nil {
		return lockedError(id, fmt.Errorf("rm %s: %w", id, err))
	}
	if p := mcpLogFile(st, id); p != "" {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(a.stderr, "rein: %s: the MCP server log stays: %v\n", id, err)
		}
	}
	fmt.Fprintf(a.stdout, "removed %s\n", id)
	return nil
}

func (a *app) sessionsSearch() *cobra.Command {
	var asJSON bool
	var page pageFlags
	cmd := &cobra.Command{
		Use:   "search TEXT",
		Short: "Find text across sessions' transcripts",
		Long: `Search looks for TEXT (case-insensitive) in the visible transcript of every
session: messages, context, steering, assistant text, tool calls and results.
It prints one line per match: session id, event seq, entry kind and the line
that matched. Sessions that do not load are reported on stderr and skipped.

In a PostgreSQL store the search runs in the database's full-text index of
message text (user, steering and assistant messages, tool results; not tool
call arguments): TEXT is words that must all occur (any order, whole words,
case-insensitive), "quoted phrases", -excluded words and 'or'; the best
matches come first, 1000 at most unless --limit says otherwise.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			needle := strings.ToLower(strings.Join(args, " "))
			if strings.TrimSpace(needle) == "" {
				return usagef("no search text: give the text to look for")
			}
			st, err := a.openStore()
			if err != nil {
				return err
			}
			hits := []searchHit{}
			next := ""
			if sr, ok := st.(store.Searcher); ok {
				found, n, err := a.indexedSearch(ctx, sr, strings.Join(args, " "), page)
				if err != nil {
					return err
				}
				hits, next = append(hits, found...), n
				return a.printHits(hits, next, asJSON)
			}
			infos, err := st.List(ctx)
			if err != nil {
				return err
			}
			for _, in := range infos {
				loaded, err := st.Load(ctx, in.ID, store.LoadOptions{})
				if err != nil {
					fmt.Fprintf(a.stderr, "rein: skipping %s: %v\n", in.ID, err)
					continue
				}
				entries, err := transcript.Build(loaded.Log.Events(0))
				if err != nil {
					fmt.Fprintf(a.stderr, "rein: skipping %s: %v\n", in.ID, err)
					continue
				}
				for _, e := range entries {
					for _, s := range searchable(e) {
						for _, line := range strings.Split(s, "\n") {
							if strings.Contains(strings.ToLower(line), needle) {
								hits = append(hits, searchHit{in.ID, e.Seq, string(e.Kind), cutRunes(strings.TrimSpace(line), 100)})
							}
						}
					}
				}
			}
			if hits, next, err = offsetPage(hits, page); err != nil {
				return err
			}
			return a.printHits(hits, next, asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	page.add(cmd, "matches")
	return cmd
}

// printHits prints search results; none is exit 1.
func (a *app) printHits(hits []searchHit, next string, asJSON bool) error {
	defer a.nextPage(next)
	if asJSON {
		return printJSON(a.stdout, hits)
	}
	for _, h := range hits {
		fmt.Fprintf(a.stdout, "%s #%d %s: %s\n", h.Session, h.Seq, h.Kind, h.Line)
	}
	if len(hits) == 0 {
		return exitWith(ExitError, nil)
	}
	return nil
}

func searchable(e transcript.Entry) []string {
	out := []string{e.Text}
	if e.Tool != nil && e.Tool.Arguments != "" {
		out = append(out, e.Tool.Arguments)
	}
	return out
}

func (a *app) sessionsRepair() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "repair ID",
		Short: "Salvage a damaged session into a new one",
		Long: `Repair reads ID, keeping every event it can prove consistent, closes a turn a
crash left open, and writes the result to a new session (the original is
left untouched). A damaged or missing line that stood for a streamed chunk
whose text is in its step's final message, or for an ignorable event, is
kept as a tombstone with the same seq; any other damaged line cuts the
session there, and the lines after it are dropped with it. It reports
every line it did not keep as it was, and why, on stderr, and prints the
new session's id on stdout. A session another process is running is
refused; a damaged header cannot be repaired.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			st, err := a.openStore()
			if err != nil {
				return err
			}
			id, err := resolveID(ctx, st, args[0])
			if err != nil {
				return err
			}
			loaded, err := st.Load(ctx, id, store.LoadOptions{Salvage: true})
			if err != nil {
				var le *store.LineError
				if errors.As(err, &le) && le.Line == 1 {
					return fmt.Errorf("repair %s: %w (repair cannot rebuild a header: fix the first line by hand, as docs/format.md describes it)", id, err)
				}
				return fmt.Errorf("repair %s: %w", id, err)
			}
			if loaded.Locked != nil {
				return exitWith(ExitLocked, fmt.Errorf("repair %s: the session is %s: it is not interrupted; repair it once that process has stopped ('rein sessions show %s' shows it now)", id, runningWhere(loaded.Locked), id))
			}
			tombs := 0
			for _, d := range loaded.Dropped {
				fmt.Fprintf(a.stderr, "%v\n", d)
				tombs += d.Tombstones
			}
			if loaded.TornBytes > 0 {
				fmt.Fprintf(a.stderr, "dropped a torn final line (%d bytes)\n", loaded.TornBytes)
			}
			if n := len(loaded.Repair); n > 0 {
				fmt.Fprintf(a.stderr, "closed the interrupted turn with %d events\n", n)
			}
			old := loaded.Log.Header()
			title := loaded.Log.Title()
			if title == "" {
				title = old.Title
			}
			extra := map[string]json.RawMessage{}
			for k, v := range old.Extra {
				extra[k] = v
			}
			from, _ := json.Marshal(id)
			extra["repairedFrom"] = from
			h := session.Header{ID: agent.NewULID(""), Cwd: old.Cwd, CreatedAt: time.Now().UTC(), Title: strings.TrimSpace("repaired " + title), Version: session.Version, Extra: extra}
			w, err := st.Create(ctx, h)
			if err != nil {
				return fmt.Errorf("repair %s: %w", id, err)
			}
			if evs := loaded.Log.Events(0); len(evs) > 0 {
				if err := w.Append(ctx, evs); err != nil {
					_ = w.Close()
					return fmt.Errorf("repair %s: %w", id, err)
				}
			}
			if err := w.Close(); err != nil {
				return fmt.Errorf("repair %s: %w", id, err)
			}
			fmt.Fprintf(a.stderr, "kept %d events of %s in a new session", loaded.Log.Len(), id)
			if tombs > 0 {
				fmt.Fprintf(a.stderr, " (%d of them tombstones)", tombs)
			}
			fmt.Fprintln(a.stderr)
			fmt.Fprintln(a.stdout, h.ID)
			return nil
		},
	}
	return cmd
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
