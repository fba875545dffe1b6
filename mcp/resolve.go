package mcp

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// pinCommand returns the server's configuration with its command found
// once, on the first start, and the same file on every restart: a
// command found on PATH (which may hold a directory the model's tools
// can write) is not looked up again. Options.CheckCommand decides
// whether the file may run at all.
func (s *server) pinCommand() (ServerConfig, error) {
	cfg := s.cfg
	if s.exe == "" {
		found := cfg.Command
		if !strings.Contains(found, "/") {
			p, err := exec.LookPath(found)
			if err != nil {
				return cfg, fmt.Errorf("cannot start %s: %w", cfg.Command, err)
			}
			found = p
		}
		if !filepath.IsAbs(found) {
			found = filepath.Join(procDir(cfg, s.m.opts.Dir, s.m.opts.ServerDir), found)
		}
		found, err := filepath.Abs(found)
		if err != nil {
			return cfg, fmt.Errorf("cannot start %s: %w", cfg.Command, err)
		}
		real, err := filepath.EvalSymlinks(found)
		if err != nil {
			return cfg, fmt.Errorf("cannot start %s: %w", cfg.Command, err)
		}
		if check := s.m.opts.CheckCommand; check != nil {
			if err := check(found, real); err != nil {
				return cfg, fmt.Errorf("refusing to start %s: %w", cfg.Command, err)
			}
		}
		s.exe = found
	}
	cfg.Command = s.exe
	return cfg, nil
}
