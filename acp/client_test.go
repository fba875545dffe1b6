package acp

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/reinhq/rein/tool"
)

// The script a client terminal runs leaves exactly the variables the
// environment policy gives the model (by name), and names and patterns
// that look like shell code stay data: a configuration that names
// "PATH) touch X ;; ZZZ" as a key variable, or a drop pattern holding a
// command substitution, runs nothing.
func TestScrubScript(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash:", err)
	}
	dir := t.TempDir()
	pwned := func(n string) string { return filepath.Join(dir, n) }
	policy := tool.EnvPolicy{
		Secrets: []string{"MY_KEY", "PATH) touch " + pwned("case") + " ;; ZZZ", "$(touch " + pwned("subst") + ")"},
		Keep:    []string{"GITHUB_TOKEN", "`touch " + pwned("backtick") + "`"},
		Drop:    []string{"AWS_*", "x|touch " + pwned("pipe"), "*) touch " + pwned("drop") + " ;; (*"},
	}
	environ := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "MY_KEY=sk-secret", "my_key=lower",
		"GITHUB_TOKEN=ghp_kept", "NPM_TOKEN=npm_dropped", "AWS_REGION=eu", "PGPASSWORD=pw",
		"EDITOR=vi", "LANG=C",
	}
	cmd := exec.Command(bash, append([]string{"-c", scrubScript, "rein-bash", "env -0"}, scrubArgs(policy)...)...)
	cmd.Env = environ
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, n := range []string{"case", "subst", "backtick", "pipe", "drop"} {
		if _, err := os.Stat(pwned(n)); err == nil {
			t.Errorf("a name or pattern ran as code: %s exists", n)
		}
	}
	var got []string
	for _, kv := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "PWD", "SHLVL", "_", "PAGER", "GIT_PAGER", "GIT_TERMINAL_PROMPT", "OLDPWD":
			continue // bash's own and the script's
		}
		got = append(got, kv)
	}
	want := policy.Environ(environ, tool.ForModel)
	// Names are matched without regard to case by the script; the policy
	// matches secret names exactly. Both remove MY_KEY; the script also
	// removes its lower-case twin.
	want = slices.DeleteFunc(want, func(kv string) bool { return strings.HasPrefix(kv, "my_key=") })
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("the terminal's environment\n got %q\nwant %q", got, want)
	}
}
