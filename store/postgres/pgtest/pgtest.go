// Package pgtest gives tests a real PostgreSQL server: a private cluster
// that it creates in a temporary directory and starts on first use (one per
// test binary), or the server named by $REIN_TEST_POSTGRES (a connection
// URL) when that is set. Each test gets a fresh schema of its own (Fresh).
//
// The cluster is started with initdb and postgres found on $PATH or under
// /usr/lib/postgresql/*/bin. PostgreSQL refuses to run as root, so as root
// both run as the "postgres" user (the one Debian's package creates). The
// server listens on a Unix socket in the temporary directory only (no TCP
// port to collide on), runs with fsync off (the data is thrown away), and
// gets SIGQUIT when the test binary dies, so no server outlives its tests.
// Test binaries call Main from TestMain to stop it at the end.
//
// When no server can be had, tests skip with the reason, unless
// $REIN_TEST_POSTGRES_REQUIRED is set (CI sets it), in which case they fail.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Environment variables.
const (
	// EnvDSN names an existing server to use instead of starting one.
	EnvDSN = "REIN_TEST_POSTGRES"
	// EnvRequired makes a missing server a test failure instead of a skip.
	EnvRequired = "REIN_TEST_POSTGRES_REQUIRED"
)

// Server is a running PostgreSQL server for tests.
type Server struct {
	// DSN is a connection URL for its "postgres" database as a superuser.
	DSN string

	dir  string    // the cluster's temporary directory ("" for $REIN_TEST_POSTGRES)
	cmd  *exec.Cmd // the postmaster we started
	done chan struct{}
}

var (
	once     sync.Once
	shared   *Server
	startErr error
	schemas  atomic.Int64
)

// Main runs the tests of a test binary and then stops the cluster if one
// was started. Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	Stop()
	os.Exit(code)
}

// Stop stops the shared cluster if Get started one.
func Stop() {
	if shared != nil {
		shared.Stop()
	}
}

// Get returns the shared server, starting it on first use.
func Get() (*Server, error) {
	once.Do(func() {
		if dsn := os.Getenv(EnvDSN); dsn != "" {
			shared = &Server{DSN: dsn}
			return
		}
		shared, startErr = Start()
	})
	return shared, startErr
}

// DSN returns the shared server's URL, skipping (or failing, see
// EnvRequired) t when no server can be had.
func DSN(t testing.TB) string {
	t.Helper()
	s, err := Get()
	if err != nil {
		if os.Getenv(EnvRequired) != "" {
			t.Fatalf("no PostgreSQL server (%s is set): %v", EnvRequired, err)
		}
		t.Skipf("no PostgreSQL server: %v (set %s to a URL to use one)", err, EnvDSN)
	}
	return s.DSN
}

// Fresh creates an empty schema for t, dropped when t ends, and returns a
// URL whose search_path is that schema: tables created through it land
// there, so tests do not see each other's data.
func Fresh(t testing.TB) string {
	t.Helper()
	dsn, drop, err := NewSchema(DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := drop(); err != nil {
			t.Error(err)
		}
	})
	return dsn
}

// NewSchema creates an empty schema on the server at base and returns a
// URL whose search_path is that schema, and a function that drops it.
func NewSchema(base string) (dsn string, drop func() error, err error) {
	name := fmt.Sprintf("t%d_%d", os.Getpid(), schemas.Add(1))
	exec := func(sql string) error {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			return fmt.Errorf("pgtest: connect: %v", err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("pgtest: %v", err)
		}
		return nil
	}
	if err := exec("CREATE SCHEMA " + name); err != nil {
		return "", nil, err
	}
	dsn, err = WithSearchPath(base, name)
	if err != nil {
		return "", nil, err
	}
	return dsn, func() error { return exec("DROP SCHEMA " + name + " CASCADE") }, nil
}

// WithSearchPath returns dsn (a URL) with its search_path set to schema.
func WithSearchPath(dsn, schema string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("pgtest: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// Start creates and starts a private cluster. Stop it with Stop.
func Start() (*Server, error) {
	initdb, err := findBin("initdb")
	if err != nil {
		return nil, err
	}
	postgres := filepath.Join(filepath.Dir(initdb), "postgres")
	if _, err := os.Stat(postgres); err != nil {
		return nil, fmt.Errorf("postgres is not next to %s", initdb)
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "rein-pg-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, done: make(chan struct{})}
	ok := false
	defer func() {
		if !ok {
			s.Stop()
		}
	}()
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	init := exec.Command(initdb, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C", "--no-sync", "-D", data)
	init.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := init.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v: %s", err, lastLines(out))
	}
	logf, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	const port = 5432 // on a socket in our own directory: no collisions
	s.cmd = exec.Command(postgres, "-D", data, "-k", dir, "-h", "", "-p", strconv.Itoa(port),
		"-F", "-c", "max_connections=200", "-c", "shared_buffers=128MB")
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	// On Linux, SIGQUIT (immediate shutdown) when the test binary dies,
	// however it dies. The signal is tied to the thread that forks, so that
	// thread stays locked to a goroutine for the server's lifetime.
	s.cmd.SysProcAttr = serverAttr(cred)
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		err := s.cmd.Start()
		started <- err
		if err == nil {
			_ = s.cmd.Wait()
		}
		close(s.done)
	}()
	if err := <-started; err != nil {
		s.cmd = nil
		return nil, fmt.Errorf("start postgres: %v", err)
	}
	s.DSN = fmt.Sprintf("postgres://postgres@/postgres?host=%s&port=%d&sslmode=disable", url.QueryEscape(dir), port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, s.DSN)
		cancel()
		if err == nil {
			conn.Close(context.Background())
			break
		}
		select {
		case <-s.done:
			log, _ := os.ReadFile(filepath.Join(dir, "log"))
			return nil, fmt.Errorf("postgres exited: %s", lastLines(log))
		default:
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("postgres did not accept connections within 30s: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	ok = true
	return s, nil
}

// Stop shuts a started cluster down (fast shutdown, then immediate) and
// removes its directory. It does nothing for a server it did not start.
func (s *Server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			<-s.done
		}
	}
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
}

// findBin finds a PostgreSQL server program on $PATH or in Debian's
// versioned directories (newest first).
func findBin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found on PATH or in /usr/lib/postgresql/*/bin (install the postgresql package)", name)
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// credential returns the user to run the server as: nil (ourselves) unless
// we are root, which PostgreSQL refuses; then "postgres".
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, errors.New(`running as root and there is no "postgres" user to run the server as`)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func lastLines(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strings.Join(lines, "\n")
}
