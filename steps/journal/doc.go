// Package journal is kremedy's append-only record of a run: one JSON object
// per line (JSONL), each a Record with a Seq that starts at 1 and grows by
// exactly one per line, a UTC timestamp, a Type (run-start, plan, approval,
// action-start, …), the step it belongs to and free-form Data. Create makes
// the file (mode 0600, O_EXCL, its directory 0700) and fsyncs the file and
// its parent directory, so the journal's existence survives power loss.
// Append writes each record as a single write of the line and its newline
// and fsyncs before it returns: a record whose Append returned nil is on
// disk, and a record whose Append did not return may or may not be. A crash
// can therefore leave at most the last line torn (no newline, or not valid
// JSON); Read ignores such a tail and never changes the file, and Open cuts
// the file back to the end of the last complete line (fsynced) before
// appending, so a run resumes after Ctrl-C, a lost SSH session, kill -9 or a
// power cut. A bad line anywhere else, or a Seq that skips or repeats, is
// reported as ErrCorrupt with the line number and the file is left as it is.
// Lines are at most 1 MiB including the newline. Redact registers secrets that
// every later Append replaces with "[redacted]" in Step and Data (in strings,
// object keys and numbers, whatever their JSON escaping) before they reach the
// disk; Seq, Time and Type are the journal's own and are never rewritten.
package journal
