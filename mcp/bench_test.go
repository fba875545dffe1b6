package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/reinhq/rein/tool"
)

// BenchmarkCallOverhead measures what rein's MCP path adds to a call: each
// iteration calls the test server's echo once through the raw go-sdk
// client session and once through rein's tool (argument check, timeout
// and progress bookkeeping, content conversion, Meta), against two
// instances of the same stdio server, and reports both and their ratio.
func BenchmarkCallOverhead(b *testing.B) {
	ctx := context.Background()
	cfg := testServerConfig(b, "t")
	m := Start(Options{Servers: []ServerConfig{cfg}, Registry: mustRegistry(b)})
	defer m.Close()
	if err := m.Sync(ctx); err != nil {
		b.Fatal(err)
	}
	echo, ok := m.opts.Registry.Lookup("mcp__t__echo")
	if !ok {
		b.Fatalf("no echo tool: %+v", m.Status())
	}
	cmd := exec.Command(cfg.Command)
	cmd.Env = mergeEnv(nil, cfg.Env)
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "bench"}, &sdk.ClientOptions{Capabilities: &sdk.ClientCapabilities{}}).
		Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	args := json.RawMessage(`{"message":"benchmark"}`)
	var raw, rein time.Duration
	for b.Loop() {
		t0 := time.Now()
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: args})
		t1 := time.Now()
		if err != nil || res.IsError {
			b.Fatalf("raw call: %v %+v", err, res)
		}
		r, err := echo.Run(ctx, tool.Call{ID: "c", Arguments: args})
		t2 := time.Now()
		if err != nil || r.IsError {
			b.Fatalf("rein call: %v %+v", err, r)
		}
		raw += t1.Sub(t0)
		rein += t2.Sub(t1)
	}
	n := float64(b.N)
	b.ReportMetric(float64(raw.Nanoseconds())/n, "raw-ns")
	b.ReportMetric(float64(rein.Nanoseconds())/n, "rein-ns")
	b.ReportMetric(float64(rein)/float64(raw), "ratio")
}

// BenchmarkParallelStartup measures starting ten stdio servers at once
// against starting the slowest of them alone: each iteration starts the
// slowest server (it waits 300 ms before it answers, like a server that
// fetches its configuration) alone until its tools are published, then
// it and nine others (waiting 30–270 ms) together, and reports both and
// their ratio. Servers that start in parallel cost about the slowest one.
func BenchmarkParallelStartup(b *testing.B) {
	slowest := testServerConfig(b, "s9", "slowstart=300")
	all := []ServerConfig{slowest}
	for i := range 9 {
		all = append(all, testServerConfig(b, fmt.Sprint("s", i), fmt.Sprint("slowstart=", 30*(i+1))))
	}
	startup := func(servers []ServerConfig) time.Duration {
		t0 := time.Now()
		m := Start(Options{Servers: servers, Registry: mustRegistry(b)})
		if err := m.Sync(context.Background()); err != nil {
			b.Fatal(err)
		}
		d := time.Since(t0)
		for _, s := range m.Status() {
			if s.State != Ready {
				b.Fatalf("%s: %s %s", s.Name, s.State, s.Error)
			}
		}
		m.Close()
		return d
	}
	var alone, ten time.Duration
	for b.Loop() {
		alone += startup(all[:1])
		ten += startup(all)
	}
	n := float64(b.N)
	b.ReportMetric(float64(alone.Milliseconds())/n, "slowest-alone-ms")
	b.ReportMetric(float64(ten.Milliseconds())/n, "ten-parallel-ms")
	b.ReportMetric(float64(ten)/float64(alone), "ratio")
}

func mustRegistry(b *testing.B) *tool.Registry {
	r, err := tool.NewRegistry()
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// BenchmarkParallelStartupNode is the same comparison with ten instances
// of the reference server-everything (node): there startup is CPU work
// (loading node and the SDK, ~0.3 s of CPU each), so on a machine with
// fewer cores than servers the parallel start is bounded by CPU, not by
// rein. Informational; skipped without the npm packages.
func BenchmarkParallelStartupNode(b *testing.B) {
	bin, err := npmPath("mcp-server-everything")
	if err != nil {
		b.Skip(err)
	}
	var all []ServerConfig
	for i := range 10 {
		all = append(all, ServerConfig{Name: fmt.Sprint("e", i), Command: bin, Args: []string{"stdio"}})
	}
	startup := func(servers []ServerConfig) time.Duration {
		t0 := time.Now()
		m := Start(Options{Servers: servers, Registry: mustRegistry(b), Environ: npmEnviron()})
		if err := m.Sync(context.Background()); err != nil {
			b.Fatal(err)
		}
		d := time.Since(t0)
		m.Close()
		return d
	}
	var alone, ten time.Duration
	for b.Loop() {
		alone += startup(all[:1])
		ten += startup(all)
	}
	n := float64(b.N)
	b.ReportMetric(float64(alone.Milliseconds())/n, "one-ms")
	b.ReportMetric(float64(ten.Milliseconds())/n, "ten-parallel-ms")
	b.ReportMetric(float64(ten)/float64(alone), "ratio")
}
