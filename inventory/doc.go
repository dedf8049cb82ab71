// Package inventory describes one Kafka cluster in ZooKeeper mode, read from
// a YAML file that the lab writes for itself and a user writes for a real
// cluster (example.yaml documents every key): its name and whether it is the
// rehearsal lab (the UI then shows LAB, not LIVE); zookeeper.connect exactly
// as the brokers have it, chroot included, with optional digest auth whose
// password comes from password_env or password_file and never from the file;
// the Kafka bootstrap servers and an optional client .properties file; SSH
// defaults; each broker's id, host, stop and start commands, optional SSH
// overrides and log_dirs; and the clients the "detach clients" step stops
// and starts. Parse is strict — unknown keys, wrong types, duplicate keys,
// anchors, tags and inline passwords are errors — and validates hosts,
// commands, log dirs and ports, requiring known_hosts because kremedy never
// trusts a host key on first use; every problem is an *Error reading
// file:line:column: message, all of them joined so one run shows them all.
// Load also resolves local paths ("~/", or relative to the file), Marshal
// writes YAML that Parse reads back to an equal value, and Write stores it
// atomically with mode 0600.
package inventory
