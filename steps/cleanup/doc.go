// Package cleanup is the kind pack of the topic-cleanup runbook: the fix
// field report 000 proved for a topic that would not die — preflight (read
// only), detach-clients, delete-znodes (after a backup, in the controller's
// order, version-checked), stop-brokers (controller last), wipe-segments
// (into a quarantine beside the log dirs, with a manifest), start-brokers
// (with the health gate) and verify-topic (absent everywhere, or recreated
// and proven). Preflight saves what it learned as the run's "facts"; every
// later kind reads them through its Env, never from another kind. The
// restore commands (RestoreZnodes, RestoreSegments) undo the destructive
// steps from the backup and the manifest.
package cleanup
