// Package shell builds the command lines kremedy sends to broker hosts:
// Quote makes any string one POSIX shell word, Command quotes a whole argv,
// and Script runs a POSIX sh script under /bin/sh whatever the remote user's
// login shell is. Validate inputs before quoting: quoting does not stop
// option injection (put "--" before operands), and a NUL byte cannot be
// carried in a shell word at all.
package shell

import "strings"

// Quote returns s as one POSIX shell word. Words made only of ASCII
// letters, digits and @%+:,./_- are left bare; anything else is put in
// single quotes, each single quote inside becoming quote, backslash, quote,
// quote. The empty string becomes a pair of single quotes:
//
//	Quote("it's") == `'it'\''s'`
//	Quote("")     == `''`
//
// '=' is not left bare so that a quoted "A=B" can never turn into a
// variable assignment when it is the first word of a command.
func Quote(s string) string {
	if s == "" {
		return "''"
	}
	for i := 0; i < len(s); i++ {
		if !safeByte(s[i]) {
			return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
	}
	return s
}

func safeByte(b byte) bool {
	switch {
	case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b >= '0' && b <= '9':
		return true
	}
	return strings.IndexByte("@%+:,./_-", b) >= 0
}

// Command quotes each argument with Quote and joins them with spaces, giving
// a command line that runs argv exactly, whatever the arguments contain.
func Command(argv ...string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = Quote(a)
	}
	return strings.Join(q, " ")
}

// Script is the command line that runs a POSIX sh script on a remote host
// under /bin/sh, whatever the remote user's login shell is: sshd hands the
// command to that shell, and zsh aborts on a glob that matches nothing while
// fish does not speak sh at all. Every script kremedy writes goes through
// it; the inventory's stop and start commands do not (they are the
// operator's, written for their own shell).
func Script(script string) string { return "exec /bin/sh -c " + Quote(script) }
