package lab

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// A lab JVM's logging, as Kafka's own config/log4j.properties (up to 3.9:
// log4j 1.x, read by reload4j or log4j 1.2) or config/log4j2.yaml (4.x:
// log4j2) lays it out: one file per appender in the process's logs/, the
// root logger at INFO into server.log, and named loggers routed to their
// own file. logSetup is the one description; render writes it in the
// release's format, and jvmArg is the -D option that makes the JVM read it.
type logSetup struct {
	dir       string      // the process's logs/
	appenders []string    // appender name, also its file: server → server.log
	loggers   []logTarget // beside the root logger (INFO → server)
}

type logTarget struct {
	name, level string
	// appender routes the logger to its own file only (additivity off);
	// "" leaves it in server.log.
	appender string
}

// brokerLogs is a broker's (and a KRaft controller's): server.log,
// controller.log (kafka.controller at TRACE) and state-change.log, as in
// Kafka's config files.
func brokerLogs(dir string, extra ...logTarget) logSetup {
	return logSetup{dir: dir, appenders: []string{"server", "controller", "stateChange"},
		loggers: append([]logTarget{
			{"org.apache.zookeeper", "WARN", ""},
			{"kafka.request.logger", "WARN", ""},
			{"kafka.controller", "TRACE", "controller"},
			{"state.change.logger", "INFO", "stateChange"},
		}, extra...)}
}

func logFile(appender string) string {
	if appender == "stateChange" {
		return "state-change.log"
	}
	return appender + ".log"
}

// log4j1 is the setup as log4j 1.x properties.
func (s logSetup) log4j1() string {
	var b strings.Builder
	b.WriteString("# as Kafka's config/log4j.properties (log4j 1.x, read by reload4j or log4j 1.2)\nlog4j.rootLogger=INFO, server\n")
	for _, a := range s.appenders {
		fmt.Fprintf(&b, "log4j.appender.%[1]s=org.apache.log4j.FileAppender\nlog4j.appender.%[1]s.File=%[2]s\nlog4j.appender.%[1]s.layout=org.apache.log4j.PatternLayout\nlog4j.appender.%[1]s.layout.ConversionPattern=[%%d] %%p %%m (%%c)%%n\n",
			a, filepath.Join(s.dir, logFile(a)))
	}
	for _, lg := range s.loggers {
		if lg.appender == "" {
			fmt.Fprintf(&b, "log4j.logger.%s=%s\n", lg.name, lg.level)
			continue
		}
		fmt.Fprintf(&b, "log4j.logger.%[1]s=%[2]s, %[3]s\nlog4j.additivity.%[1]s=false\n", lg.name, lg.level, lg.appender)
	}
	return b.String()
}

// log4j2 is the setup as a log4j2 properties configuration (Kafka 4.x
// ships config/log4j2.yaml; the properties format needs no YAML parser).
func (s logSetup) log4j2() string {
	var b strings.Builder
	b.WriteString("# as Kafka 4's config/log4j2.yaml, in log4j2's properties format\nstatus = warn\nname = kremedy-lab\n")
	for _, a := range s.appenders {
		fmt.Fprintf(&b, "appender.%[1]s.type = File\nappender.%[1]s.name = %[1]s\nappender.%[1]s.fileName = %[2]s\nappender.%[1]s.layout.type = PatternLayout\nappender.%[1]s.layout.pattern = [%%d] %%p %%m (%%c)%%n\n",
			a, filepath.Join(s.dir, logFile(a)))
	}
	b.WriteString("rootLogger.level = INFO\nrootLogger.appenderRef.server.ref = server\n")
	for i, lg := range s.loggers {
		k := fmt.Sprintf("l%d", i)
		fmt.Fprintf(&b, "logger.%[1]s.name = %[2]s\nlogger.%[1]s.level = %[3]s\n", k, lg.name, lg.level)
		if lg.appender != "" {
			fmt.Fprintf(&b, "logger.%[1]s.additivity = false\nlogger.%[1]s.appenderRef.%[2]s.ref = %[2]s\n", k, lg.appender)
		}
	}
	return b.String()
}

// logConfigPath is the logging config of the process whose directory is
// dir: log4j.properties, or log4j2.properties for a log4j2 release.
func (l *Lab) logConfigPath(dir string) string {
	if usesLog4j2(l.State.software()) {
		return filepath.Join(dir, "log4j2.properties")
	}
	return filepath.Join(dir, "log4j.properties")
}

// writeLogConfig writes s as the logging config of the process in dir.
func (l *Lab) writeLogConfig(dir string, s logSetup) error {
	text := s.log4j1()
	if usesLog4j2(l.State.software()) {
		text = s.log4j2()
	}
	return os.WriteFile(l.logConfigPath(dir), []byte(text), 0o644)
}

// logJVMArg makes a JVM of the lab's release read the config in dir
// (kafka-run-class.sh: -Dlog4j.configuration=file:… up to 3.9,
// -Dlog4j2.configurationFile=… from 4.0).
func (l *Lab) logJVMArg(dir string) string {
	if usesLog4j2(l.State.software()) {
		return "-Dlog4j2.configurationFile=" + l.logConfigPath(dir)
	}
	return "-Dlog4j.configuration=file:" + l.logConfigPath(dir)
}
