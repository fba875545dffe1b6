package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/reinhq/rein/config"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
	"github.com/reinhq/rein/store/postgres"
	"github.com/reinhq/rein/transcript"
)

// storeCmd is "rein store": the store itself rather than its sessions.
func (a *app) storeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "store",
		Short: "Manage the session store (schema migrations)",
		Long: `The store is where sessions are kept: JSONL files under $REIN_HOME by
default, or a PostgreSQL database (store = "postgres://..." in config.toml,
REIN_STORE or --store).`,
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "migrate",
		Short: "Bring a PostgreSQL store's schema up to date",
		Long: `Migrate applies the schema migrations this rein knows to the configured
PostgreSQL store and prints the schema version before and after. rein also
migrates when it opens the store; run this explicitly as a role that may
change the schema, or to upgrade ahead of a rollout. A JSONL store has no
schema.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec := a.cfg.Store
			if !config.IsPostgresURL(spec) {
				fmt.Fprintln(a.stdout, "the JSONL store has no schema to migrate")
				return nil
			}
			from, to, err := postgres.Migrate(cmd.Context(), spec)
			if err != nil {
				return fmt.Errorf("migrate %s: %w", config.RedactURL(spec), err)
			}
			if from == to {
				fmt.Fprintf(a.stdout, "schema is up to date (version %d)\n", to)
			} else {
				fmt.Fprintf(a.stdout, "schema migrated from version %d to %d\n", from, to)
			}
			return nil
		},
	})
	return cmd
}

func (a *app) sessionsExport() *cobra.Command {
	return &cobra.Command{
		Use:   "export ID",
		Short: "Write a session as a JSONL file to stdout",
		Long: `Export writes session ID in rein's session file format (a header line, then
one event per line) to stdout, whatever the store: exactly the bytes the JSONL
store holds for it. What a crash left open is exported as it is (the store
that imports it repairs it when the session is next resumed); a torn final
line is left out, and so is a tail of zeros a crash left (said on stderr).
'rein sessions import' reads the file back, into any store.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := a.openStore()
			if err != nil {
				return err
			}
			id, err := resolveID(cmd.Context(), st, args[0])
			if err != nil {
				return err
			}
			ld, err := a.load(cmd.Context(), st, id)
			if err != nil {
				return err
			}
			hl, err := json.Marshal(ld.Log.Header())
			if err != nil {
				return err
			}
			bw := bufio.NewWriterSize(a.stdout, 1<<20)
			bw.Write(hl)
			bw.WriteByte('\n')
			stored := ld.Log.Len() - int64(len(ld.Repair))
			var line []byte
			for seq := int64(0); seq < stored; seq++ {
				line = ld.Log.Event(seq).AppendLine(line[:0])
				if _, err := bw.Write(line); err != nil {
					return err
				}
			}
			return bw.Flush()
		},
	}
}

// importBatch is how many events one Append of an import carries.
const importBatch = 2000

