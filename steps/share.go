package steps

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
)

// A run shared with its approvers' group (an inventory's policy.group):
// the run directory is the group's to read, never to change, and only its
// approvals/ (signoff's) is the group's to add files to.
const (
	// SharedDirMode is a shared run directory's: setgid, so that what is
	// created in it takes the group; the group reads and searches it.
	SharedDirMode = 0o750 | fs.ModeSetgid
	// SharedFileMode is the journal's in a shared run directory (and the
	// approval requests' and signatures'): the group reads it.
	SharedFileMode fs.FileMode = 0o640
	// SharedDropMode is a shared run directory's approvals/: the group
	// adds files; sticky, so that nobody removes or replaces another
	// person's (the request, the operator's signature).
	SharedDropMode = 0o770 | fs.ModeSetgid | fs.ModeSticky
)

// ErrShare: the run directory cannot be shared with the approvers' group
// the inventory's policy.group names.
var ErrShare = errors.New("the run directory cannot be shared with the approvers' group")

// ShareGroup is the gid of the group name (an inventory's policy.group),
// which the user running kremedy must be in: their run's files take that
// group, and only a member can give them to it.
func ShareGroup(name string) (int, error) {
	g, err := user.LookupGroup(name)
	if err != nil {
		return 0, fmt.Errorf("%w: policy.group %s: %v — create the group (groupadd %s), add the operators and the approvers to it (usermod -aG %s USER) and log in again; nothing was done", ErrShare, name, err, name, name)
	}
	gid, err := strconv.Atoi(g.Gid)
	if err != nil {
		return 0, fmt.Errorf("%w: policy.group %s has gid %q, not a number; nothing was done", ErrShare, name, g.Gid)
	}
	groups, err := os.Getgroups()
	if err != nil {
		return 0, fmt.Errorf("%w: policy.group %s: your groups: %w; nothing was done", ErrShare, name, err)
	}
	if os.Getegid() != gid && !slices.Contains(groups, gid) {
		who := "you are"
		if u, err := user.Current(); err == nil {
			who = u.Username + " is"
		}
		return 0, fmt.Errorf("%w: policy.group %s: %s not in group %s (this process's groups: %v), so the run directory cannot be given to it; nothing was done — add yourself (usermod -aG %s %s) and log in again (or `newgrp %s`)", ErrShare, name, who, name, groups, name, userName(), name)
	}
	return gid, nil
}

func userName() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return "USER"
}

// ShareReach checks that the members of group (gid) can reach the run
// directory dir: every directory above it that exists lets them search it
// (x for others, or for the group when it is the directory's). One that
// refuses them is an error; "" and a note when it cannot be told from the
// modes (an ACL, a directory this user cannot stat): the run goes on and
// says so.
func ShareReach(dir, group string, gid int) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := filepath.Dir(abs); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// Made by the run: 2750, group G, like the run directory.
		case err != nil:
			return fmt.Sprintf("warning: policy.group %s: cannot tell whether the approvers can reach %s (%v): check that group %s can search every directory above it", group, abs, err, group), nil
		default:
			st, ok := fi.Sys().(*syscall.Stat_t)
			if !ok {
				return fmt.Sprintf("warning: policy.group %s: cannot tell whether the approvers can reach %s: check that group %s can search every directory above it", group, abs, group), nil
			}
			m := fi.Mode().Perm()
			if m&0o001 == 0 && (int(st.Gid) != gid || m&0o010 == 0) {
				if hasACL(d) {
					return fmt.Sprintf("warning: policy.group %s: %s (mode %#o) has an ACL: kremedy cannot tell whether group %s may search it; if `kremedy approve` says permission denied, grant it (setfacl -m g:%s:x %s)", group, d, m, group, group, d), nil
				}
				return "", fmt.Errorf("%w: policy.group %s: the approvers cannot reach the run directory %s: %s (mode %#o, group %s) lets neither group %s nor others search it; nothing was done — run under a parent the group can reach, such as --run-dir /srv/kremedy/runs/RUN (a directory of mode 2775, group %s, every directory above it searchable), or `chgrp %s %s && chmod g+x %s`",
					ErrShare, group, abs, d, m, groupName(st.Gid), group, group, group, d, d)
			}
		}
		if filepath.Dir(d) == d {
			return "", nil
		}
	}
}

func groupName(gid uint32) string {
	id := strconv.FormatUint(uint64(gid), 10)
	if g, err := user.LookupGroupId(id); err == nil {
		return g.Name
	}
	return id
}

// hasACL: path has a POSIX access ACL, or it cannot be told (an error other
// than "no such attribute" or "not supported").
func hasACL(path string) bool {
	_, err := syscall.Getxattr(path, "system.posix_acl_access", nil)
	return err == nil || !(errors.Is(err, syscall.ENODATA) || errors.Is(err, syscall.ENOTSUP))
}

// makeShared makes dir (and every missing directory above it) the group
// gid's, mode 2750: its files take the group, which reads them and adds
// none (only approvals/, made by the approval policy, is the group's to
// add to). A run directory that is a symbolic link is refused.
func makeShared(dir string, gid int) error {
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); !errors.Is(err, fs.ErrNotExist) {
			break
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := os.Mkdir(missing[i], 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	// The run directory (made now or given empty), and the ones made
	// above it: the group's, 2750. Lchown/Lstat: a link is not followed.
	made := missing
	if len(made) == 0 {
		made = []string{dir}
	}
	for _, d := range made {
		fi, err := os.Lstat(d)
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory (%v)", d, fi.Mode().Type())
		}
		if err := os.Lchown(d, -1, gid); err != nil {
			return err
		}
		if err := os.Chmod(d, SharedDirMode); err != nil {
			return err
		}
	}
	return nil
}
