package tui

import "github.com/reinhq/rein/agent"

// retryNotice describes a live event that says a failed model request
// will be sent again ("" for any other event).
func retryNotice(l agent.Live) string {
	return ""
}
