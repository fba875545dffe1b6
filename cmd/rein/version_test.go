package main

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionOf(t *testing.T) {
	bi := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/reinhq/rein", Version: "v0.2.0"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123"},
			{Key: "vcs.time", Value: "2026-12-01T10:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	got := versionOf(bi, true)
	want := "rein v0.2.0 (0123456789ab+dirty, 2026-12-01T10:00:00Z) go1.26.8 "
	if !strings.HasPrefix(got, want) {
		t.Errorf("versionOf = %q, want prefix %q", got, want)
	}
	if got := versionOf(nil, false); !strings.HasPrefix(got, "rein (unknown) go") {
		t.Errorf("versionOf without build info = %q", got)
	}
	bi.Settings = nil
	bi.Main.Version = "(devel)"
	if got := versionOf(bi, true); !strings.HasPrefix(got, "rein (devel) go1.26.8 ") {
		t.Errorf("versionOf of a checkout build = %q", got)
	}
}
