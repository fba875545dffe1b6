package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/reinhq/rein/config"
	"github.com/reinhq/rein/display"
	"github.com/reinhq/rein/trust"
)

func (a *app) configCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Inspect rein's configuration",
	}
	var asJSON bool
	show := &cobra.Command{
		Use:   "show",
		Short: "Print the effective configuration and where each value came from",
		Long: `Show prints every setting, its effective value and its origin: "default", a
file and line, "env NAME" or "flag --NAME".

Layers, each overriding the one before:
  1. built-in defaults
  2. the user file: $XDG_CONFIG_HOME/rein/config.toml, else ~/.config/rein/config.toml
  3. the workspace file: .rein/config.toml in the workspace root (the nearest
     directory upwards holding .rein or .git)
  4. environment: REIN_MODEL, REIN_PERMISSION_MODE, REIN_CONTEXT_WINDOW,
     REIN_INSTRUCTIONS_BUDGET, REIN_NETWORK_ACCESS, and REIN_<KEY> for each
     key from max_steps on (REIN_MAX_STEPS, REIN_REQUEST_TIMEOUT, ...)
  5. flags: --model, --permission-mode, ..., and rein run's flags of the
     same names (--max-steps, --request-timeout, ...)

In a workspace you have not trusted (see 'rein trust'), the workspace file's
provider base_url, api_key_env and headers, a permission_mode more permissive
than yours, [permissions] allow, [sandbox] writable_roots and network_access =
true, [env] keep, [mcp_servers], system_prompt and append_system_prompt,
[prices], and limits looser than yours (max_steps, max_output_tokens,
thinking_budget, instructions_budget, context_window, request_timeout) are
listed as ignored and do not apply.

Keys (TOML):
  model = "deepseek:deepseek-chat"      # provider:model, or scripted:FILE
  permission_mode = "workspace-write"   # read-only | workspace-write | full-access
  context_window = 0                    # tokens; 0 = the model catalog's value
  instructions_budget = 32768           # bytes of AGENTS.md/CLAUDE.md in the system prompt
  max_steps = 0                         # steps per turn (0: no limit)
  max_output_tokens = 0                 # per response (0: the model's maximum)
  reasoning_effort = ""                 # minimal | low | medium | high
  thinking_budget = 0                   # Anthropic extended thinking (0: off, else >= 1024)
  system_prompt = ""                    # replaces rein's own system prompt section
  append_system_prompt = ""             # a last system prompt section
  stream_idle_timeout = "90s"           # give up on a silent response after this
  request_timeout = "0"                 # bound each model request ("0": none)
  [prices."deepseek:deepseek-chat"]     # USD per million tokens, for the cost shown
  input = 0.28
  output = 0.42
  cache_read = 0.028
  [providers.deepseek]
  base_url = "https://..."              # override the provider's endpoint
  api_key_env = "MY_DEEPSEEK_KEY"       # read the API key from this variable
  headers = { X-Team = "core" }         # sent with every request
  [env]                                 # environment of the bash tool and hooks
  keep = ["GITHUB_TOKEN"]               # keep for bash despite the credential patterns
  drop = ["AWS_*"]                      # remove from bash and hooks

An unknown key or a wrong type is an error naming the file and line (and the
key it most likely meant).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			items, err := a.projectItems(a.root)
			if err != nil {
				return err
			}
			d := a.decide(cmd.Context(), a.root, items, false)
			if d.Apply {
				a.cfg.ApplyHeld()
			}
			settings := a.cfg.Settings()
			if asJSON {
				return printJSON(a.stdout, map[string]any{
					"files":     []string{config.UserFile(a.getenv), config.ProjectFile(a.root)},
					"settings":  settings,
					"workspace": map[string]any{"root": d.Root, "trust": d.Status, "applied": d.Apply},
				})
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "KEY\tVALUE\tFROM")
			for _, s := range settings {
				from := s.Origin
				switch {
				case s.Ignored && s.Key == "store":
					from += " (ignored: only your config, REIN_STORE or --store choose the store)"
				case s.Ignored:
					from += " (ignored: workspace not trusted)"
				}
				// Values may come from the workspace's file: one line each,
				// control characters shown escaped.
				fmt.Fprintf(tw, "%s\t%s\t%s\n", display.Quote(s.Key), display.Quote(s.Value), display.Quote(from))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "\nfiles read (when present): %s, %s\n", config.UserFile(a.getenv), config.ProjectFile(a.root))
			switch {
			case d.Status == trust.StatusNone:
			case d.Apply:
				fmt.Fprintf(a.stdout, "workspace %s: trusted (%s)\n", d.Root, d.By)
			default:
				fmt.Fprintf(a.stdout, "workspace %s: %s; %d settings ignored (hooks included); 'rein trust' applies them\n", d.Root, d.Status, len(d.Items))
			}
			return nil
		},
	}
	show.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.AddCommand(show)
	return cmd
}
