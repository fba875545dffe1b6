package main

import "fmt"

// Exit codes of rein. `rein run` exits ExitOK only when the turn completed.
const (
	// ExitOK: the command did what it was asked; for run, the turn completed.
	ExitOK = 0
	// ExitError: rein failed (configuration, store, model setup), or the
	// turn ended with an error, max-tokens or interrupted.
	ExitError = 1
	// ExitUsage: bad flags or arguments.
	ExitUsage = 2
	// ExitBlocked: prompt admission blocked the prompt; no turn ran.
	ExitBlocked = 3
	// ExitLocked: the session is held by another process.
	ExitLocked = 4
	// ExitMaxSteps: the turn reached the step limit (--max-steps) while the
	// model still had work to do.
	ExitMaxSteps = 5
	// ExitAborted: the turn was aborted (SIGINT, or a hook cancelled it).
	ExitAborted = 130
)

// exitError carries an exit code up to Main. A nil err with a code is a quiet
// exit (the command already said what happened).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

func exitWith(code int, err error) error { return &exitError{code: code, err: err} }

func usagef(format string, args ...any) error {
	return exitWith(ExitUsage, fmt.Errorf(format, args...))
}
