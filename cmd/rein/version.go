package main

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// version describes this binary from its build information: the module
// version (a tag such as v0.3.0 when installed with `go install …@version`,
// "(devel)" when built from a checkout), the VCS revision and time the
// checkout was at (with "+dirty" when it had uncommitted changes), and the Go
// toolchain.
func version() string {
	return versionOf(debug.ReadBuildInfo())
}

func versionOf(bi *debug.BuildInfo, ok bool) string {
	mod, rev, at, dirty := "(unknown)", "", "", false
	goVersion := runtime.Version()
	if ok && bi != nil {
		if bi.Main.Version != "" {
			mod = bi.Main.Version
		}
		if bi.GoVersion != "" {
			goVersion = bi.GoVersion
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	var b strings.Builder
	b.WriteString("rein ")
	b.WriteString(mod)
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		b.WriteString(" (")
		b.WriteString(rev)
		if dirty {
			b.WriteString("+dirty")
		}
		if at != "" {
			b.WriteString(", ")
			b.WriteString(at)
		}
		b.WriteString(")")
	}
	b.WriteString(" ")
	b.WriteString(goVersion)
	b.WriteString(" ")
	b.WriteString(runtime.GOOS + "/" + runtime.GOARCH)
	return b.String()
}
