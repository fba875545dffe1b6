package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/reinhq/rein/hook"
	"github.com/reinhq/rein/trust"
)

// workspaces are the workspaces a face that opens many sessions (rein acp,
// the terminal UI) opens them in: each root gets its own view of the app
// (inWorkspace), with the configuration loaded from that workspace and its
// trust decided for it, so that the settings of the directory rein started
// in, or of another session's workspace, never apply to a session, and
// nothing a session's workspace adds ("allow always" rules, trusted
// settings) changes the process's configuration. Models are shared by what
// resolves them (providerKey): a scripted model's calls are consumed
// across sessions in order and verified once at the end.
type workspaces struct {
	a      *app
	mu     sync.Mutex // views, models, and each view's configuration while its trust is decided
	views  map[string]*app
	models map[string]*model
}

func newWorkspaces(a *app) *workspaces {
	return &workspaces{a: a, views: map[string]*app{}, models: map[string]*model{}}
}

// open returns the view of dir's workspace with its trust decided (the
// question goes to the person through ask), its writes confined
// (confineWrites), its hooks, and the model: the view's, or modelSpec
// when given (for this session: the view keeps its own).
func (ws *workspaces) open(ctx context.Context, dir string, ask trust.Asker, modelSpec string) (*app, *hook.Config, *model, error) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	root := ws.a.workspaceRoot(dir)
	key := trust.Key(root)
	w := ws.views[key]
	if w == nil {
		var err error
		if w, err = ws.a.inWorkspace(root); err != nil {
			return nil, nil, nil, err
		}
		ws.views[key] = w
	}
	// Trust first: the workspace's held settings (provider URLs, allow
	// rules, hooks) apply only once it is trusted.
	w.trustAsker = ask
	hc, err := w.trustWorkspace(ctx, dir)
	w.trustAsker = nil
	if err != nil {
		return nil, nil, nil, err
	}
	if err := w.confineWrites(dir); err != nil {
		return nil, nil, nil, err
	}
	m, err := ws.modelFor(w, modelSpec)
	if err != nil {
		return nil, nil, nil, err
	}
	return w, hc, m, nil
}

// modelFor is the model of a session of view w: spec, or the view's own
// when spec is "". Models are resolved once per providerKey and shared;
// the view is not changed. ws.mu is held.
func (ws *workspaces) modelFor(w *app, spec string) (*model, error) {
	v := w
	if spec != "" && spec != w.cfg.Model {
		c := *w.cfg
		c.Model = spec
		cp := *w
		cp.cfg = &c
		v = &cp
	}
	pk := v.providerKey()
	base := ws.models[pk]
	if base == nil {
		var err error
		if base, err = v.resolveModel(); err != nil {
			if u := errors.Unwrap(err); v != w && u != nil {
				err = fmt.Errorf("model %s: %w", spec, u) // not the configured one's origin
			}
			return nil, err
		}
		ws.models[pk] = base
	}
	m := *base
	v.tune(&m)
	return &m, nil
}

// forget drops the view of the workspace root: the next session there
// gets a view loaded afresh (its trust decided again, or as remembered).
// Open sessions keep theirs.
func (ws *workspaces) forget(root string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	delete(ws.views, trust.Key(root))
}

// verify checks that each scripted model used its whole script.
func (ws *workspaces) verify() error {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	var err error
	for _, m := range ws.models {
		if m.scripted == nil {
			continue
		}
		if verr := m.scripted.Verify(); verr != nil {
			fmt.Fprintf(ws.a.stderr, "rein: scripted model: %v\n", verr)
			err = exitWith(ExitError, nil)
		}
	}
	return err
}

// resumed returns the model a resumed session runs with: spec, the model
// of its last request (lastRequestModel), as 'rein run --session' keeps it,
// unless --model chose the model for this run or spec cannot be used now;
// then m, and a notice saying why. (A face that lets the person pick a
// model passes the pick as the session's model spec instead.)
func (ws *workspaces) resumed(w *app, m *model, spec string) (*model, string) {
	if spec == "" || spec == m.spec || w.cfg.Origin("model") == "flag --model" {
		return m, ""
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	mm, err := ws.modelFor(w, spec)
	if err != nil {
		return m, fmt.Sprintf("this session ran on %s, which cannot be used now (%v); it continues on %s", spec, errors.Unwrap(err), m.spec)
	}
	return mm, ""
}
