package guard

import (
	"os"
	"path/filepath"
	"testing"
)

// TestHider: the walking tools leave out what a deny or ask rule on
// reading names, by absolute, home-relative and workspace-relative
// patterns, and by the workspace root's real path; allow rules, rules on
// other tools and rules without a pattern hide nothing.
func TestHider(t *testing.T) {
	root, _ := workspace(t)
	home := t.TempDir()
	old := homeDir
	homeDir = func() (string, error) { return home, nil }
	defer func() { homeDir = old }()
	p := &Policy{Root: root, Rules: rules(t, []string{"Read(docs/**)"}, []string{"Grep(secret/**)"},
		[]string{"Read(~/.ssh/**)", "Read(**/.env)", "Edit(a.txt)", "Bash(rm:*)", "Read"})}
	hide := p.Hider()
	if hide == nil {
		t.Fatal("no hider")
	}
	for path, want := range map[string]bool{
		home + "/.ssh":           true,
		home + "/.ssh/id_rsa":    true,
		home + "/.sshx":          false,
		root + "/.env":           true,
		root + "/sub/.env":       true,
		root + "/secret/key":     true, // an ask rule on grep
		root + "/docs/readme.md": false,
		root + "/a.txt":          false,
		"/elsewhere/.env":        true, // as Decide matches **/.env
		"/etc/passwd":            false,
	} {
		if got := hide(path); got != want {
			t.Errorf("hide(%s) = %v, want %v", path, got, want)
		}
	}
	// A workspace reached through a symlink: its real path counts too.
	link := filepath.Join(filepath.Dir(root), "wslink")
	if err := os.Symlink(root, link); err != nil {
		t.Fatal(err)
	}
	viaLink := (&Policy{Root: link, Rules: rules(t, nil, nil, []string{"Read(secret/**)"})}).Hider()
	if !viaLink(root+"/secret/key") || !viaLink(link+"/secret/key") || viaLink(root+"/a.txt") {
		t.Error("the workspace's real path is not matched")
	}
	if (&Policy{Root: root, Rules: rules(t, []string{"Read(x)"}, nil, []string{"Bash(rm:*)"})}).Hider() != nil {
		t.Error("a policy without read deny or ask patterns hides")
	}
}
