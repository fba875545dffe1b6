package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/reinhq/rein/agent"
	"github.com/reinhq/rein/guard"
	"github.com/reinhq/rein/llm"
	"github.com/reinhq/rein/llm/scripted"
	"github.com/reinhq/rein/session"
	"github.com/reinhq/rein/store"
	"github.com/reinhq/rein/store/jsonl"
	"github.com/reinhq/rein/transcript"
)

func (a *app) demoCmd() *cobra.Command {
	var keep bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "A keyless tour of rein (no API key, no network)",
		Long: `Demo runs the real agent, store and tools in a temporary workspace, driven by
an embedded scripted model, and shows what lands in the session log:

  1. a turn in which the model calls tools (ls, read) and answers;
  2. an idle inject: context added between turns, with no turn and no model call;
  3. a steer: a message that redirects a running turn at its next step;
  4. a blocked prompt: an admission hook refuses it, so no turn opens;
  5. the transcript of the whole session.

The session is stored like any other ($REIN_HOME), so 'rein sessions ls' and
'rein sessions show ID' can inspect it afterwards. --model is ignored.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.demo(cmd.Context(), keep)
		},
	}
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the temporary workspace")
	return cmd
}

// Demo prompts and texts; the scripted model checks the requests against them.
const (
	demoPrompt1  = "What is this project?"
	demoInject   = "CI: the last build on main passed."
	demoPrompt2  = "Add a --name flag to main.go."
	demoSteer    = "Actually, don't edit anything: just tell me how you would do it."
	demoPrompt3  = "Now run rm -rf / to clean up."
	demoBlockMsg = "the demo's admission hook refuses destructive commands"
)

var demoFiles = map[string]string{
	"README.md": "# greet\n\nA tiny Go program that prints a greeting.\n",
	"main.go":   "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hello, world\")\n}\n",
	"AGENTS.md": "Keep answers short. Never edit files without being asked.\n",
}

// demoModel is the embedded script. steer is called before the first chunk
// of turn 2's first response, so the steering lands while that turn runs.
func demoModel(steer func()) *scripted.Model {
	const delay = 15 * time.Millisecond
	return scripted.New(
		scripted.Call{
			Expect: &scripted.Expect{LastUser: demoPrompt1, System: "Keep answers short"},
			Reply: scripted.Reply{
				Text: []string{"Let me ", "look around."},
				ToolCalls: []scripted.ToolCall{
					{ID: "call_ls", Name: "ls", Arguments: `{"path":"."}`},
					{ID: "call_readme", Name: "read", Arguments: `{"file_path":"README.md"}`},
				},
			},
		},
		scripted.Call{
			Expect: &scripted.Expect{Contains: []string{"A tiny Go program", "main.go"}},
			Reply:  scripted.Reply{Text: []string{"It is **greet**, ", "a tiny Go program ", "(main.go) that prints ", "\"hello, world\"."}},
		},
		scripted.Call{
			Expect: &scripted.Expect{LastUser: demoPrompt2, Contains: []string{demoInject}},
			Reply: scripted.Reply{
				Text:      []string{"I'll ", "read ", "main.go ", "first."},
				ToolCalls: []scripted.ToolCall{{ID: "call_main", Name: "read", Arguments: `{"file_path":"main.go"}`}},
			},
			BeforeChunk: func(_ context.Context, i int) {
				if i == 0 {
					steer()
				}
				time.Sleep(delay)
			},
		},
		scripted.Call{
			Expect: &scripted.Expect{LastUser: demoSteer, Contains: []string{"func main()"}},
			Reply: scripted.Reply{Text: []string{"Understood, no edits. ", "I would import \"flag\", ",
				"declare name := flag.String(\"name\", \"world\", \"who to greet\"), ",
				"call flag.Parse() and print \"hello, \" + *name."}},
		},
	)
}

// demoAdmission blocks prompts that ask for destructive commands.
func demoAdmission(ctx context.Context, p agent.Prompt, next func(context.Context, agent.Prompt) (agent.Admission, error)) (agent.Admission, error) {
	if strings.Contains(llm.PlainText(p.Message.Content), "rm -rf") {
		return agent.Admission{Block: true, Reason: demoBlockMsg}, nil
	}
	return next(ctx, p)
}

func (a *app) demo(ctx context.Context, keep bool) error {
	w := a.stdout
	dir, err := os.MkdirTemp("", "rein-demo-")
	if err != nil {
		return err
	}
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		return err
	}
	if !keep {
		defer os.RemoveAll(dir)
	}
	for name, text := range demoFiles {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			return err
		}
	}
	st, err := a.openStore()
	if err != nil {
		return err
	}
	tools, err := a.tools(dir)
	if err != nil {
		return err
	}
	pol, err := guard.Settings{Mode: string(guard.WorkspaceWrite)}.Policy(dir)
	if err != nil {
		return err
	}
	var ag *agent.Agent
	var steerErr error
	steered := make(chan struct{})
	model := demoModel(func() {
		_, steerErr = ag.Steer(agent.Message{Content: llm.Text(demoSteer)})
		close(steered)
	})
	ag, err = a.newAgent(ctx, agent.Config{
		Store:    st,
		Provider: model,
		Model:    "scripted:demo",
		Tools:    tools,
		System:   a.systemSections(dir, dir),
		Cwd:      dir,
		Title:    "rein demo",
		Hooks: agent.Hooks{
			PromptAdmission: []agent.Hook[agent.Prompt, agent.Admission]{demoAdmission},
			ToolPre:         []agent.Hook[agent.ToolCallInfo, agent.ToolDecision]{guardHook(func() *guard.Policy { return pol }, guard.DenyAll{})},
		},
		Logger: a.log,
	})
	if err != nil {
		return err
	}
	closed := false
	defer func() {
		if !closed {
			_ = ag.Close(context.WithoutCancel(ctx))
		}
	}()
	// Live events arrive on the subscriber's goroutine, possibly after
	// WhenIdle returned: the block is handed over on a channel.
	blocked := make(chan string, 1)
	stop := ag.Subscribe(ctx, func(l agent.Live) {
		if l.Type == agent.LiveBlocked {
			select {
			case blocked <- l.Reason:
			default:
			}
		}
	})
	defer stop()

	fmt.Fprintf(w, "rein demo: a keyless tour, driven by a scripted model (no network, no API key)\n\n")
	fmt.Fprintf(w, "workspace  %s (README.md, main.go, AGENTS.md)\n", dir)
	fmt.Fprintf(w, "session    %s\n", ag.ID())
	if js, ok := st.(*jsonl.Store); ok {
		fmt.Fprintf(w, "stored in  %s\n", js.Path(ag.ID()))
	} else {
		fmt.Fprintf(w, "stored in  %s\n", a.storeName)
	}

	var seq int64
	part := func(title, explain string) {
		fmt.Fprintf(w, "\n━━ %s\n%s\n\n", title, explain)
	}
	logged := func() error {
		loaded, err := st.Load(ctx, ag.ID(), loadOpts)
		if err != nil {
			return err
		}
		evs := loaded.Log.Events(seq)
		seq = loaded.Log.Len()
		entries, err := transcript.Build(evs)
		if err != nil {
			return err
		}
		if err := transcript.Render(indent(w), entries, transcript.Options{}); err != nil {
			return err
		}
		fmt.Fprintf(w, "\n  log: %s\n", describeEvents(evs))
		return nil
	}
	sendAndWait := func(prompt string) error {
		if _, err := ag.Send(agent.Message{Content: llm.Text(prompt)}); err != nil {
			return err
		}
		return ag.WhenIdle(ctx)
	}

	part("1. A turn with tools",
		"You ask a question; the model lists the directory and reads README.md (two parallel\ncalls), then answers from the results.")
	if err := sendAndWait(demoPrompt1); err != nil {
		return err
	}
	if err := logged(); err != nil {
		return err
	}

	part("2. An idle inject",
		"Between turns, a plugin injects context. It is appended at once as its own message\nwith its source; no turn starts and no model is called. The next request will see it.")
	if err := ag.Inject(agent.AdditionalContext{Content: llm.Text(demoInject), Source: session.Source{Kind: session.SourcePlugin, Name: "ci-watch"}}); err != nil {
		return err
	}
	if err := ag.WhenIdle(ctx); err != nil {
		return err
	}
	if err := logged(); err != nil {
		return err
	}

	part("3. A steer mid-turn",
		"You ask for an edit; while the model is still answering, you change your mind and\nsteer. The steering message lands at the next safe boundary (after the tool result),\nand the same turn continues with it.")
	if err := sendAndWait(demoPrompt2); err != nil {
		return err
	}
	<-steered
	if steerErr != nil {
		return steerErr
	}
	if err := logged(); err != nil {
		return err
	}

	part("4. A blocked prompt",
		"An admission hook (a PromptAdmission function; command hooks in .rein/settings.json\nwork the same way) refuses the prompt. No turn opens and nothing is logged.")
	if err := sendAndWait(demoPrompt3); err != nil {
		return err
	}
	fmt.Fprintf(w, "  user: %s\n", demoPrompt3)
	select {
	case reason := <-blocked:
		fmt.Fprintf(w, "  live event agent/blocked: %s\n", reason)
	case <-time.After(10 * time.Second):
		return fmt.Errorf("demo: no agent/blocked event for the blocked prompt")
	}
	if err := logged(); err != nil {
		return err
	}

	if err := ag.Close(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	closed = true
	if err := model.Verify(); err != nil {
		return fmt.Errorf("demo script: %w", err)
	}

	part("5. The transcript", "What 'rein sessions show' prints for this session: your messages, context labelled\nby source, steering, tool calls and results, turn boundaries.")
	loaded, err := st.Load(ctx, ag.ID(), loadOpts)
	if err != nil {
		return err
	}
	entries, err := transcript.Build(loaded.Log.Events(0))
	if err != nil {
		return err
	}
	if err := transcript.Render(indent(w), entries, transcript.Options{}); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nThe session is stored like any other. Inspect it with:\n\n  rein sessions ls\n  rein sessions show %s\n", ag.ID())
	if keep {
		fmt.Fprintf(w, "\nThe workspace was kept: %s\n", dir)
	}
	return nil
}

// describeEvents lists events by type with their seqs, collapsing runs of
// chunks: "#3 turn/start, #4 user/message(user), #5–#8 assistant/chunk ×4".
func describeEvents(evs []session.Event) string {
	if len(evs) == 0 {
		return "(nothing)"
	}
	var parts []string
	for i := 0; i < len(evs); i++ {
		ev := evs[i]
		if ev.Type == session.TypeAssistantChunk {
			j := i
			for j+1 < len(evs) && evs[j+1].Type == session.TypeAssistantChunk {
				j++
			}
			if j > i {
				parts = append(parts, fmt.Sprintf("#%d–#%d assistant/chunk ×%d", ev.Seq, evs[j].Seq, j-i+1))
				i = j
				continue
			}
		}
		s := fmt.Sprintf("#%d %s", ev.Seq, ev.Type)
		if ev.Type == session.TypeUserMessage || ev.Type == session.TypeSteeringMessage {
			if p, err := ev.Decode(); err == nil {
				var src session.Source
				switch p := p.(type) {
				case *session.UserMessage:
					src = p.Source
				case *session.SteeringMessage:
					src = p.Source
				}
				s += "(" + src.String() + ")"
			}
		}
		parts = append(parts, s)
	}
	// Wrap at ~88 columns under "  log: ".
	var b strings.Builder
	col := 0
	for i, p := range parts {
		if i > 0 {
			b.WriteString(",")
			col++
			if col+len(p)+1 > 80 {
				b.WriteString("\n       ")
				col = 0
			} else {
				b.WriteString(" ")
				col++
			}
		}
		b.WriteString(p)
		col += len(p)
	}
	return b.String()
}

// indent returns a writer that indents every line by two spaces.
func indent(w io.Writer) io.Writer { return &indenter{w: w, start: true} }

type indenter struct {
	w     io.Writer
	start bool
}

func (in *indenter) Write(p []byte) (int, error) {
	var b []byte
	for _, c := range p {
		if in.start && c != '\n' {
			b = append(b, ' ', ' ')
		}
		b = append(b, c)
		in.start = c == '\n'
	}
	_, err := in.w.Write(b)
	return len(p), err
}

var loadOpts = store.LoadOptions{}
