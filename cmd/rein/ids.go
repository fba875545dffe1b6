package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/reinhq/rein/store"
)

// resolveID returns the id of the session ref names: the session whose id
// is ref, else the one whose id starts with it (case-insensitively, as
// ULIDs are). Several candidates are an error that lists them. With no
// candidate it returns ref unchanged, for the caller's load to report.
func resolveID(ctx context.Context, st store.Store, ref string) (string, error) {
	if ref == "" {
		return "", usagef("empty session id")
	}
	infos, err := st.List(ctx)
	if err != nil {
		return "", err
	}
	var matches []string
	for _, in := range infos {
		if strings.EqualFold(in.ID, ref) {
			return in.ID, nil
		}
		if len(ref) < len(in.ID) && strings.EqualFold(in.ID[:len(ref)], ref) {
			matches = append(matches, in.ID)
		}
	}
	switch len(matches) {
	case 0:
		return ref, nil
	case 1:
		return matches[0], nil
	}
	shown := matches
	if len(shown) > 5 {
		shown = append(shown[:5:5], "…")
	}
	return "", fmt.Errorf("session %s is ambiguous: %d sessions start with it (%s); give more of the id", ref, len(matches), strings.Join(shown, ", "))
}
