package guard

import (
	"errors"
	"path/filepath"
)

// Settings is the permission part of rein's configuration:
//
//	{"mode": "workspace-write",
//	 "allow": ["bash(git status:*)", "bash(go test*)"],
//	 "ask":   ["bash(git push*)"],
//	 "deny":  ["read(**/.env)", "bash(rm -rf*)"],
//	 "writable": ["/tmp"]}
type Settings struct {
	Mode     string   `json:"mode,omitempty"`
	Allow    []string `json:"allow,omitempty"`
	Ask      []string `json:"ask,omitempty"`
	Deny     []string `json:"deny,omitempty"`
	Writable []string `json:"writable,omitempty"`
}

// Policy builds the policy for the workspace root (made absolute). Every
// bad rule is reported, joined, each wrapping ErrBadRule; a bad mode wraps
// ErrBadMode.
func (s Settings) Policy(root string) (*Policy, error) {
	mode, err := ParseMode(s.Mode)
	if err != nil {
		return nil, err
	}
	if root != "" {
		if root, err = filepath.Abs(root); err != nil {
			return nil, err
		}
	}
	p := &Policy{Mode: mode, Root: root, Writable: s.Writable}
	var errs []error
	for _, set := range []struct {
		rules  []string
		action Action
	}{{s.Deny, Deny}, {s.Ask, Ask}, {s.Allow, Allow}} {
		for _, text := range set.rules {
			r, err := ParseRule(text, set.action)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			p.Rules = append(p.Rules, r)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return p, nil
}
