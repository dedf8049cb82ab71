// Package steps is kremedy's engine, and only the engine: it walks a
// runbook's steps against a cluster it reaches through the ports
// (steps/ports), never through a client library, and knows no step kind —
// kind packs (steps/cleanup, steps/restart) register theirs in a Registry,
// and the runbooks package binds a runbook's YAML to them.
//
// A run is a Session: Create makes its directory and fsynced journal (or
// Open reopens one to resume); Run walks the runbook, continuing from the
// journal, and rewrites report.md when it stops; End says how it ended
// (finished, stopped by a check or refusal, interrupted) with what was not
// done and the command that resumes it. Preview plans every step without a
// run directory (`kremedy plan`). The headless runner, the TUI and the
// tests all drive runs this way; the engine never prompts and never draws:
// it reports Events to a Reporter and asks an Approver. Before the walk,
// Run takes the cluster's lease (ports.Lease: one run per cluster, a
// holder named in every refusal) and gives it back when the attempt ends.
// ReadRun (RunView) is the one typed read of a run's journal: approve, the
// report, resume's check of approved plans and drill scoring read it.
//
// The life of one step: Planning — the kind's Plan reads the cluster and
// lists every concrete action (an Op, a target, typed Args; ZooKeeper
// writes carry the version they read), journaled with its Digest: the
// sha256 of the plan's canonical JSON, everything the approver reads
// (actions and args, notes, facts, rollback), which the journaled copy must
// reproduce (DigestJSON) or the plan is refused. A no-op
// plan is only verified. Otherwise, if the step asks for a confirmation,
// Confirming — the Approver must answer with the digest of the plan it
// showed, and a destructive step needs the runbook's confirmation word
// typed exactly (the topic, or the cluster's name); Enter alone never
// confirms, a skip needs a reason. An Approver that enforces a policy
// (steps/signoff: a second person's approval) adds Signoffs, each of the
// same digest; the engine journals them with the approval and refuses one
// of another plan. Every decision is reported (EvApproval). Running — the kind's Apply performs that
// plan action by action, each journaled before and after (Env.Do); the
// engine refuses a plan whose digest changed after the approval. A stale
// plan (ErrStalePlan: the cluster changed under it) is planned and confirmed
// again. Then Verify checks the step's postconditions, and the step is Done.
// A step's timeout bounds its work, never the operator's reading time.
//
// Resume: a step an earlier attempt finished is re-checked (Verify with
// Env.Rechecking), not re-done, and re-done only if its checks no longer
// hold — except a destructive step that a later finished step undid on
// purpose (starting the brokers undoes stopping them), which is trusted from
// the journal. Every kind's Apply is idempotent.
//
// What a kind may touch is its Env: the ports, the run's id, directory and
// artifacts, the journal (Do, Begin, Logf, Check, Output; Save for facts
// later steps and attempts Load), a read-only History of the run, the
// clock, and whether the engine previews or re-checks. Its options come
// from the runbook's `with:`, decoded into the kind's options struct when
// the runbook is loaded (Register, KindSpec).
package steps
