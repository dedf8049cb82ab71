package segments

import "strings"

// RemoteIndexCacheDir is the one directory at a log dir's root that Kafka
// skips instead of parsing as a partition directory: tiered storage's index
// cache (RemoteIndexCache.DIR_NAME, LogManager.scala:466-470).
const RemoteIndexCacheDir = "remote-log-index-cache"

// logDirFiles are the files Kafka keeps at a log dir's root, with whether it
// writes them through a "<name>.tmp" file that is then renamed
// (CheckpointFile.java:72, PropertiesUtils.java:46).
var logDirFiles = map[string]bool{
	"meta.properties":                  true,  // MetaPropertiesEnsemble.META_PROPERTIES_NAME, MetaPropertiesEnsemble.java:74
	".lock":                            false, // LogManager.LockFileName, LogManager.scala:1544
	".kafka_cleanshutdown":             false, // CleanShutdownFileHandler.java:48
	"recovery-point-offset-checkpoint": true,  // LogManager.scala:1561
	"log-start-offset-checkpoint":      true,  // LogManager.scala:1562
	"replication-offset-checkpoint":    true,  // ReplicaManager.HighWatermarkFilename, ReplicaManager.scala:191
	"cleaner-offset-checkpoint":        true,  // LogCleanerManager.scala:72
}

// IsLogDirFile reports names Kafka keeps at a log dir's root that are not
// partition directories: meta.properties, .lock, .kafka_cleanshutdown,
// recovery-point-offset-checkpoint, log-start-offset-checkpoint,
// replication-offset-checkpoint and cleaner-offset-checkpoint; the ".tmp"
// forms of the four checkpoints and of meta.properties, which Kafka writes
// first and then renames (.lock and .kafka_cleanshutdown have none); and
// RemoteIndexCacheDir, a directory Kafka skips when it loads logs.
//
// Kafka only skips these as files: a directory called meta.properties is
// parsed like any other and stops the broker, which Select reports.
func IsLogDirFile(name string) bool {
	if name == RemoteIndexCacheDir {
		return true
	}
	if base, ok := strings.CutSuffix(name, ".tmp"); ok {
		return logDirFiles[base]
	}
	_, ok := logDirFiles[name]
	return ok
}
