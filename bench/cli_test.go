package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/reinhq/rein/session"
)

// reinBinary builds the rein CLI once per benchmark run.
func reinBinary(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "rein")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/reinhq/rein/cmd/rein")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		b.Fatalf("build rein: %v", err)
	}
	return bin
}

// spawnEnv makes this test binary a spawner: it runs its arguments as a
// command, with its own stdin, stdout and stderr, and writes the command's
// peak resident memory (rusage maxrss, bytes) to the file the variable
// names. A process started straight from the benchmark would report the
// benchmark's memory instead: Linux starts a child in its parent's address
// space (vfork), and its maxrss keeps that space's high-water mark across
// exec. The spawner is a fresh, small process, so what it adds is small.
const spawnEnv = "REIN_BENCH_SPAWN"

func spawn(rssFile string) int {
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	if cmd.ProcessState != nil {
		os.WriteFile(rssFile, fmt.Appendf(nil, "%d", cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss<<10), 0o600)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// runRein runs the CLI on the store at root with its output to out and
// returns its wall time. With rss set it runs it under a spawner instead
// and returns its peak resident memory too (the time then includes the
// spawner's).
func runRein(b *testing.B, bin, root string, out io.Writer, rss bool, args ...string) (time.Duration, int64) {
	b.Helper()
	rssFile := filepath.Join(b.TempDir(), "rss")
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "REIN_HOME="+root)
	if rss {
		cmd = exec.Command(os.Args[0], append([]string{bin}, args...)...)
		cmd.Env = append(os.Environ(), "REIN_HOME="+root, spawnEnv+"="+rssFile)
	}
	cmd.Stdout = out
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		b.Fatalf("rein %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	d := time.Since(t0)
	if !rss {
		return d, 0
	}
	raw, err := os.ReadFile(rssFile)
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	fmt.Sscan(string(raw), &n)
	return d, n
}

// BenchmarkCLIFork: 'rein sessions fork big' (a new process: it finds the
// fork point in the fork index and copies, without loading the parent) vs
// the store-level Fork at the same point in this process. Fastest of four
// interleaved rounds, alternating which goes first; then one more CLI fork
// under the spawner for its peak memory. Target: cli/store <= 1.5.
//
//	go test -run '^$' -bench CLIFork -benchtime 1x ./bench/
func BenchmarkCLIFork(b *testing.B) {
	s, _ := big(b)
	resume(s, BigID) // writes the fork index when the cached session predates it
	bin := reinBinary(b)
	fp, err := s.LastForkPoint(bg, BigID)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		var storeD, cliD time.Duration
		var rss int64
		keep := func(d *time.Duration, v time.Duration) {
			if *d == 0 || v < *d {
				*d = v
			}
		}
		storeFork := func(i int) {
			id := fmt.Sprintf("storefork%d", i)
			t0 := time.Now()
			if _, err := s.Fork(bg, BigID, fp.At, session.Header{ID: id, Cwd: fp.Header.Cwd}); err != nil {
				b.Fatal(err)
			}
			keep(&storeD, time.Since(t0))
			s.Delete(bg, id)
		}
		cliFork := func(measure bool) {
			var out bytes.Buffer
			d, r := runRein(b, bin, s.Root(), &out, measure, "sessions", "fork", BigID)
			if measure {
				rss = r
			} else {
				keep(&cliD, d)
			}
			if err := s.Delete(bg, strings.TrimSpace(out.String())); err != nil {
				b.Fatal(err)
			}
		}
		// Alternate which goes first: a fork leaves its 167 MB being
		// written back while the next one copies and syncs.
		for i := range 4 {
			if i%2 == 0 {
				storeFork(i)
				cliFork(false)
			} else {
				cliFork(false)
				storeFork(i)
			}
		}
		cliFork(true)
		b.ReportMetric(ms(storeD), "store-ms")
		b.ReportMetric(ms(cliD), "cli-ms")
		b.ReportMetric(float64(cliD)/float64(storeD), "cli/store")
		b.ReportMetric(float64(rss)/(1<<20), "cli-peak-rss-MB")
	}
}

// BenchmarkShowJSON: 'rein sessions show --json big' into a pipe that a
// reader drains, its peak resident memory (the child's rusage maxrss) as a
// share of the file's size, and its time. Target: rss/file <= 1.5.
//
//	go test -run '^$' -bench ShowJSON -benchtime 1x ./bench/
func BenchmarkShowJSON(b *testing.B) {
	s, path := big(b)
	bin := reinBinary(b)
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	lineScan(path) // warm the page cache
	header, err := readFirstLine(path)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		var best time.Duration
		var rss int64
		for i := range 4 {
			var n countWriter
			d, r := runRein(b, bin, s.Root(), &n, i == 0, "sessions", "show", "--json", BigID)
			// Every event line again, byte for byte (the header is not
			// printed).
			if want := fi.Size() - int64(len(header)); int64(n) != want {
				b.Fatalf("printed %d bytes, want %d", n, want)
			}
			if i == 0 {
				rss = r
			} else if best == 0 || d < best {
				best = d
			}
		}
		b.ReportMetric(ms(best), "show-json-ms")
		b.ReportMetric(float64(rss)/(1<<20), "peak-rss-MB")
		b.ReportMetric(float64(fi.Size())/(1<<20), "file-MB")
		b.ReportMetric(float64(rss)/float64(fi.Size()), "rss/file")
	}
}

// countWriter counts what is written to it.
type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) {
	*c += countWriter(len(p))
	return len(p), nil
}

func readFirstLine(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return bufio.NewReader(f).ReadBytes('\n')
}
