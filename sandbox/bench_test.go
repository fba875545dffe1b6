package sandbox

import (
	"os/exec"
	"testing"
	"time"
)

// BenchmarkLauncher measures what the sandbox adds to starting a command:
// each iteration runs /bin/true plainly and through the launcher (with and
// without a network namespace), and reports each as ns and the ratios to
// the plain run measured in the same iterations.
func BenchmarkLauncher(b *testing.B) {
	s := New(Launcher{}, Policy{Write: []string{b.TempDir()}})
	defer s.Close()
	if st := s.Probe(); !st.Available() {
		b.Skipf("no OS sandbox here: %s", st.Why)
	}
	noNS := New(s.Launcher, s.Policy)
	defer noNS.Close()
	noNS.Probe()
	noNS.status.NetNS = false
	run := func(sb *Sandbox) time.Duration {
		cmd := exec.Command("/bin/true")
		start := time.Now()
		var err error
		if sb == nil {
			err = cmd.Run()
		} else if err = sb.Start(cmd); err == nil {
			err = cmd.Wait()
		}
		if err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	var plain, boxed, boxedNoNS time.Duration
	for b.Loop() {
		plain += run(nil)
		boxed += run(s)
		boxedNoNS += run(noNS)
	}
	n := float64(b.N)
	b.ReportMetric(float64(plain.Nanoseconds())/n, "plain-ns")
	b.ReportMetric(float64(boxed.Nanoseconds())/n, "sandboxed-ns")
	b.ReportMetric(float64(boxedNoNS.Nanoseconds())/n, "sandboxed-no-netns-ns")
	b.ReportMetric(float64(boxed)/float64(plain), "ratio")
	b.ReportMetric(float64(boxedNoNS)/float64(plain), "ratio-no-netns")
}
