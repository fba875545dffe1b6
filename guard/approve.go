package guard

import (
	"context"
	"encoding/json"
)

// Request asks an Approver whether a call may run.
type Request struct {
	Tool   string
	CallID string
	Args   json.RawMessage
	// Reason is why the policy asks.
	Reason string
}

// Approval is an Approver's answer.
type Approval struct {
	Allow bool
	// By names who decided: "user", "flag:--yes", "headless", or a
	// Decision's By when the policy decided alone.
	By     string
	Reason string
}

// Approver answers the policy's "ask". The TUI and ACP ask a human; a
// headless run uses DenyAll, or Yes with --yes. Approve must honour ctx: on
// cancellation it returns promptly (a denial, with ctx's error).
type Approver interface {
	Approve(ctx context.Context, req Request) (Approval, error)
}

// ApproverFunc adapts a function to Approver.
type ApproverFunc func(ctx context.Context, req Request) (Approval, error)

// Approve calls f.
func (f ApproverFunc) Approve(ctx context.Context, req Request) (Approval, error) { return f(ctx, req) }

// DenyAll is the headless default: it denies every request. (It is not
// called Deny, which is the Action.)
type DenyAll struct{}

// Approve denies.
func (DenyAll) Approve(context.Context, Request) (Approval, error) {
	return Approval{Allow: false, By: "headless", Reason: "no approver; rerun with --yes"}, nil
}

// Yes approves every request (the --yes flag).
type Yes struct{}

// Approve allows.
func (Yes) Approve(context.Context, Request) (Approval, error) {
	return Approval{Allow: true, By: "flag:--yes"}, nil
}

// Authorize decides a call: the policy alone for allow and deny, the
// approver (DenyAll when nil) for ask. It returns the outcome to record as
// tool/approval and the policy's decision. An approver error denies the
// call, with the error as the reason, and is returned. A headless denial
// keeps the policy's reason for asking in front of its own.
func Authorize(ctx context.Context, p *Policy, a Approver, toolName, callID string, args json.RawMessage) (Approval, Decision, error) {
	d := p.Decide(toolName, args)
	switch d.Action {
	case Allow:
		return Approval{Allow: true, By: d.By, Reason: d.Reason}, d, nil
	case Deny:
		return Approval{Allow: false, By: d.By, Reason: d.Reason}, d, nil
	}
	if a == nil {
		a = DenyAll{}
	}
	ap, err := a.Approve(ctx, Request{Tool: toolName, CallID: callID, Args: args, Reason: d.Reason})
	if err != nil {
		return Approval{Allow: false, By: "approver", Reason: err.Error()}, d, err
	}
	switch {
	case ap.Allow:
	case ap.Reason == "":
		ap.Reason = d.Reason
	case ap.By == "headless" && d.Reason != "":
		// Say why it was asked, not only that nobody could answer.
		ap.Reason = d.Reason + "; " + ap.Reason
	}
	return ap, d, nil
}
