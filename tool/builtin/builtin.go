// Package builtin assembles rein's default tool set: read, write, edit,
// glob, grep, ls, bash and todo, in that order (the order of the request's
// tool list).
//
// It only composes; it owns no state. It imports the tool sub-packages.
package builtin

import (
	"github.com/reinhq/rein/tool"
	"github.com/reinhq/rein/tool/fs"
	"github.com/reinhq/rein/tool/shell"
	"github.com/reinhq/rein/tool/todo"
)

// Options configure the default tools.
type Options struct {
	FS    fs.Options
	Shell shell.Options
}

// All returns the default tools.
func All(opts Options) []tool.Tool {
	tools := fs.All(opts.FS)
	return append(tools, shell.Bash(opts.Shell), todo.Tool())
}

// Registry returns a registry holding All(opts).
func Registry(opts Options) (*tool.Registry, error) {
	return tool.NewRegistry(All(opts)...)
}