func (a *app) sessionsImport() *cobra.Command {
	var id string
	cmd := &cobra.Command{
		Use:   "import FILE",
		Short: "Add a session from a JSONL file (from 'sessions export')",
		Long: `Import reads a session file (rein's format: a header line, then one event per
line; - reads stdin), checks every event as loading does, and stores it as a
new session with the same id (--id to choose another), byte for byte. A torn
final line is dropped with a warning; any other bad line is an error naming
it (try 'rein sessions repair' on the original). It prints the id.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			var data []byte
			var err error
			if args[0] == "-" {
				data, err = io.ReadAll(a.stdin)
			} else {
				data, err = os.ReadFile(args[0])
			}
			if err != nil {
				return err
			}
			l, torn, err := parseSessionFile(args[0], data)
			if err != nil {
				return err
			}
			if torn > 0 {
				fmt.Fprintf(a.stderr, "rein: dropped a torn final line (%d bytes)\n", torn)
			}
			h := l.Header()
			if id != "" {
				h.ID = id
			}
			st, err := a.openStore()
			if err != nil {
				return err
			}
			w, err := st.Create(ctx, h)
			if errors.Is(err, store.ErrExists) {
				return fmt.Errorf("import %s: session %s exists in %s (--id imports it under another id)", args[0], h.ID, a.storeName)
			}
			if err != nil {
				return fmt.Errorf("import %s: %w", args[0], err)
			}
			last := time.Now()
			for from := int64(0); from < l.Len(); from += importBatch {
				if err := w.Append(ctx, l.EventRange(from, from+importBatch)); err != nil {
					_ = w.Close()
					return fmt.Errorf("import %s: %w (the partly imported session %s is left as it is)", args[0], err, h.ID)
				}
				if time.Since(last) > 2*time.Second {
					last = time.Now()
					fmt.Fprintf(a.stderr, "rein: imported %d of %d events\n", min(from+importBatch, l.Len()), l.Len())
				}
			}
			if err := w.Close(); err != nil {
				return err
			}
			fmt.Fprintf(a.stderr, "rein: imported %d events into %s\n", l.Len(), a.storeName)
			fmt.Fprintln(a.stdout, h.ID)
			return nil
		},
	}
	cmd.Flags().StringVar(&id, "id", "", "store the session under this `ID` instead of its own")
	return cmd
}

// parseSessionFile parses a session file as loading does (store.ReadFile),
// without repair: a torn final line (its size is returned) is dropped; any
// other bad line is an error naming file and line.
func parseSessionFile(name string, data []byte) (*session.Log, int, error) {
	ld, err := store.ReadFile(name, data, store.LoadOptions{}, false)
	if err != nil {
		return nil, 0, err
	}
	return ld.Log, ld.TornBytes, nil
}

// follower returns st as a store.Follower, or the usage error of --follow
// on a store that is not one.
func (a *app) follower(st store.Store) (store.Follower, error) {
	f, ok := st.(store.Follower)
	if !ok {
		return nil, usagef("--follow needs a store that other processes' appends can be followed in (a postgres:// store); %s is not one", a.storeName)
	}
	return f, nil
}

// follow prints session id's events as they are appended, in whatever
// process, until interrupted: JSON lines, or transcript entries.
func (a *app) follow(ctx context.Context, st store.Store, id string, from int64, asJSON bool, opts transcript.Options) error {
	f, err := a.follower(st)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	var b transcript.Builder
	var line []byte
	for ev, err := range f.Follow(ctx, id, from) {
		if err != nil {
			if ctx.Err() != nil {
				return nil // interrupted: the normal end of following
			}
			return err
		}
		if asJSON {
			line = ev.AppendLine(line[:0])
			if _, err := a.stdout.Write(line); err != nil {
				return err
			}
			continue
		}
		entries, err := b.Add(ev)
		if err != nil {
			return err
		}
		if err := transcript.Render(a.stdout, entries, opts); err != nil {
			return err
		}
	}
	return nil
}

// pageFlags are --limit and --page of listings and searches.
type pageFlags struct {
	limit int
	page  string
}

// add defines the flags on cmd, and refuses a negative --limit before
// cmd runs.
func (p *pageFlags) add(cmd *cobra.Command, what string) {
	cmd.Flags().IntVar(&p.limit, "limit", 0, "print at most `N` "+what+" (0: all); the next page's cursor goes to stderr")
	cmd.Flags().StringVar(&p.page, "page", "", "continue after the page that printed this `CURSOR`")
	cmd.PreRunE = func(*cobra.Command, []string) error {
		if p.limit < 0 {
			return usagef("--limit %d: want a number of %s, or 0 for all", p.limit, what)
		}
		return nil
	}
}

// offsetPage pages a full list for stores without a paged listing: the
// cursor is an offset.
func offsetPage[T any](all []T, p pageFlags) ([]T, string, error) {
	off := 0
	if p.page != "" {
		raw, err := base64.RawURLEncoding.DecodeString(p.page)
		v, perr := strconv.Atoi(strings.TrimPrefix(string(raw), "i"))
		if err != nil || perr != nil || v < 0 || !strings.HasPrefix(string(raw), "i") {
			return nil, "", usagef("--page %s: not a cursor this store handed out", p.page)
		}
		off = v
	}
	all = all[min(off, len(all)):]
	if p.limit == 0 || len(all) <= p.limit {
		return all, "", nil
	}
	return all[:p.limit], base64.RawURLEncoding.EncodeToString([]byte("i" + strconv.Itoa(off+p.limit))), nil
}

// listSessions returns one page of summaries (all of them without --limit).
func (a *app) listSessions(ctx context.Context, st store.Store, p pageFlags) ([]store.Info, string, error) {
	if pg, ok := st.(store.Pager); ok && p.limit > 0 {
		infos, next, err := pg.ListPage(ctx, store.PageOptions{Limit: p.limit, Cursor: p.page})
		if err != nil && p.page != "" && !errors.Is(err, store.ErrUnreadable) {
			return nil, "", exitWith(ExitUsage, err)
		}
		return infos, next, err
	}
	infos, err := st.List(ctx)
	if err != nil {
		return nil, "", err
	}
	return offsetPage(infos, p)
}

// nextPage tells where the next page starts.
func (a *app) nextPage(next string) {
	if next != "" {
		fmt.Fprintf(a.stderr, "rein: more: --page %s\n", next)
	}
}

// searchHit is one line of 'sessions search'.
type searchHit struct {
	Session string `json:"session"`
	Seq     int64  `json:"seq"`
	Kind    string `json:"kind"`
	Line    string `json:"line"`
}

// indexedSearch runs a search in the store's full-text index.
func (a *app) indexedSearch(ctx context.Context, s store.Searcher, query string, p pageFlags) ([]searchHit, string, error) {
	limit := p.limit
	if limit <= 0 {
		limit = 1000
	}
	found, next, err := s.Search(ctx, query, store.PageOptions{Limit: limit, Cursor: p.page})
	if err != nil {
		return nil, "", err
	}
	words := strings.Fields(strings.ToLower(strings.NewReplacer(`"`, " ", "-", " ").Replace(query)))
	var hits []searchHit
	for _, h := range found {
		hits = append(hits, searchHit{h.Session, h.Seq, hitKind(h.Type), cutRunes(strings.TrimSpace(matchingLine(h.Text, words)), 100)})
	}
	return hits, next, nil
}

func hitKind(t session.Type) string {
	switch t {
	case session.TypeUserMessage:
		return string(transcript.User)
	case session.TypeSteeringMessage:
		return string(transcript.Steering)
	case session.TypeAssistantMessage:
		return string(transcript.Assistant)
	case session.TypeToolResult:
		return string(transcript.ToolResult)
	}
	return string(t)
}

// matchingLine returns the first line of text holding one of words, else
// its first line.
func matchingLine(text string, words []string) string {
	lines := strings.Split(text, "\n")
	for _, l := range lines {
		ll := strings.ToLower(l)
		for _, w := range words {
			if w != "or" && strings.Contains(ll, w) {
				return l
			}
		}
	}
	return lines[0]
}
