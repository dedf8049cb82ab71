// Package runbooks holds kremedy's built-in runbooks, YAML files embedded in
// the binary, the strict loader that reads them, and the registry of every
// step kind kremedy has (Kinds, from the kind packs).
//
// A runbook has a name (its file's base name), a one-line summary, an
// optional description, the cluster mode it repairs (zookeeper), what a
// destructive step's operator types (confirm: word, a template such as
// {{.topic}} or {{.cluster}}, and noun), the files its steps write in the
// run directory (artifacts: id, what, path), what to do after a successful
// run (next), the parameters an operator sets with --set name=value (each
// typed string, int, bool or duration, or a type a step pack registers —
// topic, brokers, topics, batch (steps.RegisterType) —, either required or
// with a default), and its steps. A step names a kind, a title, the training
// note saying why it is done, its risk (read-only, low, destructive), the
// confirmation it needs (none, yes, or typed, which every destructive step
// needs), the rollback note as a text/template (required unless the step is
// read-only), an optional timeout, and with: — the kind's options, each a
// value as written or $param for a runbook parameter.
//
// Parse rejects everything else — unknown keys, wrong types, unknown step
// kinds, options a kind does not have or a value not of its type, a
// parameter an option refers to that does not exist or has another type, an
// artifact a kind needs that the runbook does not declare, a template that
// does not parse or names what the runbook does not have — with every
// problem as a *strictyaml.Error reading file:line:column: message, all of
// them joined in file order. Bind checks the --set pairs (ParseSet) against
// the parameters (hostile and internal topic names are refused before
// anything is contacted) and builds the steps with their options: a
// steps.Runbook ready to run.
package runbooks
