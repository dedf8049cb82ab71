// Package webhook holds what the inventory's checks and the notifier
// (steps/notify) agree on about a webhook URL: whether it is a Slack
// incoming webhook (whose URL is its secret), how messages name one without
// its secret, and whether it is this machine's.
package webhook

import (
	"net"
	"net/url"
	"strings"
)

// IsSlack reports whether raw is a Slack incoming webhook,
// https://hooks.slack.com/services/T…/B…/… (api.slack.com/messaging/webhooks):
// its path is the credential.
func IsSlack(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && strings.EqualFold(u.Hostname(), "hooks.slack.com") && strings.HasPrefix(u.Path, "/services/")
}

// Name is how messages name a webhook: its scheme and host, never its
// user, path or query (any of which may be its secret).
func Name(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "a webhook (not a URL)"
	}
	return u.Scheme + "://" + u.Host + "/…"
}

// Loopback reports whether host names this machine's loopback.
func Loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
