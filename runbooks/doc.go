// Package runbooks holds kremedy's built-in runbooks, YAML files embedded in
// the binary, and the strict loader that reads them. A runbook has a name
// (its file's base name), a one-line summary, an optional description, the
// cluster mode it repairs (zookeeper), the parameters an operator sets with
// --set name=value (each typed string, topic, int, bool or duration, either
// required or with a default), and its steps. A step names a kind the engine
// implements, a title, the training note saying why it is done, its risk
// (read-only, low, destructive), the confirmation it needs (none, yes, or
// typed, which every destructive step needs), the rollback note as a
// text/template (required unless the step is read-only) and an optional
// timeout. Parse rejects everything else — unknown keys, wrong types,
// unknown step kinds, duplicate ids, templates that do not parse — with
// every problem as a *strictyaml.Error reading file:line:column: message,
// all of them joined in file order. Bind turns the --set pairs (ParseSet)
// into typed Values, filling defaults and validating topic names with
// steps.ValidateTopic before anything is planned.
package runbooks
