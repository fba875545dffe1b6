package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/reinhq/rein/sandbox"
	"github.com/reinhq/rein/store"
	"github.com/reinhq/rein/store/jsonl"
	"github.com/reinhq/rein/store/postgres"
	"github.com/reinhq/rein/store/postgres/pgtest"
)

func TestMain(m *testing.M) {
	testscript.Main(stopPostgres{m}, map[string]func(){
		"rein": func() {
			code := Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
			// A background command's exit code is not visible to a
			// script: it may ask for it in a file.
			if f := os.Getenv("REIN_TEST_EXIT_FILE"); f != "" {
				_ = os.WriteFile(f, []byte(strconv.Itoa(code)+"\n"), 0o644)
			}
			os.Exit(code)
		},
		"rein-test-mcp": testMCPServer,
	})
}

// stopPostgres stops the test PostgreSQL server (if a script started it)
// after the tests.
type stopPostgres struct{ m *testing.M }

func (s stopPostgres) Run() int {
	code := s.m.Run()
	pgtest.Stop()
	return code
}

// TestScripts runs testdata/script/*.txtar against the real rein binary
// (this test binary, installed as "rein" on the scripts' PATH). Each script
// has its own HOME beside its work directory ($WORK.home), with
// XDG_CONFIG_HOME=$HOME/.config and REIN_HOME=$HOME/.rein-home; files the
// archive puts in .config/ and .claude/ are moved there.
//
// A rein run with REIN_TEST_EXIT_FILE set writes its exit code there (for
// commands run in the background).
//
// Extra commands:
//
//	exitcode N cmd args...   run cmd; its exit code must be N (stdout and
//	                         stderr are kept for stdout/stderr checks)
//	setenv-from NAME REGEXP  set $NAME to REGEXP's first group in the last
//	                         command's stdout
//	wait-log REGEXP          wait until a session file in $REIN_HOME
//	                         matches REGEXP
//	lock ID / unlock ID      hold / release session ID's writer lock in the
//	                         test process (another process holding it), in
//	                         the store $REIN_STORE names, else $REIN_HOME
//	pgstore NAME             set $NAME to the URL of a fresh PostgreSQL
//	                         store (condition [postgres]: a server can be had)
//	chop FILE                remove FILE's final newline (a torn write)
//	hold ID                  take session ID's writer lock as a running
//	                         rein would, without loading or repairing it
//	                         (released by unlock ID)
func TestScripts(t *testing.T) {
	var mu sync.Mutex
	locks := map[string]store.Writer{}
	held := map[string]*os.File{}
	t.Cleanup(func() {
		for _, w := range locks {
			_ = w.Close()
		}
		for _, f := range held {
			_ = f.Close()
		}
	})
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("testdata", "script"),
		RequireExplicitExec: true,
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "landlock":
				// The OS sandbox works here: rein (this test binary
				// called "rein") as its own launcher.
				exe, err := os.Executable()
				if err != nil {
					return false, err
				}
				sb := &sandbox.Sandbox{Launcher: sandbox.Launcher{Path: exe, Arg0: "rein"}}
				st := sb.Probe()
				if !st.Available() {
					t.Logf("[landlock] is false: %s", st.Why)
				}
				return st.Available(), nil
			case "postgres":
				_, err := pgtest.Get()
				if err != nil && os.Getenv(pgtest.EnvRequired) != "" {
					return false, err
				}
				return err == nil, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Setup: func(e *testscript.Env) error {
			// The user's home (config, sessions, ~/.claude) is beside the
			// work directory, not in it, as a project is beside the user's
			// configuration on a real machine: a workspace holding rein's
			// configuration or session store would be read-only (see
			// docs/security.md). The archive's .config/ and .claude/ are
			// the user's: they move there.
			home := e.WorkDir + ".home"
			if err := os.Mkdir(home, 0o755); err != nil {
				return err
			}
			for _, d := range []string{".config", ".claude"} {
				if err := os.Rename(filepath.Join(e.WorkDir, d), filepath.Join(home, d)); err != nil && !errors.Is(err, os.ErrNotExist) {
					return err
				}
			}
			e.Setenv("HOME", home)
			e.Setenv("REIN_HOME", filepath.Join(home, ".rein-home"))
			// The repository, for scripts that check its examples.
			repo, err := filepath.Abs(filepath.Join("..", ".."))
			if err != nil {
				return err
			}
			e.Setenv("REPO", repo)
			e.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
			// Under -race every rein process would sleep 1 s at exit
			// (atexit_sleep_ms); a race still fails the process (exit 66).
			e.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exitcode": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) < 2 {
					ts.Fatalf("usage: exitcode N cmd args...")
				}
				want, err := strconv.Atoi(args[0])
				if err != nil {
					ts.Fatalf("exitcode: %v", err)
				}
				err = ts.Exec(args[1], args[2:]...)
				got := 0
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					got = ee.ExitCode()
				} else if err != nil {
					ts.Fatalf("exitcode: %v", err)
				}
				if got != want {
					ts.Fatalf("exit code %d, want %d", got, want)
				}
			},
			"setenv-from": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) != 2 {
					ts.Fatalf("usage: setenv-from NAME REGEXP")
				}
				re, err := regexp.Compile(args[1])
				ts.Check(err)
				m := re.FindStringSubmatch(ts.ReadFile("stdout"))
				if len(m) < 2 {
					ts.Fatalf("setenv-from: %q does not match stdout", args[1])
				}
				ts.Setenv(args[0], m[1])
			},
			"wait-log": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) != 1 {
					ts.Fatalf("usage: wait-log REGEXP")
				}
				re, err := regexp.Compile(args[0])
				ts.Check(err)
				deadline := time.Now().Add(20 * time.Second)
				for time.Now().Before(deadline) {
					files, _ := filepath.Glob(filepath.Join(ts.Getenv("REIN_HOME"), "sessions", "*.jsonl"))
					for _, f := range files {
						if b, err := os.ReadFile(f); err == nil && re.Match(b) {
							return
						}
					}
					time.Sleep(20 * time.Millisecond)
				}
				ts.Fatalf("wait-log: no session log matches %q", args[0])
			},
			"lock": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) != 1 {
					ts.Fatalf("usage: lock ID")
				}
				var st store.Store
				if url := ts.Getenv("REIN_STORE"); strings.HasPrefix(url, "postgres") {
					pst, err := postgres.Open(context.Background(), url, postgres.Options{})
					ts.Check(err)
					ts.Defer(pst.Close)
					st = pst
				} else {
					jst, err := jsonl.Open(ts.Getenv("REIN_HOME"))
					ts.Check(err)
					st = jst
				}
				w, _, err := st.Open(context.Background(), args[0])
				ts.Check(err)
				mu.Lock()
				locks[ts.Getenv("WORK")+args[0]] = w
				mu.Unlock()
			},
			"pgstore": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) != 1 {
					ts.Fatalf("usage: pgstore NAME")
				}
				srv, err := pgtest.Get()
				ts.Check(err)
				dsn, drop, err := pgtest.NewSchema(srv.DSN)
				ts.Check(err)
				ts.Defer(func() { ts.Check(drop()) })
				ts.Setenv(args[0], dsn)
			},
			"hold": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) != 1 {
					ts.Fatalf("usage: hold ID")
				}
				f, err := os.OpenFile(filepath.Join(ts.Getenv("REIN_HOME"), "sessions", "."+args[0]+".lock"), os.O_RDWR|os.O_CREATE, 0o600)
				ts.Check(err)
				ts.Check(syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB))
				_, err = f.WriteString(strconv.Itoa(os.Getpid()) + "\n")
				ts.Check(err)
				mu.Lock()
				held[ts.Getenv("WORK")+args[0]] = f
				mu.Unlock()
			},
			"chop": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) != 1 {
					ts.Fatalf("usage: chop FILE")
				}
				f := ts.MkAbs(args[0])
				b, err := os.ReadFile(f)
				ts.Check(err)
				ts.Check(os.WriteFile(f, []byte(strings.TrimSuffix(string(b), "\n")), 0o600))
			},
			"unlock": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) != 1 {
					ts.Fatalf("usage: unlock ID")
				}
				mu.Lock()
				w, f := locks[ts.Getenv("WORK")+args[0]], held[ts.Getenv("WORK")+args[0]]
				delete(locks, ts.Getenv("WORK")+args[0])
				delete(held, ts.Getenv("WORK")+args[0])
				mu.Unlock()
				switch {
				case w != nil:
					ts.Check(w.Close())
				case f != nil:
					ts.Check(f.Close())
				default:
					ts.Fatalf("unlock: %s is not locked", args[0])
				}
			},
		},
	})
}
