package trust

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// ErrCorrupt: the trust file cannot be read as a trust file. Nothing is
// trusted until it is fixed or removed (rein never rewrites a file it
// cannot read).
var ErrCorrupt = errors.New("trust: corrupt trust file")

// FileName is the trust file's name in the user's config directory.
const FileName = "trusted.json"

// fileVersion is the trust file's format version.
const fileVersion = 1

// Store is the user's trust file: the workspaces trusted, each with the
// items trusted and their digest. It is JSON, written whole to a temporary
// file and renamed over the old one (mode 0600), under an exclusive lock
// file so concurrent rein processes do not lose each other's updates.
type Store struct{ path string }

// NewStore returns the store kept at path (see FileName). The file and its
// directory are created on the first Trust.
func NewStore(path string) *Store { return &Store{path: path} }

// Path is the trust file's path.
func (s *Store) Path() string { return s.path }

// Entry is one trusted workspace.
type Entry struct {
	// Root is the workspace root's real path.
	Root string `json:"root"`
	// Digest is Digest(Items).
	Digest string `json:"digest"`
	// Items are the settings the user trusted.
	Items     []Item    `json:"items"`
	TrustedAt time.Time `json:"trustedAt"`
}

type fileData struct {
	Version    int     `json:"version"`
	Workspaces []Entry `json:"workspaces"`
}

// List returns the trusted workspaces, sorted by root.
func (s *Store) List() ([]Entry, error) {
	f, err := s.read()
	if err != nil {
		return nil, err
	}
	return f.Workspaces, nil
}

// Get returns the entry of the workspace whose real path is root.
func (s *Store) Get(root string) (Entry, bool, error) {
	f, err := s.read()
	if err != nil {
		return Entry{}, false, err
	}
	i := slices.IndexFunc(f.Workspaces, func(e Entry) bool { return e.Root == root })
	if i < 0 {
		return Entry{}, false, nil
	}
	return f.Workspaces[i], true, nil
}

// Trust records that the user trusts the workspace at root (a real path,
// see Key) with these items, replacing what was trusted before.
func (s *Store) Trust(root string, items []Item, now time.Time) error {
	items = slices.Clone(items)
	sortItems(items)
	return s.update(func(f *fileData) bool {
		f.Workspaces = slices.DeleteFunc(f.Workspaces, func(e Entry) bool { return e.Root == root })
		f.Workspaces = append(f.Workspaces, Entry{Root: root, Digest: Digest(items), Items: items, TrustedAt: now.UTC().Truncate(time.Second)})
		return true
	})
}

// Revoke forgets the workspace at root. It reports whether it was trusted.
func (s *Store) Revoke(root string) (bool, error) {
	found := false
	err := s.update(func(f *fileData) bool {
		n := len(f.Workspaces)
		f.Workspaces = slices.DeleteFunc(f.Workspaces, func(e Entry) bool { return e.Root == root })
		found = len(f.Workspaces) < n
		return found
	})
	return found, err
}

func (s *Store) read() (*fileData, error) {
	b, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return &fileData{Version: fileVersion}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("trust: %w", err)
	}
	var f fileData
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, s.path, err)
	}
	if f.Version != fileVersion {
		return nil, fmt.Errorf("%w: %s: version %d, want %d", ErrCorrupt, s.path, f.Version, fileVersion)
	}
	return &f, nil
}

// update runs change on the current file under the lock and writes the
// result when change reports a change.
func (s *Store) update(change func(*fileData) bool) error {
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return fmt.Errorf("trust: %w", err)
	}
	unlock, err := lockFile(s.path + ".lock")
	if err != nil {
		return fmt.Errorf("trust: lock %s: %w", s.path, err)
	}
	defer unlock()
	f, err := s.read()
	if err != nil {
		return err
	}
	if !change(f) {
		return nil
	}
	slices.SortFunc(f.Workspaces, func(a, b Entry) int { return strings.Compare(a.Root, b.Root) })
	f.Version = fileVersion
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("trust: %w", err)
	}
	return writeAtomic(s.path, append(b, '\n'))
}

// writeAtomic writes data to a temporary file next to path, syncs it and
// renames it over path, so a reader sees the old file or the new one.
func writeAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("trust: %w", err)
	}
	name := tmp.Name()
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(name)
		}
	}()
	if err := tmp.Chmod(0o600); err != nil {
		return fmt.Errorf("trust: %w", err)
	}
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("trust: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("trust: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("trust: %w", err)
	}
	if err := os.Rename(name, path); err != nil {
		return fmt.Errorf("trust: %w", err)
	}
	ok = true
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
