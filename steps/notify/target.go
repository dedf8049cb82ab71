package notify

import (
	"errors"
	"fmt"
	"net/url"

	"github.com/kremedy/kremedy/internal/webhook"
)

// Format is the body a webhook gets.
type Format int

const (
	Auto  Format = iota // Slack for a Slack incoming-webhook URL, JSON otherwise
	JSON                // the Message itself
	Slack               // a Slack incoming-webhook body: text and blocks
)

var formatNames = [...]string{"auto", "json", "slack"}

func (f Format) String() string {
	if f < 0 || int(f) >= len(formatNames) {
		return fmt.Sprintf("Format(%d)", int(f))
	}
	return formatNames[f]
}

// ParseFormat reads a format's name ("" is Auto).
func ParseFormat(s string) (Format, error) {
	if s == "" {
		return Auto, nil
	}
	for i, n := range formatNames {
		if n == s {
			return Format(i), nil
		}
	}
	return Auto, fmt.Errorf("format %q: use slack or json", s)
}

// Target is one webhook.
type Target struct {
	URL    string
	Format Format
	// Token, when set, is sent as "Authorization: Bearer <token>".
	Token string
}

// ErrTarget is wrapped by Check's errors.
var ErrTarget = errors.New("not a webhook kremedy can notify")

// IsSlack reports whether u is a Slack incoming webhook
// (https://hooks.slack.com/services/…), whose URL is its secret.
func IsSlack(u string) bool { return webhook.IsSlack(u) }

// Check refuses what kremedy must not POST to: not an absolute http(s)
// URL, a user and password in it, or a token that would travel in clear
// text to another machine.
func (t Target) Check() error {
	u, err := url.Parse(t.URL)
	switch {
	case err != nil:
		return fmt.Errorf("%w: %s is not a URL", ErrTarget, Name(t.URL))
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		return fmt.Errorf("%w: %s: use an http:// or https:// URL with a host", ErrTarget, Name(t.URL))
	case u.User != nil:
		return fmt.Errorf("%w: %s has a user or password in it; give a bearer token from an environment variable or a file instead", ErrTarget, Name(t.URL))
	case t.Token != "" && u.Scheme == "http" && !webhook.Loopback(u.Hostname()):
		return fmt.Errorf("%w: %s: a token is sent over https only (or to this machine's loopback); nothing was sent", ErrTarget, Name(t.URL))
	}
	return nil
}

// format is the body t gets.
func (t Target) format() Format {
	if t.Format != Auto {
		return t.Format
	}
	if IsSlack(t.URL) {
		return Slack
	}
	return JSON
}

// Name is how messages name a webhook: its scheme and host, never its
// path or query (a Slack webhook's path is its secret).
func Name(raw string) string { return webhook.Name(raw) }
