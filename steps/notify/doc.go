// Package notify tells a team what a run is doing: one more steps.Reporter
// that POSTs one JSON object per event that matters to the people watching
// (the run's start and end, each step's plan, confirmation, start and end,
// the outage window opening and closing, a failure with its resume command,
// a second approval wanted) to every webhook of the run — a Slack
// incoming-webhook body (text and blocks) for a hooks.slack.com/services/
// URL, the plain event otherwise, with a bearer token when one is given.
//
// It never blocks or fails the repair: Report only formats the event and
// queues it, without waiting; each webhook has its own goroutine and
// bounded queue and gets its events in order, each retried with backoff
// for a bounded time (Options.Retry) while the webhook is healthy and tried
// once while it is not. A webhook that loses an event, or gets them late, is
// reported once (Options.Problem: the journal and the screen), and the run
// goes on. Close, at the end of a run, waits a little for what is still
// queued (Options.Flush with no delivery, Options.MaxFlush in all) and says
// what was not delivered. Messages name a webhook by its scheme and host
// only: its path and query may be its secret.
package notify
